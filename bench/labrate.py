"""MRC at the lab's own rates, side by side with in-kernel TCP: what a flow costs the machine.

On the `default` preset (8 hosts, 4 planes of 100 Mbit/s links), in one run:

(a) one connection between racks (h4 -> h0): one MRC connection against `iperf3 -P 4` TCP;
(b) the permutation: every host sends to one host of the other rack at once, 8 MRC flows
    against 8 TCP flows (one iperf3 each);
(c) the same permutation with the MRC flows packed into one process per CPU (`mrc perf
    --pairs`, the pairs dealt out evenly): a process's trio loop then serves many
    endpoints per wake-up, where (b)'s 16 processes each pay their own;
(d) (a)'s connection with both its ends in one process (`mrc perf --pairs h4:h0`).

For each it prints the goodput as a fraction of the capacity the flows could use (MRC: every
port of the senders, 400 Mbit/s a host; a TCP flow: the one port its ECMP hash picks, so
`-P 4` could use 400 and eight single flows 8 x 100), the system-wide CPU core-seconds per
delivered Gbit (all of /proc/stat, since in a lab the kernel's forwarding through the
switches is work too), whether the CPUs were saturated, and MRC's ratio to TCP. Goodput and
CPU are read over the same window: the clients print an interval line every INTERVAL seconds
(iperf3 with --forceflush), each stamped with the monotonic time it arrived, and the window
runs from the last flow's third interval to the first flow's last, so start-up (imports,
connection set-up) and the end are left out.

Usage: bench/labrate.py [--seconds 10] [--repeat 3] [--only a|b|c|d] [--moderation paced]
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchlab import need_root, own_lab

from labs import addressing
from labs.topology import Topology, namespace, preset
from mrc_transport.harness.machine import CPU_BOUND, cpu_times

PERF = (sys.executable, "-m", "mrc_transport.cli.main", "perf")
"""`mrc perf`; the cases get it with the run's MRC flags (``--moderation``)."""
INTERVAL = 0.5
"""Seconds per interval line: the window's resolution."""
SKIP = 2
"""Interval lines of each flow left out at its start (start-up)."""
PORT_BPS = 100e6
"""A port's rate on `default`."""
MRC_PORT, TCP_PORT = 4791, 5301
_LINE = re.compile(
    r"^\[(?:SUM|\s*\d+)\]\s+([\d.]+)-\s*([\d.]+)\s+sec\s+[\d.]+ \w?Bytes\s+([\d.]+) (\w?)bits/sec"
)
_UNIT = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Pair:
    src: str
    dst: str


@dataclass
class Client:
    """One sending process and its interval lines as they arrived."""

    proc: subprocess.Popen[str]
    lines: list[tuple[float, float, float]] = field(default_factory=list)
    """(monotonic arrival, seconds, bits per second) of each interval line."""
    text: list[str] = field(default_factory=list)

    def read(self, total_only: bool) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.text.append(line)
            if "sender" in line or "receiver" in line or (total_only and "[SUM]" not in line):
                continue
            m = _LINE.match(line)
            if m:
                a, b, rate, unit = m.groups()
                self.lines.append(
                    (time.monotonic(), float(b) - float(a), float(rate) * _UNIT[unit])
                )


class CpuSampler:
    """(monotonic, busy core-seconds, all core-seconds) of the whole machine, every 50 ms."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = cpu_times()
            if t is None:
                raise SystemExit("bench/labrate.py: /proc/stat cannot be read")
            # Stolen time counts as busy: the guest wanted to run then.
            self.samples.append((time.monotonic(), t.busy + t.steal, t.total))
            self._stop.wait(0.05)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, t0: float, t1: float) -> tuple[float, float]:
        """(busy core-seconds, all core-seconds) from t0 to t1, from the nearest samples."""
        ts = [s[0] for s in self.samples]
        a = self.samples[max(bisect.bisect_left(ts, t0) - 1, 0)]
        b = self.samples[min(bisect.bisect_left(ts, t1), len(ts) - 1)]
        return b[1] - a[1], b[2] - a[2]


@dataclass(frozen=True)
class Result:
    """One side of one case: what the flows delivered over the window and what it cost."""

    bps: float
    capacity_bps: float
    busy_s: float
    window_s: float
    cpu_share: float
    """Busy share of all CPUs over the window."""
    verified: bool

    @property
    def fraction(self) -> float:
        return self.bps / self.capacity_bps

    @property
    def per_gbit(self) -> float:
        return self.busy_s / (self.bps * self.window_s / 1e9)

    @property
    def saturated(self) -> bool:
        return self.cpu_share >= CPU_BOUND


def _ns(lab: str, host: str) -> list[str]:
    return ["ip", "netns", "exec", namespace(lab, host)]


def _start(argv: list[str], out: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE if out else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
        text=True,
    )


def _mrc_ends(
    lab: str, pairs: Sequence[Pair], seconds: float, perf: Sequence[str]
) -> tuple[list[subprocess.Popen[str]], list[list[str]]]:
    """`mrc perf -s -1` in each receiver, a port each; the clients' argv."""
    servers, clients = [], []
    for i, p in enumerate(pairs):
        port = ["--lab", lab, "-p", str(MRC_PORT + i)]
        servers.append(_start([*_ns(lab, p.dst), *perf, "-s", "-1", *port], False))
        run = ["-t", str(seconds), "-i", str(INTERVAL)]
        clients.append([*_ns(lab, p.src), *perf, "-c", p.dst, *port, *run])
    return servers, clients


