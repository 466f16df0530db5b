"""Lab bring-up and teardown time for `default` and `large`, beside the floor measured in
the same run: ONE plain `ip -b` batch creating the same namespaces and veth pairs (no
addresses, routes, SIDs, shaping or marking) and one `ip -b` deleting them.

Run as root: .venv/bin/python bench/lab.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import replace

from labs import bpf, kernel
from labs.apply import down, up
from labs.plan import SID_DEV, SID_PEER, SWITCH_PROGRAM
from labs.topology import Topology, namespace, preset


def _ip_batch(lines: list[str]) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(
        ["ip", "-force", "-b", "-"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"ip -b failed: {res.stderr.strip()[:200]}")
    return took


def floor_once(topo: Topology) -> tuple[float, float]:
    """(up, down) seconds of the plain batch build of the same namespaces and veths."""
    lab = "f" + uuid.uuid4().hex[:6]
    names = [namespace(lab, n) for n in topo.nodes]
    lines = [f"netns add {ns}" for ns in names]
    for ln in topo.links:
        lines.append(
            f"link add {ln.a_dev} netns {namespace(lab, ln.a)} type veth "
            f"peer name {ln.b_dev} netns {namespace(lab, ln.b)}"
        )
    for sw in topo.switches if topo.srv6 == "seg6local" else ():
        ns = namespace(lab, sw)
        lines.append(f"link add {SID_DEV} netns {ns} type veth peer name {SID_PEER} netns {ns}")
    try:
        t_up = _ip_batch(lines)
    finally:
        t_down = _ip_batch([f"netns del {ns}" for ns in names])
    return t_up, t_down


def lab_once(topo: Topology) -> tuple[float, float]:
    """(up, down) seconds of the lab itself; the BPF switch's object is compiled before
    (labs/bpf.py caches it), as it is for every lab but the first on a machine."""
    lab = "b" + uuid.uuid4().hex[:6]
    try:
        t_up = up(topo, lab)
    finally:
        t0 = time.perf_counter()
        down(lab)
        t_down = time.perf_counter() - t0
    return t_up, t_down


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--presets", default="default,large")
    ap.add_argument("--load", action="store_true", help="all-pairs iperf3 on default instead")
    args = ap.parse_args(argv)
    if args.load:
        return load()
    print(f"switch dataplane: {kernel.srv6_dataplane()}")
    if kernel.srv6_dataplane() == "bpf":
        bpf.object_path(SWITCH_PROGRAM)
    print(
        f"{'preset':8} {'ns':>4} {'veths':>5} | {'lab up':>7} {'floor':>7} {'ratio':>6} | "
        f"{'lab down':>8} {'floor':>7} {'ratio':>6}   (median of {args.repeat}, seconds)"
    )
    for name in args.presets.split(","):
        topo = replace(preset(name), srv6=kernel.srv6_dataplane())
        labs, floors = [], []
        for _ in range(args.repeat):
            floors.append(floor_once(topo))
            labs.append(lab_once(topo))
        lu = statistics.median(x[0] for x in labs)
        ld = statistics.median(x[1] for x in labs)
        fu = statistics.median(x[0] for x in floors)
        fd = statistics.median(x[1] for x in floors)
        veths = len(topo.links) + (len(topo.switches) if topo.srv6 == "seg6local" else 0)
        print(
            f"{name:8} {len(topo.nodes):>4} {veths:>5} | {lu:7.3f} {fu:7.3f} {lu / fu:5.1f}x | "
            f"{ld:8.3f} {fd:7.3f} {ld / fd:5.1f}x"
        )
    return 0


def _cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


def _listening(ns: str, ports: set[int]) -> bool:
    from labs import netns

    with netns.entered(ns), open("/proc/thread-self/net/tcp6") as f:
        seen = {
            int(line.split()[1].rsplit(":", 1)[1], 16)
            for line in f.readlines()[1:]
            if line.split()[3] == "0A"
        }
    return ports <= seen


def _tx_bytes(lab: str, topo: Topology) -> dict[tuple[str, str], int]:
    """Bytes sent through each host port's tbf (`tc -s -j qdisc`)."""
    import json

    out: dict[tuple[str, str], int] = {}
    for h in topo.hosts:
        res = subprocess.run(
            ["tc", "-n", namespace(lab, h), "-s", "-j", "qdisc"],
            capture_output=True,
            text=True,
            check=True,
        )
        for q in json.loads(res.stdout):
            if q.get("kind") == "tbf":
                out[(h, q["dev"])] = int(q["bytes"])
    return out


