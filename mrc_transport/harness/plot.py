"""PNG figures of the demos and experiments (matplotlib, Agg backend: no display needed),
drawn for a projector: large fonts, the legend below the plot.

- timeline: goodput of every MRC and baseline flow over time, each fault a shaded span with
  its label: the picture of the paper's failover claim (mrc-protocol-notes.md, "Failure
  behaviour reported in production").
- collisions: per-pair throughput, ECMP (and MPTCP) versus MRC, with min/max and Jain's
  index in the title: the paper's two-rack permutation ("Headline comparisons").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrc_transport.harness.baselines import LABELS
from mrc_transport.harness.fairness import fairness
from mrc_transport.harness.summary import fault_label
from mrc_transport.harness.timeline import FaultWindow, Goodput

MRC_COLOURS = ("#1f77b4", "#17becf", "#2ca02c", "#9467bd")
TCP_COLOURS = ("#d62728", "#ff7f0e", "#8c564b", "#e377c2")
COLOURS = {"mrc": "#1f77b4", "tcp": "#d62728", "tcp-rehash": "#ff7f0e", "mptcp": "#9467bd"}
"""Each kind's colour, as in the live view (demo/live.py)."""
FAULT_COLOURS = {"cut": "#f4a6a6", "fail": "#c5a3e0", "degrade": "#f6d28b", "flap": "#a6cdf4"}
DRAW_S = 0.1
"""The drawn line is the mean goodput over this long around each bin (centred): a receiver
hands over a backlog in one 10 ms bin after a stall, which drawn as it is reads as a rate
several times the port's. The stall figures keep the fine bins."""
FONT: dict[str, Any] = {
    "font.size": 13,
    "axes.titlesize": 15,
    "axes.labelsize": 14,
    "legend.fontsize": 13,
}
"""Readable on a projector at the figure's size."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with fonts a room can read."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    rc: Any = plt.rcParams  # typed by its literal keys, which FONT's dict is not
    rc.update(FONT)
    return plt


def _line_colour(kind: str, counters: dict[str, int]) -> str:
    """The kind's colour for its first line, then its palette's next for more."""
    n = counters.get(kind, 0)
    counters[kind] = n + 1
    if n == 0 and kind in COLOURS:
        return COLOURS[kind]
    palette = MRC_COLOURS if kind == "mrc" else TCP_COLOURS
    return palette[n % len(palette)]


PANELS_UP_TO = 6
"""Up to this many flows each get a panel of their own (stacked, one time axis): on a
projector four lines on one axis are a tangle. More share one axis."""


@dataclass(frozen=True)
class _Line:
    label: str
    colour: str
    xs: list[float]
    ys: list[float]


def _lines(
    series: Mapping[str, Goodput],
    kinds: Mapping[str, str],
    t_origin: float,
    legend: Mapping[str, str] | None,
    draw_s: float,
) -> list[_Line]:
    """Each flow's drawn line, MRC's first: the mean over draw_s around each bin."""
    counters: dict[str, int] = {}
    out = []
    for flow in sorted(series, key=lambda f: (kinds.get(f, "tcp") != "mrc", f)):
        g = series[flow]
        kind = kinds.get(flow, "tcp")
        name = LABELS.get(kind, kind)
        out.append(
            _Line(
                (legend or {}).get(flow, name if flow == kind else f"{flow} ({name})"),
                _line_colour(kind, counters),
                [t - t_origin + g.bin_s / 2 for t in g.times()],
                [v / 1e6 for v in centred_mean(g.bps, max(1, round(draw_s / g.bin_s)))],
            )
        )
    return out


def timeline_png(
    path: str | Path,
    series: Mapping[str, Goodput],
    kinds: Mapping[str, str],
    faults: Sequence[FaultWindow],
    t_origin: float,
    *,
    title: str = "Goodput while the fabric breaks: MRC and its baselines",
    fault_labels: bool = True,
    legend: Mapping[str, str] | None = None,
    draw_s: float = DRAW_S,
) -> None:
    """Goodput of every flow (Mbit/s against seconds since t_origin), each in a panel of
    its own named above it (more than PANELS_UP_TO: one axis, the legend below it), the
    faults shaded in every panel and named in a strip above them (``fault_labels`` False:
    shaded only, for many faults; a flap's cycles named once). The line is the mean over
    ``draw_s`` around each bin; ``legend`` names a flow (default: its kind's name, and its
    id when that differs)."""
    plt = pyplot()
    lines = _lines(series, kinds, t_origin, legend, draw_s)
    panels = len(lines) if 1 <= len(lines) <= PANELS_UP_TO else 1
    strip = 1 if fault_labels and faults else 0
    fig, grid = plt.subplots(
        strip + panels, 1, figsize=(13, 1.4 + 1.1 * strip + 2.0 * panels), dpi=110,
        sharex=True, squeeze=False, gridspec_kw={"height_ratios": [0.8] * strip + [1] * panels},
    )  # fmt: skip
    axes = [row[0] for row in grid]
    top = max((_percentile(ln.ys, 0.995) for ln in lines), default=0.0)
    ylim = top * 1.15 if top > 0 else 1.0
    for i, ax in enumerate(axes[strip:]):
        for ln in [lines[i]] if panels > 1 else lines:
            ax.plot(ln.xs, ln.ys, color=ln.colour, linewidth=1.8, label=ln.label)
        shade_faults(ax, faults, t_origin)
        ax.set_ylim(0, ylim)
        ax.grid(True, alpha=0.3)
        if panels > 1:
            ax.set_title(lines[i].label, loc="left", fontsize=14, fontweight="bold",
                         color=lines[i].colour)  # fmt: skip
    if strip:
        fault_strip(axes[0], faults, t_origin)
    axes[-1].set_xlabel("seconds since the transfers started")
    bin_s = next(iter(series.values())).bin_s if series else 0.01
    mean = f"mean over {draw_s * 1000:g} ms" if draw_s > bin_s else f"{bin_s * 1000:g} ms bins"
    fig.supylabel(f"goodput, Mbit/s ({mean})", fontsize=14)
    fig.suptitle(title, fontsize=16)
    if panels == 1 and len(lines) > 1:
        axes[-1].legend(
            loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=min(len(lines), 6),
            frameon=False,
        )  # fmt: skip
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def _groups(faults: Sequence[FaultWindow]) -> list[tuple[FaultWindow, int]]:
    """Faults to label: one per fault, a flap's cycles once (its first, with the count)."""
    out: list[tuple[FaultWindow, int]] = []
    for f in sorted(faults, key=lambda w: w.t_start):
        last = out[-1][0] if out else None
        if (
            f.kind == "flap"
            and last is not None
            and last.kind == "flap"
            and last.target == f.target
        ):
            out[-1] = (last, out[-1][1] + 1)
        else:
            out.append((f, 1))
    return out


def _label(f: FaultWindow, count: int) -> str:
    what = f"flap x{count}" if f.kind == "flap" else fault_label(f.kind, f.action)
    return f" {what}\n {f.target}"


LEVELS = (0.95, 0.62, 0.29)
"""Heights of the fault names in their strip, top first: a name goes to the highest one
whose previous name it clears."""
CHAR_OF_AXIS = 0.0085
"""A name's character's width as a share of the time axis (11 pt on the 13-inch figure)."""


def _label_levels(labels: Sequence[tuple[float, str]], span: float) -> list[float]:
    """For names at (x, text), a height each so that names on one height do not overlap
    (the highest free one; the least crowded when none is)."""
    ends = [-float("inf")] * len(LEVELS)
    out = []
    for x, text in labels:
        width = max(len(line) for line in text.splitlines()) * CHAR_OF_AXIS * span
        free = [k for k, end in enumerate(ends) if end <= x]
        k = free[0] if free else min(range(len(LEVELS)), key=lambda j: ends[j])
        ends[k] = x + width
        out.append(LEVELS[k])
    return out


def shade_faults(ax: Any, faults: Sequence[FaultWindow], t_origin: float) -> None:
    """Each fault a shaded span."""
    for f in faults:
        a, b = f.t_start - t_origin, f.t_end - t_origin
        ax.axvspan(
            a, max(b, a + 0.01), color=FAULT_COLOURS.get(f.kind, "#dddddd"), alpha=0.45, linewidth=0
        )


def fault_strip(ax: Any, faults: Sequence[FaultWindow], t_origin: float) -> None:
    """The faults' spans and names above the panels, a flap's cycles named once."""
    shade_faults(ax, faults, t_origin)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    texts = [(f.t_start - t_origin, _label(f, count)) for f, count in _groups(faults)]
    lo, hi = ax.get_xlim()
    for (x, text), level in zip(texts, _label_levels(texts, hi - lo), strict=True):
        ax.text(x, level, text, fontsize=11, va="top", ha="left")


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def centred_mean(values: Sequence[float], n: int) -> list[float]:
    """Each value replaced by the mean of the n values around it (fewer at the ends)."""
    if n <= 1:
        return list(values)
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    half = n // 2
    out = []
    for i in range(len(values)):
        lo, hi = max(0, i - half), min(len(values), i - half + n)
        out.append((prefix[hi] - prefix[lo]) / (hi - lo))
    return out


def grouped_bars_png(
    path: str | Path,
    groups: Sequence[str],
    bars: Mapping[str, Sequence[float]],
    colours: Sequence[str],
    *,
    title: str,
    ylabel: str,
    line: tuple[float, str] | None = None,
    top: float | None = None,
) -> None:
    """Per group (x axis) one bar of each series in ``bars`` (label -> a value per group),
    side by side; ``line`` a dashed reference (value, label); ``top`` the y axis' end
    (default: 1.3 x the largest value or the line)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 3), 4.6), dpi=110)
    width = 0.8 / max(1, len(bars))
    xs = list(range(len(groups)))
    for i, (label, values) in enumerate(bars.items()):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar(
            [x + offset for x in xs], values, width, label=label, color=colours[i % len(colours)]
        )
    if line is not None:
        ax.axhline(line[0], color="black", linestyle="--", linewidth=1, label=line[1])
    ax.set_xticks(xs)
    ax.set_xticklabels(groups, rotation=30 if len(groups) > 6 else 0, fontsize=11)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=13)
    if top is None:
        values = [v for vs in bars.values() for v in vs] + ([line[0]] if line else [])
        top = max(values, default=1.0) * 1.3
    ax.set_ylim(0, top or 1.0)
    ax.legend(loc="upper right", fontsize=11, ncols=3)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def collisions_png(
    path: str | Path,
    ecmp_bps: Mapping[str, float],
    mrc_bps: Mapping[str, float],
    line_rate_bps: float,
    *,
    title: str = "Two-rack permutation: per-flow throughput",
    mptcp_bps: Mapping[str, float] | None = None,
) -> None:
    """Grouped bars per host pair, ECMP (and MPTCP) next to MRC, the line rate dashed; the
    title carries each run's min/max and Jain's index."""
    runs = {
        "TCP over ECMP (single path)": (ecmp_bps, COLOURS["tcp"]),
        "MPTCP": (mptcp_bps or {}, COLOURS["mptcp"]),
        "MRC (sprayed)": (mrc_bps, COLOURS["mrc"]),
    }
    runs = {k: v for k, v in runs.items() if v[0]}
    pairs = sorted({p for bps, _ in runs.values() for p in bps})
    words = []
    for label, (bps, _) in runs.items():
        f = fairness(list(bps.values()))
        words.append(f"{label.split(' (')[0]}: min/max {f.min_over_max:.2f}, Jain {f.jain:.3f}")
    grouped_bars_png(
        path,
        pairs,
        {label: [bps.get(p, 0.0) / 1e6 for p in pairs] for label, (bps, _) in runs.items()},
        [colour for _, colour in runs.values()],
        title=f"{title}\n" + "    ".join(words),
        ylabel="throughput, Mbit/s",
        line=(line_rate_bps / 1e6, "line rate"),
    )
