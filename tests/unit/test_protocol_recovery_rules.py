"""Rules of loss recovery and path probing whose breaking costs only speed, each pinned by a
test that fails when the rule is broken (issue 39, item 7: three one-line mutations of the
core passed the whole suite): the RTO's backoff restarts once data is acknowledged again
(RFC 6298 5.7), a resend leaves its lost packet's EV for another one, a PSN that arrives
again above a hole is a duplicate (counted, answered at once), in the Python twin as in
C; probes go in the data class and one clean reply readmits an EV."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from mrc_transport import backend
from mrc_transport.protocol import Connection, Transmit, events, rxplace
from mrc_transport.protocol.ev import EvInput, EvSet, EvState
from mrc_transport.protocol.rxplace import RxState
from mrc_transport.wire import frames
from mrc_transport.wire.frames import NackReason, Opcode
from mrc_transport.wire.records import RX_DATA
from tests.unit.conftest import MakeEstablished
from tests.unit.helpers import SMALL_CFG, as_packet, drain, payload
from tests.unit.helpers import paths as unit_paths


def _data(txs: list[Transmit]) -> list[Transmit]:
    return [t for t in txs if isinstance(t.header, frames.DataHeader)]


def _deliver(txs: list[Transmit], to: Connection, now: float) -> None:
    for tx in txs:
        to.receive(as_packet(tx), now)


def test_rto_backoff_restarts_once_data_is_acknowledged(make_established: MakeEstablished) -> None:
    """RFC 6298 5.7: after the backoff, the next acknowledgement of new data restarts the
    RTO from the RTT estimates; a backoff kept after progress stretched every later RTO
    (the mutation: sender.py's ``rto_count = 0`` removed)."""
    cfg = dataclasses.replace(SMALL_CFG, rto_linear=0)  # the first RTO already doubles
    fabric, client, server = make_established(cfg=cfg)
    now = fabric.now
    client.send_message(payload(3000), now)
    lost = _data(client.datagrams_to_send(now))
    assert lost  # dropped: never delivered
    before = client.sender.rto
    deadline = client.get_timer()
    assert deadline is not None
    now = deadline
    client.handle_timer(now)
    assert client.sender.rto_count == 1
    assert client.sender.rto > before  # backed off
    resent = _data(client.datagrams_to_send(now))
    assert len(resent) == 1
    assert resent[0].header.common.flags & frames.Flags.RTX
    _deliver(resent, server, now + 1e-4)
    _deliver(server.control_to_send(), client, now + 2e-4)
    assert client.counters.sacks_received >= 1
    assert client.sender.rto_count == 0
    assert client.sender.rto == pytest.approx(client.sender.path_rto)


@pytest.mark.parametrize(
    "reason", [NackReason.TRIMMED_LASTHOP, NackReason.NO_BUFFER], ids=["lasthop", "no_buffer"]
)
def test_a_resend_takes_another_ev_than_the_lost_packet(
    reason: NackReason, make_established: MakeEstablished
) -> None:
    """A NACK that leaves the EV usable (a trim at the last hop, a full buffer) resends the
    packet on another EV: with two EVs a plane, dropping the ``avoid`` argument of the
    resend's pick reuses the old EV half of the time, 24 times in a row almost never."""
    cfg = dataclasses.replace(SMALL_CFG, ev_count=4, ev_backup=2, ev_min_active=1)
    fabric, client, server = make_established(cfg=cfg)
    now = fabric.now
    client.send_message(payload(24 * cfg.mss), now)
    sent = _data(client.datagrams_to_send(now))
    assert len(sent) >= 24
    drain(client)
    for tx in sent[:24]:
        h = tx.header
        assert isinstance(h, frames.DataHeader)
        common = frames.Common(Opcode.NACK, frames.Flags.NONE, client.conn, server.conn)
        nack = frames.NackHeader(common, h.psn, reason, tx.ev, h.ts)
        back = frames.PathHeader(tx.path.dst.packed, tx.path.src.packed, ev=tx.ev)
        client.receive(frames.Packet(back, nack, b""), now)
        [again] = _data(client.datagrams_to_send(now))
        assert again.header.psn == h.psn  # type: ignore[union-attr]
        assert again.ev != tx.ev
    moves = [e for e in drain(client) if isinstance(e, events.Retransmit)]
    assert len(moves) == 24
    assert all(e.old_ev != e.new_ev for e in moves)


def _twins() -> list[Any]:
    """The placement's twins under test: the Python one always (the pure-Python run skips
    the C cross-check), C when it is built."""
    out: list[Any] = [pytest.param(RxState, id="python")]
    if backend.FASTPATH:
        from mrc_transport.protocol.rxfast import CRxState

        out.append(pytest.param(CRxState, id="c"))
    return out


@pytest.mark.parametrize("twin", _twins())
def test_a_psn_again_above_a_hole_is_a_duplicate(twin: Any) -> None:
    """PSN 102 twice with 101 missing: the second is a duplicate (counted as one, a SACK
    due at once so the sender learns it got through), not a second placement of its
    segment (``dup_segment``, no SACK) as when only PSNs below the cumulative PSN were
    tested (the mutation)."""
    seg = 24
    st = twin(seg, seg, 1 << 31, 16, 4, 100 * seg, 0.001, 100)
    conn, src = 7, bytes(16)
    recs = [
        (RX_DATA, conn, src, 0x02, psn, 0, (psn - 100) * seg, 4 * seg, 9, 0, seg, 1, 0, 0)
        for psn in (100, 102, 102)
    ]
    view = memoryview(bytes(seg))
    buf, placed = st.prepare(recs, view, 0, len(recs))
    msg = bytearray(4 * seg)
    i, sacks, dups, dup_segments = 0, [], 0, 0
    while i < len(recs):
        i = int(st.place(buf, placed, i, len(recs), conn, 1.0))
        taken = st.take()
        sacks.append(taken.sacks)
        dups += taken.dup_packets
        dup_segments += taken.dup_segment
        if taken.why == rxplace.NEW_MESSAGE:
            st.open_message(0, 0, msg, 4)
    assert (dups, dup_segments) == (1, 0)
    assert int(st.cum) == 101
    assert int(st.highest) == 102
    # the first packet waits for the ack delay, the gap at 102 and the duplicate ask now
    assert sum(sacks) == 2


def _probe_of(client: Connection, ev: Any) -> tuple[float, Transmit]:
    """Run ``client``'s timers to its next probe of retired ``ev``: when, and the probe."""
    while True:
        t = client.get_timer()
        assert t is not None
        client.handle_timer(t)
        for x in client.datagrams_to_send(t):
            if x.header.common.opcode is Opcode.PROBE and x.ev == ev.value:
                return t, x


def test_probes_travel_in_the_data_class_and_one_clean_reply_readmits(
    make_established: MakeEstablished,
) -> None:
    """A probe tests the path data takes, so it goes in the data class; its reply echoes
    a CE mark, and only an unmarked (clean) reply readmits the EV: one is enough (UEC,
    MRC; ``readmit_probes`` = 3 was the project's former rule)."""
    fabric, client, server = make_established()
    ev = client.evs.usable[0]
    client.evs.apply(ev, EvInput.LOSS, fabric.now)
    now, probe = _probe_of(client, ev)
    assert probe.dscp == frames.DSCP_DATA
    marked = as_packet(probe)
    marked = frames.Packet(dataclasses.replace(marked.path, ecn=frames.Ecn.CE), marked.header, b"")
    server.receive(marked, now)
    [reply] = server.control_to_send()
    assert reply.header.common.opcode is Opcode.PROBE_REPLY
    assert reply.header.common.flags & frames.Flags.ECN_ECHO
    assert reply.dscp == frames.DSCP_CONTROL
    client.receive(as_packet(reply), now)
    assert ev.state is EvState.ASSUMED_BAD  # answered, but busy: not clean
    now, probe = _probe_of(client, ev)
    server.receive(as_packet(probe), now)
    [reply] = server.control_to_send()
    assert not reply.header.common.flags & frames.Flags.ECN_ECHO
    client.receive(as_packet(reply), now)
    assert ev.state is EvState.GOOD


def test_readmission_after_three_probes_is_an_option() -> None:
    cfg = dataclasses.replace(SMALL_CFG, readmit_probes=3)
    evs = EvSet(unit_paths(), cfg, random.Random(1), 1, lambda e: None)
    ev = evs.usable[0]
    evs.apply(ev, EvInput.LOSS, 0.0)
    for k in range(3):
        assert ev.state is EvState.ASSUMED_BAD
        evs.probe_ok(ev, 1.0 + k)
    assert ev.state is EvState.GOOD
