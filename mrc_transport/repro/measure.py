"""Measures the experiments share, on delivery records (harness/timeline.py): a flow's
goodput over a window, an aggregate of flows, how deep and long a dip was, and words.

Pure: no IO, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from labs.units import format_rate
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.timeline import Delivery, FaultWindow, Goodput, recovery_time
from mrc_transport.harness.windows import window_rates
from mrc_transport.repro.spec import RunResult

HOLD_BINS = 5
"""Recovered/settled = the mean of this many bins at the level (timeline.recovery_time)."""


def rate(deliveries: Sequence[Delivery], names: Sequence[str], t0: float, t1: float) -> float:
    """Bits per second the named flows delivered together in [t0, t1)."""
    if t1 <= t0:
        raise HarnessError(
            f"a measurement window of {t1 - t0:.2f} s: the run was too short for its start-up "
            "and the faults' apply time (a loaded machine?)"
        )
    return sum(window_rates(deliveries, names, t0, t1).values())


def span(deliveries: Iterable[Delivery], names: Sequence[str]) -> tuple[float, float] | None:
    """(first, last) delivery time of the named flows together; None if they delivered none."""
    wanted = set(names)
    times = [d.t_mono for d in deliveries if d.flow in wanted]
    return (min(times), max(times)) if times else None


def starts(deliveries: Iterable[Delivery], names: Sequence[str]) -> list[float]:
    """Each named flow's first delivery (flows that delivered nothing left out), sorted."""
    return sorted(_extreme(deliveries, names, min).values())


def ends(deliveries: Iterable[Delivery], names: Sequence[str]) -> list[float]:
    """Each named flow's last delivery, sorted."""
    return sorted(_extreme(deliveries, names, max).values())


def _extreme(
    deliveries: Iterable[Delivery], names: Sequence[str], pick: Callable[[float, float], float]
) -> dict[str, float]:
    out: dict[str, float] = {}
    wanted = set(names)
    for d in deliveries:
        if d.flow in wanted:
            out[d.flow] = pick(out.get(d.flow, d.t_mono), d.t_mono)
    return out


def warm(res: RunResult, names: Sequence[str], settle_s: float) -> float:
    """When a healthy window may begin: settle_s after the last named flow's first delivery
    (a connection's first round trips are no measure of its rate), not before the run's
    time 0."""
    return max([res.t_origin, *starts(res.deliveries, names)]) + settle_s


def merged(deliveries: Iterable[Delivery], names: Sequence[str], as_name: str) -> list[Delivery]:
    """The named flows' deliveries as one flow (an aggregate's goodput)."""
    wanted = set(names)
    return [Delivery(d.t_mono, d.nbytes, as_name) for d in deliveries if d.flow in wanted]


@dataclass(frozen=True, slots=True)
class Dip:
    """How far and how long goodput fell below a baseline."""

    depth: float
    """1 - lowest bin / baseline (0: never below; 1: a bin with nothing)."""
    below_s: float
    """Seconds of bins below ``fraction`` x baseline."""
    lowest_at: float | None
    """Start of the lowest bin (time.monotonic())."""


def dip(series: Goodput, baseline_bps: float, t0: float, t1: float, fraction: float = 0.9) -> Dip:
    """The bins of series that start in [t0, t1), against baseline_bps."""
    # (the 1e-9: 0.4 / 0.1 is 3.9999999999999996 in binary floating point)
    first = max(0, math.floor((t0 - series.t0) / series.bin_s + 1e-9))
    last = min(len(series.bps), math.ceil((t1 - series.t0) / series.bin_s - 1e-9))
    window = list(range(first, last))
    if not window or baseline_bps <= 0:
        return Dip(0.0, 0.0, None)
    low = min(window, key=lambda i: series.bps[i])
    below = sum(1 for i in window if series.bps[i] < fraction * baseline_bps)
    return Dip(
        depth=max(0.0, 1.0 - series.bps[low] / baseline_bps),
        below_s=below * series.bin_s,
        lowest_at=series.bin_start(low),
    )


def back_to(series: Goodput, t_from: float, target_bps: float, t_limit: float) -> float | None:
    """Seconds from t_from until goodput held target_bps (HOLD_BINS bins); None: not by
    t_limit."""
    return recovery_time(series, t_from, target_bps, HOLD_BINS, t_limit)


def first_fault(res: RunResult, kind: str) -> FaultWindow:
    """The run's first fault of a kind from the lab's log; HarnessError if it has none."""
    hits = [f for f in res.faults if f.kind == kind]
    if not hits:
        raise HarnessError(f"the lab's fault log has no {kind} in run {res.run.name}")
    return hits[0]


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is 0."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


# -- words ------------------------------------------------------------------------------------


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def mbit(bps: float | None) -> str:
    return "-" if bps is None else format_rate(bps, width=0, prefix="M")


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def gap(seconds: float | None, open_ended: bool = False) -> str:
    """A delivery gap in words; one still open when the run ended is a lower bound:
    "> 3.2 s (still stalled)", never cut to the run's length without saying so."""
    return f"> {ms(seconds)} (still stalled)" if open_ended and seconds is not None else ms(seconds)


def secs(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"
