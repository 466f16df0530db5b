"""Packet trimming and RED marking by the switch-port program (labs/bpf/mrc_port.c) on real
packets: MRC data packets built by the codec, sent in bursts from two hosts at once through
a shaped port (200 Mbit/s into 100), captured with AF_PACKET on the receiving host.

Lab: tiny, every switch port trims above 64 KB of its virtual queue; the T0 -> T1 ports
also drop everything above 128 KB and mark RED between 16 and 96 KB. Two hosts of rack 0
send to h2 (rack 1) through t1-p0-0, so the congested port is t0-p0-0's port towards
t1-p0-0 (a trim on the way: DSCP_TRIMMED); two hosts sending to h0 congest t0-p0-0's port
towards h0 (the last hop: DSCP_TRIMMED_LASTHOP). Retransmissions (DSCP_RTX) are cut as
new data is; the no-trim class (DSCP_NO_TRIM) is dropped above the same threshold."""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import yaml

from labs import netns
from labs.apply import down
from labs.check import Encoding
from labs.paths import paths
from labs.state import load_state
from labs.topology import Topology, from_dict, namespace
from labs.trim import port_counters
from mrc_transport.wire.codec import encode
from mrc_transport.wire.frames import (
    DSCP_CONTROL,
    DSCP_DATA,
    DSCP_NO_TRIM,
    DSCP_RTX,
    DSCP_TRIMMED,
    DSCP_TRIMMED_LASTHOP,
    Common,
    DataHeader,
    Ecn,
    Flags,
    Opcode,
    PathHeader,
)
from srv6.checksum import udp6_checksum
from srv6.path import SrPath
from tests.lab.conftest import RunningLab

pytestmark = pytest.mark.lab

TOPOLOGY = """
preset: tiny
links:
  host_t0: {trim: {threshold: 64kb}}
  t0_t1:
    trim: {threshold: 64kb, limit: 128kb}
    ecn: {mode: red, min: 16kb, max: 96kb, probability: 1.0}
"""
PAYLOAD = 8000
BURST = 120  # packets per sender: ~1 MB each, well past every threshold
STUB_L4 = 8 + 36  # UDP + MRC common + data header (docs/protocol.md "Trimmed data packets")
ETH_P_IPV6 = 0x86DD
PACKET_HOST = 0
QUIET = 0.5


@pytest.fixture(scope="module")
def trim_lab(running_lab: RunningLab) -> Iterator[tuple[str, Topology]]:
    with running_lab(from_dict(yaml.safe_load(TOPOLOGY))) as name:
        yield name, load_state(name).topology  # srv6 decided


def _path(topo: Topology, src: str, dst: str) -> SrPath:
    """The plane-0 path from src to dst, through t1-p0-0 when it crosses racks."""
    return next(p for p in paths(topo, src, dst) if p.plane == 0 and "t1-p0-1" not in p.hops)


def data_packet(
    path: SrPath, encoding: Encoding, psn: int, dscp: int = DSCP_DATA, ecn: Ecn = Ecn.ECT0
) -> tuple[bytes, str]:
    """A WRITE_MIDDLE of PAYLOAD bytes (its psn also in the EV) and its first hop."""
    first = path.segments[0] if encoding == "srh" else path.usid_dst
    ph = PathHeader(
        src=path.src.packed,
        dst=first.packed,
        final_dst=None if encoding == "srh" else path.dst.packed,
        segments=tuple(s.packed for s in path.segments) if encoding == "srh" else (),
        ev=0x8000_0000 | psn,
        dscp=dscp,
        ecn=ecn,
        encap=encoding == "encap",
    )
    header = DataHeader(
        Common(Opcode.WRITE_MIDDLE, Flags.TS, 0x1111, 0x2222),
        psn,
        7,
        PAYLOAD,
        1 << 30,
        time.monotonic_ns(),
    )
    return encode(ph, header, os.urandom(PAYLOAD)), str(first)


def burst(
    lab: str, flows: list[tuple[str, Callable[[int], tuple[bytes, str]]]]
) -> dict[int, bytes]:
    """BURST packets from each (host, make(psn)) flow, round robin, each host as fast as its
    own port takes them (ENOBUFS: its tbf is full, try again); every packet sent, by psn."""
    txs = []
    for host, _ in flows:
        with netns.entered(namespace(lab, host)):
            tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        tx.setsockopt(socket.IPPROTO_IPV6, 25, 1)  # IPV6_RECVERR: a full qdisc says ENOBUFS
        txs.append(tx)
    todo = [
        (tx, psn, *make(psn))
        for i in range(BURST)
        for k, ((_, make), tx) in enumerate(zip(flows, txs, strict=True))
        for psn in (i * len(flows) + k,)
    ]  # built first: the codec's pure-Python checksum of 8 KB is slower than the link
    try:
        for tx, _, pkt, first in todo:
            _send(tx, pkt, first)
    finally:
        for tx in txs:
            tx.close()
    return {psn: pkt for _, psn, pkt, _ in todo}


