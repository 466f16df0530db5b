"""MRC goodput beside iperf3 on the same host pair, in the same run; ratios printed.

(a) unshaped links (tbf far above what a core can push), two hosts in different racks:
    one MRC connection (`mrc perf`) vs one iperf3 TCP stream and iperf3 UDP -b 0, plus
    CPU seconds per delivered gigabit (both ends: every process is our child).
(b) the shaped `default` lab (4 planes x 100 Mbit/s per host): one MRC connection vs the
    sum of the host's port rates, and one iperf3 TCP flow (baseline ECMP: one plane) vs
    one port's rate.

Run as root: .venv/bin/python bench/perf.py [--seconds N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

from labs import addressing
from labs.apply import down, up
from labs.topology import LinkClass, Topology, namespace, preset

UNSHAPED = LinkClass(rate_bps=40_000_000_000, mtu=9000, burst=8 << 20, limit=16 << 20, ecn="none")
PERF = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def mrc(lab: str, src: str, dst: str, seconds: float) -> tuple[float, float]:
    """(goodput bit/s, CPU seconds of both ends) of one verified MRC connection."""
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
    return float(end["sum_received"]["bits_per_second"]), cpu


def iperf3(
    lab: str, topo: Topology, src: str, dst: str, seconds: float, udp: bool
) -> tuple[float, float]:
    """(goodput bit/s, CPU seconds of both ends) of one iperf3 flow over the baseline route."""
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
    if udp:
        return float(end["sum"]["bits_per_second"]) * (1 - end["sum"]["lost_percent"] / 100), cpu
    return float(end["sum_received"]["bits_per_second"]), cpu


def _g(bps: float) -> str:
    return f"{bps / 1e9:6.3f} Gbit/s"


def unshaped(seconds: float) -> None:
    topo = Topology(
        planes=2,
        racks=2,
        hosts_per_rack=1,
        t1_per_plane=2,
        host_link=UNSHAPED,
        fabric_link=UNSHAPED,
    )
    lab = "bp" + uuid.uuid4().hex[:6]
    try:
        up(topo, lab)
        src, dst = "h0", "h1"  # different racks
        m, m_cpu = mrc(lab, src, dst, seconds)
        t, t_cpu = iperf3(lab, topo, src, dst, seconds, udp=False)
        u, u_cpu = iperf3(lab, topo, src, dst, seconds, udp=True)
    finally:
        down(lab)
    print(f"(a) unshaped, {src} -> {dst} (different racks), {seconds:g} s each")
    print(f"    MRC, 1 connection      {_g(m)}   CPU {m_cpu / (m * seconds / 1e9):6.2f} s/Gbit")
    print(f"    iperf3 TCP, 1 stream   {_g(t)}   CPU {t_cpu / (t * seconds / 1e9):6.2f} s/Gbit")
    print(f"    iperf3 UDP -b 0        {_g(u)}   CPU {u_cpu / (u * seconds / 1e9):6.2f} s/Gbit")
    print(f"    MRC / iperf3 UDP = {m / u:.3f}   (target >= 0.5)")
    print(f"    MRC / iperf3 TCP = {m / t:.3f}")


def shaped(seconds: float) -> None:
    topo = preset("default")
    lab = "bq" + uuid.uuid4().hex[:6]
    try:
        up(topo, lab)
        src, dst = "h0", "h4"  # different racks
        m, _ = mrc(lab, src, dst, seconds)
        t, _ = iperf3(lab, topo, src, dst, seconds, udp=False)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", choices=("unshaped", "shaped"), default=None)
    args = ap.parse_args(argv)
    if args.only != "shaped":
        unshaped(args.seconds)
    if args.only != "unshaped":
        shaped(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
