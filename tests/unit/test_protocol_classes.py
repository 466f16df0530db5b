"""The traffic class (DSCP) of every kind of packet the core sends: new data in DSCP_DATA,
a retransmission in DSCP_RTX (both trimmable), a ``no_trim`` connection's data, new or
resent, in DSCP_NO_TRIM; probes in the data class and everything else in the control
class, whatever the connection's data class (docs/protocol.md, "Traffic classes")."""

from __future__ import annotations

import dataclasses

import pytest

from mrc_transport.protocol import Config, Connection, Transmit
from mrc_transport.protocol.ev import EvInput
from mrc_transport.protocol.segments import DataRun
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Flags, NackReason, Opcode
from tests.unit.conftest import MakeEstablished
from tests.unit.helpers import SMALL_CFG, as_packet, drain, payload

NO_TRIM_CFG = dataclasses.replace(SMALL_CFG, no_trim=True)
BY_CONNECTION = pytest.mark.parametrize(
    ("cfg", "new", "resent"),
    [
        (SMALL_CFG, frames.DSCP_DATA, frames.DSCP_RTX),
        (NO_TRIM_CFG, frames.DSCP_NO_TRIM, frames.DSCP_NO_TRIM),
    ],
    ids=["trimmable", "no-trim"],
)
"""A connection's config, and the classes of its new data and of its resends."""


def test_the_data_classes() -> None:
    assert frames.data_dscp(rtx=False, no_trim=False) == frames.DSCP_DATA == 26  # AF31
    assert frames.data_dscp(rtx=True, no_trim=False) == frames.DSCP_RTX == 28  # AF32
    assert frames.data_dscp(rtx=False, no_trim=True) == frames.DSCP_NO_TRIM == 30  # AF33
    assert frames.data_dscp(rtx=True, no_trim=True) == frames.DSCP_NO_TRIM
    assert {frames.DSCP_DATA, frames.DSCP_RTX} == frames.TRIMMABLE_DSCPS
    # no data class is a trimmed stub's, nor the control class
    classes = {frames.DSCP_DATA, frames.DSCP_RTX, frames.DSCP_NO_TRIM}
    assert not classes & ({frames.DSCP_CONTROL} | set(frames.TRIM_REASONS))


def data_of(out: list[Transmit]) -> list[Transmit]:
    return [t for t in out if isinstance(t.header, frames.DataHeader)]


def nack_and_resend(client: Connection, server: Connection, now: float) -> tuple[Transmit, ...]:
    """The client's first data packet, trimmed on the way; the server's NACK; then the
    original and the resend the NACK brings."""
    client.send_message(payload(20_000), now)
    first = data_of(client.datagrams_to_send(now))[0]
    whole = as_packet(first)
    stub = dataclasses.replace(whole.path, dscp=frames.DSCP_TRIMMED)
    server.receive(frames.Packet(stub, whole.header, b""), now)
    [nack] = server.control_to_send()
    assert isinstance(nack.header, frames.NackHeader)
    assert nack.header.reason is NackReason.TRIMMED
    drain(client)
    client.receive(as_packet(nack), now + 10e-6)
    [resend] = [t for t in data_of(client.datagrams_to_send(now + 10e-6)) if is_rtx(t)]
    return first, nack, resend


def is_rtx(tx: Transmit) -> bool:
    return bool(tx.header.common.flags & Flags.RTX)


@BY_CONNECTION
def test_new_data_and_a_nacked_resend_go_in_their_classes(
    make_established: MakeEstablished, cfg: Config, new: int, resent: int
) -> None:
    fabric, client, server = make_established(cfg=cfg)
    first, nack, resend = nack_and_resend(client, server, fabric.now)
    assert (first.dscp, is_rtx(first)) == (new, False)
    assert (resend.dscp, is_rtx(resend)) == (resent, True)
    assert nack.dscp == frames.DSCP_CONTROL  # the receiver's control class, any data class


@BY_CONNECTION
def test_a_run_of_new_data_carries_the_connections_class(
    make_established: MakeEstablished, cfg: Config, new: int, resent: int
) -> None:
    fabric, client, _ = make_established(cfg=cfg)
    client.send_message(payload(20_000), fabric.now)
    runs = [item for item in client.burst_to_send(fabric.now) if isinstance(item, DataRun)]
    assert runs
    assert {run.dscp for run in runs} == {new}
    assert {t.dscp for run in runs for t in run.transmits()} == {new}


@BY_CONNECTION
def test_an_rto_resend_goes_in_the_retransmission_class(
    make_established: MakeEstablished, cfg: Config, new: int, resent: int
) -> None:
    """Nothing comes back: the RTO resends the oldest packet, RTX set, in its class."""
    fabric, client, _ = make_established(cfg=cfg)
    client.send_message(payload(5_000), fabric.now)
    sent = data_of(client.datagrams_to_send(fabric.now))
    assert {t.dscp for t in sent} == {new}
    resends: list[Transmit] = []
    while not resends:  # the timers up to the RTO (an ack delay, a probe) send no data
        t = client.get_timer()
        assert t is not None
        client.handle_timer(t)
        resends = [x for x in data_of(client.datagrams_to_send(t)) if is_rtx(x)]
    assert {x.dscp for x in resends} == {resent}
    assert client.counters.rtos == 1


@pytest.mark.parametrize("cfg", [SMALL_CFG, NO_TRIM_CFG], ids=["trimmable", "no-trim"])
def test_probes_stay_in_the_data_class_and_acks_in_the_control_class(
    make_established: MakeEstablished, cfg: Config
) -> None:
    """A probe tests the queue data meets (it is no data packet: never trimmed), so a
    no-trim connection probes in DSCP_DATA too; its reply and every SACK are control."""
    fabric, client, server = make_established(cfg=cfg)
    ev = client.evs.usable[0]
    client.evs.apply(ev, EvInput.LOSS, fabric.now)
    while True:
        t = client.get_timer()
        assert t is not None
        client.handle_timer(t)
        probes = [x for x in client.datagrams_to_send(t) if x.header.common.opcode is Opcode.PROBE]
        if probes:
            break
    assert {p.dscp for p in probes} == {frames.DSCP_DATA}
    server.receive(as_packet(probes[0]), t)
    client.send_message(payload(3_000), t)
    for tx in data_of(client.datagrams_to_send(t)):
        server.receive(as_packet(tx), t)
    control = server.control_to_send(t + 1e-3)
    kinds = {x.header.common.opcode for x in control}
    assert Opcode.PROBE_REPLY in kinds
    assert kinds & {Opcode.ACK, Opcode.SACK}
    assert {x.dscp for x in control} == {frames.DSCP_CONTROL}
