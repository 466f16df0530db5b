"""Burst receive with path information and raw IPv6 burst send (csrc/mrc_io.c) against
their pure-Python twins, over loopback (::1) only."""

from __future__ import annotations

import dataclasses
import os
import select
import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from mrc_transport import wire
from mrc_transport.io import batchio
from mrc_transport.io.sockets import IPV6_TCLASS, open_rx, open_rx_encap
from mrc_transport.wire import frames
from mrc_transport.wire.frames import (
    Common,
    DataHeader,
    Flags,
    Header,
    Opcode,
    PathHeader,
    ProbeHeader,
    SackHeader,
)
from mrc_transport.wire.records import RX_BAD_INNER, RX_META, RxMeta
from srv6.checksum import udp6_checksum

LOOPBACK = socket.inet_pton(socket.AF_INET6, "::1")
SLOT = 1024
TCLASS = 0x2A << 2 | 0b10  # DSCP 42, ECT(0)

RECEIVERS: list[Callable[..., batchio.BurstReceiver]] = [batchio.PyBurstReceiver]
RAW_SENDERS: list[Callable[..., int]] = [batchio.py_send_raw6]
if batchio.BACKEND == "c":
    from mrc_transport import _fastpath

    RECEIVERS.append(batchio.CBurstReceiver)
    RAW_SENDERS.append(batchio.c_send_raw6)

Batch = list[tuple[RxMeta, bytes]]


@pytest.fixture
def rx() -> Iterator[socket.socket]:
    sock = open_rx(0, "::1")
    try:
        yield sock
    finally:
        sock.close()


@pytest.fixture
def tx() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TCLASS, TCLASS)
    sock.bind(("::1", 0))
    try:
        yield sock
    finally:
        sock.close()


def _datagrams() -> list[bytes]:
    """Different lengths and contents; the last is larger than a slot."""
    return [bytes([i]) * (1 + 97 * i % SLOT) + i.to_bytes(4, "big") for i in range(20)] + [
        b"\x5a" * (SLOT + 100)
    ]


def _receive(rx: socket.socket, receiver: batchio.BurstReceiver, want: int) -> Batch:
    """Until want datagrams arrived: each record with its slot's bytes."""
    got: Batch = []
    while len(got) < want:
        assert select.select([rx], [], [], 2.0)[0], f"only {len(got)} of {want} arrived"
        for i, meta in enumerate(receiver.recv(rx)):
            off = i * receiver.slot_size
            got.append((meta, bytes(receiver.view[off : off + meta[0]])))
    return got


@pytest.mark.parametrize("make", RECEIVERS, ids=lambda c: c.__name__)
def test_burst_receive_gives_payload_source_and_path_information(
    make: Callable[[int, int], batchio.BurstReceiver], rx: socket.socket, tx: socket.socket
) -> None:
    receiver = make(8, SLOT)  # fewer slots than datagrams: several calls
    assert receiver.recv(rx) == []  # nothing waiting is not an error
    sent = _datagrams()
    for d in sent:
        tx.sendto(d, rx.getsockname())
    got = _receive(rx, receiver, len(sent))
    sport = tx.getsockname()[1]
    for (meta, data), want in zip(got, sent, strict=True):
        n, truncated, tclass, src_port, flow, src, dst = meta
        assert data == want[:SLOT]
        assert (n, truncated) == (min(len(want), SLOT), int(len(want) > SLOT))
        assert (tclass, src_port, src, dst) == (TCLASS, sport, LOOPBACK, LOOPBACK)
        assert 0 <= flow <= 0xFFFFF
    assert receiver.recv(rx) == []


@pytest.mark.skipif(batchio.BACKEND != "c", reason="the C fast path is not loaded")
def test_c_and_python_receivers_agree(rx: socket.socket, tx: socket.socket) -> None:
    sent = _datagrams()
    batches = []
    for make in (batchio.CBurstReceiver, batchio.PyBurstReceiver):
        for d in sent:
            tx.sendto(d, rx.getsockname())
        batches.append(_receive(rx, make(64, SLOT), len(sent)))
    assert batches[0] == batches[1]  # flow labels too: the same socket, the same flow


def test_receiver_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        batchio.burst_receiver(0, SLOT)
    with pytest.raises(ValueError, match="must be > 0"):
        batchio.burst_receiver(4, 0)