def _mrc_packed(
    lab: str, pairs: Sequence[Pair], seconds: float, perf: Sequence[str], procs: int
) -> tuple[list[subprocess.Popen[str]], list[list[str]]]:
    """No servers: `procs` `mrc perf --pairs` processes, each running both ends of every
    procs-th pair, a port each."""
    clients = []
    for g in range(procs):
        mine = ",".join(f"{p.src}:{p.dst}" for p in pairs[g::procs])
        port = ["--lab", lab, "-p", str(MRC_PORT + len(pairs) + g)]
        clients.append([*perf, *port, "--pairs", mine, "-t", str(seconds), "-i", str(INTERVAL)])
    return [], clients


def _tcp_ends(
    lab: str, topo: Topology, pairs: Sequence[Pair], seconds: float, parallel: int
) -> tuple[list[subprocess.Popen[str]], list[list[str]]]:
    """`iperf3 -s -1` in each receiver, a port each; the clients' argv (the baseline
    addresses, so the fabric's ECMP routes carry them)."""
    servers, clients = [], []
    for i, p in enumerate(pairs):
        port = ["-p", str(TCP_PORT + i)]
        servers.append(_start([*_ns(lab, p.dst), "iperf3", "-s", "-1", *port], False))
        ends = ["-c", str(addressing.baseline_address(topo, p.dst))]
        ends += ["-B", str(addressing.baseline_address(topo, p.src))]
        run = ["-t", str(seconds), "-i", str(INTERVAL), "--forceflush", "-P", str(parallel)]
        clients.append([*_ns(lab, p.src), "iperf3", *ends, *port, *run])
    return servers, clients


def _run(
    servers: list[subprocess.Popen[str]], argvs: list[list[str]], total_only: bool
) -> tuple[list[Client], CpuSampler]:
    """Start the clients once the servers listen, read their lines, wait for the end."""
    if servers:  # their start-up: a client that comes first fails and is retried
        time.sleep(1.5)
    with CpuSampler() as cpu:
        clients = [Client(_start(argv, True)) for argv in argvs]
        readers = [threading.Thread(target=c.read, args=(total_only,)) for c in clients]
        for r in readers:
            r.start()
        for r in readers:
            r.join()
        for c in clients:
            c.proc.wait()
    for s in servers:
        try:
            s.wait(timeout=15)
        except subprocess.TimeoutExpired:
            s.kill()
    return clients, cpu


def _measure(clients: list[Client], cpu: CpuSampler, capacity: float, mrc: bool) -> Result:
    """Goodput and CPU over the window every flow was past its start-up and still running."""
    if any(len(c.lines) <= SKIP + 1 for c in clients):
        bad = next(c for c in clients if len(c.lines) <= SKIP + 1)
        raise RuntimeError("a flow printed too few interval lines:\n" + "".join(bad.text[-15:]))
    t0 = max(c.lines[SKIP][0] - c.lines[SKIP][1] for c in clients)
    t1 = min(c.lines[-2][0] for c in clients)  # the last line may be a part-interval
    bits = 0.0
    for c in clients:
        for arrived, secs, bps in c.lines:
            if t0 <= arrived - secs and arrived <= t1 + 0.05:
                bits += bps * secs
    busy, total = cpu.between(t0, t1)
    verified = all(c.proc.returncode == 0 for c in clients) and (
        not mrc or all(any(ln.startswith("verified") for ln in c.text) for c in clients)
    )
    return Result(bits / (t1 - t0), capacity, busy, t1 - t0, busy / total, verified)


def case_a(lab: str, topo: Topology, seconds: float, perf: Sequence[str]) -> tuple[Result, Result]:
    pair = [Pair("h4", "h0")]
    srv, argv = _mrc_ends(lab, pair, seconds, perf)
    mrc = _measure(*_run(srv, argv, True), 4 * PORT_BPS, True)
    srv, argv = _tcp_ends(lab, topo, pair, seconds, 4)
    tcp = _measure(*_run(srv, argv, True), 4 * PORT_BPS, False)
    return mrc, tcp


