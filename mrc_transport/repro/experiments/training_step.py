"""`training-step`: a training step's loop (ring all-reduce over every host, a barrier per
step) over MRC, single-path TCP and MPTCP side by side, through a link cut and a T1 that
stops forwarding: the step times' tail.

Paper (its opening; mrc-protocol-notes.md, "Failure behaviour reported in production",
"Headline comparisons"): tail latency dominates synchronous pretraining, since one slow
flow holds every GPU at the next barrier; with MRC a T0-T1 link lost has no measurable
impact and a T1 up but not forwarding is a brief dip, no job failure; one MRC connection
beats single-path RoCE on ring all-reduce.

Lab: every host a rank of one process (collective/steploop.py); each step an all-reduce
of ``size`` bytes, every result checked. After the warm-up, whose port counters find the
T0-T1 link that carried the most of that transport's bytes (``@tcp-link``: over TCP a
link one of the ring's flows hashed onto; over MRC, which sprays, any), that link is cut
at ``cut_at`` for ``cut_s`` (gray: it drops everything and its carrier stays up, so no
router takes it out of its ECMP routes), then its T1 stops forwarding at ``fail_at`` for
``fail_s``.
A step is fault-free when no fault was in effect during it; the slowdown is the tail over
the fault-free median. The same loop again over TCP pinned to its ECMP path (the
stand-in for single-path RoCE) and over MPTCP (a subflow per plane; not in the paper).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.faultkinds import Cut, Fail, Restore, Unfail
from labs.topology import Topology
from mrc_transport.collective import bandwidth
from mrc_transport.collective.algorithms import ALGORITHMS
from mrc_transport.collective.figures import Series, cdf_png, timeline_png
from mrc_transport.collective.groups import default_procs
from mrc_transport.collective.steploop import LoopConfig
from mrc_transport.collective.steps import (
    StepSummary,
    StepTime,
    overlapping,
    percentile,
    summarize,
)
from mrc_transport.harness.baselines import LABELS
from mrc_transport.harness.linkload import PLACEHOLDERS
from mrc_transport.harness.machine import CpuUse, process_bound
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import FaultWindow
from mrc_transport.repro.measure import first_fault
from mrc_transport.repro.spec import (
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    StepLoop,
    compared,
    need,
    run_named,
)

TARGET = 1.2
"""MRC's p99 step time through a link cut, at most this times its fault-free p50 (issue 37)."""
BRIEF_S = 1.0
"""A dip is brief when the worst step took less than this longer than the median (the
t1-blackhole experiment's bound)."""
TRANSPORTS = ("mrc", "tcp", "mptcp")


@dataclass(frozen=True, slots=True)
class Knobs:
    size: int = 4 << 20
    """Bytes each rank all-reduces per step (0.147 s at best at default's rates)."""
    warmup: int = 2
    """Untimed steps (they find the busiest link)."""
    cut_at: float = 3.0
    """Seconds after the first timed step the link is cut (gray)."""
    cut_s: float = 3.0
    """How long it stays cut."""
    fail_at: float = 9.0
    """Seconds after the first timed step its T1 stops forwarding."""
    fail_s: float = 3.0
    """How long the T1 forwards nothing."""
    tail_s: float = 3.0
    """Steps after the T1 forwards again."""
    min_steps: int = 10
    """Timed steps at the least (the loop runs until the tail's end, however many it takes)."""


def check(topo: Topology, k: Knobs) -> None:
    need(topo.racks >= 2, "a T0-T1 link carries a ring's traffic only between racks: 2+ racks")
    need(topo.t1_per_plane >= 2 or topo.planes >= 2, "one T1 must not be the only path")
    need(k.size % (4 * len(topo.hosts)) == 0, f"size {k.size} must split into 4-byte chunks")
    need(k.warmup >= 1, "the warm-up finds the link to cut: 1 step or more")


def schedule(k: Knobs) -> tuple[Step, ...]:
    link, t1, _ = PLACEHOLDERS
    return (
        Step(k.cut_at, Cut(link, "gray")),
        Step(k.cut_at + k.cut_s, Restore(link)),
        Step(k.fail_at, Fail(t1)),
        Step(k.fail_at + k.fail_s, Unfail(t1)),
    )


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    steps = schedule(k)
    until = k.fail_at + k.fail_s + k.tail_s
    runs = []
    for kind in TRANSPORTS:
        cfg = LoopConfig(
            ALGORITHMS["allreduce"], k.size, k.min_steps, k.warmup, transport=kind,
            schedule=steps, until_s=until, procs=default_procs(len(topo.hosts)),
        )  # fmt: skip
        runs.append(Run(kind, (), until, steps, StepLoop(cfg, topo.hosts)))
    return tuple(runs)


