"""Bad input is counted and dropped: never an exception, never state corruption."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from mrc_transport.protocol import Connection
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Common, Flags, Opcode
from tests.sim.fabric import Fabric, Host
from tests.unit.conftest import Established
from tests.unit.helpers import payload


@pytest.fixture
def delivered(established: Established) -> Established:
    """``established``, with one message of 5000 bytes delivered: the server has state to
    keep from harm."""
    fabric, client, _ = established
    _, b = fabric.hosts
    client.send_message(payload(5000), fabric.now)
    assert fabric.run(0.05, lambda: len(b.messages) == 1)
    return established


def data(conn: Connection, **kw: int) -> frames.Packet:
    """A well-formed data packet from ``conn``'s peer, with fields overridden."""
    assert conn.receiver is not None
    fields = dict(
        psn=conn.receiver.cum & 0xFFFF_FFFF,
        msn=conn.receiver.next_msn,
        msg_offset=0,
        msg_len=10,
        ts=0,
    )
    fields.update(kw)
    common = Common(Opcode.WRITE_ONLY, Flags.NONE, conn.conn, conn.peer_conn)
    header = frames.DataHeader(common, **fields)
    n = fields["msg_len"] - fields["msg_offset"]
    return frames.Packet(frames.PathHeader(b"\0" * 16, b"\0" * 16, ev=1), header, b"x" * max(n, 0))


def sack(conn: Connection, **kw: int) -> frames.Packet:
    s = conn.sender
    fields = dict(
        cum_psn=s.snd_una & 0xFFFF_FFFF,
        sack_base=s.snd_una & 0xFFFF_FFFF,
        bitmap=0,
        ev=0,
        ts=0,
        ooo_count=0,
        rwnd_penalty=0,
        rwnd=1 << 20,
    )
    fields.update(kw)
    common = Common(Opcode.SACK, Flags.NONE, conn.conn, conn.peer_conn)
    path = frames.PathHeader(b"\0" * 16, b"\0" * 16)
    return frames.Packet(path, frames.SackHeader(common, **fields), b"")


def still_works(fabric: Fabric, b: Host, client: Connection) -> None:
    before = len(b.messages)
    msg = payload(40_000, 99)
    client.send_message(msg, fabric.now)
    fabric.run(fabric.now + 0.1, lambda: len(b.messages) == before + 1)
    assert list(b.messages.values())[-1] == msg


def test_unknown_connection(delivered: Established) -> None:
    fabric, client, server = delivered
    _, b = fabric.hosts
    p = data(server)
    bogus = dataclasses.replace(
        p,
        header=dataclasses.replace(
            p.header, common=dataclasses.replace(p.header.common, dst_conn=server.conn ^ 1)
        ),
    )
    b.endpoint.receive(bogus, fabric.now)
    assert b.endpoint.counters.unknown_connection == 1
    still_works(fabric, b, client)


CASES: list[tuple[str, Callable[[Connection, Connection], frames.Packet], str]] = [
    (
        "psn beyond the window",
        lambda c, s: data(s, psn=(s.receiver.cum + 5000) & 0xFFFF_FFFF),  # type: ignore[union-attr]
        "psn_out_of_window",
    ),
    (
        "duplicate psn",
        lambda c, s: data(s, psn=(s.receiver.cum - 1) & 0xFFFF_FFFF),  # type: ignore[union-attr]
        "dup_packets",
    ),
    (
        "payload past msg_len",
        lambda c, s: dataclasses.replace(data(s), payload=b"y" * 30),
        "inconsistent_header",
    ),
    ("msn already delivered", lambda c, s: data(s, msn=0), "msn_out_of_window"),
    ("msn far ahead", lambda c, s: data(s, msn=1 << 20), "msn_out_of_window"),
    (
        "sack beyond sent",
        lambda c, s: sack(s, cum_psn=(s.sender.snd_nxt + 10) & 0xFFFF_FFFF),
        "sack_beyond_sent",
    ),
    ("sack bitmap beyond sent", lambda c, s: sack(s, bitmap=1 << 40), "sack_beyond_sent"),
]


@pytest.mark.parametrize(("name", "make", "counter"), CASES, ids=[c[0] for c in CASES])
def test_bad_packet_is_counted_and_dropped(
    name: str,
    make: Callable[[Connection, Connection], frames.Packet],
    counter: str,
    delivered: Established,
) -> None:
    fabric, client, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    cum, msn = server.receiver.cum, server.receiver.next_msn
    una, nxt = server.sender.snd_una, server.sender.snd_nxt
    before = getattr(server.counters, counter)
    b.endpoint.receive(make(client, server), fabric.now)
    assert getattr(server.counters, counter) == before + 1
    assert (server.receiver.cum, server.receiver.next_msn) == (cum, msn)
    assert (server.sender.snd_una, server.sender.snd_nxt) == (una, nxt)
    assert len(b.messages) == 1
    still_works(fabric, b, client)