def _raw_packet(dport: int, payload: bytes) -> bytes:
    """IPv6 + UDP from ::1 to [::1]:dport, checksum over the final destination."""
    udp = struct.pack("!HHHH", 40000, dport, 8 + len(payload), 0) + payload
    csum = udp6_checksum(LOOPBACK, LOOPBACK, udp)
    udp = udp[:6] + csum.to_bytes(2, "big") + udp[8:]
    ipv6 = struct.pack("!IHBB", 6 << 28 | TCLASS << 20 | 0x12345, len(udp), 17, 64)
    return ipv6 + LOOPBACK + LOOPBACK + udp


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
@pytest.mark.parametrize("send", RAW_SENDERS, ids=lambda f: f.__name__)
def test_raw_burst_goes_to_each_packets_own_destination(
    send: Callable[..., int], rx: socket.socket
) -> None:
    payloads = [bytes([i]) * (10 + 13 * i) for i in range(70)]  # more than one sendmmsg
    pkts = [_raw_packet(rx.getsockname()[1], p) for p in payloads]
    offsets = [0]
    for p in pkts:
        offsets.append(offsets[-1] + len(p))
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        assert send(raw, b"".join(pkts), offsets) == len(pkts)
    finally:
        raw.close()
    got = _receive(rx, batchio.PyBurstReceiver(64, SLOT), len(pkts))
    assert [data for _, data in got] == payloads
    # the header went out as built: traffic class and flow label as written
    assert {(m[2], m[4]) for m, _ in got} == {(TCLASS, 0x12345)}


@pytest.mark.parametrize("send", RAW_SENDERS, ids=lambda f: f.__name__)
def test_raw_burst_rejects_a_packet_shorter_than_an_ipv6_header(
    send: Callable[..., int],
) -> None:
    with (
        socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock,  # never reached
        pytest.raises(ValueError, match="shorter than an IPv6 header"),
    ):
        send(sock, bytes(60), [0, 40, 60])


@pytest.mark.parametrize("send", RAW_SENDERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([0, 80, 40, 120], "non-decreasing"),
        ([0, 60, 140], "inside the buffer"),
        ([-20, 60, 120], "inside the buffer"),
        ([], "N \\+ 1 entries"),
    ],
)
def test_raw_burst_rejects_offsets_outside_the_buffer_or_out_of_order(
    send: Callable[..., int], offsets: list[int], match: str
) -> None:
    with (
        socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock,  # never reached
        pytest.raises(ValueError, match=match),
    ):
        send(sock, bytes(120), offsets)


# -- burst encoder ------------------------------------------------------------------------

MakeEncoder = Callable[[int, int], batchio.BurstEncoder]
ENCODERS: list[MakeEncoder] = [batchio.PyBurstEncoder]
if batchio.BACKEND == "c":
    ENCODERS.append(batchio.CBurstEncoder)

SRC = socket.inet_pton(socket.AF_INET6, "fc00:0:1:e000::2")
SEGS = tuple(socket.inet_pton(socket.AF_INET6, f"fc00:{i}::1") for i in range(1, 4))


