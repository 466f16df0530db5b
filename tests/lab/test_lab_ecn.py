"""ECN CE marking measured on real packets: ECT(0) UDP sent over SRv6 paths of a lab whose
switches mark with a high probability, read back with IPV6_RECVTCLASS in the receiver (for
an encapsulated packet, the outer header's, on a raw IPPROTO_IPV6 socket).

The plan marks on every switch egress except T0 -> host (the last hop to the receiver,
as MRC expects), so a cross-rack path h -> T0 -> T1 -> T0' -> h' has two marking hops
(T0 -> T1, T1 -> T0') and a packet leaves it CE with probability 1 - (1 - p)^2, while a
same-rack path h -> T0 -> h' has none and must arrive unmarked."""

from __future__ import annotations

import math
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Iterator

import pytest
import yaml

from labs import netns
from labs.check import INNER_LEN, IPPROTO_IPV6, Encoding, build_probe
from labs.paths import paths
from labs.topology import Topology, from_dict, namespace
from srv6.path import SrPath
from tests.lab.conftest import RunningLab

pytestmark = pytest.mark.lab

PROBABILITY = 0.5
PACKETS = 2000
WAVE = 200  # below the tbf queue limit, so no packet is dropped on the way
PORT = 47_123
NOT_ECT, ECT0, CE = 0b00, 0b10, 0b11  # RFC 3168 section 5
QUIET = 0.5
_SEQ = struct.Struct("!8sI")

TOPOLOGY = f"""
preset: tiny
links:
  host_t0: {{ecn: {{mode: probability, probability: {PROBABILITY}}}}}
  t0_t1: {{ecn: {{mode: probability, probability: {PROBABILITY}}}}}
"""


@pytest.fixture(scope="module")
def ecn_lab(running_lab: RunningLab) -> Iterator[tuple[str, Topology]]:
    """One tiny lab for the module; every link class marks with PROBABILITY, so a marking
    last hop (T0 -> host) would show up in both tests below."""
    topo = from_dict(yaml.safe_load(TOPOLOGY))
    with running_lab(topo) as name:
        yield name, topo


def _receiver(lab: str, host: str, path: SrPath, encoding: Encoding) -> socket.socket:
    """A UDP socket on PORT, or for encap a raw IPPROTO_IPV6 one, which gets the inner
    packet and the outer header's traffic class (docs/protocol.md, "Encapsulation")."""
    encap = encoding == "encap"
    with netns.entered(namespace(lab, host)):
        kind, proto = (socket.SOCK_RAW, IPPROTO_IPV6) if encap else (socket.SOCK_DGRAM, 0)
        rx = socket.socket(socket.AF_INET6, kind, proto)
    rx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    if not encap:
        rx.bind((str(path.dst), PORT))
    rx.setblocking(False)
    return rx


