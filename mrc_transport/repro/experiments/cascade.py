"""`cascade` (Fig. 9c): T0-T1 links go down one per second under an MRC transfer, twenty of
them or as many as the fabric has with one T1 of every plane left whole; goodput at
200 ms granularity.

Paper (mrc-protocol-notes.md, "Testbed figures (Fig. 9)"): twenty T0-T1 links taken down
one per second have minimal impact at 200 ms granularity.

Lab: one MRC connection between racks; links are cut hard (labs/faults.py ``cut``) in the
order of ``cascade_links``: T1 by T1 from the second, rack by rack, plane by plane, so each
plane loses its links in turn and keeps its first T1 wired to every rack (the fabric stays
connected). In the default fabric that is 20 of its 32 T0-T1 links (the paper's twenty
were a small share of its fabric's): every plane is left with one path between the racks,
at the host port's rate, so the transfer's capacity is unchanged and what a cut costs is
what it caught in flight and the paths the sender must find. The links come back at the
run's end. Per cut, the report gives the goodput until the next and the fewest paths
left in a plane.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from labs.faultkinds import Cut, Restore
from labs.paths import path_links, paths
from labs.topology import Topology
from mrc_transport.harness.patterns import pick_hosts
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import FaultWindow, analyse, goodput
from mrc_transport.repro.figures import run_timeline
from mrc_transport.repro.measure import dip, ms, pct, rate, ratio, warm
from mrc_transport.repro.spec import (
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    as_baseline,
    compared,
    need,
    one_mrc_flow,
    run_named,
)

BIN_S = 0.2
"""The paper's granularity."""
LOW_OK = 0.75
"""Minimal impact: no 200 ms bin below this share of before ..."""
MEAN_OK = 0.9
"""... and the mean over the cascade at least this share."""


@dataclass(frozen=True, slots=True)
class Knobs:
    first_at: float = 2.0
    """Seconds into the transfer of the first cut."""
    every_s: float = 1.0
    """Seconds between cuts."""
    links: int = 20
    """Cuts at most (fewer when the fabric has fewer to spare)."""
    tail_s: float = 3.0
    """Transfer after the last cut."""
    settle_s: float = 0.5
    """Skipped at the start before the healthy goodput counts."""


def cascade_links(topo: Topology, limit: int) -> list[str]:
    """Up to ``limit`` T0-T1 links whose loss leaves every plane's first T1 linked to every
    rack: T1 1, 2, .. in turn, rack by rack, plane by plane."""
    out = [
        f"{topo.t0(plane, rack)}:{topo.t1(plane, j)}"
        for j in range(1, topo.t1_per_plane)
        for rack in range(topo.racks)
        for plane in range(topo.planes)
    ]
    return out[:limit]


def check(topo: Topology, k: Knobs) -> None:
    pick_hosts(topo, None, None)
    need(topo.t1_per_plane >= 2, "the cascade needs 2+ T1 per plane (one stays whole)")
    need(k.links >= 1 and k.every_s > 0, "the cascade needs links >= 1 and every_s > 0")


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    """The cuts, then every link back at the run's end: a transfer on the few paths left
    may be crawling, and must finish (every byte checked) in seconds, not minutes."""
    links = cascade_links(topo, k.links)
    duration = k.first_at + len(links) * k.every_s + k.tail_s
    steps = [Step(k.first_at + i * k.every_s, Cut(link)) for i, link in enumerate(links)]
    steps.append(Step(duration, Restore("+".join(links))))  # together: labs/faultkinds.py
    mrc = one_mrc_flow(topo, duration, steps)
    return (mrc, as_baseline(mrc, "mptcp"))


def paths_left(topo: Topology, src: str, dst: str, cut: Sequence[str]) -> dict[int, int]:
    """Per plane, the paths from src to dst that avoid every cut link."""
    left = dict.fromkeys(range(topo.planes), 0)
    for p in paths(topo, src, dst):
        if not set(path_links(src, dst, p)) & set(cut):
            left[p.plane] += 1
    return left


def per_cut(
    topo: Topology, res: RunResult, cuts: Sequence[FaultWindow], before: float
) -> list[dict[str, Any]]:
    """After each cut, until the next: goodput against before, and the fewest paths left
    in a plane."""
    flow = res.run.flows[0]
    out = []
    for i, cut in enumerate(cuts):
        t_next = cuts[i + 1].t_start if i + 1 < len(cuts) else res.t_stop
        got = (
            rate(res.deliveries, [flow.name], cut.t_start, t_next) if t_next > cut.t_start else None
        )
        left = paths_left(topo, flow.src, flow.dst, [c.target for c in cuts[: i + 1]])
        out.append(
            {"link": cut.target, "fraction": ratio(got, before), "fewest_paths": min(left.values())}
        )
    return out


def cut_gaps(res: RunResult, cuts: Sequence[FaultWindow], k: Knobs) -> list[float]:
    """Each cut's longest delivery gap (the failover demo's measure), cut by cut."""
    name = res.run.flows[0].name
    windows = [replace(f, t_end=f.t_start + k.every_s * 0.5) for f in cuts]
    found = analyse(res.deliveries, windows, t_begin=res.t_origin, t_stop=res.t_stop)
    return [s.duration for r in found if (s := r.flows[name].stall) is not None]