def test_inconsistent_message_length(delivered: Established) -> None:
    fabric, _, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    msn = server.receiver.next_msn + 5
    first = segment(server, 1, msn, 0, 3000)
    second = segment(server, 2, msn, 1200, 4000)
    b.endpoint.receive(first, fabric.now)
    b.endpoint.receive(second, fabric.now)
    assert server.counters.inconsistent_header == 1


def test_wrong_header_for_opcode_and_unknown_probe_reply(delivered: Established) -> None:
    fabric, client, server = delivered
    _, b = fabric.hosts
    p = sack(server)
    wrong = dataclasses.replace(
        p,
        header=dataclasses.replace(
            p.header, common=dataclasses.replace(p.header.common, opcode=Opcode.WRITE_ONLY)
        ),
    )
    b.endpoint.receive(wrong, fabric.now)
    assert server.counters.wrong_state == 1
    common = Common(Opcode.PROBE_REPLY, Flags.NONE, server.conn, server.peer_conn)
    reply = frames.Packet(p.path, frames.ProbeHeader(common, 12345, 7, 0), b"")
    b.endpoint.receive(reply, fabric.now)
    assert server.counters.probe_unknown == 1
    still_works(fabric, b, client)


def test_close_before_all_data_is_refused(delivered: Established) -> None:
    fabric, client, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    common = Common(Opcode.CLOSE, Flags.NONE, server.conn, server.peer_conn)
    final = (server.receiver.cum + 3) & 0xFFFF_FFFF
    b.endpoint.receive(
        frames.Packet(sack(server).path, frames.CloseHeader(common, final), b""), fabric.now
    )
    assert server.counters.close_early == 1
    still_works(fabric, b, client)


def test_nack_for_unknown_psn_and_trimmed_nack(delivered: Established) -> None:
    fabric, client, _ = delivered
    a, _ = fabric.hosts
    path = sack(client).path
    common = Common(Opcode.NACK, Flags.NONE, client.conn, client.peer_conn)
    bad = frames.NackHeader(
        common, (client.sender.snd_nxt + 7) & 0xFFFF_FFFF, frames.NackReason.TRIMMED, 0, 0
    )
    a.endpoint.receive(frames.Packet(path, bad, b""), fabric.now)
    assert client.counters.nack_invalid == 1
    # a real trim: the packet's EV is skipped and the packet is resent at once
    client.send_message(payload(3000), fabric.now)
    sent = client.datagrams_to_send(fabric.now)
    first = next(t for t in sent if isinstance(t.header, frames.DataHeader))
    assert isinstance(first.header, frames.DataHeader)
    psn, ts = first.header.psn, first.header.ts  # a receiver reflects the stub's ts
    nack = frames.NackHeader(common, psn, frames.NackReason.TRIMMED, first.ev, ts)
    a.endpoint.receive(frames.Packet(path, nack, b""), fabric.now)
    assert client.counters.nacks_received == 1
    assert client.evs.by_value[first.ev].state.value == "skip"
    fabric.now += 1e-3
    again = client.datagrams_to_send(fabric.now)
    rtx = [t for t in again if isinstance(t.header, frames.DataHeader)]
    assert rtx
    assert rtx[0].header.common.flags & Flags.RTX
    assert rtx[0].ev != first.ev
    # the same NACK again, as a second stub of the first transmission would bring it: the
    # resend in flight answers it, so it is not resent a third time
    a.endpoint.receive(frames.Packet(path, nack, b""), fabric.now)
    assert (client.counters.nacks_received, client.counters.nack_invalid) == (1, 2)
    assert not [
        t for t in client.datagrams_to_send(fabric.now) if isinstance(t.header, frames.DataHeader)
    ]


def segment(
    conn: Connection,
    psn_ahead: int,
    msn: int,
    offset: int,
    msg_len: int,
    n: int | None = None,
    fill: int = 0x41,
) -> frames.Packet:
    """Data packet ``psn_ahead`` PSNs above ``conn``'s cumulative PSN; payload ``n`` bytes."""
    assert conn.receiver is not None
    size = min(msg_len - offset, conn.receiver.seg_size) if n is None else n
    p = data(
        conn,
        psn=(conn.receiver.cum + psn_ahead) & 0xFFFF_FFFF,
        msn=msn,
        msg_offset=offset,
        msg_len=msg_len,
    )
    return dataclasses.replace(p, payload=bytes([fill]) * size)