def _summary(res: RunResult) -> StepSummary:
    assert res.loop is not None, "a training-step run is a loop"
    return summarize(res.loop.steps, res.faults, res.loop.ideal_s)


def _during(res: RunResult, fault: FaultWindow) -> list[StepTime]:
    assert res.loop is not None
    return [s for s in res.loop.steps if overlapping(s, [fault])]


def _phase(res: RunResult, kind: str, summary: StepSummary) -> dict[str, Any]:
    """The steps one fault touched: how many, their p99 and longest, against the
    fault-free median."""
    fault = first_fault(res, kind)
    touched = _during(res, fault)
    p99 = percentile([s.seconds for s in touched], 0.99) if touched else None
    longest = max((s.seconds for s in touched), default=None)
    ref = summary.reference_s
    return {
        "target": fault.target,
        "steps": len(touched),
        "p99_s": p99,
        "longest_s": longest,
        "slowdown_p99": None if p99 is None else p99 / ref,
        "extra_s": None if longest is None else longest - ref,
    }


def _numbers(topo: Topology, k: Knobs, res: RunResult) -> dict[str, Any]:
    assert res.loop is not None
    s = _summary(res)
    n = len(topo.hosts)
    alg = ALGORITHMS["allreduce"]
    busbw = bandwidth.busbw(alg, n, bandwidth.algbw(k.size, s.reference_s))
    fabric = bandwidth.Fabric.of(topo, topo.hosts)
    return {
        "steps": len(res.loop.steps),
        "fault_free_p50_s": s.reference_s,
        "fault_free_p99_s": s.fault_free.p99 if s.fault_free else None,
        "p99_s": s.all.p99,
        "max_s": s.all.max,
        "busbw_fault_free": busbw,
        "ideal_busbw": bandwidth.ideal_busbw(alg, k.size, n, fabric),
        "cut": _phase(res, "cut", s),
        "t1": _phase(res, "fail", s),
        "wrong": s.wrong,
        "process_bound": res.cpu is not None and process_bound(res.cpu),
        "process_core_share": None if res.cpu is None else _busiest(res.cpu),
    }


def _busiest(cpu: CpuUse) -> float:
    """The busiest rank process's share of one core."""
    return (cpu.own if cpu.busiest is None else cpu.busiest) * (os.cpu_count() or 1)


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    runs = {r.run.name: _numbers(topo, k, r) for r in results}
    mrc = runs["mrc"]
    rows = [_cut_row(mrc), _t1_row(mrc, all(r.verified.get(r.run.name) for r in results))]
    if "tcp" in runs:
        rows += [_ring_row(mrc, runs["tcp"]), _tail_row(mrc, runs["tcp"])]
    if "mptcp" in runs:
        rows.append(_mptcp_row(mrc, runs["mptcp"]))
    return Findings(tuple(rows), runs)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} s"


def _cpu(n: dict[str, Any]) -> str:
    share = n["process_core_share"]
    if share is None:
        return ""
    return f"; the busiest rank process had {100 * share:.0f}% of a core" + (
        " (CPU-bound)" if n["process_bound"] else ""
    )


def _cut_row(n: dict[str, Any]) -> Row:
    c = n["cut"]
    ok = c["slowdown_p99"] is not None and c["slowdown_p99"] <= TARGET
    free = ratio_of(n["fault_free_p99_s"], n["fault_free_p50_s"])
    return Row(
        "A T0-T1 link lost: no measurable impact on the job",
        f"MRC's {c['steps']} steps while {c['target']} was cut: p99 {_s(c['p99_s'])} = "
        f"{_x(c['slowdown_p99'])} the fault-free p50 {_s(n['fault_free_p50_s'])} (the "
        f"fault-free steps' own p99: {_x(free)}){_cpu(n)}",
        f"agrees (at most {TARGET:g}x)" if ok else f"differs: above {TARGET:g}x the median",
        ok,
    )


