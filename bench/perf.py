"""MRC goodput beside iperf3 on the same host pair, in the same run; ratios printed.

(a) unshaped links (tbf far above what a core can push), two hosts in different racks:
    one MRC connection (`mrc perf`) vs one iperf3 TCP stream and iperf3 UDP -b 0, and the
    raw-socket floor (prebuilt MRC packets sent with batchio.send_raw6 as fast as one core
    can, drained by a BurstReceiver: what a userspace MRC sender pays without protocol or
    per-packet Python, so the most MRC's endpoint could reach here), the GSO floor (the
    same packets 4 to a UDP GSO send: the kernel carries each send through the lab as one
    packet on one path, so it shows what a cheaper kernel path would give, not what MRC
    may do, which sprays each packet on its own path), the encode floor (the floor's
    sends, each burst first copied and checksummed by the C codec in one call from an
    8 MB pool as mrc perf's messages are: the least a C data path pays, with no protocol
    at all), plus
    CPU seconds per delivered gigabit: of both ends (every process is our child; MRC's
    includes two Python start-ups, ~0.6 s each), and of each side during the transfer
    (the sender's and the receiver's, as each tool reports them: iperf3's and mrc perf's
    cpu_utilization_percent, the floor's process times), with MRC's per-side ratios to
    iperf3 UDP's (issue 20: <= 1.5x), and the sender's split into user space and kernel
    (the kernel's part carries the lab's forwarding and is much the same for all three
    senders; MRC's user space is what it adds). ``--repeat N`` runs the five N times,
    interleaved (MRC and iperf3 UDP back to back, each first in turn), and reports
    medians; MRC / iperf3 UDP is the median of each run's ratio. Each run also says how
    many CPUs were busy outside our processes meanwhile (/proc/stat minus our children:
    other work, or ksoftirqd), since a shared machine moves these figures by 2x and more.
(b) the shaped `default` lab (4 planes x 100 Mbit/s per host): one MRC connection vs the
    sum of the host's port rates, one iperf3 TCP flow (baseline ECMP: one plane) vs one
    port's rate, and one MPTCP connection (harness/tcpflow.py --mptcp, every byte checked:
    a subflow per plane, docs/lab.md "MPTCP") vs the sum of the ports.

Run as root: .venv/bin/python bench/perf.py [--seconds N] [--repeat N] [--only unshaped|shaped]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labs import addressing
from labs.apply import down, up
from labs.topology import LinkClass, Topology, namespace, preset

if TYPE_CHECKING:
    from mrc_transport.io.batchio import BurstEncoder
    from mrc_transport.wire.frames import PathHeader

UNSHAPED = LinkClass(rate_bps=40_000_000_000, mtu=9000, burst=8 << 20, limit=16 << 20, ecn="none")
PERF = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
ME = [sys.executable, os.path.abspath(__file__)]  # this script, for its --blast and --drain


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _machine_busy() -> float:
    """CPU seconds every CPU of the machine spent busy so far (/proc/stat, not idle or
    iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sides:
    """What one tool did: goodput and the CPU seconds it took."""

    bps: float
    """Goodput, bit/s."""
    cpu: float
    """CPU seconds of both ends (our children, start-ups included)."""
    sender: float
    """CPU seconds of the sending end during the transfer, as it reports them."""
    receiver: float
    """CPU seconds of the receiving end during the transfer."""
    sender_user: float
    """Of ``sender``, the seconds in user space (the rest is the kernel's: the send system
    calls and, in this lab, the forwarding through every switch namespace they carry)."""

    def per_gbit(self, seconds: float) -> tuple[float, float, float, float]:
        """CPU seconds per delivered gigabit over a ``seconds``-long transfer: both ends,
        the sender, the receiver, the sender in user space."""
        gbit = self.bps * seconds / 1e9
        return self.cpu / gbit, self.sender / gbit, self.receiver / gbit, self.sender_user / gbit


@dataclass(frozen=True)
class Run:
    """One measurement."""

    got: Sides
    others: float
    """CPUs busy outside our processes meanwhile, on average: other work, or softirq
    work of our own traffic that ksoftirqd took over."""

    @property
    def bps(self) -> float:
        return self.got.bps

    def per_gbit(self, seconds: float) -> tuple[float, float, float, float]:
        return self.got.per_gbit(seconds)


def measure(fn: Callable[[], Sides]) -> Run:
    """fn's result and the load the rest of the machine added meanwhile."""
    b0, c0, t0 = _machine_busy(), _children_cpu(), time.monotonic()
    got = fn()
    b1, c1, t1 = _machine_busy(), _children_cpu(), time.monotonic()
    return Run(got, max(0.0, (b1 - b0) - (c1 - c0)) / (t1 - t0))


def _reported(end: dict[str, Any], key: str, cpu: float) -> Sides:
    """Goodput (less what was lost) and each side's CPU from an iperf3-style end document:
    ``end[key]`` the sums, ``cpu_utilization_percent`` host (the client, which sends) and
    remote (the server); ``cpu`` both ends' CPU as we measured it."""
    got, pct = end[key], end["cpu_utilization_percent"]
    bps = float(got["bits_per_second"]) * (1 - got.get("lost_percent", 0) / 100)
    secs = got["seconds"]
    return Sides(
        bps, cpu, pct["host_total"] / 100 * secs, pct["remote_total"] / 100 * secs,
        pct["host_user"] / 100 * secs,
    )  # fmt: skip


def mrc(lab: str, src: str, dst: str, seconds: float) -> Sides:
    """Goodput and CPU of one verified MRC connection."""
    c0 = _children_cpu()
    res = subprocess.run(
        [*PERF, "--lab", lab, "--from", src, "--to", dst, "-t", str(seconds), "-J", "-i", "0"],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    cpu = _children_cpu() - c0
    if res.returncode != 0:
        raise RuntimeError(f"mrc perf failed: {res.stderr.strip()[-300:]}")
    end = json.loads(res.stdout)["end"]
    if not end["verified"]:
        raise RuntimeError("mrc perf: not verified")
    return _reported(end, "sum_received", cpu)


def iperf3(lab: str, topo: Topology, src: str, dst: str, seconds: float, udp: bool) -> Sides:
    """Goodput and CPU of one iperf3 flow over the baseline route."""
    port = 5301
    c0 = _children_cpu()
    server = subprocess.Popen(
        ["ip", "netns", "exec", namespace(lab, dst), "iperf3", "-s", "-1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = [
            "ip",
            "netns",
            "exec",
            namespace(lab, src),
            "iperf3",
            "-J",
            "-t",
            str(seconds),
            "-c",
            str(addressing.baseline_address(topo, dst)),
            "-B",
            str(addressing.baseline_address(topo, src)),
            "-p",
            str(port),
        ]
        if udp:
            client += ["-u", "-b", "0", "-l", "8900"]
        for _ in range(50):  # the server needs a moment to listen; iperf3 fails fast
            res = subprocess.run(client, capture_output=True, text=True, timeout=seconds + 30)
            if res.returncode == 0 and "error" not in json.loads(res.stdout or "{}"):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"iperf3 failed: {res.stdout[-300:]}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)  # the client's report counts; finally ends the server
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    cpu = _children_cpu() - c0
    end: dict[str, Any] = json.loads(res.stdout)["end"]
    return _reported(end, "sum" if udp else "sum_received", cpu)


FLOOR_PORT = 4792  # the floor's packets go to this UDP port, not to an MRC endpoint's
GSO_FLOOR = 4  # packets per UDP GSO send: 7 of 9 KB fit in the 64 KB a send may carry


def floor_burst(lab: str, src: str, dst: str) -> tuple[BurstEncoder, list[PathHeader], int]:
    """(in src's namespace) The floor's burst: a full pump's worth of MRC data packets of
    one MSS each, packet i on path i of src -> dst's in turn, to ``FLOOR_PORT``; with their
    path headers and the MSS."""
    from mrc_transport.io import batchio
    from mrc_transport.io.endpoint import default_mss, path_header
    from mrc_transport.io.paths import LabPaths
    from mrc_transport.io.tuning import IO_MAX_BURST as FLOOR_BURST  # as its bursts
    from mrc_transport.wire.frames import DSCP_DATA, Common, DataHeader, Flags, Opcode

    paths = LabPaths(lab, src).paths_to(dst)
    payload = os.urandom(default_mss("usid"))
    common = Common(Opcode.WRITE_MIDDLE, Flags.NONE, 1, 2)
    enc = batchio.burst_encoder(FLOOR_BURST, 9100)
    phs = [
        path_header(paths[i % len(paths)], 0x10000 + i, DSCP_DATA, "usid", FLOOR_PORT)
        for i in range(FLOOR_BURST)
    ]
    for i, ph in enumerate(phs):
        enc.add(ph, DataHeader(common, i, 0, 0, 1 << 30, 0), payload)
    return enc, phs, len(payload)


def _blast(
    lab: str,
    src: str,
    dst: str,
    seconds: float,
    gso: int = 0,
    encode: bool = False,
    pace_bps: float = 0.0,
) -> None:
    """(in src's namespace) Send prebuilt MRC data packets to dst over every path with
    ``send_raw6`` (or ``gso`` at a time by UDP GSO, or each burst ``encode``d afresh) as
    fast as one core can, or a burst at a time at ``pace_bps``; print the sender's CPU
    seconds."""
    from mrc_transport.io.sockets import open_tx

    enc, phs, mss = floor_burst(lab, src, dst)
    burst = len(phs)
    if gso:
        send = _gso_sender([enc.packet(i) for i in range(burst)], gso)
    elif encode:
        send = _encode_sender(phs, open_tx(), mss)
    else:
        tx = open_tx()
        send = lambda: enc.send(tx)  # noqa: E731
    c0, u0, t0 = time.process_time(), os.times().user, time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        try:
            n = send()
        except OSError as exc:  # ENOBUFS: a port's queue is full (paced just above its rate)
            if exc.errno != errno.ENOBUFS:
                raise
            n = 0
        sent += n
        if n < burst:
            time.sleep(0)  # the socket buffer is full: let the kernel drain it
        if pace_bps:  # the next burst when this one has left at the rate
            time.sleep(max(0.0, t0 + sent * mss * 8 / pace_bps - time.monotonic()))
    cpu, user = time.process_time() - c0, os.times().user - u0
    print(json.dumps({"cpu": cpu, "user": user, "seconds": time.monotonic() - t0}))


def _encode_sender(phs: list[PathHeader], tx: socket.socket, mss: int) -> Callable[[], int]:
    """A send of a burst encoded afresh, packet i on path ``phs[i]``: its payloads cut in
    turn from a pool as large as ``mrc perf``'s, copied and checksummed by the C codec in
    one call a burst (``mrc_encode_data_run``, as a ``DataRun``), then ``send_raw6``: what
    a C data path costs per burst without any protocol. Returns how many packets went."""
    from mrc_transport._fastpath import ffi, lib

    from mrc_transport.perf.session import POOL_SIZE
    from mrc_transport.wire import fast
    from mrc_transport.wire.frames import Flags

    n, room = len(phs), 9100
    templates = ffi.new("struct mrc_template *[]", [fast._template(ph) for ph in phs])
    pool = ffi.from_buffer(bytearray(os.urandom(POOL_SIZE)))
    buf, ends = ffi.new("char[]", n * room), ffi.new("uint32_t[]", n + 1)
    span, at = n * mss, [0]

    def send() -> int:
        off = at[0]
        at[0] = off + span if off + 2 * span <= POOL_SIZE else 0
        done = lib.mrc_encode_data_run(
            buf, n * room, room, templates, n, Flags.TS, 0, 1, 2, off // mss, 0, off, mss,
            pool, POOL_SIZE, 0, 0, ends + 1,
        )  # fmt: skip
        rc = lib.mrc_send_raw6(tx.fileno(), buf, n * room, ends, done, 0)
        return max(int(rc), 0)

    return send


UDP_SEGMENT = 103  # <linux/udp.h>: the socket's GSO segment size


def _gso_sender(packets: list[bytes], k: int) -> Callable[[], int]:
    """A send of the floor's packets through a UDP socket with UDP GSO: ``k`` packets per
    datagram, which the kernel forwards through the lab as one and cuts into packets at
    the end, so they share one IPv6 header and one path. Returns how many packets went.

    The kernel computes the UDP checksum over the first uSID destination, not the final
    one; it arrives intact only because veth never completes a partial checksum
    (kernel-facts.md, "Checksums"), and UDP GSO refuses zero checksums."""
    from mrc_transport.io import batchio
    from mrc_transport.wire.frames import IPV6_HEADER_LEN, UDP_HEADER_LEN

    udp = IPV6_HEADER_LEN + UDP_HEADER_LEN  # a uSID packet's UDP payload starts here
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    tx.setblocking(False)
    seg = len(packets[0]) - udp
    tx.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, seg)
    groups = [packets[i : i + k] for i in range(0, len(packets) - k + 1, k)]
    buf = b"".join(p[udp:] for g in groups for p in g)
    offsets = [i * k * seg for i in range(len(groups) + 1)]
    addrs = [(g[0][batchio.IPV6_DST], FLOOR_PORT) for g in groups]

    return lambda: k * batchio.send_batch(tx, buf, offsets, addrs)


def _drain(seconds: float) -> None:
    """(in dst's namespace) Receive the floor's packets for ``seconds`` after the first;
    print the UDP payload bytes received and this process's CPU seconds."""
    import select

    from mrc_transport.io import batchio
    from mrc_transport.io.sockets import open_rx

    rx = open_rx(FLOOR_PORT)
    burst = batchio.burst_receiver(256, 9000)
    print("ready", flush=True)
    nbytes, t_end, c0 = 0, math.inf, 0.0
    while time.monotonic() < t_end:
        if not select.select([rx], [], [], 1.0)[0] and t_end == math.inf:
            continue
        got = burst.recv(rx)
        if got and t_end == math.inf:
            t_end, c0 = time.monotonic() + seconds, time.process_time()
        nbytes += sum(m[0] for m in got)
    print(json.dumps({"bytes": nbytes, "cpu": time.process_time() - c0, "t0": t_end - seconds}))


def in_lab_host(blast: list[str] | None) -> bool:
    """Whether this process runs in the blast's source host namespace (or, to drain, in
    any lab host's): the floor's sends bypass MRC's endpoint and would follow the root
    namespace's default route out of the machine."""
    from mrc_transport.io.paths import find_lab_host

    where = find_lab_host([blast[0]] if blast else None)
    return where is not None and (not blast or where == (blast[0], blast[1]))


def floor(
    lab: str, src: str, dst: str, seconds: float, gso: int = 0, encode: bool = False
) -> Sides:
    """Goodput and CPU of raw-socket sends alone: the IO a userspace MRC sender cannot
    avoid, without protocol or per-packet Python (``gso``: that many packets per send by
    UDP GSO instead, one path each; ``encode``: each burst encoded afresh in C first)."""
    blast = [*ME, "--blast", lab, src, dst, str(seconds + 1), "--gso", str(gso),
             *(["--encode"] if encode else [])]  # fmt: skip
    return floor_run(lab, src, dst, seconds, blast)


def floor_run(lab: str, src: str, dst: str, seconds: float, sender: list[str]) -> Sides:
    """Run ``sender`` (a command that sends to dst's ``FLOOR_PORT`` for ``seconds`` + 1 and
    prints its ``cpu``, ``user`` and ``seconds`` as JSON) in src's namespace while dst's
    drains; goodput over ``seconds`` and the CPU of both."""
    drain = subprocess.Popen(
        ["ip", "netns", "exec", namespace(lab, dst), *ME, "--drain", str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert drain.stdout is not None
        drain.stdout.readline()  # "ready": the socket is bound
        blast = subprocess.run(
            ["ip", "netns", "exec", namespace(lab, src), *sender],
            capture_output=True, text=True, check=True, timeout=seconds + 30,
        )  # fmt: skip
        got = json.loads(drain.communicate(timeout=30)[0])
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    sent = json.loads(blast.stdout)
    # the sender runs a second longer than the drain counts (it starts first): its CPU
    # over the drain's ``seconds``, at its steady rate
    share = seconds / sent["seconds"]
    cpu, user = sent["cpu"] * share, sent["user"] * share
    return Sides(got["bytes"] * 8 / seconds, got["cpu"] + cpu, cpu, got["cpu"], user)


def _g(bps: float) -> str:
    return f"{bps / 1e9:6.3f} Gbit/s"


def _median(runs: list[Run], seconds: float) -> tuple[float, float, float, float]:
    """Median goodput, and median CPU seconds per Gbit of both ends, the sender and the
    receiver."""
    per = [r.per_gbit(seconds) for r in runs]
    both, snd, rcv = (statistics.median(p[k] for p in per) for k in range(3))
    return statistics.median(r.bps for r in runs), both, snd, rcv


def median_ratio(a: list[float], b: list[float]) -> float:
    """The median of the runs' ratios a/b (each pair measured back to back)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def unshaped_topology() -> Topology:
    """Two hosts in different racks, two planes, links far faster than a core can fill."""
    return Topology(
        planes=2,
        racks=2,
        hosts_per_rack=1,
        t1_per_plane=2,
        host_link=UNSHAPED,
        fabric_link=UNSHAPED,
    )


NAMES = {"mrc": "MRC, 1 connection", "tcp": "iperf3 TCP, 1 stream",
         "udp": "iperf3 UDP -b 0", "floor": "raw-socket floor",
         "gso": f"GSO floor, {GSO_FLOOR} a send", "enc": "encode floor"}  # fmt: skip
"""(a)'s six measurements, in the order of a round's results, with their names."""


def unshaped(seconds: float, repeat: int = 1) -> None:
    topo = unshaped_topology()
    lab = "bp" + uuid.uuid4().hex[:6]
    src, dst = "h0", "h1"  # different racks
    runs: dict[str, list[Run]] = {key: [] for key in NAMES}
    print(f"(a) unshaped, {src} -> {dst} (different racks), {seconds:g} s each")
    try:
        up(topo, lab)
        for i in range(repeat):  # interleaved, so a busy spell hits all four alike
            rnd = _round(lab, topo, src, dst, seconds, mrc_first=i % 2 == 0)
            for key, run in zip(runs, rnd, strict=True):
                runs[key].append(run)
            if repeat > 1:
                _print_round(i, rnd)
    finally:
        down(lab)
    if repeat > 1:
        print(f"  medians of {repeat} runs:")
    _print_medians(runs, seconds)
    _print_ratios(runs, seconds)


def _round(
    lab: str, topo: Topology, src: str, dst: str, seconds: float, mrc_first: bool
) -> tuple[Run, ...]:
    """One of each measurement, in ``NAMES``' order. MRC and iperf3 UDP go back to back,
    each first in turn: their ratio is the target, and this VM's speed moved 1.6x between
    runs seconds apart (docs/measurements.md), so a pair measured 15 s apart compared two
    machines."""
    if mrc_first:
        m = measure(lambda: mrc(lab, src, dst, seconds))
        u = measure(lambda: iperf3(lab, topo, src, dst, seconds, udp=True))
    else:
        u = measure(lambda: iperf3(lab, topo, src, dst, seconds, udp=True))
        m = measure(lambda: mrc(lab, src, dst, seconds))
    t = measure(lambda: iperf3(lab, topo, src, dst, seconds, udp=False))
    f = measure(lambda: floor(lab, src, dst, seconds))
    g = measure(lambda: floor(lab, src, dst, seconds, gso=GSO_FLOOR))
    e = measure(lambda: floor(lab, src, dst, seconds, encode=True))
    return m, t, u, f, g, e


def _print_round(i: int, rnd: tuple[Run, ...]) -> None:
    m, t, u, f, g, e = rnd
    print(f"  run {i + 1}: MRC {_g(m.bps)}  TCP {_g(t.bps)}  UDP {_g(u.bps)}  "
          f"floor {_g(f.bps)}  GSO floor {_g(g.bps)}  encode floor {_g(e.bps)}  "
          f"MRC/UDP {m.bps / u.bps:.3f}  (busy outside: "
          f"{max(r.others for r in rnd):.1f} CPUs)")  # fmt: skip


def _print_medians(runs: dict[str, list[Run]], seconds: float) -> None:
    """Each measurement's median goodput and CPU per Gbit, and the floors against UDP."""
    med = {k: _median(runs[k], seconds) for k in runs}
    print(f"    {'':22} {'goodput':>13}   CPU s/Gbit: both  sender  receiver")
    for key, name in NAMES.items():
        bps, both, snd, rcv = med[key]
        print(f"    {name:22} {_g(bps)}   {both:15.2f} {snd:7.2f} {rcv:9.2f}")
    print(f"    (raw-socket floor: prebuilt packets, send_raw6, no protocol: "
          f"{med['floor'][0] / med['udp'][0]:.2f}x iperf3 UDP; the GSO floor, the same "
          f"packets {GSO_FLOOR} to a UDP GSO send, each send on one path, so not sprayed per "
          f"packet: {med['gso'][0] / med['udp'][0]:.2f}x; the encode floor, each burst copied "
          f"and checksummed from an 8 MB pool in one C call before its send, the least a C "
          f"data path without protocol pays: {med['enc'][0] / med['udp'][0]:.2f}x)")  # fmt: skip


def _print_ratios(runs: dict[str, list[Run]], seconds: float) -> None:
    """MRC against the others (medians of the rounds' ratios), each side's CPU, the
    sender's split, and a warning when the machine was busy."""
    got = {k: [r.bps for r in rs] for k, rs in runs.items()}
    print(f"    MRC / iperf3 UDP = {median_ratio(got['mrc'], got['udp']):.3f}   (target >= 0.9)")
    print(f"    MRC / raw floor  = {median_ratio(got['mrc'], got['floor']):.3f}   (target >= 1.0)")
    print(f"    MRC / iperf3 TCP = {median_ratio(got['mrc'], got['tcp']):.3f}")
    for k, side in ((1, "sender"), (2, "receiver")):
        cpu = {key: [r.per_gbit(seconds)[k] for r in rs] for key, rs in runs.items()}
        print(f"    CPU per Gbit, MRC / iperf3 UDP, {side}: "
              f"{median_ratio(cpu['mrc'], cpu['udp']):.2f}x   (target <= 1.5x)")  # fmt: skip
    _print_sender_split(runs, seconds)
    others = max(r.others for rs in runs.values() for r in rs)
    if others >= 0.5:
        print(
            f"    note: up to {others:.1f} CPUs were busy outside these processes (other "
            "work, or ksoftirqd): the figures are low and noisy"
        )


def _print_sender_split(runs: dict[str, list[Run]], seconds: float) -> None:
    """The sender's CPU per Gbit in user space and in the kernel. The kernel's part is
    much the same for all three (the raw or UDP send, then every switch namespace's
    forwarding, which runs in the sender's system call): what MRC spends beyond the
    baselines is its user space."""
    print("    sender CPU s/Gbit, user space + kernel:", end="")
    for key, name in (("mrc", "MRC"), ("udp", "iperf3 UDP"), ("floor", "floor"),
                      ("enc", "encode floor")):  # fmt: skip
        split = [r.per_gbit(seconds) for r in runs[key]]
        user = statistics.median(p[3] for p in split)
        kernel = statistics.median(p[1] - p[3] for p in split)
        print(f"   {name} {user:.3f} + {kernel:.3f}", end="")
    print()


def mptcp(lab: str, topo: Topology, src: str, dst: str, seconds: float) -> float:
    """Goodput of one verified MPTCP connection (the failover demo's baseline)."""
    from mrc_transport.harness.baselines import baseline

    b, port = baseline("mptcp"), 5302
    flow = [sys.executable, "-m", "mrc_transport.harness.tcpflow"]
    with tempfile.TemporaryDirectory() as tmp:
        records = os.path.join(tmp, "mptcp.jsonl")
        rx = subprocess.Popen(
            ["ip", "netns", "exec", namespace(lab, dst), *flow,
             *b.recv_args(port, "mptcp"), "--records", records],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert rx.stdout is not None
            rx.stdout.readline()  # {"event": "listening", ...}: it is ready
            tx = subprocess.run(
                ["ip", "netns", "exec", namespace(lab, src), *flow,
                 *b.send_args(topo, src, dst, port), "-t", str(seconds)],
                capture_output=True, text=True, timeout=seconds + 60,
            )  # fmt: skip
            rx_end = json.loads(rx.communicate(timeout=60)[0].strip().splitlines()[-1])
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
    sent = json.loads(tx.stdout.strip().splitlines()[-1])
    if tx.returncode != 0 or not rx_end["verified"] or rx_end["bytes"] != sent["bytes_sent"]:
        raise RuntimeError(f"MPTCP flow failed or not verified: {tx.stderr.strip()[-300:]}")
    return float(sent["bytes_sent"] * 8 / (sent["t_end"] - sent["t_start"]))


def shaped(seconds: float) -> None:
    topo = preset("default")
    lab = "bq" + uuid.uuid4().hex[:6]
    try:
        up(topo, lab)
        src, dst = "h0", "h4"  # different racks
        m = mrc(lab, src, dst, seconds).bps
        t = iperf3(lab, topo, src, dst, seconds, udp=False).bps
        mp = mptcp(lab, topo, src, dst, seconds)
    finally:
        down(lab)
    port = topo.host_link.rate_bps
    total = port * topo.planes
    print(f"(b) shaped `default`, {src} -> {dst}: {topo.planes} ports x {port / 1e6:g} Mbit/s")
    print(
        f"    MRC, 1 connection      {m / 1e6:7.1f} Mbit/s = {m / total:.3f} of all ports "
        f"(target >= 0.9)"
    )
    print(
        f"    iperf3 TCP, 1 flow     {t / 1e6:7.1f} Mbit/s = {t / port:.3f} of one port, "
        f"{t / total:.3f} of all"
    )
    print(f"    MPTCP, 1 connection    {mp / 1e6:7.1f} Mbit/s = {mp / total:.3f} of all ports")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", choices=("unshaped", "shaped"), default=None)
    ap.add_argument("--repeat", type=int, default=1, help="(a): interleaved runs, medians")
    ap.add_argument("--blast", nargs=4, help=argparse.SUPPRESS)  # floor: LAB SRC DST SECONDS
    ap.add_argument("--drain", type=float, help=argparse.SUPPRESS)  # floor: SECONDS
    ap.add_argument("--gso", type=int, default=0, help=argparse.SUPPRESS)  # floor: per send
    ap.add_argument("--encode", action="store_true", help=argparse.SUPPRESS)  # floor: encode
    ap.add_argument("--pace", type=float, default=0.0, help=argparse.SUPPRESS)  # floor: bit/s
    args = ap.parse_args(argv)
    if (args.blast or args.drain is not None) and not in_lab_host(args.blast):
        print("perf.py: --blast and --drain run only inside the lab's host namespace "
              "(ip netns exec), never where their packets could leave the lab",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.blast:
        lab, src, dst, secs = args.blast
        _blast(lab, src, dst, float(secs), args.gso, args.encode, args.pace)
        return 0
    if args.drain is not None:
        _drain(args.drain)
        return 0
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.only != "shaped":
        unshaped(args.seconds, args.repeat)
    if args.only != "unshaped":
        shaped(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
