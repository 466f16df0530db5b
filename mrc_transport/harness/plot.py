"""PNG figures of the demos and experiments (matplotlib, Agg backend: no display needed).

- timeline: goodput of every MRC and TCP flow over time in fine bins, each fault a shaded
  span with its label: the picture of the paper's failover claim (mrc-protocol-notes.md,
  "Failure behaviour reported in production").
- collisions: per-pair throughput, ECMP versus MRC, with min/max and Jain's index in the
  title: the paper's two-rack permutation ("Headline comparisons").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mrc_transport.harness.fairness import fairness
from mrc_transport.harness.timeline import FaultWindow, Goodput

MRC_COLOURS = ("#1f77b4", "#17becf", "#2ca02c", "#9467bd")
TCP_COLOURS = ("#d62728", "#ff7f0e", "#8c564b", "#e377c2")
FAULT_COLOURS = {"cut": "#f4a6a6", "fail": "#c5a3e0", "degrade": "#f6d28b", "flap": "#a6cdf4"}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def timeline_png(
    path: str | Path,
    series: Mapping[str, Goodput],
    kinds: Mapping[str, str],
    faults: Sequence[FaultWindow],
    t_origin: float,
    *,
    title: str = "Goodput while the fabric breaks: MRC versus single-path TCP",
    smooth_bins: int = 1,
    fault_labels: bool = True,
    legend: Mapping[str, str] | None = None,
) -> None:
    """One line per flow (Mbit/s against seconds since t_origin), faults shaded and labelled
    (``fault_labels`` False: shaded only, for many faults). ``smooth_bins`` > 1 plots a
    moving average over that many bins; ``legend`` names a flow's line (default: its
    kind, and its id when that differs)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 4.8), dpi=110)
    top = 0.0
    counters = {"mrc": 0, "tcp": 0}
    for flow in sorted(series, key=lambda f: (kinds.get(f, "tcp") != "mrc", f)):
        g = series[flow]
        kind = kinds.get(flow, "tcp")
        palette = MRC_COLOURS if kind == "mrc" else TCP_COLOURS
        colour = palette[counters.get(kind, 0) % len(palette)]
        counters[kind] = counters.get(kind, 0) + 1
        ys = [v / 1e6 for v in _moving_average(g.bps, smooth_bins)]
        xs = [t - t_origin for t in g.times()]
        # A receiver that drains a backlog after a stall delivers seconds of data in one
        # bin, far above the path's rate; scale the axis to the
        # 99th percentile so that one spike does not flatten the picture (it is clipped).
        top = max(top, _percentile(ys, 0.99))
        label = {"mrc": "MRC", "tcp": "TCP over ECMP"}.get(kind, kind)
        ax.step(
            xs,
            ys,
            where="post",
            color=colour,
            linewidth=1.2,
            label=(legend or {}).get(flow, label if flow == kind else f"{flow} ({label})"),
        )
    ylim = top * 1.25 if top > 0 else 1.0
    _shade(ax, faults, t_origin, ylim, fault_labels)
    ax.set_ylim(0, ylim)
    ax.set_xlabel("seconds since the transfers started")
    bin_ms = next(iter(series.values())).bin_s * 1000 if series else 0
    ax.set_ylabel(f"goodput, Mbit/s ({bin_ms:g} ms bins)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _shade(
    ax: Any, faults: Sequence[FaultWindow], t_origin: float, ylim: float, labels: bool
) -> None:
    """Each fault a shaded span, labelled unless told not to."""
    for i, f in enumerate(faults):
        a, b = f.t_start - t_origin, f.t_end - t_origin
        ax.axvspan(
            a, max(b, a + 0.01), color=FAULT_COLOURS.get(f.kind, "#dddddd"), alpha=0.45, linewidth=0
        )
        if labels:
            # Labels alternate between two heights so neighbouring faults do not overlap.
            y = ylim * (0.97 if i % 2 == 0 else 0.89)
            ax.text(a, y, f" {f.kind} {f.action}\n {f.target}", fontsize=7, va="top", ha="left")


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _moving_average(values: Sequence[float], n: int) -> list[float]:
    if n <= 1:
        return list(values)
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= n:
            acc -= values[i - n]
        out.append(acc / min(i + 1, n))
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
    ax.set_xticklabels(groups, rotation=30 if len(groups) > 6 else 0, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if top is None:
        values = [v for vs in bars.values() for v in vs] + ([line[0]] if line else [])
        top = max(values, default=1.0) * 1.3
    ax.set_ylim(0, top or 1.0)
    ax.legend(loc="upper right", fontsize=8, ncols=3)
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
) -> None:
    """Grouped bars per host pair, ECMP next to MRC, the line rate dashed; the title carries
    each run's min/max and Jain's index."""
    pairs = sorted(set(ecmp_bps) | set(mrc_bps))
    e, m = fairness(list(ecmp_bps.values())), fairness(list(mrc_bps.values()))
    grouped_bars_png(
        path,
        pairs,
        {
            "TCP over ECMP (single path)": [ecmp_bps.get(p, 0.0) / 1e6 for p in pairs],
            "MRC (sprayed)": [mrc_bps.get(p, 0.0) / 1e6 for p in pairs],
        },
        (TCP_COLOURS[0], MRC_COLOURS[0]),
        title=f"{title}\nECMP: min/max {e.min_over_max:.2f}, Jain {e.jain:.3f}    "
        f"MRC: min/max {m.min_over_max:.2f}, Jain {m.jain:.3f}",
        ylabel="throughput, Mbit/s",
        line=(line_rate_bps / 1e6, "line rate"),
    )
