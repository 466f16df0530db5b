"""`permutation`: every host sends to one host of the other rack at once; per-flow goodput
of one pinned TCP flow per pair over ECMP, of one MPTCP connection per pair, then of one
MRC connection per pair.

Paper (mrc-protocol-notes.md, "Headline comparisons"): in a two-rack permutation,
single-path flows get 1/2 or 1/3 of line rate (ECMP hashes several onto one uplink); MRC
flows all get full rate.

Lab: the collisions demo's permutation and runs (demo/collisions.py) in one plane, where
a flow's only choice is its T1: each T0 has as many uplinks as hosts, so the fabric could
carry every flow at line rate if the flows were spread. Goodput is measured over the span
in which every flow ran (collisions.common_window). MPTCP opens a subflow per plane, each
hashed by ECMP like a TCP flow: in this one-plane fabric, one subflow per connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.topology import Topology
from mrc_transport.harness.patterns import pair_flows, permutation
from mrc_transport.harness.plot import collisions_png
from mrc_transport.harness.report import collisions_report
from mrc_transport.harness.windows import common_window, window_rates
from mrc_transport.repro.measure import mbit, pct
from mrc_transport.repro.spec import (
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    compared,
    need,
    sender_seconds,
)

SLOW = 0.6
"""A single-path flow below this share of line rate shared its uplink (1/2 or 1/3)."""
EVEN = 0.85
"""MRC flows "all at full rate": the slowest at least this share of the fastest (none held
back by another) ...
"""
FLOOR = 0.75
"""... and at least this share of line rate. (A lone MRC flow reaches ~90% of a 20 Mbit/s
port in this lab, TCP ~98%: README, `mrc demo collisions`.)"""


@dataclass(frozen=True, slots=True)
class Knobs:
    duration_s: float = 8.0
    """Seconds each run sends."""


def check(topo: Topology, k: Knobs) -> None:
    need(topo.racks >= 2, "the permutation needs at least 2 racks")
    need(k.duration_s > 2.0, "runs must last more than 2 s (1.5 s are start-up and tail)")


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    pairs = permutation(topo)
    seconds = sender_seconds(k.duration_s)
    return (
        Run("ecmp", tuple(pair_flows(pairs, "tcp", seconds)), k.duration_s),
        Run("mptcp", tuple(pair_flows(pairs, "mptcp", seconds)), k.duration_s),
        Run("mrc", tuple(pair_flows(pairs, "mrc", seconds)), k.duration_s),
    )


def rates(res: RunResult) -> dict[str, float]:
    names = [f.name for f in res.run.flows]
    window = common_window(res.deliveries, names, res.t_origin, res.t_stop)
    return window_rates(res.deliveries, names, *window)


def _doc(topo: Topology, results: Sequence[RunResult]) -> dict[str, Any]:
    by = {r.run.name: r for r in results}
    return collisions_report(
        rates(by["ecmp"]),
        rates(by["mrc"]),
        float(topo.host_link.rate_bps),
        verified=all(all(r.verified.values()) for r in results),
        meta={"pairs": [f.name for f in by["mrc"].run.flows], "planes": topo.planes},
        mptcp_bps=rates(by["mptcp"]) if "mptcp" in by else None,
    )


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    doc = _doc(topo, results)
    line = doc["line_rate_bps"]
    ecmp, mrc = doc["ecmp"], doc["mrc"]
    slow = sorted(v / line for v in ecmp["flows"].values() if v < SLOW * line)
    collided = bool(slow)
    ecmp_lab = (
        f"TCP over ECMP: slowest {mbit(ecmp['min_bps'])} ({pct(ecmp['min_bps'] / line)} of "
        f"line rate), {len(slow)} of {ecmp['n']} flows below {pct(SLOW)}; Jain {ecmp['jain']:.2f}"
    )
    mrc_ok = mrc["min_over_max"] >= EVEN and mrc["min_bps"] >= FLOOR * line
    rows = [
        Row(
            "Two-rack permutation: single-path flows get 1/2 or 1/3 of line rate",
            ecmp_lab,
            f"agrees: ECMP put {len(slow)} flows on shared uplinks, at "
            + ", ".join(pct(x) for x in slow)
            if collided
            else "differs this run: ECMP happened to hash every flow onto an uplink of its own",
            collided,
        ),
        Row(
            "MRC flows all get full rate",
            f"MRC: slowest {mbit(mrc['min_bps'])} ({pct(mrc['min_bps'] / line)} of line "
            f"rate), slowest/fastest {mrc['min_over_max']:.2f}; Jain {mrc['jain']:.2f}",
            f"agrees: no MRC flow held back by another (slowest/fastest >= {EVEN:g}, "
            f"slowest >= {pct(FLOOR)} of line rate)"
            if mrc_ok
            else f"differs: slowest/fastest {mrc['min_over_max']:.2f}, the slowest at "
            f"{pct(mrc['min_bps'] / line)} of line rate",
            mrc_ok,
        ),
    ]
    if "mptcp" in doc:
        rows.append(_mptcp_row(topo, doc))
    return Findings(tuple(rows), doc)


def _mptcp_row(topo: Topology, doc: dict[str, Any]) -> Row:
    line, mptcp, ecmp = doc["line_rate_bps"], doc["mptcp"], doc["ecmp"]
    slow = sum(1 for v in mptcp["flows"].values() if v < SLOW * line)
    how = (
        "one plane, so one subflow per connection, which ECMP hashes as it does a TCP flow"
        if topo.planes == 1
        else f"a subflow in each of {topo.planes} planes, each hashed by ECMP"
    )
    return compared(
        "Two-rack permutation: Linux MPTCP, one connection per pair",
        f"MPTCP: slowest {mbit(mptcp['min_bps'])} ({pct(mptcp['min_bps'] / line)} of line "
        f"rate), {slow} of {mptcp['n']} flows below {pct(SLOW)}; Jain {mptcp['jain']:.2f}",
        f"{how}: Jain {mptcp['jain']:.2f} against TCP's {ecmp['jain']:.2f} and MRC's "
        f"{doc['mrc']['jain']:.2f}",
    )


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    by = {r.run.name: r for r in results}
    collisions_png(
        path,
        rates(by["ecmp"]),
        rates(by["mrc"]),
        float(topo.host_link.rate_bps),
        mptcp_bps=rates(by["mptcp"]) if "mptcp" in by else None,
    )


EXPERIMENT = Experiment(
    name="permutation",
    code="perm",
    title="two-rack permutation: TCP over ECMP and MPTCP vs MRC, per flow",
    paper="Two-rack permutation (every host sends to one host of the other rack): "
    "single-path flows get 1/2 or 1/3 of line rate; MRC flows all get full rate.",
    fabric=Fabric(preset="default", planes=1, rate_bps=20_000_000),
    full=Knobs(),
    quick=Knobs(duration_s=3.0),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
