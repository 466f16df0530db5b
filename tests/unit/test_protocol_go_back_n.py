"""Go-back-N (Config.recovery "go-back-n"), RoCE's reliable connection emulated as the
paper's baseline: the receiver takes packets only in PSN order, NAKs the first one out of
order once and drops what follows; the sender resends everything from the NAKed PSN; the
connection keeps its path through losses and marks."""

from __future__ import annotations

import dataclasses

from mrc_transport.protocol import Transmit, events
from mrc_transport.protocol.ev import EvState
from mrc_transport.wire import frames
from mrc_transport.wire.frames import NackReason, Opcode
from tests.unit.conftest import MakeEstablished
from tests.unit.helpers import SMALL_CFG, as_packet, drain, payload, psn

CFG = dataclasses.replace(SMALL_CFG, recovery="go-back-n", ev_count=1, ev_backup=0)


def _data(txs: list[Transmit]) -> list[Transmit]:
    return [t for t in txs if isinstance(t.header, frames.DataHeader)]


def test_a_gap_costs_everything_after_it(make_established: MakeEstablished) -> None:
    fabric, client, server = make_established(cfg=CFG)
    now = fabric.now
    client.send_message(payload(6 * CFG.mss), now)
    sent = _data(client.datagrams_to_send(now))
    assert len(sent) == 6
    assert len({t.ev for t in sent}) == 1  # one path, as RoCE's hashed flow
    for tx in sent[:2] + sent[3:]:  # the third is lost on the way
        server.receive(as_packet(tx), now + 1e-4)
    assert server.receiver is not None
    assert server.receiver.cum == psn(sent[2])  # nothing past the gap was kept
    assert server.counters.go_back_dropped == 3
    naks = [t for t in server.control_to_send() if t.header.common.opcode is Opcode.NACK]
    assert len(naks) == 1  # one NAK per gap, not one per dropped packet
    assert naks[0].header.reason is NackReason.SEQUENCE_ERROR
    assert naks[0].header.psn == psn(sent[2])

    client.receive(as_packet(naks[0]), now + 2e-4)
    assert client.counters.rtx_go_back == 4
    again = _data(client.datagrams_to_send(now + 2e-4))
    assert [psn(t) for t in again] == [psn(t) for t in sent[2:]]  # from the NAK on, in order
    assert all(t.header.common.flags & frames.Flags.RTX for t in again)
    assert all(t.ev == sent[0].ev for t in again)  # the same path again
    for tx in again:
        server.receive(as_packet(tx), now + 3e-4)
    assert server.receiver.cum == psn(sent[-1]) + 1
    got = [e for e in drain(server) if isinstance(e, events.MessageReceived)]
    assert [bytes(e.data) for e in got] == [payload(6 * CFG.mss)]


def test_the_path_is_kept_through_a_loss(make_established: MakeEstablished) -> None:
    fabric, client, _ = make_established(cfg=CFG)
    ev = client.evs.usable[0]
    client.send_message(payload(CFG.mss), fabric.now)
    [tx] = _data(client.datagrams_to_send(fabric.now))
    deadline = client.get_timer()
    assert deadline is not None
    client.handle_timer(deadline)  # an RTO: MRC would mark the EV ASSUMED_BAD
    assert ev.state is EvState.GOOD
    [again] = _data(client.datagrams_to_send(deadline))
    assert again.ev == tx.ev


def test_selective_recovery_keeps_what_came_after_a_gap(make_established: MakeEstablished) -> None:
    """The same loss with MRC's SACKs: the packets past the gap are kept (the contrast)."""
    cfg = dataclasses.replace(CFG, recovery="sack")
    fabric, client, server = make_established(cfg=cfg)
    now = fabric.now
    client.send_message(payload(6 * cfg.mss), now)
    sent = _data(client.datagrams_to_send(now))
    for tx in sent[:2] + sent[3:]:
        server.receive(as_packet(tx), now + 1e-4)
    assert server.receiver is not None
    assert len(server.receiver.ooo) == 3
    assert server.counters.go_back_dropped == 0
