"""The experiments' PNGs, drawn by harness/plot.py: goodput timelines with the faults shaded,
and grouped bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from mrc_transport.harness.plot import timeline_png
from mrc_transport.harness.timeline import Delivery, FaultWindow, Goodput, goodput
from mrc_transport.repro.spec import RunResult


def series_of(
    deliveries: Sequence[Delivery], t0: float, t1: float, bin_s: float, origin: float
) -> Goodput:
    """One flow's goodput in bins, its time axis in seconds since ``origin``."""
    g = goodput(deliveries, t0, t1, bin_s)
    return replace(g, t0=g.t0 - origin)


def shifted(faults: Sequence[FaultWindow], origin: float) -> list[FaultWindow]:
    return [replace(f, t_start=f.t_start - origin, t_end=f.t_end - origin) for f in faults]


def run_timeline(
    path: Path,
    res: RunResult,
    *,
    bin_s: float,
    title: str,
    flows: Mapping[str, Sequence[str]] | None = None,
    fault_labels: bool = True,
    faults: Sequence[FaultWindow] | None = None,
    beside: Sequence[RunResult] = (),
) -> None:
    """A run's goodput over time, the faults shaded. ``flows`` maps a line's label to the
    flows it sums (default: one line per flow); ``beside``: runs of the same plan with
    another transport (MPTCP), their flows summed into one line each, against their own
    time 0."""
    series: dict[str, Goodput] = {}
    kinds: dict[str, str] = {}
    for r in (res, *beside):
        groups = flows or {f.name: [f.name] for f in r.run.flows}
        if r is not res:  # the same flows by another transport: one line, named after it
            groups = {r.run.name: [n for names in groups.values() for n in names]}
        for label, names in groups.items():
            wanted = set(names)
            mine = [d for d in r.deliveries if d.flow in wanted]
            series[label] = series_of(mine, r.t_origin, r.t_stop, bin_s, r.t_origin)
            kinds[label] = next(f.kind for f in r.run.flows if f.name in wanted)
    timeline_png(
        path,
        series,
        kinds,
        shifted(res.faults if faults is None else faults, res.t_origin),
        0.0,
        title=title,
        fault_labels=fault_labels,
    )