def _burst() -> list[tuple[PathHeader, Header, bytes]]:
    """Data, SACK and control packets over a uSID path and an SRH path."""
    usid = PathHeader(src=SRC, dst=SEGS[0], final_dst=SEGS[2], ev=0x12345, dscp=10, dport=4791)
    srh = PathHeader(src=SRC, dst=SEGS[0], segments=SEGS, ev=0xABCDE, dscp=46, dport=4791)
    common = Common(Opcode.WRITE_MIDDLE, Flags.ACK_REQ, 7, 9)
    sack = SackHeader(
        Common(Opcode.SACK, Flags.NONE, 7, 9), 100, 90, 0b1011, 0x55, 123, 2, 5, 1 << 20,
        1 << 35, 789, 0b1000,
    )  # fmt: skip
    probe = ProbeHeader(Common(Opcode.PROBE, Flags.NONE, 7, 9), 3, 0x77, 456)
    out: list[tuple[PathHeader, Header, bytes]] = []
    for i in range(12):
        data = DataHeader(common, 1000 + i, 5, i * 700, 1 << 20, 10**9 + i)
        out.append((usid if i % 2 else srh, data, bytes([i]) * (1 + 61 * i)))
    out += [(usid, sack, b""), (srh, probe, b""), (usid, sack, b"")]
    return out


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_burst_encoder_writes_what_wire_encode_writes(make: MakeEncoder) -> None:
    burst = _burst()
    enc = make(len(burst), 2048)
    for _ in range(2):  # the buffer is reused after clear()
        enc.clear()
        lengths = [enc.add(path, header, payload) for path, header, payload in burst]
        want = [wire.encode(path, header, payload) for path, header, payload in burst]
        assert [enc.packet(i) for i in range(len(enc))] == want
        assert lengths == [len(p) for p in want]
        assert enc.nbytes == sum(lengths)
        assert bytes(enc.view[: enc.nbytes]) == b"".join(want)


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_burst_encoder_raises_as_wire_encode_does(make: MakeEncoder) -> None:
    path, data, payload = _burst()[1]
    enc = make(2, 1024)
    bad_opcode = DataHeader(Common(Opcode.SACK, Flags.NONE, 1, 2), 1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="does not go with"):
        enc.add(path, bad_opcode, b"")
    bad_psn = DataHeader(Common(Opcode.WRITE_ONLY, Flags.NONE, 1, 2), 1 << 32, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="out of range"):
        enc.add(path, bad_psn, b"")
    with pytest.raises(ValueError, match="exceeds"):
        enc.add(path, data, bytes(1100))
    assert len(enc) == 0  # nothing half-added
    enc.add(path, data, payload)
    enc.add(path, data, payload)
    with pytest.raises(ValueError, match="at most 2 packets"):
        enc.add(path, data, payload)


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_burst_encoder_sends_to_the_first_hop(make: MakeEncoder, rx: socket.socket) -> None:
    port = rx.getsockname()[1]
    path = PathHeader(src=LOOPBACK, dst=LOOPBACK, ev=0x10005, dscp=10, dport=port)
    common = Common(Opcode.WRITE_MIDDLE, Flags.NONE, 7, 9)
    enc = make(40, 1500)
    payloads = [bytes([i]) * (100 + 20 * i) for i in range(40)]
    for i, p in enumerate(payloads):
        enc.add(path, DataHeader(common, i, 0, 0, 1 << 20, 0), p)
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        assert enc.send(raw, 30) == 10
        assert enc.send(raw) == 40
    finally:
        raw.close()
    got = _receive(rx, batchio.PyBurstReceiver(64, SLOT), 50)
    headers = len(wire.encode(path, DataHeader(common, 0, 0, 0, 0, 0))) - 48
    assert [data[headers:] for _, data in got] == payloads[30:] + payloads


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_add_many_is_add_in_order(make: MakeEncoder) -> None:
    """Runs of data packets (the C encoder's one call per run) between control packets,
    over a buffer reused after clear()."""
    burst = _burst()
    burst = burst[:5] + burst[12:13] + burst[5:12] + burst[13:]  # a SACK mid-run
    one, many = make(len(burst), 2048), make(len(burst), 2048)
    for _ in range(2):
        one.clear()
        many.clear()
        for path, header, payload in burst:
            one.add(path, header, payload)
        many.add_many(burst)
        assert many.offsets == one.offsets
        assert bytes(many.view[: many.nbytes]) == bytes(one.view[: one.nbytes])
        want = [wire.encode(path, header, payload) for path, header, payload in burst]
        assert [many.packet(i) for i in range(len(many))] == want


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("opcode", "does not go with"),
        ("psn", "out of range"),
        ("payload", "exceeds"),
        ("count", "at most 4 packets"),
    ],
)
def test_add_many_raises_as_add_does_with_the_ones_before_added(
    make: MakeEncoder, bad: str, match: str
) -> None:
    path, data, payload = _burst()[1]
    items = [(path, data, payload)] * 2
    if bad == "opcode":
        items.append((path, DataHeader(Common(Opcode.SACK, Flags.NONE, 1, 2), 1, 2, 3, 4, 5), b""))
    elif bad == "psn":
        items.append((path, dataclasses.replace(data, psn=1 << 32), b""))
    elif bad == "payload":
        items.append((path, data, bytes(1100)))
    else:
        items *= 3  # six for a burst of four
    items.append((path, data, payload))
    enc = make(4, 1024)
    with pytest.raises(ValueError, match=match):
        enc.add_many(items)
    assert len(enc) == (4 if bad == "count" else 2)
    assert [enc.packet(i) for i in range(len(enc))] == [wire.encode(*items[0])] * len(enc)


# ------------------------------------------------------------------ the encap encoding


