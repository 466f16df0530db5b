"""The step loop's PNGs (harness/plot.py's matplotlib, fonts for a projector): each step's
time over the loop with the faults shaded and named, and the step times' CDF with the
steps a fault touched marked, a line per transport."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mrc_transport.collective.steps import StepTime, overlapping
from mrc_transport.harness.baselines import LABELS
from mrc_transport.harness.plot import COLOURS, fault_strip, pyplot, shade_faults
from mrc_transport.harness.timeline import FaultWindow

HIT_COLOUR = "#8b0000"
"""A step a fault touched."""


@dataclass(frozen=True)
class Series:
    """One loop's steps, as a figure draws them."""

    kind: str
    """Its transport: mrc, tcp or mptcp (the colour and the name)."""
    steps: Sequence[StepTime]
    """Its timed steps."""
    faults: Sequence[FaultWindow]
    """The lab's faults during the loop."""
    t_origin: float
    """time.monotonic() of its first step: the time axis' 0."""
    reference_s: float
    """Its fault-free median step time."""

    @property
    def label(self) -> str:
        return LABELS.get(self.kind, self.kind)


def _hit(s: Series, step: StepTime) -> bool:
    return bool(overlapping(step, s.faults))


def timeline_png(path: str | Path, series: Sequence[Series], title: str) -> None:
    """Each step's time as a bar over the time it took, a panel per loop, faults shaded (and
    named above the first), the steps they touched marked, the fault-free median dashed."""
    plt = pyplot()
    strip = 1 if series and series[0].faults else 0
    heights = [0.8] * strip + [1.0] * len(series)
    fig, grid = plt.subplots(
        len(heights), 1, figsize=(13, 1.4 + 1.1 * strip + 2.2 * len(series)), dpi=110,
        sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    axes = [row[0] for row in grid]
    if strip:
        fault_strip(axes[0], series[0].faults, series[0].t_origin)
    for ax, s in zip(axes[strip:], series, strict=True):
        colour = COLOURS.get(s.kind, "#444444")
        starts = [st.t_start - s.t_origin for st in s.steps]
        ys = [st.seconds for st in s.steps]
        xs = [x + y / 2 for x, y in zip(starts, ys, strict=True)]  # each step's middle
        ax.hlines(ys, starts, [x + y for x, y in zip(starts, ys, strict=True)], color=colour,
                  linewidth=3, alpha=0.5)  # fmt: skip
        ax.plot(xs, ys, color=colour, linewidth=1, marker="o", markersize=3, label=s.label)
        hit = [(x, y) for x, y, st in zip(xs, ys, s.steps, strict=True) if _hit(s, st)]
        if hit:
            ax.scatter(*zip(*hit, strict=True), marker="x", s=40, color=HIT_COLOUR, zorder=3,
                       label="a fault in effect")  # fmt: skip
        ax.axhline(s.reference_s, color="black", linestyle="--", linewidth=1,
                   label="fault-free median")  # fmt: skip
        shade_faults(ax, s.faults, s.t_origin)
        ax.set_ylim(0, max(ys, default=1.0) * 1.15)
        ax.set_title(s.label, loc="left", fontsize=14, fontweight="bold", color=colour)
        ax.grid(True, alpha=0.3)
        # above the panel's right end, beside its title: never over a tall step
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=10, ncols=3,
                  frameon=False)  # fmt: skip
    axes[-1].set_xlabel("seconds since the first step")
    fig.supylabel("step time, s", fontsize=14)
    fig.suptitle(title, fontsize=16)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def cdf_png(
    path: str | Path, series: Sequence[Series], title: str, *, relative: bool = False,
    target: float | None = None,
) -> None:  # fmt: skip
    """The step times' CDF, a line per loop, the steps a fault touched marked; ``relative``:
    each step over its loop's fault-free median (loops of different speeds side by side),
    ``target`` a dotted line there."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    for s in series:
        scale = s.reference_s if relative and s.reference_s > 0 else 1.0
        ordered = sorted(s.steps, key=lambda st: st.seconds)
        xs = [st.seconds / scale for st in ordered]
        ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
        colour = COLOURS.get(s.kind, "#444444")
        ax.step(xs, ys, where="post", color=colour, linewidth=2, label=s.label)
        hit = [(x, y) for x, y, st in zip(xs, ys, ordered, strict=True) if _hit(s, st)]
        if hit:
            ax.scatter(*zip(*hit, strict=True), marker="x", s=40, color=HIT_COLOUR, zorder=3)
    if target is not None:
        ax.axvline(target, color="black", linestyle=":", linewidth=1.2, label=f"{target:g}x")
    if any(_hit(s, st) for s in series for st in s.steps):
        ax.scatter([], [], marker="x", color=HIT_COLOUR, label="a fault in effect")
    if relative:  # a stalled single path's step is many times the median: keep 1-2x legible
        ax.set_xscale("log")
        top = max(
            (st.seconds / (s.reference_s or 1.0) for s in series for st in s.steps), default=2.0
        )
        ticks = [t for t in (0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0) if t <= top * 1.1]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.tick_params(axis="x", which="minor", labelbottom=False)
    ax.set_xlabel("step time, x the fault-free median" if relative else "step time, s")
    ax.set_ylabel("fraction of steps")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=11)
    ax.set_title(title, fontsize=14)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