def test_segment_placed_twice_under_new_psn_leaves_no_hole(delivered: Established) -> None:
    """A forged or buggy packet with a fresh PSN but an offset already placed must not
    count towards completion: a message is complete only when every segment arrived."""
    fabric, _, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    seg, msn = server.receiver.seg_size, server.receiver.next_msn
    n_msgs = len(b.messages)
    length = 2 * seg + seg // 2  # three segments
    b.endpoint.receive(segment(server, 1, msn, 0, length, fill=1), fabric.now)
    b.endpoint.receive(segment(server, 2, msn, 0, length, fill=2), fabric.now)  # same offset
    b.endpoint.receive(segment(server, 3, msn, 2 * seg, length, fill=3), fabric.now)
    assert server.counters.dup_segment == 1
    fabric.run(fabric.now + 1e-3)
    assert len(b.messages) == n_msgs  # the middle segment is still missing
    b.endpoint.receive(segment(server, 0, msn, 0, length, fill=9), fabric.now)  # dup again
    assert server.counters.dup_segment == 2
    # the dropped packets' PSNs are not marked received: their genuine packets still count
    cum = server.receiver.cum
    assert cum + 2 not in server.receiver.ooo
    assert {cum + 1, cum + 3} <= server.receiver.ooo
    b.endpoint.receive(segment(server, 4, msn, seg, length, fill=4), fabric.now)
    fabric.run(fabric.now + 1e-3, lambda: len(b.messages) == n_msgs + 1)
    got = list(b.messages.values())[-1]
    assert got == bytes([1]) * seg + bytes([4]) * seg + bytes([3]) * (seg // 2)


OVERLAPS: list[tuple[str, int, int, int | None]] = [
    # name, offset, msg_len, payload length (None: the natural one)
    ("misaligned offset", 600, 5000, None),
    ("short middle segment", 0, 5000, 100),
    ("last segment short of msg_len", 1200 * 4, 5000, 100),
    ("payload larger than a segment", 0, 5000, 1300),
]


@pytest.mark.parametrize(("name", "offset", "length", "n"), OVERLAPS, ids=[o[0] for o in OVERLAPS])
def test_segment_breaking_the_grid_is_dropped(
    name: str, offset: int, length: int, n: int | None, delivered: Established
) -> None:
    fabric, client, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    assert server.receiver.seg_size == 1200
    cum, before = (
        server.receiver.cum,
        server.counters.bad_segment + server.counters.inconsistent_header,
    )
    b.endpoint.receive(segment(server, 0, server.receiver.next_msn, offset, length, n), fabric.now)
    after = server.counters.bad_segment + server.counters.inconsistent_header
    assert after == before + 1
    assert server.receiver.cum == cum
    assert server.counters.bytes_received == 5000
    still_works(fabric, b, client)


def test_overlapping_segments_never_complete_a_message(delivered: Established) -> None:
    """Two half-overlapping writes covering msg_len in bytes but not on the grid."""
    fabric, _, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    msn, n_msgs = server.receiver.next_msn, len(b.messages)
    b.endpoint.receive(segment(server, 0, msn, 0, 2400, 1200), fabric.now)
    b.endpoint.receive(segment(server, 1, msn, 600, 2400, 1200), fabric.now)
    b.endpoint.receive(segment(server, 2, msn, 1200, 2400, 600), fabric.now)
    fabric.run(fabric.now + 1e-3)
    assert len(b.messages) == n_msgs
    assert server.counters.bad_segment == 2


def test_a_packet_for_another_connection_id_is_counted_not_taken(delivered: Established) -> None:
    """Given straight to a connection (the endpoint demultiplexes by id first), a data
    packet naming another connection goes nowhere but its counters."""
    fabric, client, server = delivered
    _, b = fabric.hosts
    assert server.receiver is not None
    cum, wrong = server.receiver.cum, server.counters.wrong_state
    arrived = server.counters.packets_received
    p = data(server)
    common = dataclasses.replace(p.header.common, dst_conn=server.conn ^ 1)
    server.receive(dataclasses.replace(p, header=dataclasses.replace(p.header, common=common)), 0)
    assert (server.receiver.cum, server.counters.wrong_state) == (cum, wrong + 1)
    assert server.counters.packets_received == arrived + 1
    still_works(fabric, b, client)
