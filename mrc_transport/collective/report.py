"""A step loop's files: the JSON document, the timeline and the CDF.

The JSON is for scripts: ``verified`` is true only when every element of every rank's
result in every step was the expected one; ``steps`` holds each step's start (seconds
since the first step), time, wrong elements and the faults in effect during it;
``summary`` the tail (collective/steps.py); ``faults`` the lab's log as windows,
``schedule`` what was played and what was not; ``machine`` the CPUs over the loop
(harness/machine.py: one process serves every rank, so a busy machine shows in the
figures).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from mrc_transport.collective.figures import Series, cdf_png, timeline_png
from mrc_transport.collective.links import Placement
from mrc_transport.collective.steploop import LoopConfig, LoopResult
from mrc_transport.collective.steps import StepSummary, overlapping
from mrc_transport.harness.machine import machine_state
from mrc_transport.harness.report import fault_json, played_json, write_json

LOOP_VERSION = 1


def loop_document(
    cfg: LoopConfig, where: Placement, res: LoopResult, summary: StepSummary
) -> dict[str, Any]:
    t0 = res.t_origin
    return {
        "version": LOOP_VERSION,
        "collective": cfg.alg.name,
        "size": cfg.size,
        "dtype": cfg.dtype,
        "transport": cfg.transport,
        "lab": where.lab,
        "hosts": list(where.hosts),
        "collide": cfg.collide,
        "verified": summary.wrong == 0 and bool(res.steps),
        "t_origin_mono": t0,
        "warmup_s": [round(s, 4) for s in res.warmup_s],
        "steps": [
            {
                "index": s.index,
                "t_start": round(s.t_start - t0, 4),
                "seconds": round(s.seconds, 4),
                "wrong": s.wrong,
                "faults": [f"{f.kind} {f.target}" for f in overlapping(s, res.faults)],
            }
            for s in res.steps
        ],
        "summary": summary_json(summary),
        "bindings": res.bindings,
        "schedule": {
            "played": played_json(res.played, t0),
            "not_played": [s.describe() for s in res.unplayed],
            "undone_at_end": res.undone,
        },
        "faults": [fault_json(f, t0) for f in res.faults],
        "machine": {**machine_state(), "cpu": res.cpu.to_dict() if res.cpu else None},
    }


def summary_json(s: StepSummary) -> dict[str, Any]:
    return {
        "all": asdict(s.all),
        "fault_free": asdict(s.fault_free) if s.fault_free else None,
        "during_faults": asdict(s.faulted) if s.faulted else None,
        "reference_s": s.reference_s,
        "slowdown_p99": round(s.slowdown_p99, 4),
        "slowdown_max": round(s.slowdown_max, 4),
        "ideal_s": s.ideal_s,
        "wrong": s.wrong,
        "per_fault": [
            {
                "kind": p.fault.kind,
                "target": p.fault.target,
                "steps": p.steps,
                "longest_s": p.longest_s,
            }
            for p in s.per_fault
        ],
    }


def series(cfg: LoopConfig, res: LoopResult, summary: StepSummary) -> Series:
    return Series(cfg.transport, res.steps, res.faults, res.t_origin, summary.reference_s)


def write_loop(
    out: Path, cfg: LoopConfig, where: Placement, res: LoopResult, summary: StepSummary
) -> list[Path]:
    """steps.json, steps-timeline.png and steps-cdf.png under ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "steps.json", out / "steps-timeline.png", out / "steps-cdf.png"]
    write_json(paths[0], loop_document(cfg, where, res, summary))
    what = f"{cfg.alg.name} of {cfg.size} B over {len(where.hosts)} ranks, {cfg.transport}"
    one = [series(cfg, res, summary)]
    timeline_png(paths[1], one, f"Step times: {what}")
    cdf_png(paths[2], one, f"Step-time CDF: {what}")
    return paths
