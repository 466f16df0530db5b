"""`flapping` (Fig. 9b): half of one host's links flap for a while under an MRC transfer;
goodput over time and the time back to full rate after they return.

Paper (mrc-protocol-notes.md, "Testbed figures (Fig. 9)", "Failure behaviour reported in
production"): with four of the eight links of one host flapping, the transfer drops to
about half the bandwidth within ~5 s and is back to full ~17 s after the links return; in
production, four links of one NIC flapping for a minute cost 25% of the throughput for
that minute and no connection failed.

Lab: one MRC connection between racks; the receiving host's links to its T0s in half the
planes (2 of 4 in the default fabric) flap together: down half a period, up half a
period, ``count`` times (labs/faults.py ``flap_many``: a hard cut of the host's end, so
its port goes down). The paper's figure flaps a host's own links, and so does this: half
of a T0's uplinks flapping would leave one host's capacity whole (a T0 has as many
uplinks as the plane has T1s, each at the rate of a host port).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.faultkinds import Flap
from labs.topology import Topology
from mrc_transport.harness.patterns import pick_hosts
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import goodput, longest_stall
from mrc_transport.repro.figures import run_timeline
from mrc_transport.repro.measure import back_to, gap, ms, pct, rate, ratio, secs, warm
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

BIN_S = 0.1
"""Goodput bins for "back to full" (5 of them must hold 90% of before)."""
PAPER_BACK_S = 17.0
STALL_S = 1.0
"""A delivery gap this long with half the links up is a stall, not "about half"."""


@dataclass(frozen=True, slots=True)
class Knobs:
    flap_at: float = 3.0
    """Seconds into the transfer the links start flapping."""
    period: float = 4.0
    """One down + up cycle, seconds (production saw up to ~14 flaps a minute). The up half
    starts with a restore, which re-applies the host's addresses and routes and takes
    seconds on a busy machine, so a shorter period leaves the links hardly ever up."""
    count: int = 2
    """Cycles."""
    tail_s: float = 4.0
    """Transfer after the links are back for good."""
    settle_s: float = 1.0
    """Skipped at the start before the healthy goodput counts."""


def flapping_links(topo: Topology) -> list[str]:
    """The receiving host's links to its T0s in the first half of the planes."""
    _src, dst = pick_hosts(topo, None, None)
    rack = topo.rack_of(dst)
    return [f"{dst}:{topo.t0(plane, rack)}" for plane in range(topo.planes // 2)]


def check(topo: Topology, k: Knobs) -> None:
    pick_hosts(topo, None, None)
    need(topo.planes >= 2, "half of a host's links flapping needs a fabric with 2+ planes")
    need(k.count >= 1 and k.period > 0, "a flap needs count >= 1 and period > 0")


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    links = "+".join(flapping_links(topo))  # in step: labs/faultkinds.py
    steps = [Step(k.flap_at, Flap(links, k.period, k.count))]
    mrc = one_mrc_flow(topo, k.flap_at + k.period * k.count + k.tail_s, steps)
    return (mrc, as_baseline(mrc, "mptcp"))


def figures(topo: Topology, k: Knobs, res: RunResult) -> dict[str, Any]:
    """One run's flow while the links flapped: its goodput against before, its longest
    gap, and how soon it was back to full after they returned."""
    name = res.run.flows[0].name
    links = flapping_links(topo)
    flaps = [f for f in res.faults if f.target in links]
    t_a = min((f.t_start for f in flaps), default=res.t_origin + k.flap_at)
    t_b = max((f.t_end for f in flaps), default=t_a + k.period * k.count)
    before = rate(res.deliveries, [name], warm(res, [name], k.settle_s), t_a)
    during = rate(res.deliveries, [name], t_a, t_b)
    series = goodput(res.deliveries, res.t_origin, res.t_stop, BIN_S)
    times = sorted(d.t_mono for d in res.deliveries)
    stall = longest_stall(times, t_a, t_b, res.t_origin, res.t_stop)
    return {
        "baseline_bps": before,
        "flapping_bps": during,
        "flapping_fraction": ratio(during, before),
        "longest_gap_s": None if stall is None else stall.duration,
        "longest_gap_open": bool(stall and stall.open_ended),
        "back_to_full_s": back_to(series, t_b, 0.9 * before, res.t_stop),
        "flapping_s": [round(t_a - res.t_origin, 3), round(t_b - res.t_origin, 3)],
    }


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    res = run_named(results, "mrc") or results[0]
    links = flapping_links(topo)
    n = figures(topo, k, res)
    numbers: dict[str, Any] = {
        "links": links,
        "of_host_links": topo.planes,
        "cycles": k.count,
        "period_s": k.period,
        **n,
    }
    frac, gap_s, back = n["flapping_fraction"], n["longest_gap_s"], n["back_to_full_s"]
    stalled = gap_s is not None and gap_s >= STALL_S
    half = frac is not None and 0.35 <= frac <= 0.65 and not stalled
    lab = (
        f"{len(links)} of {topo.planes} links of {res.run.flows[0].dst} flapping "
        f"({k.count} x {k.period:g} s): {pct(frac)} of before, longest gap "
        f"{gap(gap_s, n['longest_gap_open'])}"
    )
    rows = [
        Row(
            "Four of eight links of one host flapping: about half the bandwidth within ~5 s",
            lab,
            "agrees" if half else _differs(frac, gap_s if stalled else None),
            half,
        ),
        Row(
            "Back to full rate ~17 s after the links return",
            f"back to 90% of before {secs(back)} after the last restore",
            f"agrees, sooner: back in {secs(back)} (the paper: ~17 s)"
            if back is not None and back <= PAPER_BACK_S
            else "not within the run's tail"
            if back is None
            else f"differs: back after {secs(back)}",
            back is not None and back <= PAPER_BACK_S,
        ),
    ]
    mp = run_named(results, "mptcp")
    if mp is not None:
        numbers["mptcp"] = m = figures(topo, k, mp)
        rows.append(
            compared(
                "Half of one host's links flapping: Linux MPTCP, a subflow per plane",
                f"{pct(m['flapping_fraction'])} of before, longest gap "
                f"{gap(m['longest_gap_s'], m['longest_gap_open'])}; back to 90% "
                f"{secs(m['back_to_full_s'])} after the last restore",
                f"MPTCP kept {pct(m['flapping_fraction'])} of before, MRC {pct(frac)}; "
                f"longest gaps {gap(m['longest_gap_s'], m['longest_gap_open'])} and "
                f"{gap(gap_s, n['longest_gap_open'])}",
            )
        )
    return Findings(tuple(rows), numbers)


def _differs(frac: float | None, stall_s: float | None) -> str:
    if stall_s is not None:
        return (
            f"differs: {pct(frac)} of before on average, but nothing was delivered for "
            f"{ms(stall_s)} while half the links were still up"
        )
    if frac is not None and frac > 0.65:
        return (
            f"differs: {pct(frac)} of before; the links are up for part of each cycle and "
            "MRC uses them while they are"
        )
    return f"differs: {pct(frac)} of before, less than the links left can carry"


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    run_timeline(
        path,
        run_named(results, "mrc") or results[0],
        bin_s=BIN_S,
        title="Half of the receiver's links flapping (Fig. 9b at lab scale)",
        fault_labels=False,
        beside=[r for r in results if r.run.name != "mrc"],
    )


EXPERIMENT = Experiment(
    name="flapping",
    code="flap",
    title="half of one host's links flapping (Fig. 9b)",
    paper="Fig. 9b: four of the eight links of one host flap; about half the bandwidth within "
    "~5 s, back to full ~17 s after the links return. In production, four links of one NIC "
    "flapping for a minute: -25% throughput for that minute, no connection failed.",
    fabric=Fabric(preset="default", rate_bps=25_000_000),
    full=Knobs(),
    quick=Knobs(flap_at=1.5, period=2.0, count=1, tail_s=2.0, settle_s=0.5),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
