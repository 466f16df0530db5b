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

from labs.apply import down, up
from labs.plan import SID_DEV, SID_PEER
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
    for sw in topo.switches:
        ns = namespace(lab, sw)
        lines.append(f"link add {SID_DEV} netns {ns} type veth peer name {SID_PEER} netns {ns}")
    try:
        t_up = _ip_batch(lines)
    finally:
        t_down = _ip_batch([f"netns del {ns}" for ns in names])
    return t_up, t_down


def lab_once(topo: Topology) -> tuple[float, float]:
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
    args = ap.parse_args(argv)
    print(
        f"{'preset':8} {'ns':>4} {'veths':>5} | {'lab up':>7} {'floor':>7} {'ratio':>6} | "
        f"{'lab down':>8} {'floor':>7} {'ratio':>6}   (median of {args.repeat}, seconds)"
    )
    for name in args.presets.split(","):
        topo = preset(name)
        labs, floors = [], []
        for _ in range(args.repeat):
            floors.append(floor_once(topo))
            labs.append(lab_once(topo))
        lu = statistics.median(x[0] for x in labs)
        ld = statistics.median(x[1] for x in labs)
        fu = statistics.median(x[0] for x in floors)
        fd = statistics.median(x[1] for x in floors)
        veths = len(topo.links) + len(topo.switches)
        print(
            f"{name:8} {len(topo.nodes):>4} {veths:>5} | {lu:7.3f} {fu:7.3f} {lu / fu:5.1f}x | "
            f"{ld:8.3f} {fd:7.3f} {ld / fd:5.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
