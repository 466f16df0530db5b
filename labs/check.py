"""`mrc lab check`: a real SRv6 probe between every host pair over every path, every encoding.

Each probe is a full IPv6 (+ SRH, or + an inner IPv6 header) + UDP packet built here on
srv6/ (usid, srh, checksum), sent with a ``SOCK_RAW, IPPROTO_RAW`` socket opened in the
source host's namespace (kernel-facts "Sending SRv6 from userspace") and received by a UDP
socket opened in the destination's namespace, or for the encap encoding by a raw
IPPROTO_IPV6 socket there (the kernel has no decapsulating SID; the probe's inner UDP
checksum is verified here, as the kernel verifies the others'). Sockets keep the
namespace they were created in, so one thread opens them all and then waits on every
receiver with select(): no sleeps, one deadline.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from ipaddress import IPv6Address
from typing import Any, Literal

from labs import netns
from labs.paths import path_links, paths
from labs.topology import Topology, namespace
from srv6.checksum import udp6_checksum
from srv6.path import SrPath
from srv6.srh import Srh

Encoding = Literal["usid", "srh", "encap"]
ENCODINGS: tuple[Encoding, ...] = ("usid", "srh", "encap")
PROBE_PORT = 47_999
MAGIC = b"MRCLABCHK"
_PROBE = struct.Struct("!9s8sI")  # magic, run nonce, probe id
IPPROTO_ROUTING = 43
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
INNER_LEN = 40 + 8  # an encapsulated probe's inner IPv6 and UDP headers
HOP_LIMIT = 64
WAVE = 1024
QUIET = 0.05
RCVBUF = 4 << 20


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Outcome of one probe."""

    src: str
    """Sending host."""
    dst: str
    """Receiving host."""
    plane: int
    """Plane (= sending port)."""
    hops: tuple[str, ...]
    """Switches on the path."""
    encoding: Encoding
    """"usid" (container in the destination address), "srh" (classic End segments) or
    "encap" (the uSID container on an outer header, an inner one between the hosts)."""
    ok: bool
    """True when the probe reached the destination's socket before the deadline."""
    links: tuple[str, ...]
    """Links the path crosses, "a:b"."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["hops"] = list(self.hops)
        out["links"] = list(self.links)
        return out


def ipv6_header(
    src: IPv6Address,
    dst: IPv6Address,
    payload_len: int,
    nh: int,
    flow: int = 0,
    tclass: int = 0,
) -> bytes:
    """RFC 8200 section 3. Probes keep traffic class 0 (Not-ECT: never CE-marked); the ECN
    test sends ECT(0) = tclass 0b10 (RFC 3168 section 5)."""
    first_word = (6 << 28) | ((tclass & 0xFF) << 20) | (flow & 0xFFFFF)
    return struct.pack("!IHBB", first_word, payload_len, nh, HOP_LIMIT) + src.packed + dst.packed


def build_probe(
    path: SrPath,
    encoding: Encoding,
    payload: bytes,
    sport: int = PROBE_PORT,
    dport: int = PROBE_PORT,
    tclass: int = 0,
) -> tuple[bytes, IPv6Address]:
    """(packet, first-hop destination) for a probe over ``path``.

    The UDP checksum is over the FINAL destination, ``path.dst``, in every encoding (RFC
    8200 8.1): the kernel does not fix it when a switch shifts the uSID container; the
    encap encoding's inner header carries path.dst itself.
    """
    udp_len = 8 + len(payload)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    csum = udp6_checksum(path.src.packed, path.dst.packed, udp)
    udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
    if encoding == "usid":
        first = path.usid_dst
        return ipv6_header(path.src, first, udp_len, IPPROTO_UDP, tclass=tclass) + udp, first
    if encoding == "encap":
        first = path.usid_dst
        inner = ipv6_header(path.src, path.dst, udp_len, IPPROTO_UDP, tclass=tclass) + udp
        outer = ipv6_header(path.src, first, len(inner), IPPROTO_IPV6, tclass=tclass)
        return outer + inner, first
    srh = Srh.for_path(path.segments, IPPROTO_UDP).encode()
    first = path.segments[0]
    head = ipv6_header(path.src, first, len(srh) + udp_len, IPPROTO_ROUTING, tclass=tclass)
    return head + srh + udp, first


@dataclass(frozen=True, slots=True)
class _Probe:
    src: str
    dst: str
    path: SrPath
    encoding: Encoding


def plan_probes(topo: Topology, pairs: Iterable[tuple[str, str]] | None = None) -> list[_Probe]:
    if pairs is None:
        pairs = [(s, d) for s in topo.hosts for d in topo.hosts if s != d]
    return [_Probe(s, d, p, enc) for s, d in pairs for p in paths(topo, s, d) for enc in ENCODINGS]


def _open_sockets(
    lab: str, hosts: Iterable[str]
) -> tuple[dict[str, socket.socket], list[socket.socket]]:
    """Each host's raw sender, and every host's receivers: its UDP socket on PROBE_PORT
    and its raw IPPROTO_IPV6 socket (encapsulated probes)."""
    senders: dict[str, socket.socket] = {}
    receivers: list[socket.socket] = []
    try:
        for host in hosts:
            with netns.entered(namespace(lab, host)):
                tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
                senders[host] = tx
                rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                receivers.append(rx)
                rx.bind(("::", PROBE_PORT))
                receivers.append(socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_IPV6))
                for r in receivers[-2:]:
                    r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
                    r.setblocking(False)
    except BaseException:
        for s in (*senders.values(), *receivers):
            s.close()
        raise
    return senders, receivers


def _inner_probe(data: bytes) -> bytes:
    """The UDP payload of an encapsulated probe as a raw IPPROTO_IPV6 socket delivers it
    (inner IPv6 + UDP), or b"" unless it is UDP to PROBE_PORT with a checksum that
    verifies over the inner addresses (the kernel checks no inner packet)."""
    if len(data) < INNER_LEN or data[6] != IPPROTO_UDP:
        return b""
    src, dst, udp = data[8:24], data[24:40], data[40:]
    _, dport, _, csum = struct.unpack_from("!HHHH", udp)
    if dport != PROBE_PORT or udp6_checksum(src, dst, udp[:6] + bytes(2) + udp[8:]) != csum:
        return b""
    return udp[8:]


def _drain(rx: socket.socket, nonce: bytes, got: set[int]) -> None:
    encapsulated = rx.proto == IPPROTO_IPV6
    while True:
        try:
            data = rx.recv(2048)
        except BlockingIOError:
            return
        if encapsulated:
            data = _inner_probe(data)
        if len(data) == _PROBE.size:
            magic, run, pid = _PROBE.unpack(data)
            if magic == MAGIC and run == nonce:
                got.add(pid)


def _send(
    senders: dict[str, socket.socket], probes: list[_Probe], ids: Iterable[int], nonce: bytes
) -> None:
    for pid in ids:
        pr = probes[pid]
        pkt, first = build_probe(pr.path, pr.encoding, _PROBE.pack(MAGIC, nonce, pid))
        # ENETUNREACH on a port that is down, ENOBUFS...: the probe simply fails.
        with contextlib.suppress(OSError):
            senders[pr.src].sendto(pkt, (str(first), 0))


def run_check(
    lab: str,
    topo: Topology,
    pairs: Iterable[tuple[str, str]] | None = None,
    timeout: float = 1.0,
    attempts: int = 2,
) -> list[ProbeResult]:
    """Probe every path; a probe unanswered after ``attempts`` sends is a FAIL.

    Probes go out in waves of WAVE so no tbf queue or socket buffer overflows (a large lab
    has 200k+ probes); a wave ends when all its answers are in or nothing arrived for
    QUIET seconds; the last attempt waits up to ``timeout`` for stragglers."""
    probes = plan_probes(topo, pairs)
    hosts = sorted({p.src for p in probes} | {p.dst for p in probes})
    nonce = os.urandom(8)
    got: set[int] = set()
    senders, receivers = _open_sockets(lab, hosts)
    try:
        for attempt in range(attempts):
            missing = [i for i in range(len(probes)) if i not in got]
            quiet = timeout if attempt == attempts - 1 else min(QUIET, timeout)
            for start in range(0, len(missing), WAVE):
                wave = missing[start : start + WAVE]
                _send(senders, probes, wave, nonce)
                _wait(receivers, nonce, got, set(wave), quiet, timeout)
    finally:
        for s in (*senders.values(), *receivers):
            s.close()
    return [
        ProbeResult(
            p.src,
            p.dst,
            p.path.plane,
            p.path.hops,
            p.encoding,
            i in got,
            path_links(p.src, p.dst, p.path),
        )
        for i, p in enumerate(probes)
    ]


def _wait(
    receivers: list[socket.socket],
    nonce: bytes,
    got: set[int],
    wave: set[int],
    quiet: float,
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    last_news = time.monotonic()
    while not wave <= got:
        now = time.monotonic()
        left = min(deadline, last_news + quiet) - now
        if left <= 0:
            return
        ready, _, _ = select.select(receivers, [], [], left)
        if ready:
            last_news = time.monotonic()
        for rx in ready:
            _drain(rx, nonce, got)


FAIL_LINES = 20
"""FAIL lines printed before "... and N more": enough to see a fault's shape on a screen."""