def _send(tx: socket.socket, pkt: bytes, first: str) -> None:
    while True:
        try:
            tx.sendto(pkt, (first, 0))
            return
        except OSError as exc:
            if exc.errno != errno.ENOBUFS:
                raise
            time.sleep(0.0002)  # pacing: the host's own port drains at its rate


@dataclass(frozen=True)
class Arrival:
    """One MRC packet as captured at the receiving host."""

    frame_len: int
    dscp: int
    ecn: int
    psn: int
    udp_len: int
    mrc_header: bytes
    checksum_ok: bool


@contextmanager
def capture(lab: str, host: str) -> Iterator[Callable[[], list[Arrival]]]:
    """AF_PACKET on the host's plane-0 port, open before the burst; the callable reads what
    arrived until nothing more comes for QUIET seconds."""
    with netns.entered(namespace(lab, host)):
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
    rx.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: a whole burst
    rx.bind(("p0", ETH_P_IPV6))
    rx.setblocking(False)

    def read() -> list[Arrival]:
        out: list[Arrival] = []
        while select.select([rx], [], [], QUIET)[0]:
            while True:
                try:
                    frame, where = rx.recvfrom(65536)
                except BlockingIOError:
                    break
                arrival = parse(frame) if where[2] == PACKET_HOST else None
                if arrival is not None:
                    out.append(arrival)
        return out

    with rx:
        yield read


def parse(frame: bytes) -> Arrival | None:
    """An MRC packet of this test (dst_conn 0x1111), with its checksum verified over the
    final destination: segments[0] of an SRH, the inner header's addresses when
    encapsulated (whose length must match too), else the destination (RFC 8200 8.1)."""
    ip6 = frame[14:]
    tclass = ((ip6[0] & 0x0F) << 4) | (ip6[1] >> 4)
    src, final, off = ip6[8:24], ip6[24:40], 40
    if ip6[6] == 43:
        final, off = ip6[48:64], 40 + 8 + 8 * ip6[41]
    elif ip6[6] == 41:
        assert struct.unpack_from("!H", ip6, 44)[0] == len(ip6) - 80  # inner payload length
        src, final, off = ip6[48:64], ip6[64:80], 80
    udp = ip6[off:]
    if len(udp) < STUB_L4 or struct.unpack_from("!H", udp, 2)[0] != 4791:
        return None
    if struct.unpack_from("!I", udp, 12)[0] != 0x1111:
        return None
    assert struct.unpack_from("!H", ip6, 4)[0] == len(ip6) - 40  # IPv6 payload length
    (udp_len, csum) = struct.unpack_from("!HH", udp, 4)
    assert udp_len == len(udp)
    return Arrival(
        frame_len=len(frame),
        dscp=tclass >> 2,
        ecn=tclass & 3,
        psn=struct.unpack_from("!I", udp, 20)[0],
        udp_len=udp_len,
        mrc_header=bytes(udp[8:STUB_L4]),
        checksum_ok=csum == udp6_checksum(src, final, udp),
    )


def _mrc_header(pkt: bytes) -> bytes:
    off = 40 + (8 + 8 * pkt[41] if pkt[6] == 43 else 40 if pkt[6] == 41 else 0)
    return pkt[off + 8 : off + STUB_L4]


def _port(lab: str, topo: Topology, node: str, dev: str) -> dict[str, int]:
    return next(p for p in port_counters(lab, topo) if (p["node"], p["dev"]) == (node, dev))


def _delta(after: dict[str, int], before: dict[str, int], key: str) -> int:
    return after[key] - before[key]


def _every_encoding(path: SrPath) -> Callable[[int], tuple[bytes, str]]:
    encodings: tuple[Encoding, ...] = ("usid", "usid", "srh", "srh", "encap", "encap")
    return lambda psn: data_packet(path, encodings[psn % 6], psn)