def _tclass(ancdata: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_TCLASS:
            return int.from_bytes(data[:4], sys.byteorder)
    raise AssertionError("IPV6_RECVTCLASS gave no IPV6_TCLASS control message")


def _drain(rx: socket.socket, nonce: bytes, got: dict[int, int]) -> None:
    while True:
        try:
            data, anc, _, _ = rx.recvmsg(128, socket.CMSG_SPACE(4))
        except BlockingIOError:
            return
        if rx.proto == IPPROTO_IPV6:  # inner IPv6 + UDP, then the payload
            data = data[INNER_LEN:] if data[42:44] == PORT.to_bytes(2, "big") else b""
        if len(data) != _SEQ.size:
            continue
        run, seq = _SEQ.unpack(data)
        if run == nonce:
            got[seq] = _tclass(anc) & 0b11


def _wait(rx: socket.socket, nonce: bytes, got: dict[int, int], upto: int) -> None:
    """Until every packet below ``upto`` is in, or nothing arrived for QUIET seconds."""
    last = time.monotonic()
    while len(got) < upto and time.monotonic() - last < QUIET:
        ready, _, _ = select.select([rx], [], [], QUIET)
        if ready:
            last = time.monotonic()
            _drain(rx, nonce, got)


def send(
    lab: str,
    src: str,
    dst: str,
    path: SrPath,
    encoding: Encoding,
    tclass: int = ECT0,
    count: int = PACKETS,
    gap: float = 0.0,
) -> list[int]:
    """ECN bits of every packet that arrived, of ``count`` packets sent over path, back to
    back or paced ``gap`` seconds apart (pacing is the stimulus, not a wait)."""
    nonce = os.urandom(8)
    got: dict[int, int] = {}
    rx = _receiver(lab, dst, path, encoding)
    with netns.entered(namespace(lab, src)):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    with rx, tx:
        for start in range(0, count, WAVE):
            end = min(count, start + WAVE)
            for seq in range(start, end):
                pkt, first = build_probe(
                    path, encoding, _SEQ.pack(nonce, seq), sport=PORT, dport=PORT, tclass=tclass
                )
                tx.sendto(pkt, (str(first), 0))
                if gap:
                    time.sleep(gap)
            _wait(rx, nonce, got, end)
    return [got[seq] for seq in sorted(got)]  # in sending order


def _tolerance(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n)  # five binomial standard deviations


@pytest.mark.parametrize("encoding", ["usid", "srh", "encap"])
def test_cross_rack_path_marks_at_the_two_fabric_hops(
    ecn_lab: tuple[str, Topology], encoding: Encoding
) -> None:
    lab, topo = ecn_lab
    path = paths(topo, "h0", "h2")[3]  # plane 1 via T1 1: h0 -> t0-p1-0 -> t1-p1-1 -> t0-p1-1
    assert path.hops == ("t0-p1-0", "t1-p1-1", "t0-p1-1")
    ecn = send(lab, "h0", "h2", path, encoding)
    assert len(ecn) >= 0.99 * PACKETS
    assert set(ecn) <= {ECT0, CE}
    expected = 1 - (1 - PROBABILITY) ** 2  # 0.75; one hop would give 0.5, three 0.875
    fraction = ecn.count(CE) / len(ecn)
    print(f"{encoding}: CE {fraction:.3f} of {len(ecn)} (expected {expected:.3f})")
    assert abs(fraction - expected) < _tolerance(expected, len(ecn))


@pytest.mark.parametrize("encoding", ["usid", "srh", "encap"])
def test_same_rack_path_is_never_marked(ecn_lab: tuple[str, Topology], encoding: Encoding) -> None:
    """host -> T0 -> host: the only switch egress is the last hop, which never marks."""
    lab, topo = ecn_lab
    path = paths(topo, "h1", "h0")[0]
    assert path.hops == ("t0-p0-0",)
    ecn = send(lab, "h1", "h0", path, encoding)
    assert len(ecn) >= 0.99 * PACKETS
    assert ecn.count(CE) == 0
    assert set(ecn) == {ECT0}


def test_not_ect_packets_are_never_marked(ecn_lab: tuple[str, Topology]) -> None:
    """The rules match ECT only (RFC 3168 section 6.1.1: never mark Not-ECT)."""
    lab, topo = ecn_lab
    path = paths(topo, "h0", "h2")[0]
    ecn = send(lab, "h0", "h2", path, "srh", tclass=NOT_ECT, count=WAVE)
    assert len(ecn) >= 0.99 * WAVE
    assert set(ecn) == {NOT_ECT}


RATE_FRACTION = 0.01  # of 100 Mbit/s: mark what exceeds 125 kbytes/s
RATE_TOPOLOGY = f"""
preset: tiny
links:
  t0_t1: {{ecn: {{mode: rate, rate_fraction: {RATE_FRACTION}}}}}
"""
# nft's byte limit starts with, and refills to, one second of its rate (kernel nft_limit:
# tokens_max = unit x (rate + burst) / rate, unit = 1 s): that much passes unmarked.
BUCKET = 125 * 1024
TRICKLE = 40
TRICKLE_GAP = 0.005  # 40 x 132 bytes every 5 ms: ~26 kbytes/s, below the mark rate
BURST = 3000  # 396 kbytes back to back: three buckets


def test_rate_mode_marks_above_the_rate_after_one_bucket(running_lab: RunningLab) -> None:
    topo = from_dict(yaml.safe_load(RATE_TOPOLOGY))
    with running_lab(topo) as lab:
        path = paths(topo, "h0", "h2")[0]
        size = len(build_probe(path, "srh", _SEQ.pack(b"", 0))[0])
        trickle = send(lab, "h0", "h2", path, "srh", count=TRICKLE, gap=TRICKLE_GAP)
        t0 = time.monotonic()
        burst = send(lab, "h0", "h2", path, "srh", count=BURST)
        took = time.monotonic() - t0
    assert len(trickle) == TRICKLE
    assert trickle.count(CE) == 0
    assert len(burst) >= 0.99 * BURST
    unmarked = size * (len(burst) - burst.count(CE))
    refill = RATE_FRACTION * 100e6 / 8 * took
    tail = burst[-BURST // 3 :]
    print(f"rate mode: {unmarked} bytes unmarked, bucket {BUCKET} + refill {refill:.0f}")
    assert 0.8 * BUCKET <= unmarked <= 1.2 * BUCKET + refill
    assert burst[:100] == [ECT0] * 100  # the bucket is full at first
    # then every packet above the rate is CE: all of the tail but what the bucket refilled
    # while it went out (a third of the burst's refill; a slow sender lets more through)
    tail_refill = refill / 3 / size
    assert tail.count(CE) >= 0.9 * (len(tail) - tail_refill), (tail.count(CE), tail_refill)
