"""Many MRC connections at once for a long while: verified, memory bounded, nothing left over.

On the `default` preset, side by side in one run:

(a) one server, 64 clients: `mrc perf -s` in h0, `mrc perf -c h0 -P 64` in h7;
(b) all-to-all among the 8 hosts: `mrc perf --pairs` with the 56 ordered pairs, one process.

For each it prints whether every byte was verified, the serving process's memory per
connection (its resident set while the connections run, less what it held before they came,
over their number), how that memory moved from the first tenth of the run to its end (MB a
minute: it must not grow with time), and what was left after: the server's open file
descriptors against before the test (sockets), processes still in the lab's namespaces, and
namespaces left once the lab is down.

Usage: bench/manyconns.py [--seconds 60] [--only a|b]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import permutations

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchlab import need_root, own_lab

from labs.topology import namespace, preset

PERF = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
RATE = "5M"
"""Each connection's rate: 64 of them fill about the four 100 Mbit/s ports of a host, so the
run measures many connections, not a CPU-bound machine."""


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Watch:
    """A process's resident set every second while it runs."""

    pid: int
    samples: list[tuple[float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), rss_mb(self.pid)))
            except OSError:
                return
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def growth_mb_per_min(self, t0: float, t1: float) -> float:
        """The resident set's trend over the run's second half (a least-squares line, MB
        a minute): by then every connection's windows have opened, so what is left is
        growth with time."""
        pts = [(t, m) for t, m in self.samples if t0 + (t1 - t0) / 2 <= t <= t1]
        if len(pts) < 2:
            return 0.0
        tm = sum(t for t, _ in pts) / len(pts)
        mm = sum(m for _, m in pts) / len(pts)
        var = sum((t - tm) ** 2 for t, _ in pts)
        return 60 * sum((t - tm) * (m - mm) for t, m in pts) / var if var else 0.0

    def peak(self) -> float:
        return max((m for _, m in self.samples), default=0.0)


@dataclass(frozen=True)
class Result:
    name: str
    connections: int
    verified: bool
    mb_per_conn: float
    growth_mb_per_min: float
    fds_left: int | None
    """The server's open files after the test less before it (None: no server kept)."""
    pids_left: int


def _lab_pids(lab: str, hosts: tuple[str, ...]) -> int:
    n = 0
    for h in hosts:
        got = subprocess.run(["ip", "netns", "pids", namespace(lab, h)], capture_output=True)
        n += len(got.stdout.split())
    return n


def one_server(lab: str, hosts: tuple[str, ...], seconds: float, n: int = 64) -> Result:
    """(a): `mrc perf -s` in the first host (kept running), one client with -P n in the
    last (the other rack)."""
    server_host, client_host = hosts[0], hosts[-1]
    srv = subprocess.Popen(
        ["ip", "netns", "exec", namespace(lab, server_host), *PERF, "-s", "--lab", lab, "-i", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert srv.stdout is not None
        while not srv.stdout.readline().startswith("Server listening"):
            pass
        base_fds, base_mb = open_fds(srv.pid), rss_mb(srv.pid)
        watch = Watch(srv.pid)
        t0 = time.monotonic()
        client = [*PERF, "-c", server_host, "--lab", lab, "-P", str(n), "-t", str(seconds)]
        got = subprocess.run(
            ["ip", "netns", "exec", namespace(lab, client_host), *client, "-b", RATE, "-i", "0"],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
        )
        t1 = time.monotonic()
        watch.stop()
        fds_after = open_fds(srv.pid)  # the test is over: its sockets must be gone
        verified = got.returncode == 0 and "verified:" in got.stdout
        per_conn = (watch.peak() - base_mb) / n
        return Result(
            f"one server, {n} clients", n, verified, per_conn,
            watch.growth_mb_per_min(t0, t1), fds_after - base_fds, 0,
        )  # fmt: skip
    finally:
        srv.terminate()
        srv.wait(timeout=30)


def all_to_all(lab: str, hosts: tuple[str, ...], seconds: float) -> Result:
    """(b): every ordered pair of hosts, one `mrc perf --pairs` process."""
    pairs = ",".join(f"{a}:{b}" for a, b in permutations(hosts, 2))
    argv = [*PERF, "--lab", lab, "--pairs", pairs, "-t", str(seconds), "-b", RATE, "-i", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    base_mb = rss_mb(proc.pid)  # the interpreter and the code, before the endpoints
    watch = Watch(proc.pid)
    t0 = time.monotonic()
    out, _ = proc.communicate(timeout=seconds + 180)
    t1 = time.monotonic()
    watch.stop()
    n = len(hosts) * (len(hosts) - 1)
    verified = proc.returncode == 0 and "verified:" in out
    return Result(
        "all-to-all, 8 hosts", n, verified, (watch.peak() - base_mb) / n,
        watch.growth_mb_per_min(t0, t1), None, _lab_pids(lab, hosts),
    )  # fmt: skip


def _print(r: Result) -> None:
    fds = "" if r.fds_left is None else f", server fds left {r.fds_left:+d}"
    print(
        f"{r.name}: {r.connections} connections, {'verified' if r.verified else 'NOT VERIFIED'}"
        f", {r.mb_per_conn:.2f} MB per connection, memory {r.growth_mb_per_min:+.2f} MB/min"
        f"{fds}, processes left in the lab {r.pids_left}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--only", choices=("a", "b"))
    args = ap.parse_args(argv)
    if not need_root("bench/manyconns.py"):
        return 2
    topo = preset("default")
    with own_lab(topo, "mc") as lab:
        if args.only in (None, "a"):
            _print(one_server(lab, topo.hosts, args.seconds))
        if args.only in (None, "b"):
            _print(all_to_all(lab, topo.hosts, args.seconds))
    left = [ns for ns in os.listdir("/run/netns") if ns.startswith(f"mrc-{lab}-")]
    print(f"lab down: {len(left)} namespaces left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