def _t1_row(n: dict[str, Any], verified: bool) -> Row:
    t = n["t1"]
    brief = t["extra_s"] is not None and t["extra_s"] < BRIEF_S
    return Row(
        "A T1 up but not forwarding: a brief dip, no job failure",
        f"MRC's {t['steps']} steps while {t['target']} forwarded nothing: the longest "
        f"{_s(t['longest_s'])} ({_x(ratio_of(t['longest_s'], n['fault_free_p50_s']))}); "
        + ("every step's result verified" if verified else "NOT verified"),
        "agrees" if brief and verified else "differs: a long step or a wrong result",
        brief and verified,
    )


def ratio_of(a: float | None, b: float) -> float | None:
    return None if a is None or b <= 0 else a / b


def _ring_row(mrc: dict[str, Any], tcp: dict[str, Any]) -> Row:
    gain = ratio_of(mrc["busbw_fault_free"], tcp["busbw_fault_free"] or 0.0)
    ok = gain is not None and gain > 1.0
    return Row(
        "Ring all-reduce: one MRC connection beats single-path RoCE",
        f"fault-free busbw MRC {mrc['busbw_fault_free']:.4f} GB/s, TCP pinned to its path "
        f"{tcp['busbw_fault_free']:.4f} GB/s (ideal {mrc['ideal_busbw']:.4f})",
        f"agrees: {_x(gain)} TCP's" if ok else f"differs: {_x(gain)} TCP's",
        ok,
    )


def _tail_row(mrc: dict[str, Any], tcp: dict[str, Any]) -> Row:
    t, m = tcp["cut"], mrc["cut"]
    tcp_tail = ratio_of(t["longest_s"], tcp["fault_free_p50_s"])
    mrc_tail = ratio_of(m["longest_s"], mrc["fault_free_p50_s"])
    ok = tcp_tail is not None and mrc_tail is not None and tcp_tail > 2 * mrc_tail
    return Row(
        "Tail latency dominates synchronous training: one slow flow holds every rank",
        f"through the cut, TCP's longest step {_s(t['longest_s'])} = {_x(tcp_tail)} its "
        f"median (the ring's flow on {t['target']} stalled, every rank waited); MRC's "
        f"{_x(mrc_tail)}",
        "agrees: single-path TCP's step is its stalled flow's"
        if ok
        else "differs: "
        "TCP's steps did not stall much longer than MRC's (its flows missed the cut?)",
        ok,
    )


def _mptcp_row(mrc: dict[str, Any], mp: dict[str, Any]) -> Row:
    return compared(
        "The same steps over Linux MPTCP, a subflow per plane",
        f"cut: p99 {_x(mp['cut']['slowdown_p99'])} its fault-free p50 "
        f"{_s(mp['fault_free_p50_s'])}; T1 forwarding nothing: longest "
        f"{_x(ratio_of(mp['t1']['longest_s'], mp['fault_free_p50_s']))}",
        f"MPTCP's cut tail {_x(mp['cut']['slowdown_p99'])}, MRC's {_x(mrc['cut']['slowdown_p99'])}",
    )


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    """NAME.png: the step times over each loop; NAME-cdf.png: their CDFs, each over its
    fault-free median."""
    series = []
    for name in TRANSPORTS:
        res = run_named(results, name)
        if res is not None and res.loop is not None:
            s = _summary(res)
            series.append(Series(name, res.loop.steps, res.faults, res.t_origin, s.reference_s))
    names = " / ".join(LABELS[s.kind] for s in series)
    what = f"all-reduce of {k.size >> 20} MiB over {len(topo.hosts)} hosts"
    timeline_png(path, series, f"Training steps through a link cut and a dead T1: {what}")
    cdf_png(
        path.with_name(f"{path.stem}-cdf.png"), series, f"Step times, {names}: {what}",
        relative=True, target=TARGET,
    )  # fmt: skip


EXPERIMENT = Experiment(
    name="training-step",
    code="ts",
    title="a training step's all-reduce through a link cut and a dead T1",
    paper="Tail latency dominates synchronous pretraining: one slow flow holds every GPU at "
    "the barrier. With MRC a T0-T1 link lost has no measurable impact, a T1 up but not "
    "forwarding is a brief dip and no job failure; MRC beats single-path RoCE on ring "
    "all-reduce.",
    fabric=Fabric(preset="default"),
    full=Knobs(),
    quick=Knobs(
        size=1 << 20,
        warmup=2,
        cut_at=0.6,
        cut_s=0.8,
        fail_at=1.8,
        fail_s=0.8,
        tail_s=0.6,
        min_steps=5,
    ),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