def _encap_packets(port: int, nonce: bytes) -> tuple[list[bytes], list[bytes]]:
    """(good, bad) encapsulated probes from ::1 to [::1]:port, ``nonce`` in each so a test
    knows its own among what the raw socket sees. The outer header says CE, the inner
    ECT(0): the receiver reports the outer one (the switches mark it)."""
    path = PathHeader(src=LOOPBACK, dst=LOOPBACK, ev=0x8001_2345, dport=port, encap=True)
    good = []
    for i in range(5):
        probe = ProbeHeader(Common(Opcode.PROBE, Flags.NONE, i, 2), int.from_bytes(nonce), 0, 0)
        packet = bytearray(wire.encode(path, probe))
        packet[1] |= 0x30  # outer ECN = CE (no checksum covers the outer header)
        good.append(bytes(packet))
    cut = bytearray(good[0][:104])  # the inner header whole, its UDP cut after the nonce
    cut[4:6] = (64).to_bytes(2, "big")
    wrong_sum = bytearray(good[1])
    wrong_sum[-1] ^= 1
    short = bytearray(good[2][:80] + nonce[:3])  # too short for a UDP port: the nonce's
    short[4:6] = (43).to_bytes(2, "big")  # first bytes, the inner source the rest
    short[48:64] = nonce * 4
    return good, [bytes(cut), bytes(wrong_sum), bytes(short)]


def _ours(nonce: bytes, data: bytes) -> bool:
    return nonce in data or nonce * 4 in data


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
@pytest.mark.parametrize("make", RECEIVERS, ids=lambda c: c.__name__)
def test_encap_burst_is_decapsulated(make: Callable[..., batchio.BurstReceiver]) -> None:
    """What a raw IPPROTO_IPV6 socket delivers, decapsulated in place: the UDP payload at
    the start of its slot, the inner source, destination and source port, the outer
    traffic class; a bad inner packet is marked, not dropped silently, nor a crash. One
    for another port the socket's filter keeps out (sent first, so it would be first in)."""
    port, nonce = 40000 + os.getpid() % 20000, os.urandom(4)
    good, bad = _encap_packets(port, nonce)
    other_port = _encap_packets(port + 1, nonce)[0][0]
    rx = open_rx_encap(port)
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        for packet in [other_port, *good, *bad]:
            raw.sendto(packet, ("::1", 0))
        receiver = make(64, SLOT, port)
        got: Batch = []
        while len(got) < len(good) + len(bad):
            assert select.select([rx], [], [], 2.0)[0], f"only {len(got)} arrived"
            got += [(m, d) for m, d in _slots(receiver, rx) if _ours(nonce, d)]
    finally:
        rx.close()
        raw.close()
    ok = [(m, d) for m, d in got if not m[1]]
    assert [d for _, d in ok] == [p[88:] for p in good]
    assert {m[2:] for m, _ in ok} == {(TCLASS_CE, 0x8001, 0x12345, LOOPBACK, LOOPBACK)}
    marked = [m for m, _ in got if m[1]]
    assert [m[1] for m in marked] == [RX_BAD_INNER] * len(bad)


def _slots(receiver: batchio.BurstReceiver, rx: socket.socket) -> Batch:
    out = []
    for i, meta in enumerate(receiver.recv(rx)):
        off = i * receiver.slot_size
        out.append((meta, bytes(receiver.view[off : off + meta[0]])))
    return out


TCLASS_CE = frames.DSCP_DATA << 2 | 0b11  # PathHeader's DSCP, CE


@pytest.mark.skipif(batchio.BACKEND != "c", reason="the C fast path is not loaded")
def test_c_and_python_decapsulators_agree() -> None:
    """mrc_decap_burst and decap_slot on the same slots: the same metas, the same bytes,
    for good inner packets, cut ones, wrong ones and ones for another port."""
    port = 4791
    good, bad = _encap_packets(port, b"\x01\x02\x03\x04")
    inner = [p[40:] for p in good + bad]
    other_port = _encap_packets(port + 1, b"\x05\x06\x07\x08")[0][0][40:]
    inner += [other_port, b"", inner[0][:47]]
    results = []
    for decap in ("c", "python"):
        receiver = batchio.CBurstReceiver(len(inner), SLOT, port)
        metas: list[RxMeta] = []
        for i, data in enumerate(inner):
            receiver.view[i * SLOT : i * SLOT + len(data)] = data
            metas.append((len(data), 0, TCLASS_CE, 0, 0x12345, bytes(16), bytes(16)))
        if decap == "c":
            dec = receiver.decoder
            for i, m in enumerate(metas):
                RX_META.pack_into(dec._meta_view, i * RX_META.size, *m)
            _fastpath.lib.mrc_decap_burst(dec.c_buf, SLOT, dec.c_metas, len(inner), port)
            metas = dec.metas(len(inner))
        else:
            metas = [
                batchio.decap_slot(receiver.view, i * SLOT, m, port) for i, m in enumerate(metas)
            ]
        results.append((metas, bytes(receiver.view)))
    assert results[0] == results[1]
    assert [m[1] for m in results[0][0]] == [0] * len(good) + [RX_BAD_INNER] * (len(bad) + 3)