def fail_lines(results: list[ProbeResult], limit: int = FAIL_LINES) -> list[str]:
    """The failed probes, up to ``limit`` of them taken in turn from each (src, dst) pair so
    both directions of a cut show, then how many were left out and the links that every failed
    path crosses (usually the fault's own link)."""
    bad = [r for r in results if not r.ok]
    by_pair: dict[tuple[str, str], list[ProbeResult]] = {}
    for r in bad:
        by_pair.setdefault((r.src, r.dst), []).append(r)
    order = sorted(_round_robin(list(by_pair.values())), key=lambda t: t[0])
    shown = [r for _, r in order][:limit]
    lines = [
        f"FAIL {r.src}->{r.dst} plane {r.plane} {r.encoding} via {' '.join(r.hops)}" for r in shown
    ]
    if len(bad) > len(shown):
        lines.append(f"... and {len(bad) - len(shown)} more (--json lists every probe)")
    common = set.intersection(*(set(r.links) for r in bad)) if bad else set()
    if common:
        lines.append(f"every failed path crosses {', '.join(sorted(common))}")
    return lines


def _round_robin(groups: list[list[ProbeResult]]) -> list[tuple[int, ProbeResult]]:
    """(turn, result) so sorting takes every group's first, then every group's second..."""
    return [(turn * len(groups) + g, r) for g, rs in enumerate(groups) for turn, r in enumerate(rs)]


def matrix(results: list[ProbeResult], hosts: tuple[str, ...]) -> str:
    """src x dst table: "OK" when every path in every encoding works, else "Fn/m": n of the
    pair's m probes (its paths in every encoding) failed; a legend line says so."""
    cells: dict[tuple[str, str], list[bool]] = {}
    for r in results:
        cells.setdefault((r.src, r.dst), []).append(r.ok)
    width = max(7, *(len(h) + 1 for h in hosts))
    lines = ["src\\dst".ljust(width) + "".join(h.rjust(width) for h in hosts)]
    for s in hosts:
        row = s.ljust(width)
        for d in hosts:
            oks = cells.get((s, d))
            if oks is None:
                row += "-".rjust(width)
            elif all(oks):
                row += "OK".rjust(width)
            else:
                row += f"F{len(oks) - sum(oks)}/{len(oks)}".rjust(width)
        lines.append(row)
    if not all(all(oks) for oks in cells.values()):
        lines.append("Fn/m: n of the pair's m probes failed (every path, uSID, SRH and encap)")
    return "\n".join(lines)