def _burst_to(
    lab: str,
    topo: Topology,
    senders: tuple[str, str],
    dst: str,
    port: tuple[str, str],
    make: Callable[[SrPath], Callable[[int], tuple[bytes, str]]] = _every_encoding,
) -> tuple[dict[int, bytes], list[Arrival], dict[str, int]]:
    """Both senders' bursts to dst; (sent, arrivals, the congested port's counter deltas)."""
    before = _port(lab, topo, *port) | _high_class(lab, *port)
    flows = [(src, make(_path(topo, src, dst))) for src in senders]
    with capture(lab, dst) as read:
        sent = burst(lab, flows)
        got = read()
    after = _port(lab, topo, *port) | _high_class(lab, *port)
    return sent, got, {k: after[k] - before[k] for k in after if isinstance(after[k], int)}


def _high_class(lab: str, node: str, dev: str) -> dict[str, int]:
    """Bytes and packets the port's htb high class sent, as the qdisc measured them."""
    argv = ["tc", "-n", namespace(lab, node), "-j", "-s", "qdisc", "show", "dev", dev]
    out = json.loads(subprocess.run(argv, capture_output=True, check=True, text=True).stdout)
    high = next(q for q in out if q.get("parent") == "1:10")
    return {"high_bytes": high["bytes"], "high_packets": high["packets"]}


def _check_stubs(
    sent: dict[int, bytes], got: list[Arrival], dscp: int, whole: int = DSCP_DATA
) -> list[Arrival]:
    """Every arrival is a whole data packet of class ``whole`` or a stub of it with the
    trimmed DSCP; the MRC headers are the sender's, byte for byte; every checksum
    verifies."""
    for a in got:
        assert a.checksum_ok, f"psn {a.psn}: bad UDP checksum over the final destination"
        assert a.mrc_header == _mrc_header(sent[a.psn])
        srh = len(sent[a.psn]) - 40 - STUB_L4 - PAYLOAD  # the SRH or inner header it keeps
        if a.udp_len == STUB_L4:
            assert (a.dscp, a.frame_len) == (dscp, 14 + 40 + srh + STUB_L4)
        else:
            assert (a.dscp, a.udp_len) == (whole, STUB_L4 + PAYLOAD)
    return [a for a in got if a.udp_len == STUB_L4]


def test_a_burst_through_a_shaped_port_arrives_in_part_as_stubs_with_intact_headers(
    trim_lab: tuple[str, Topology],
) -> None:
    lab, topo = trim_lab
    sent, got, d = _burst_to(lab, topo, ("h0", "h1"), "h2", ("t0-p0-0", "t1-p0-0"))
    assert sorted(a.psn for a in got) == sorted(sent)  # every packet, whole or as a stub
    stubs = _check_stubs(sent, got, DSCP_TRIMMED)
    assert 0.3 * len(sent) < len(stubs) < 0.7 * len(sent)  # 200 Mbit/s into 100
    assert {sent[a.psn][6] for a in stubs} == {17, 43, 41}  # uSID, SRH, encap: all trimmed
    assert (d["trimmed"], d["trimmed_bytes"]) == (len(stubs), len(stubs) * PAYLOAD)
    assert (d["dropped"], d["trim_errors"]) == (0, 0)
    # the stubs jumped the queue, and htb measured them as stubs (sent through the egress
    # again after the cut), not as the 8 KB packets they were when they reached it
    assert d["high_packets"] == len(stubs)
    assert d["high_bytes"] == sum(a.frame_len for a in stubs)
    assert 64 * 1024 - PAYLOAD < d["q_max"] <= 64 * 1024 + 2 * len(stubs) * 160


def test_a_trim_at_the_last_hop_says_so(trim_lab: tuple[str, Topology]) -> None:
    lab, topo = trim_lab
    sent, got, d = _burst_to(lab, topo, ("h1", "h2"), "h0", ("t0-p0-0", "h0"))
    assert sorted(a.psn for a in got) == sorted(sent)
    stubs = _check_stubs(sent, got, DSCP_TRIMMED_LASTHOP)
    assert stubs
    assert (d["trimmed"], d["dropped"]) == (len(stubs), 0)


def _in_class(dscp: int) -> Callable[[SrPath], Callable[[int], tuple[bytes, str]]]:
    return lambda path: lambda psn: data_packet(path, "usid", psn, dscp=dscp)