def floor(lab: str, seconds: float) -> Result:
    """(a)'s least a packet-per-path userspace sender pays: bench/perf.py's raw-socket
    floor (prebuilt MRC data packets, a burst per send, no protocol, no SACKs, a receiver
    that only drains) paced at the host's four ports, h4 -> h0, the machine's CPU over the
    receiver's counting window."""
    import json

    perf = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf.py")]
    drain = _start([*_ns(lab, "h0"), *perf, "--drain", str(seconds)], True)
    with CpuSampler() as cpu:
        assert drain.stdout is not None
        drain.stdout.readline()  # "ready"
        pace = str(0.95 * 4 * PORT_BPS)  # tbf passes a little under its nominal rate
        blast = [*perf, "--blast", lab, "h4", "h0", str(seconds + 1), "--pace", pace]
        subprocess.run([*_ns(lab, "h4"), *blast], check=True, capture_output=True)
        got = json.loads(drain.communicate(timeout=30)[0].splitlines()[-1])
    busy, total = cpu.between(got["t0"], got["t0"] + seconds)
    return Result(got["bytes"] * 8 / seconds, 4 * PORT_BPS, busy, seconds, busy / total, True)


def _permutation(topo: Topology) -> list[Pair]:
    """Every host of the first two racks sends to its counterpart in the other."""
    racks = [topo.hosts_in_rack(r) for r in range(topo.racks)]
    pairs = [Pair(a, b) for a, b in zip(racks[0], racks[1], strict=True)]
    return pairs + [Pair(b, a) for a, b in zip(racks[0], racks[1], strict=True)]


def case_b(lab: str, topo: Topology, seconds: float, perf: Sequence[str]) -> tuple[Result, Result]:
    pairs = _permutation(topo)
    srv, argv = _mrc_ends(lab, pairs, seconds, perf)
    mrc = _measure(*_run(srv, argv, True), len(pairs) * 4 * PORT_BPS, True)
    srv, argv = _tcp_ends(lab, topo, pairs, seconds, 1)
    tcp = _measure(*_run(srv, argv, False), len(pairs) * PORT_BPS, False)
    return mrc, tcp


def case_c(lab: str, topo: Topology, seconds: float, perf: Sequence[str]) -> tuple[Result, Result]:
    pairs = _permutation(topo)
    srv, argv = _mrc_packed(lab, pairs, seconds, perf, os.cpu_count() or 1)
    mrc = _measure(*_run(srv, argv, True), len(pairs) * 4 * PORT_BPS, True)
    srv, argv = _tcp_ends(lab, topo, pairs, seconds, 1)
    tcp = _measure(*_run(srv, argv, False), len(pairs) * PORT_BPS, False)
    return mrc, tcp


def case_d(lab: str, topo: Topology, seconds: float, perf: Sequence[str]) -> tuple[Result, Result]:
    pair = [Pair("h4", "h0")]
    srv, argv = _mrc_packed(lab, pair, seconds, perf, 1)
    mrc = _measure(*_run(srv, argv, True), 4 * PORT_BPS, True)
    srv, argv = _tcp_ends(lab, topo, pair, seconds, 4)
    tcp = _measure(*_run(srv, argv, True), 4 * PORT_BPS, False)
    return mrc, tcp


def _row(name: str, r: Result) -> str:
    sat = "SATURATED" if r.saturated else "not saturated"
    return (
        f"  {name:4s} {r.bps / 1e6:8.1f} Mbit/s = {r.fraction:5.3f} of {r.capacity_bps / 1e9:.1f}"
        f" Gbit/s, {r.per_gbit:5.2f} core-s/Gbit, CPUs {100 * r.cpu_share:4.1f}% busy ({sat})"
        f"{', verified' if r.verified else ', NOT verified'}"
    )


def report(name: str, runs: list[tuple[Result, Result]]) -> None:
    for i, (mrc, tcp) in enumerate(runs, 1):
        print(f"{name} run {i} (window {mrc.window_s:.1f} s / {tcp.window_s:.1f} s):")
        print(_row("MRC", mrc))
        print(_row("TCP", tcp))
    med = statistics.median
    mrc_g, tcp_g = med(m.per_gbit for m, _ in runs), med(t.per_gbit for _, t in runs)
    print(
        f"{name} medians of {len(runs)}: MRC {med(m.fraction for m, _ in runs):.3f} of its "
        f"capacity at {mrc_g:.2f} core-s/Gbit, TCP {med(t.fraction for _, t in runs):.3f} at "
        f"{tcp_g:.2f}; MRC/TCP CPU per Gbit {med(m.per_gbit / t.per_gbit for m, t in runs):.2f}x"
        f"; MRC saturated in {sum(m.saturated for m, _ in runs)} of {len(runs)}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("a", "b", "c", "d"))
    ap.add_argument(
        "--moderation", choices=("bulk", "paced"), default="bulk", help="mrc perf --moderation"
    )
    args = ap.parse_args(argv)
    perf = [*PERF, "--moderation", args.moderation]
    if not need_root("bench/labrate.py"):
        return 2
    topo = preset("default")
    with own_lab(topo, "lr") as lab:
        for name, case in (("a", case_a), ("b", case_b), ("c", case_c), ("d", case_d)):
            if args.only in (None, name):
                runs = [case(lab, topo, args.seconds, perf) for _ in range(args.repeat)]
                report(f"({name})", runs)
        if args.only in (None, "a"):
            f = floor(lab, args.seconds)
            print("(a)'s floor, paced raw-socket sends and a drain, no protocol:")
            print(_row("raw", f))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
