"""A trimmed data packet end to end in the core: the receiver NACKs the stub with the
reason its DSCP names and the EV it came on; the sender resends that PSN at once on
another EV of the same plane, skips the trimmed EV and shrinks the plane's window."""

from __future__ import annotations

import dataclasses

import pytest

from mrc_transport import wire
from mrc_transport.protocol import Connection, Transmit, events
from mrc_transport.protocol.ev import EvState
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Flags, NackReason, Opcode
from tests.unit.conftest import Established
from tests.unit.helpers import as_packet, drain, payload

LASTHOP = frames.DSCP_TRIMMED_LASTHOP


def first_data(client: Connection, now: float) -> frames.Packet:
    """The client's first data packet of a new message, as it arrives whole."""
    client.send_message(payload(20_000), now)
    tx = next(t for t in client.datagrams_to_send(now) if is_data(t))
    return as_packet(tx)


def trimmed(whole: frames.Packet, dscp: int = frames.DSCP_TRIMMED) -> frames.Packet:
    """``whole`` as a switch trimmed it: headers only, a trimmed DSCP."""
    return frames.Packet(dataclasses.replace(whole.path, dscp=dscp), whole.header, b"")


def stub(client: Connection, now: float, dscp: int = frames.DSCP_TRIMMED) -> frames.Packet:
    return trimmed(first_data(client, now), dscp)


def is_data(tx: Transmit) -> bool:
    return isinstance(tx.header, frames.DataHeader)


def nacks(server: Connection) -> list[frames.NackHeader]:
    out = [tx.header for tx in server.control_to_send()]
    return [h for h in out if isinstance(h, frames.NackHeader)]


@pytest.mark.parametrize(
    ("dscp", "reason"),
    [(frames.DSCP_TRIMMED, NackReason.TRIMMED), (LASTHOP, NackReason.TRIMMED_LASTHOP)],
)
def test_stub_is_nacked_with_its_reason_and_ev(
    dscp: int, reason: NackReason, established: Established
) -> None:
    fabric, client, server = established
    p = stub(client, fabric.now, dscp)
    assert isinstance(p.header, frames.DataHeader)
    server.receive(p, fabric.now)
    [nack] = nacks(server)
    assert (nack.psn, nack.reason, nack.ev, nack.ts) == (
        p.header.psn,
        reason,
        p.path.ev,
        p.header.ts,
    )
    assert (server.counters.trimmed_received, server.counters.nacks_sent) == (1, 1)
    assert server.counters.data_received == 0  # nothing placed: the payload is gone


@pytest.mark.parametrize("dscp", [frames.DSCP_TRIMMED, LASTHOP])
def test_stub_of_a_message_last_packet_is_read_off_the_wire_and_nacked(
    dscp: int, established: Established
) -> None:
    """Its payload cut, a WRITE_LAST stub ends short of msg_len: decoded as the receiving
    endpoint decodes it (the datagram decoder, the DSCP from IPV6_TCLASS), it is a stub to
    NACK, not a malformed packet (bench/trim.py: every message's last packet, trimmed, was
    found only by RACK or the RTO)."""
    fabric, client, server = established
    client.send_message(payload(20_000), fabric.now)
    out = [t for t in client.datagrams_to_send(fabric.now) if is_data(t)]
    last = next(t for t in out if t.header.common.opcode is Opcode.WRITE_LAST)
    header = last.header
    assert isinstance(header, frames.DataHeader)
    path = frames.PathHeader(last.path.src.packed, last.path.dst.packed, ev=last.ev, dscp=dscp)
    udp = wire.encode(path, header, b"")[frames.IPV6_HEADER_LEN + frames.UDP_HEADER_LEN :]
    p = wire.decode_datagram_untrusted(
        udp, src=path.src, dst=path.dst, sport=last.ev >> 16, dport=frames.MRC_UDP_PORT,
        tclass=dscp << 2 | 2, flow_label=last.ev & 0xFFFF,
    )  # fmt: skip
    server.receive(p, fabric.now)
    [nack] = nacks(server)
    assert (nack.psn, nack.ev) == (header.psn, last.ev)
    assert server.counters.trimmed_received == 1


def test_stub_of_a_psn_already_here_is_not_nacked(established: Established) -> None:
    fabric, client, server = established
    whole = first_data(client, fabric.now)
    server.receive(whole, fabric.now)
    server.control_to_send()
    server.receive(trimmed(whole), fabric.now)
    assert nacks(server) == []
    assert server.counters.trimmed_ignored == 1


@pytest.mark.parametrize("dscp", [frames.DSCP_TRIMMED, LASTHOP])
def test_nack_resends_at_once_on_another_ev_of_the_same_plane(
    dscp: int, established: Established
) -> None:
    fabric, client, server = established
    p = stub(client, fabric.now, dscp)
    assert isinstance(p.header, frames.DataHeader)
    trimmed_ev = client.evs.by_value[p.path.ev]
    window = client.cc.windows()[trimmed_ev.plane]
    server.receive(p, fabric.now)
    [nack_tx] = server.control_to_send()
    drain(client)
    now = fabric.now + 10e-6
    client.receive(as_packet(nack_tx), now)
    out = [t for t in client.datagrams_to_send(now) if is_data(t)]
    rtx = [t for t in out if t.header.common.flags & Flags.RTX]
    assert rtx, "the NACKed PSN goes out again at once"
    first = rtx[0]
    assert isinstance(first.header, frames.DataHeader)
    assert first.header.psn == p.header.psn
    assert first.ev != trimmed_ev.value
    assert client.evs.by_value[first.ev].plane == trimmed_ev.plane
    # a trim on the way skips the EV; one at the last hop blames no path
    assert (trimmed_ev.state is EvState.SKIP) == (dscp == frames.DSCP_TRIMMED)
    assert client.cc.windows()[trimmed_ev.plane] < window
    assert (client.counters.nacks_received, client.counters.rtx_nack) == (1, 1)
    [ev] = [e for e in drain(client) if isinstance(e, events.Retransmit)]
    assert (ev.psn & 0xFFFF_FFFF, ev.cause) == (p.header.psn, "trimmed")
    assert ev.after == pytest.approx(10e-6)


def test_nack_for_a_psn_not_in_flight_is_counted_and_ignored(established: Established) -> None:
    fabric, client, server = established
    p = stub(client, fabric.now)
    server.receive(p, fabric.now)
    [nack_tx] = server.control_to_send()
    client.receive(as_packet(nack_tx), fabric.now)
    client.receive(as_packet(nack_tx), fabric.now)  # the PSN is queued, not in flight
    assert (client.counters.nacks_received, client.counters.nack_invalid) == (1, 1)
    assert nack_tx.header.common.opcode is Opcode.NACK