def test_retransmissions_are_trimmed_as_new_data_is(trim_lab: tuple[str, Topology]) -> None:
    lab, topo = trim_lab
    port = ("t0-p0-0", "t1-p0-0")
    sent, got, d = _burst_to(lab, topo, ("h0", "h1"), "h2", port, _in_class(DSCP_RTX))
    assert sorted(a.psn for a in got) == sorted(sent)
    stubs = _check_stubs(sent, got, DSCP_TRIMMED, whole=DSCP_RTX)
    assert 0.3 * len(sent) < len(stubs) < 0.7 * len(sent)
    assert d["trimmed"] == d["trimmed_rtx"] == len(stubs)
    assert (d["dropped"], d["dropped_no_trim"]) == (0, 0)


def test_the_no_trim_class_is_dropped_above_the_trim_threshold(
    trim_lab: tuple[str, Topology],
) -> None:
    """The same burst in DSCP_NO_TRIM: no stub; what does not fit under the 64 KB threshold
    is dropped, whole, and counted as the no-trim class's."""
    lab, topo = trim_lab
    port = ("t0-p0-0", "t1-p0-0")
    sent, got, d = _burst_to(lab, topo, ("h0", "h1"), "h2", port, _in_class(DSCP_NO_TRIM))
    assert {(a.dscp, a.udp_len) for a in got} == {(DSCP_NO_TRIM, STUB_L4 + PAYLOAD)}
    assert all(a.checksum_ok and a.mrc_header == _mrc_header(sent[a.psn]) for a in got)
    assert len({a.psn for a in got}) == len(got) == len(sent) - d["dropped"]
    assert d["dropped"] == d["dropped_no_trim"] > 0.3 * len(sent)
    assert (d["trimmed"], d["trim_errors"]) == (0, 0)


def _not_trimmable(path: SrPath) -> Callable[[int], tuple[bytes, str]]:
    """MRC data in the control class (never trimmed), ECT(0): RED marks it or the hard
    limit drops it."""
    return lambda psn: data_packet(path, "usid", psn, dscp=DSCP_CONTROL)


def test_red_marks_rise_with_the_queue_and_the_hard_limit_drops(
    trim_lab: tuple[str, Topology],
) -> None:
    lab, topo = trim_lab
    port = ("t0-p0-0", "t1-p0-0")
    sent, got, d = _burst_to(lab, topo, ("h0", "h1"), "h2", port, _not_trimmable)
    arrived = {a.psn: a.ecn for a in got}
    assert len(arrived) == len(got) == len(sent) - d["dropped"]  # no loss but the limit's
    assert d["dropped"] > 0
    assert d["trimmed"] == 0
    assert d["marked"] == sum(ecn == 0b11 for ecn in arrived.values())  # CE
    ce = [arrived[psn] == 0b11 for psn in sorted(arrived)]
    # two senders at the port's rate each: the queue grows ~4 KB a packet, past the 16 KB
    # RED minimum after ~4, past the 96 KB maximum after ~24, then stays near the 128 KB
    # limit, where every packet is marked
    assert not any(ce[:3])
    assert sum(ce[4:14]) < sum(ce[14:24])
    assert all(ce[40:])
    assert d["q_max"] <= 128 * 1024


def test_status_json_shows_the_counters_and_down_removes_the_pins(
    trim_lab: tuple[str, Topology], capsys: pytest.CaptureFixture[str]
) -> None:
    from labs import bpf
    from labs.trim import map_pin
    from mrc_transport.cli.main import main

    lab, topo = trim_lab
    assert main(["lab", "status", "--name", lab, "--json"]) == 0
    ports = json.loads(capsys.readouterr().out)["ports"]
    expected = {(s, dev) for s in topo.switches for dev, _, _ in topo.ports(s)}
    assert {(p["node"], p["dev"]) for p in ports} == expected  # every switch port trims
    by_port = {(p["node"], p["dev"]): p for p in ports}
    last_hop, uplink = by_port[("t0-p0-0", "h0")], by_port[("t0-p0-0", "t1-p0-0")]
    assert (last_hop["faces_host"], last_hop["trim"], last_hop["mark"]) == (True, True, False)
    assert (uplink["faces_host"], uplink["trim"], uplink["mark"]) == (False, True, True)
    assert main(["lab", "status", "--name", lab]) == 0
    totals = {k: sum(p[k] for p in ports) for k in ("trimmed_rtx", "dropped_no_trim")}
    text = capsys.readouterr().out
    assert f"({totals['trimmed_rtx']} retransmissions)" in text
    assert f"({totals['dropped_no_trim']} no-trim above the threshold)" in text
    assert map_pin(lab).exists()
    down(lab)
    assert not bpf.pin_dir(lab).exists()