def _in_ns(lab: str, host: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", namespace(lab, host), *cmd]


def _start_servers(lab: str, topo: Topology) -> list[subprocess.Popen[str]]:
    """One one-shot iperf3 server per (destination, source) pair, port 5200 + the
    source's index; returns once every server listens."""
    procs: list[subprocess.Popen[str]] = []
    hosts = topo.hosts
    for d in hosts:
        ports = {5200 + j for j, s in enumerate(hosts) if s != d}
        for p in sorted(ports):
            cmd = _in_ns(lab, d, "iperf3", "-s", "-1", "-p", str(p))
            procs.append(
                subprocess.Popen(
                    cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
                )
            )
        deadline = time.monotonic() + 10
        while not _listening(namespace(lab, d), ports):
            if time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 servers on {d} did not start")
            time.sleep(0.01)
    return procs


def _start_clients(lab: str, topo: Topology, seconds: int) -> list[subprocess.Popen[str]]:
    """Every host to every other host, over the baseline (ECMP) addresses."""
    from labs import addressing

    clients = []
    for j, s in enumerate(topo.hosts):
        src = str(addressing.baseline_address(topo, s))
        for d in topo.hosts:
            if s == d:
                continue
            dst = str(addressing.baseline_address(topo, d))
            cmd = _in_ns(
                lab, s, "iperf3", "-J", "-t", str(seconds), "-c", dst, "-B", src,
                "-p", str(5200 + j),
            )  # fmt: skip
            clients.append(
                subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            )
    return clients


def _print_load(
    topo: Topology, flows: int, seconds: int, total: float, util: list[float], busy: float
) -> None:
    hosts = len(topo.hosts)
    rate = topo.host_link.rate_bps
    cap = hosts * topo.planes * rate
    sat = sum(u >= 0.9 for u in util)
    print(f"load: {flows} iperf3 TCP flows at once on `default` for {seconds} s")
    print(
        f"  goodput sum {total / 1e6:.0f} Mbit/s; host NIC capacity {cap / 1e6:.0f} Mbit/s "
        f"({hosts} hosts x {topo.planes} ports x {rate / 1e6:g}) -> {100 * total / cap:.0f}%"
    )
    print(
        f"  host NIC port egress utilisation: median {100 * util[len(util) // 2]:.0f}%, "
        f"max {100 * util[-1]:.0f}%, {sat}/{len(util)} ports at >= 90% of the tbf rate"
    )
    print(f"  CPU busy {100 * busy:.0f}% of all cores during the run")


def load(seconds: int = 8) -> int:
    """Every host sends to every other host at once (iperf3 TCP over the baseline ECMP
    routes, 56 flows on `default`): goodput vs shaped capacity, and CPU busy share."""
    import json

    topo = preset("default")
    lab = "l" + uuid.uuid4().hex[:6]
    servers: list[subprocess.Popen[str]] = []
    try:
        up(topo, lab)
        servers = _start_servers(lab, topo)
        clients = _start_clients(lab, topo, seconds)
        time.sleep(1)  # skip slow start: sample CPU over the steady part of the run
        b0, t0 = _cpu()
        q0, w0 = _tx_bytes(lab, topo), time.monotonic()
        time.sleep(seconds - 2)
        b1, t1 = _cpu()
        q1, w1 = _tx_bytes(lab, topo), time.monotonic()
        total = 0.0
        for c in clients:
            out, _ = c.communicate(timeout=seconds + 20)
            total += json.loads(out)["end"]["sum_received"]["bits_per_second"]
        rate = topo.host_link.rate_bps
        util = sorted(8 * (q1[k] - q0[k]) / (w1 - w0) / rate for k in q0)
        _print_load(topo, len(clients), seconds, total, util, (b1 - b0) / max(1, t1 - t0))
    finally:
        for server in servers:
            server.kill()
            server.wait()
        down(lab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
