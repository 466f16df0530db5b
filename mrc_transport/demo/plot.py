"""PNG figures of the demos (matplotlib, Agg backend: no display needed).

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

from mrc_transport.demo.fairness import fairness
from mrc_transport.demo.timeline import FaultWindow, Goodput

MRC_COLOURS = ("#1f77b4", "#17becf", "#2ca02c", "#9467bd")
TCP_COLOURS = ("#d62728", "#ff7f0e", "#8c564b", "#e377c2")
FAULT_COLOURS = {"cut": "#f4a6a6", "fail": "#c5a3e0", "degrade": "#f6d28b", "flap": "#a6cdf4"}


def _pyplot() -> Any:
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
) -> None:
    """One line per flow (Mbit/s against seconds since t_origin), faults shaded and labelled.
    ``smooth_bins`` > 1 plots a moving average over that many bins."""
    plt = _pyplot()
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
        # bin (measured: 1.3 Gbit/s in 10 ms on a 100 Mbit/s path); scale the axis to the
        # 99th percentile so that one spike does not flatten the picture (it is clipped).
        top = max(top, _percentile(ys, 0.99))
        label = {"mrc": "MRC", "tcp": "TCP over ECMP"}.get(kind, kind)
        ax.step(
            xs,
            ys,
            where="post",
            color=colour,
            linewidth=1.2,
            label=label if flow == kind else f"{flow} ({label})",
        )
    ylim = top * 1.25 if top > 0 else 1.0
    for i, f in enumerate(faults):
        a, b = f.t_start - t_origin, f.t_end - t_origin
        ax.axvspan(
            a, max(b, a + 0.01), color=FAULT_COLOURS.get(f.kind, "#dddddd"), alpha=0.45, linewidth=0
        )
        # Labels alternate between two heights so neighbouring faults do not overlap.
        y = ylim * (0.97 if i % 2 == 0 else 0.89)
        ax.text(a, y, f" {f.kind} {f.action}\n {f.target}", fontsize=7, va="top", ha="left")
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
    plt = _pyplot()
    pairs = sorted(set(ecmp_bps) | set(mrc_bps))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(pairs) + 3), 4.6), dpi=110)
    width = 0.4
    xs = list(range(len(pairs)))
    ax.bar(
        [x - width / 2 for x in xs],
        [ecmp_bps.get(p, 0.0) / 1e6 for p in pairs],
        width,
        label="TCP over ECMP (single path)",
        color=TCP_COLOURS[0],
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [mrc_bps.get(p, 0.0) / 1e6 for p in pairs],
        width,
        label="MRC (sprayed)",
        color=MRC_COLOURS[0],
    )
    ax.axhline(line_rate_bps / 1e6, color="black", linestyle="--", linewidth=1, label="line rate")
    ax.set_xticks(xs)
    ax.set_xticklabels(pairs, rotation=30 if len(pairs) > 6 else 0, fontsize=8)
    ax.set_ylabel("throughput, Mbit/s")
    e, m = fairness(list(ecmp_bps.values())), fairness(list(mrc_bps.values()))
    ax.set_title(
        f"{title}\nECMP: min/max {e.min_over_max:.2f}, Jain {e.jain:.3f}    "
        f"MRC: min/max {m.min_over_max:.2f}, Jain {m.jain:.3f}",
        fontsize=10,
    )
    top = max([line_rate_bps, *ecmp_bps.values(), *mrc_bps.values()]) / 1e6
    ax.set_ylim(0, top * 1.3)
    ax.legend(loc="upper right", fontsize=8, ncols=3)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
