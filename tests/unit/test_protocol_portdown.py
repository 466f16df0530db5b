"""A local NIC port going down, as the core sees it: refused sends, replies on the
trigger's plane, probing a dead port, and an RTO that blames no EV."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from mrc_transport.protocol import Connection, Transmit, events
from mrc_transport.protocol.ev import EvInput, EvSet, EvState, Role
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Common, Flags, Opcode
from tests.sim.fabric import Fabric
from tests.unit.conftest import Established
from tests.unit.helpers import SMALL_CFG as CFG
from tests.unit.helpers import as_packet, drain, paths, psn

DEAD = 1  # the plane whose port goes down


def opcode(tx: Transmit) -> Opcode:
    return tx.header.common.opcode


def dead_port_evs(conn: Connection) -> list[int]:
    return [e.value for e in conn.evs.by_value.values() if e.plane == DEAD]


def refused_probe(conn: Connection) -> Transmit:
    """A PROBE on the dead plane, as the IO layer would hand it back."""
    ev = conn.evs.usable_in(DEAD)[0]
    h = frames.ProbeHeader(Common(Opcode.PROBE, Flags.TS, conn.peer_conn, conn.conn), 77, 0, 0)
    return Transmit(ev.path, ev.value, h, b"", frames.DSCP_CONTROL)


# -- send_failed --------------------------------------------------------------------------
def test_a_refused_data_packet_retires_its_port_and_is_resent_at_once(
    established: Established,
) -> None:
    fabric, conn, _ = established
    now = fabric.now
    conn.send_message(bytes(10 * CFG.mss), now)
    data = [tx for tx in conn.datagrams_to_send(now) if isinstance(tx.header, frames.DataHeader)]
    refused = [tx for tx in data if tx.path.plane == DEAD]
    assert refused
    assert len(refused) < len(data)
    window, lost = conn.cc.window, conn.counters.lost
    for tx in refused:  # the IO layer reports each refused packet of the burst
        conn.send_failed(tx, now)
    log = drain(conn)
    retired = [e for e in log if isinstance(e, events.PathRetired)]
    assert sorted(e.ev for e in retired) == sorted(dead_port_evs(conn))  # backups too
    assert {e.reason for e in retired} == {"port"}
    assert [e.plane for e in log if isinstance(e, events.PlaneDown)] == [DEAD]
    for value in dead_port_evs(conn):
        ev = conn.evs.by_value[value]
        assert (ev.state, ev.role) == (EvState.ASSUMED_BAD, Role.RETIRED)
    assert conn.evs.usable_in(DEAD) == []
    assert conn.counters.send_failed == len(refused)
    # not congestion and not a loss: same window, nothing counted lost
    assert conn.cc.window == window
    assert conn.counters.lost == lost
    again = [tx for tx in conn.datagrams_to_send(now) if isinstance(tx.header, frames.DataHeader)]
    resent = [tx for tx in again if tx.header.common.flags & Flags.RTX]
    assert [psn(tx) for tx in resent] == [psn(tx) for tx in refused]
    assert all(tx.path.plane != DEAD for tx in again)


def test_a_refused_data_packet_on_an_old_transmission_is_ignored(established: Established) -> None:
    fabric, conn, _ = established
    now = fabric.now
    conn.send_message(bytes(4 * CFG.mss), now)
    out = conn.datagrams_to_send(now)
    dead = [t for t in out if t.path.plane == DEAD]
    tx = dead[0]
    conn.send_failed(tx, now)
    conn.send_failed(tx, now)  # reported twice: resent once
    resent = [t for t in conn.datagrams_to_send(now) if t.header.common.flags & Flags.RTX]
    # the port's queue died with it: every packet out on that plane goes again, once
    assert [psn(t) for t in resent] == [psn(t) for t in dead]
    assert all(t.path.plane != DEAD for t in resent)
    assert resent[0].header == dataclasses.replace(
        tx.header, common=dataclasses.replace(tx.header.common, flags=resent[0].header.common.flags)
    )
    conn.send_failed(tx, now)  # the first transmission again, late: its resend is out
    assert conn.datagrams_to_send(now) == []
    s = conn.sender
    assert s.in_flight_bytes == sum(p.length for p in s.inflight.values()) == 4 * CFG.mss


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_refused_control_packet_is_resent_as_it_was_on_another_plane(seed: int) -> None:
    conn = Connection(CFG, paths(), random.Random(seed), 5, 0.0)
    [setup] = conn.datagrams_to_send(0.0)
    assert opcode(setup) is Opcode.SETUP
    conn.send_failed(setup, 0.0)
    [again] = conn.datagrams_to_send(0.0)
    assert again.header == setup.header
    assert again.path.plane != setup.path.plane
    assert again.ev in conn.evs.usable_values()
    # both ports down: nothing to resend on; the SETUP retry timer goes on
    conn.send_failed(again, 0.0)
    assert conn.datagrams_to_send(0.0) == []
    assert conn.get_timer() == pytest.approx(CFG.setup_timeout)


def test_a_refused_probe_is_not_resent(established: Established) -> None:
    fabric, conn, _ = established
    conn.send_failed(refused_probe(conn), fabric.now)
    assert conn.evs.usable_in(DEAD) == []
    assert conn.datagrams_to_send(fabric.now) == []


# -- replies on the trigger's plane ---------------------------------------------------------
def probe_from(plane: int, conn: Connection, server: Connection, probe_id: int) -> frames.Packet:
    ph = frames.PathHeader(Fabric.addr(0, plane).packed, Fabric.addr(1, plane).packed, ev=0)
    h = frames.ProbeHeader(Common(Opcode.PROBE, Flags.TS, server.conn, conn.conn), probe_id, 0, 1)
    return frames.Packet(ph, h, b"")


def test_replies_go_on_the_plane_the_trigger_came_over(established: Established) -> None:
    fabric, conn, server = established
    now = fabric.now
    planes = [1, 0, 1, 1, 0, 0, 1, 0]
    for i, plane in enumerate(planes):
        server.receive(probe_from(plane, conn, server, i + 1), now)
        [reply] = server.datagrams_to_send(now)
        assert opcode(reply) is Opcode.PROBE_REPLY
        assert reply.path.plane == plane
        assert reply.ev in server.evs.usable_values()
    # SACKs too: each answer goes on the plane of the data packet that asked for it
    conn.send_message(bytes(8 * CFG.mss), now)
    data = conn.datagrams_to_send(now)
    assert {tx.path.plane for tx in data} == {0, 1}
    sacks = 0
    for tx in reversed(data):  # the last one asks for a SACK; the rest fill the gaps
        server.receive(as_packet(tx), now)
        out = server.datagrams_to_send(now)
        sacks += len(out)
        assert all(o.path.plane == tx.path.plane for o in out)
    assert sacks >= 1


# -- probing a dead port --------------------------------------------------------------------
def test_probe_timers_count_in_the_larger_of_base_rtt_and_srtt() -> None:
    evs = EvSet(paths(), CFG, random.Random(1), 1, lambda e: None)
    for base, srtt in ((1e-4, 2e-3), (3e-3, 1e-3)):
        evs.base_rtt, evs.srtt = base, srtt
        assert evs.probe_rtt == max(base, srtt)
        ev = evs.usable[0]
        evs.apply(ev, EvInput.LOSS, 10.0)
        assert ev.next_probe == pytest.approx(10.0 + CFG.probe_after_rtts * max(base, srtt))
        [due] = evs.due_probes(ev.next_probe)
        assert due is ev
        # retried after OCP's 2 ms probe timeout, or two probe RTTs if longer
        wait = max(CFG.probe_timeout, 2 * max(base, srtt))
        assert evs.probe_wait == pytest.approx(wait)
        assert ev.next_probe == pytest.approx(10.0 + CFG.probe_after_rtts * max(base, srtt) + wait)
        for _ in range(CFG.readmit_probes):
            evs.probe_ok(ev, 11.0)
        assert ev.state is EvState.GOOD


def test_a_dead_port_gets_one_probe_per_retry_interval_then_all_on_its_first_reply(
    established: Established,
) -> None:
    fabric, conn, server = established
    t0 = fabric.now
    conn.send_failed(refused_probe(conn), t0)
    rtt = conn.evs.probe_rtt
    assert rtt == max(conn.evs.base_rtt, conn.evs.srtt) > 0
    behind = dead_port_evs(conn)
    probes: list[tuple[float, Transmit]] = []
    now = t0
    while len(probes) < len(behind) + 3:
        timer = conn.get_timer()
        assert timer is not None
        now = timer
        conn.handle_timer(now)
        for tx in conn.datagrams_to_send(now):
            assert opcode(tx) is Opcode.PROBE
            probes.append((now, tx))
            conn.send_failed(tx, now)  # the port is still down
    times = [t for t, _ in probes]
    assert times[0] == pytest.approx(t0 + CFG.probe_after_rtts * rtt)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([conn.evs.probe_wait] * len(gaps))
    assert {tx.path.plane for _, tx in probes} == {DEAD}
    # the port's EVs take turns: every one probed once before any twice
    assert sorted(tx.ev for _, tx in probes[: len(behind)]) == sorted(behind)
    # the port is back: the latest probe gets through and is answered
    last = probes[-1][1]
    server.receive(as_packet(last), now)
    [reply] = server.datagrams_to_send(now)
    conn.receive(as_packet(reply), now)
    assert DEAD not in conn.evs.ports_down
    assert conn.get_timer() == now
    conn.handle_timer(now)
    burst = conn.datagrams_to_send(now)
    assert all(opcode(tx) is Opcode.PROBE for tx in burst)
    assert sorted(tx.ev for tx in burst) == sorted(v for v in behind if v != last.ev)


# -- RTO ------------------------------------------------------------------------------------
def test_rto_resends_only_the_oldest_packet_and_marks_its_ev_assumed_bad(
    established: Established,
) -> None:
    """A timeout marks the EV of the timed-out packet ASSUMED_BAD (UEC, OCP mrc_ctl.h's EV
    states); only that one: the packets after it say nothing yet."""
    fabric, conn, _ = established
    now = fabric.now
    conn.send_message(bytes(6 * CFG.mss), now)
    data = conn.datagrams_to_send(now)
    assert len(data) == 6
    timer = conn.get_timer()
    assert timer is not None
    assert timer == pytest.approx(now + conn.sender.rto)
    conn.handle_timer(timer)
    out = conn.datagrams_to_send(timer)
    log = drain(conn)
    assert [type(e) for e in log] == [events.RtoFired, events.PathRetired, events.Retransmit]
    retired = log[1]
    assert isinstance(retired, events.PathRetired)
    assert (retired.ev, retired.reason) == (data[0].ev, "timeout")
    [resent] = out
    assert isinstance(resent.header, frames.DataHeader)
    assert psn(resent) == psn(data[0])
    assert resent.header.common.flags & Flags.RTX
    assert resent.ev != data[0].ev
    assert conn.evs.by_value[data[0].ev].state is EvState.ASSUMED_BAD
    assert all(conn.evs.by_value[tx.ev].state is EvState.GOOD for tx in data[1:])


def test_an_rto_resends_its_packet_with_no_window_left(established: Established) -> None:
    """RFC 6298 5.4: when the timer expires, the oldest packet goes again at once. Other
    resends wait for window room; with every plane's window filled by packets that were
    all lost, the RTO's must not, or each RTO only frees one packet's room (the
    gray-cut demo under load: 2-6 RTOs in a row, stalls of 1.3-2.4 s)."""
    fabric, conn, _ = established
    now = fabric.now
    conn.send_message(bytes(6 * CFG.mss), now)
    data = conn.datagrams_to_send(now)
    for plane in conn.evs.planes:  # the windows shrank below what is in flight
        conn.sender.cc.sent(plane, 1 << 30)
    timer = conn.get_timer()
    assert timer is not None
    conn.handle_timer(timer)
    [resent] = conn.datagrams_to_send(timer)
    assert psn(resent) == psn(data[0])
    assert resent.header.common.flags & Flags.RTX
    # one packet beyond the window per RTO, as TCP: the next resend waits for room (the
    # timers before it probe the EV the first RTO retired)
    later, again = timer, []
    while not again:
        t = conn.get_timer()
        assert t is not None
        assert t > later
        later = t
        conn.handle_timer(later)
        again = [tx for tx in conn.datagrams_to_send(later) if opcode(tx) is not Opcode.PROBE]
    assert conn.sender.rto_count == 2
    assert [psn(tx) for tx in again] == [psn(data[1])]
    assert conn.datagrams_to_send(later) == []


def test_the_rto_resends_the_oldest_packet_in_flight_whichever_plane_it_took(
    established: Established,
) -> None:
    """The oldest packet in flight is the earliest of each plane's oldest (the planes keep
    their transmissions in order): once the first packet is acknowledged, the RTO resends
    the second, which went out on another plane."""
    fabric, conn, _ = established
    now = fabric.now
    conn.send_message(bytes(6 * CFG.mss), now)
    data = conn.datagrams_to_send(now)
    assert data[0].path.plane != data[1].path.plane  # the planes take turns
    first = psn(data[0])
    conn.sender.sack(0, first + 1, first + 1, 0, data[0].ev, 0, CFG.rcvbuf, now)
    assert conn.sender.inflight.get(first) is None
    conn.handle_timer(now)  # loss detection, due after a SACK: nothing is lost yet
    assert conn.datagrams_to_send(now) == []
    timer = conn.get_timer()
    assert timer is not None
    conn.handle_timer(timer)
    assert conn.counters.rtos == 1
    [resent] = conn.datagrams_to_send(timer)
    assert psn(resent) == psn(data[1])
    assert resent.header.common.flags & Flags.RTX


def test_the_host_announcing_a_port_down_retires_it_and_resends_its_packets(
    established: Established,
) -> None:
    """Link state (io/linkwatch.py) tells the core before any send is refused: a plane
    whose window is full would otherwise not learn it until RACK found the losses."""
    fabric, conn, _ = established
    a = fabric.hosts[0]
    now = fabric.now
    conn.send_message(bytes(6 * CFG.mss), now)
    out = conn.datagrams_to_send(now)
    dead = [t for t in out if t.path.plane == DEAD]
    assert dead
    port = dead[0].path.port
    a.endpoint.port_state(port, False, now)
    assert DEAD in conn.evs.ports_down
    assert not conn.evs.usable_in(DEAD)
    resent = [t for t in conn.datagrams_to_send(now) if t.header.common.flags & Flags.RTX]
    assert [psn(t) for t in resent] == [psn(t) for t in dead]
    assert all(t.path.plane != DEAD for t in resent)
    assert conn.counters.lost == 0  # a dead port is not congestion
    # the port is back: probed now, not at the next retry interval
    later = now + 1e-3
    a.endpoint.port_state(port, True, later)
    assert conn.evs.ports_down[DEAD] == later
    assert conn.evs.next_probe_time() == later
    a.endpoint.port_state("no-such-port", False, later)  # not ours: nothing happens
    assert set(conn.evs.ports_down) == {DEAD}
