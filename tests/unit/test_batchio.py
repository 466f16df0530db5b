"""Batched datagram IO over loopback (::1 only): the C (sendmmsg/recvmmsg) and pure-Python
implementations against each other and against the contract in mrc_transport/io/batchio.py."""

from __future__ import annotations

import errno
import itertools
import os
import select
import socket
from collections.abc import Callable, Iterator

import pytest

from mrc_transport.io import batchio

LOOPBACK = socket.inet_pton(socket.AF_INET6, "::1")

SendFn = Callable[..., int]
RecvFn = Callable[..., list[tuple[int, int]]]

SENDERS: list[SendFn] = [batchio.py_send_batch]
RECEIVERS: list[RecvFn] = [batchio.py_recv_batch]
if batchio.BACKEND == "c":
    SENDERS.append(batchio.c_send_batch)
    RECEIVERS.append(batchio.c_recv_batch)


def _name(fn: Callable[..., object]) -> str:
    return fn.__name__


@pytest.fixture
def udp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    tx.bind(("::1", 0))
    rx.bind(("::1", 0))
    try:
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def _packets(count: int) -> tuple[bytearray, list[int]]:
    """count datagrams of different lengths and contents, back to back."""
    buf = bytearray()
    offsets = [0]
    for i in range(count):
        buf += bytes([i & 0xFF]) * (1 + 37 * i % 1400) + i.to_bytes(4, "big")
        offsets.append(len(buf))
    return buf, offsets


def _drain(rx: socket.socket, recv: RecvFn, want: int) -> list[bytes]:
    """Receive until want datagrams arrived (loopback delivers synchronously, but poll)."""
    buf = bytearray(2048 * 256)
    got: list[bytes] = []
    while len(got) < want:
        ready, _, _ = select.select([rx], [], [], 5.0)
        assert ready, f"timed out with {len(got)} of {want} datagrams"
        for off, n in recv(rx, buf, 256, 2048):
            got.append(bytes(buf[off : off + n]))
    return got


@pytest.mark.parametrize("send", SENDERS, ids=_name)
@pytest.mark.parametrize("recv", RECEIVERS, ids=_name)
def test_round_trip_over_loopback(
    udp_pair: tuple[socket.socket, socket.socket], send: SendFn, recv: RecvFn
) -> None:
    tx, rx = udp_pair
    buf, offsets = _packets(150)  # more than one 64-packet chunk of sendmmsg
    port = rx.getsockname()[1]
    assert send(tx, buf, offsets, [(LOOPBACK, port)]) == 150
    got = _drain(rx, recv, 150)
    assert got == [bytes(buf[a:b]) for a, b in itertools.pairwise(offsets)]


@pytest.mark.parametrize("send", SENDERS, ids=_name)
def test_per_packet_destinations(
    udp_pair: tuple[socket.socket, socket.socket], send: SendFn
) -> None:
    tx, rx = udp_pair
    rx2 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        rx2.bind(("::1", 0))
        ports = [rx.getsockname()[1], rx2.getsockname()[1]]
        buf, offsets = _packets(6)
        addrs = [(LOOPBACK, ports[i % 2]) for i in range(6)]
        assert send(tx, buf, offsets, addrs) == 6
        first = _drain(rx, batchio.py_recv_batch, 3)
        second = _drain(rx2, batchio.py_recv_batch, 3)
        packets = [bytes(buf[a:b]) for a, b in itertools.pairwise(offsets)]
        assert first == packets[0::2]
        assert second == packets[1::2]
    finally:
        rx2.close()


@pytest.mark.parametrize("recv", RECEIVERS, ids=_name)
def test_empty_socket_returns_nothing(
    udp_pair: tuple[socket.socket, socket.socket], recv: RecvFn
) -> None:
    _, rx = udp_pair
    rx.setblocking(True)  # the call must not block even on a blocking socket
    assert recv(rx, bytearray(4096), 2, 2048) == []


@pytest.mark.parametrize("recv", RECEIVERS, ids=_name)
def test_oversized_datagram_is_cut_to_its_slot(
    udp_pair: tuple[socket.socket, socket.socket], recv: RecvFn
) -> None:
    tx, rx = udp_pair
    tx.sendto(b"x" * 1000, rx.getsockname())
    tx.sendto(b"y" * 10, rx.getsockname())
    buf = bytearray(4 * 512)
    got: list[tuple[int, int]] = []
    while len(got) < 2:
        got += recv(rx, memoryview(buf)[len(got) * 512 :], 4 - len(got), 512)
    assert [n for _, n in got] == [512, 10]


def test_recv_from_reports_the_source(udp_pair: tuple[socket.socket, socket.socket]) -> None:
    tx, rx = udp_pair
    receivers = [batchio.py_recv_batch_from]
    if batchio.BACKEND == "c":
        receivers.append(batchio.c_recv_batch_from)
    for recv_from in receivers:
        tx.sendto(b"hello", rx.getsockname())
        buf = bytearray(1024)
        got: list[batchio.ReceivedFrom] = []
        while not got:
            got = recv_from(rx, buf, 1, 1024)
        assert got == [(0, 5, LOOPBACK, tx.getsockname()[1])]


@pytest.mark.parametrize("send", SENDERS, ids=_name)
def test_full_socket_returns_a_short_count_not_an_error(send: SendFn) -> None:
    # A connected AF_UNIX datagram pair blocks (EAGAIN) when the peer's queue is full,
    # unlike UDP which drops: the only portable way to see "would block" on send.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        buf = bytes(1000) * 500
        offsets = list(range(0, len(buf) + 1, 1000))
        sent = send(a, buf, offsets, None)
        assert 0 < sent < 500
        assert send(a, buf, offsets[sent:], None) == 0
        got = _drain(b, batchio.py_recv_batch, sent)
        assert len(got) == sent
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("send", SENDERS, ids=_name)
def test_other_errors_raise_oserror_with_errno(send: SendFn) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.close()
    try:
        with pytest.raises(OSError, match=r"refused|not connected") as info:
            send(a, b"abc", [0, 3], None)
        assert info.value.errno in (errno.ECONNREFUSED, errno.ENOTCONN)
        assert not isinstance(info.value, BlockingIOError)
    finally:
        a.close()


@pytest.mark.parametrize("send", SENDERS, ids=_name)
def test_bad_arguments_are_rejected(send: SendFn) -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        with pytest.raises(ValueError, match="destinations"):
            send(s, b"abcd", [0, 2, 4], [(LOOPBACK, 1)] * 3)
        with pytest.raises(ValueError, match="offsets"):
            send(s, b"abcd", [0, 5], None)
        with pytest.raises(ValueError, match="16-byte"):
            send(s, b"abcd", [0, 4], [(b"\0" * 4, 1)])


def test_backend_follows_the_switch() -> None:
    if os.environ.get("MRC_PUREPYTHON") == "1":
        assert batchio.BACKEND == "python"
    if os.environ.get("MRC_PUREPYTHON") == "0":
        assert batchio.BACKEND == "c"