def figures(topo: Topology, k: Knobs, res: RunResult) -> dict[str, Any]:
    """One run's flow through the cascade: goodput against before, its lowest 200 ms bin,
    its longest gap at a cut."""
    name = res.run.flows[0].name
    cuts = sorted((f for f in res.faults if f.kind == "cut"), key=lambda f: f.t_start)
    t_a = cuts[0].t_start if cuts else res.t_origin + k.first_at
    t_b = min(res.t_stop, (cuts[-1].t_start if cuts else t_a) + k.every_s)
    before = rate(res.deliveries, [name], warm(res, [name], k.settle_s), t_a)
    during = rate(res.deliveries, [name], t_a, t_b)
    after = rate(res.deliveries, [name], t_b, res.t_stop) if res.t_stop > t_b else None
    low = dip(goodput(res.deliveries, t_a, t_b, BIN_S), before, t_a, t_b)
    gaps = cut_gaps(res, cuts, k)
    return {
        "links_cut": [f.target for f in cuts],
        "baseline_bps": before,
        "cascade_bps": during,
        "after_bps": after,
        "mean_fraction": ratio(during, before),
        "lowest_bin_fraction": 1 - low.depth,
        "bins_below_90pct": round(low.below_s / BIN_S),
        "longest_gap_s": max(gaps, default=None),
        "after_fraction": ratio(after, before),
        "per_cut": per_cut(topo, res, cuts, before),
    }


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    res = run_named(results, "mrc") or results[0]
    n = figures(topo, k, res)
    lowest, mean = n["lowest_bin_fraction"], n["mean_fraction"]
    ok = lowest >= LOW_OK and mean is not None and mean >= MEAN_OK
    numbers: dict[str, Any] = {
        "of_t0_t1_links": sum(1 for ln in topo.links if ln.kind == "t0-t1"),
        "every_s": k.every_s,
        **n,
    }
    lab = (
        f"{len(n['links_cut'])} of {numbers['of_t0_t1_links']} links, one per {k.every_s:g} s: "
        f"lowest 200 ms bin {pct(lowest)} of before, mean {pct(mean)}, longest gap at a cut "
        f"{ms(n['longest_gap_s'])}; after the last, {pct(n['after_fraction'])}"
    )
    claim = "Twenty T0-T1 links taken down one per second: minimal impact at 200 ms granularity"
    verdict = "agrees" if ok else _differs(n["per_cut"], lowest, mean)
    rows = [Row(claim, lab, verdict, ok)]
    mp = run_named(results, "mptcp")
    if mp is not None:
        numbers["mptcp"] = m = figures(topo, k, mp)
        rows.append(
            compared(
                "T0-T1 links down one per second: Linux MPTCP, a subflow per plane",
                f"lowest 200 ms bin {pct(m['lowest_bin_fraction'])} of before, mean "
                f"{pct(m['mean_fraction'])}, longest gap at a cut {ms(m['longest_gap_s'])}",
                f"MPTCP's lowest bin {pct(m['lowest_bin_fraction'])} and mean "
                f"{pct(m['mean_fraction'])}, MRC's {pct(lowest)} and {pct(mean)}",
            )
        )
    return Findings(tuple(rows), numbers)


def _differs(steps: Sequence[dict[str, Any]], lowest: float, mean: float | None) -> str:
    text = (
        f"differs: a 200 ms bin fell to {pct(lowest)} of before, the mean to {pct(mean)} "
        f"(minimal: >= {pct(LOW_OK)} and >= {pct(MEAN_OK)})"
    )
    broke = next(
        (i for i, s in enumerate(steps) if all((x["fraction"] or 0) < 0.5 for x in steps[i:])),
        None,
    )
    if broke is not None:
        s = steps[broke]
        text += (
            f"; it held through {broke} cuts and fell to {pct(s['fraction'])} after cut "
            f"{broke + 1}, with {s['fewest_paths']} path(s) left in a plane"
        )
    return text


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    res = run_named(results, "mrc") or results[0]
    marks = [replace(f, t_end=f.t_start) for f in res.faults if f.kind == "cut"]
    run_timeline(
        path,
        res,
        bin_s=BIN_S,
        title=f"{len(marks)} T0-T1 links cut, one per {k.every_s:g} s: goodput in 200 ms "
        "bins (Fig. 9c at lab scale)",
        fault_labels=False,
        faults=marks,
        beside=[r for r in results if r.run.name != "mrc"],
    )


EXPERIMENT = Experiment(
    name="cascade",
    code="casc",
    title="T0-T1 links down one per second (Fig. 9c)",
    paper="Fig. 9c: twenty T0-T1 links taken down one per second: minimal impact at 200 ms "
    "granularity.",
    fabric=Fabric(preset="default", rate_bps=25_000_000),
    full=Knobs(),
    quick=Knobs(first_at=1.0, every_s=0.3, links=8, tail_s=1.5),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
