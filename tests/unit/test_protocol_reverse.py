"""The reverse EV set (protocol/reverse.py): acknowledgements go on a few EVs, at least one
per plane; an idle receiver probes them; one whose return path dies is retired and
replaced, and the acknowledgements leave its path."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from collections.abc import Callable

import pytest

from mrc_transport.protocol import Config, Connection, ConnState, Transmit, events
from mrc_transport.protocol.counters import ConnCounters
from mrc_transport.protocol.ev import EvSet, EvState
from mrc_transport.protocol.reverse import PATIENCE_ROUNDS, ReverseEvs
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Opcode
from tests.sim.fabric import Fabric, Host
from tests.unit.conftest import Established, MakeEstablished, MakePair
from tests.unit.helpers import SMALL_CFG, paths, payload

ACKS = (Opcode.SACK, Opcode.ACK, Opcode.NACK)


def sent_by(fabric: Fabric, conn_id: int, *ops: Opcode) -> list[tuple[float, Transmit]]:
    """What connection ``conn_id`` sent so far, of the opcodes ``ops``."""
    assert fabric.sent_log is not None
    return [
        (t, tx)
        for t, tx in fabric.sent_log
        if tx.header.common.src_conn == conn_id and tx.header.common.opcode in ops
    ]


def one_way(est: Established, messages: int, size: int = 8 * 1024) -> None:
    """The client sends ``messages`` messages to the server (which sends nothing)."""
    now = est.fabric.now
    for i in range(messages):
        est.client.send_message(payload(size, i), now)


@pytest.mark.parametrize("per_plane", [1, 2])
def test_acks_go_on_the_reverse_evs_of_the_trigger_plane(
    make_established: MakeEstablished, per_plane: int
) -> None:
    est = make_established(cfg=dataclasses.replace(SMALL_CFG, reverse_evs=per_plane))
    fabric, server = est.fabric, est.server
    fabric.sent_log = []
    one_way(est, 40)
    fabric.run(fabric.now + 0.05, lambda: not est.client.sender.inflight)
    acks = sent_by(fabric, server.conn, *ACKS)
    assert len(acks) > 10
    used: dict[int, set[int]] = {}
    for _, tx in acks:
        used.setdefault(tx.path.plane, set()).add(tx.ev)
    assert set(used) == {0, 1}  # at least one per plane: both planes carry acks
    for plane, evs in used.items():
        members = server.reverse.members[plane]
        assert evs == {e.value for e in members}
        assert len(evs) == per_plane  # of the plane's 8 usable EVs, only these
        # on as many SRv6 paths: the set spreads over the plane's paths first
        assert len({e.path_key for e in members}) == per_plane


def test_an_idle_receiver_probes_one_reverse_ev_a_round_then_goes_quiet(
    established: Established,
) -> None:
    fabric, client, server = established
    fabric.sent_log = []
    t_start = fabric.now
    trickle(fabric, client, t_start + 0.06)
    fabric.run(t_start + 0.06)
    done = fabric.run(fabric.now + 0.05, lambda: not client.sender.inflight)
    assert done
    t_end = fabric.now
    fabric.run(t_end + 0.05)
    probes = sent_by(fabric, server.conn, Opcode.PROBE)
    members = {e.value for ms in server.reverse.members.values() for e in ms}
    interval = server.reverse.interval
    assert interval == max(SMALL_CFG.reverse_probe_interval, server.evs.probe_wait)
    for _, tx in probes:
        assert tx.ev in members
        assert tx.dscp == frames.DSCP_DATA  # probes test the queues data meets
    times = [t for t, _ in probes]
    # one probe a round: the first a round after the first acknowledgement, the last in
    # the round after the last one
    assert len(probes) >= 4, "the receiver did not probe its return paths"
    assert all(b - a >= interval * 0.999 for a, b in itertools.pairwise(times))
    assert t_start + interval * 0.999 <= times[0] <= t_start + interval * 1.2
    assert times[-1] <= t_end + interval * 1.001
    # answered: nothing retired; nothing acknowledged any more: no more rounds
    assert server.counters.reverse_probes == len(probes)
    assert server.counters.reverse_retired == 0
    assert server.reverse.timer() == float("inf")
    # the sender, whose own data tests its paths, probed none of its reverse EVs
    assert client.counters.reverse_probes == 0


def test_a_sender_with_data_in_flight_does_not_probe() -> None:
    evs = EvSet(paths(), SMALL_CFG, random.Random(1), 1, lambda e: None)
    rev = ReverseEvs(evs, 1, random.Random(2), ConnCounters(), lambda e: None)
    assert rev.timer() == float("inf")  # nothing acknowledged: no rounds
    rev.note_ack()
    assert rev.timer() == 0.0
    assert rev.due(0.0, idle=True) is None  # the clock starts: the first probe a round on
    assert rev.timer() == pytest.approx(rev.interval)
    rev.note_ack()
    assert rev.due(rev.interval, idle=False) is None  # our own data in flight
    rev.note_ack()
    probe = rev.due(2 * rev.interval, idle=True)
    assert probe is not None
    assert probe in [e for ms in rev.members.values() for e in ms]
    assert rev.due(2 * rev.interval, idle=True) is None  # the next round is a round away
    assert rev.timer() == pytest.approx(3 * rev.interval)


def test_pick_rotates_over_the_plane_and_falls_back_to_the_other_planes() -> None:
    evs = EvSet(paths(), SMALL_CFG, random.Random(1), 1, lambda e: None)
    rev = ReverseEvs(evs, 2, random.Random(2), ConnCounters(), lambda e: None)
    got = [rev.pick(1) for _ in range(4)]
    assert {e.plane for e in got} == {1}
    assert got[:2] == got[2:]
    assert len({e.value for e in got}) == 2
    evs.port_down(1, 0.0)
    assert evs.usable_in(1) == []
    # no usable EV left on plane 1: the other planes' reverse EVs in turn
    got = [rev.pick(1) for _ in range(4)]
    assert {e.plane for e in got} == {0}
    assert {e.value for e in got} == {e.value for e in rev.members[0]}


def trickle(fabric: Fabric, client: Connection, until: float, every: float = 0.5e-3) -> None:
    """The client sends a 4 KB message every ``every`` seconds until ``until``: a one-way
    transfer that goes on (the receiver keeps acknowledging) without millions of packets."""
    i = 0
    t = fabric.now
    while t < until:
        fabric.at(t, functools.partial(_send_one, fabric, client, i))
        i += 1
        t += every


def _send_one(fabric: Fabric, client: Connection, i: int) -> None:
    client.send_message(payload(4096, i), fabric.now)


def _dead_return_path(make_pair: MakePair, seed: int) -> tuple[Fabric, Host, int, int]:
    """A one-way transfer from a to b; after 5 ms, b's plane-0 reverse EV's path drops
    everything from b to a (only b's acknowledgements and probes cross it). Returns the
    fabric, b's host, that EV and the dead path's index."""
    fabric, a, b = make_pair(seed)
    fabric.sent_log = []
    client = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(0.01, lambda: client.state is ConnState.ESTABLISHED)
    [server] = b.endpoint.connections.values()
    trickle(fabric, client, fabric.now + 0.4)
    fabric.run(fabric.now + 5e-3)
    [victim] = server.reverse.members[0]
    k = int(victim.path.hops[1].rsplit("-", 1)[1])  # t1-p0-K: its path's T1
    fabric.links[(0, k, "rev")].dead = True  # b -> a: the direction data never takes
    return fabric, b, victim.value, k


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_dead_return_path_is_retired_and_the_acks_leave_it(
    make_pair: MakePair, seed: int
) -> None:
    fabric, b, victim, k = _dead_return_path(make_pair, seed)
    [server] = b.endpoint.connections.values()
    t_cut = fabric.now
    dead = fabric.links[(0, k, "rev")]
    fabric.run(t_cut + 0.3)
    retired = [
        e for e in b.events if isinstance(e, events.PathRetired) and e.reason == "return path"
    ]
    assert [e.ev for e in retired] == [victim]
    t_found = retired[0].time
    # found within a few rounds: one probe a round, at random over the 2 reverse EVs
    assert t_found - t_cut < 10 * server.reverse.interval
    assert server.evs.by_value[victim].state is EvState.ASSUMED_BAD
    assert server.counters.reverse_retired == 1
    # its replacement is on the plane's other path, and no ack went on the dead one since
    [new] = server.reverse.members[0]
    assert new.value != victim
    assert fabric.link_of(new.path) is not dead
    # each choice is an event: the one that died, then its replacement, when it died
    chosen = [e for e in b.events if isinstance(e, events.ReverseEvChosen) and e.plane == 0]
    assert [e.ev for e in chosen] == [victim, new.value]
    assert chosen[-1].time == t_found
    later = [tx for t, tx in sent_by(fabric, server.conn, *ACKS) if t > t_found]
    assert len([tx for tx in later if tx.path.plane == 0]) > 10
    assert not [tx for tx in later if fabric.link_of(tx.path) is dead]
    before = [tx for t, tx in sent_by(fabric, server.conn, *ACKS) if t_cut < t <= t_found]
    assert any(fabric.link_of(tx.path) is dead for tx in before)  # the test can fail


def test_a_probe_answered_in_time_keeps_its_ev(make_pair: MakePair) -> None:
    fabric, a, b = make_pair(4)
    fabric.sent_log = []
    client = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(0.01, lambda: client.state is ConnState.ESTABLISHED)
    [server] = b.endpoint.connections.values()
    trickle(fabric, client, fabric.now + 0.1)
    fabric.run(fabric.now + 0.1)
    assert server.counters.reverse_probes > 5
    assert server.counters.reverse_retired == 0
    assert not [e for e in b.events if isinstance(e, events.PathRetired)]


def test_go_back_n_keeps_its_evs_and_probes_nothing() -> None:
    cfg = Config(recovery="go-back-n", ev_count=4, ev_backup=0)
    evs = EvSet(paths(), cfg, random.Random(1), 1, lambda e: None)
    rev = ReverseEvs(evs, 1, random.Random(2), ConnCounters(), lambda e: None)
    for t in range(3):
        rev.note_ack()
        assert rev.due(t * rev.interval, idle=True) is None


def _probing(per_plane: int = 2) -> ReverseEvs:
    evs = EvSet(paths(), SMALL_CFG, random.Random(1), 1, lambda e: None)
    return ReverseEvs(evs, per_plane, random.Random(2), ConnCounters(), lambda e: None)


def _play(rev: ReverseEvs, rounds: int, delay: Callable[[int], float | None]) -> None:
    """A receiver acknowledging for ``rounds`` rounds whose k-th probe is answered
    ``delay(k)`` rounds after it went (None: never), replies handed in as they arrive."""
    step = rev.interval
    replies: list[tuple[float, int]] = []
    sent: dict[int, float] = {}
    k = 0
    for tick in range(rounds * 10):
        now = tick * step / 10
        for t, value in sorted(r for r in replies if r[0] <= now):
            replies.remove((t, value))
            rev.probe_ok(value, t, sent[value])
        rev.note_ack()
        if rev.timer() <= now and (probe := rev.due(now, idle=True)) is not None:
            d = delay(k)
            sent[probe.value] = now
            if d is not None:
                replies.append((now + d * step, probe.value))
            k += 1


def test_replies_late_behind_an_incasts_queue_retire_a_path_only_as_it_builds() -> None:
    """An incast: from the 6th probe on, every reply waits 4.5 rounds in the last hop
    into this host and comes back in order. No return path is dead: the probes in flight
    as the queue builds may be taken for lost, none once a late reply was seen (judged
    by the next round, every probe was: one a round)."""
    rev = _probing()
    _play(rev, 60, lambda k: 0.2 if k < 5 else 4.5)
    assert rev.counters.reverse_probes > 40
    assert rev.counters.reverse_retired <= 2
    assert rev.patience == pytest.approx(9 * rev.interval)


def test_a_probe_never_answered_is_lost_after_three_rounds_or_twice_the_latest_reply() -> None:
    rev = _probing(per_plane=1)
    _play(rev, 40, lambda k: None if k == 3 else 0.2)
    assert rev.counters.reverse_retired == 1
    slow = _probing(per_plane=1)
    _play(slow, 40, lambda k: None if k == 12 else 2.5)
    assert slow.counters.reverse_retired == 1
    assert slow.patience == pytest.approx(5 * slow.interval)  # twice 2.5 rounds
    assert rev.patience == pytest.approx(PATIENCE_ROUNDS * rev.interval)


def test_a_probe_a_later_reply_of_its_plane_overtook_is_lost_and_its_ev_replaced() -> None:
    rev = _probing()
    lost, later = rev.members_of(0)
    [other] = rev.members_of(1)[:1]
    step = rev.interval
    rev.outstanding = [(lost, 0.0), (other, 0.1 * step), (later, step)]
    rev.probe_ok(later.value, 1.5 * step, step)
    assert rev.counters.reverse_retired == 1  # the plane's older probe, no other plane's
    assert rev.evs.by_value[lost.value].state is EvState.ASSUMED_BAD
    assert lost not in rev.members[0]
    assert len(rev.members[0]) == 2
    assert [ev for ev, _ in rev.outstanding] == [other]
