"""Burst receive with path information and raw IPv6 burst send (csrc/mrc_io.c) against
their pure-Python twins, over loopback (::1) only."""

from __future__ import annotations

import os
import select
import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from mrc_transport.io import batchio
from mrc_transport.io.sockets import IPV6_TCLASS, open_rx
from srv6.checksum import udp6_checksum

LOOPBACK = socket.inet_pton(socket.AF_INET6, "::1")
SLOT = 1024
TCLASS = 0x2A << 2 | 0b10  # DSCP 42, ECT(0)

RECEIVERS: list[type[batchio.PyBurstReceiver]] = [batchio.PyBurstReceiver]
RAW_SENDERS: list[Callable[..., int]] = [batchio.py_send_raw6]
if batchio.BACKEND == "c":
    RECEIVERS.append(batchio.CBurstReceiver)
    RAW_SENDERS.append(batchio.c_send_raw6)

Batch = list[tuple[batchio.RxMeta, bytes]]


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


def _receive(rx: socket.socket, receiver: batchio.PyBurstReceiver, want: int) -> Batch:
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
    make: type[batchio.PyBurstReceiver], rx: socket.socket, tx: socket.socket
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
        batchio.BurstReceiver(0, SLOT)
    with pytest.raises(ValueError, match="must be > 0"):
        batchio.BurstReceiver(4, 0)


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
