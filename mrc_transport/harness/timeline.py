"""Per-delivery records joined with the lab's fault log: goodput bins, stalls, recovery.

Theory of operation. Every receiver (MRC or the TCP baseline) logs one ``Delivery`` per
chunk handed to the application, stamped with time.monotonic(); the lab logs each fault
with the same system-wide CLOCK_MONOTONIC (labs/faults.py), so the two join without any
clock translation. From them, per fault and per flow:

- stall: the longest gap between consecutive deliveries that overlaps the window
  [t_start, t_end + margin]. The observation bounds ``t_begin``/``t_stop`` act as virtual
  deliveries, so a flow that never delivers again has an open-ended stall running to
  ``t_stop`` (a lower bound), and a fault before the first delivery counts from
  ``t_begin``.
- recovery: the time from t_start until goodput, averaged over ``hold_bins`` bins of
  ``bin_s``, is back at or above ``fraction`` (90%) of the capacity that survives.
  The surviving capacity is the healthy pre-fault goodput times a fraction the caller gives
  (e.g. paths alive / paths before: the paper's "one T0-T1 link lost costs 1/N of the
  capacity", mrc-protocol-notes.md). The healthy goodput is measured over the last
  ``pre_s`` seconds before t_start that lie outside every fault window (and its margin) and
  its aftermath (any flow's stall that started in it), so faults do not skew each other's
  reference. Resolution: one bin.

Pure: no IO, no clock.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

FAULT_KINDS = frozenset({"cut", "degrade", "fail", "flap"})
RESTORE_KIND = "restore"


@dataclass(frozen=True, slots=True)
class Delivery:
    """Bytes handed to the receiving application at one instant."""

    t_mono: float
    """time.monotonic() right after the receive returned."""
    nbytes: int
    """Payload bytes delivered in order by this receive."""
    flow: str
    """Flow id, e.g. "mrc" or "tcp" or "h4->h0"."""


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One fault from the lab's event log, paired with the restore that ended it."""

    kind: str
    """cut, degrade, fail or flap."""
    target: str
    """Link "a:b", switch name or "host:port"."""
    action: str
    """How, e.g. "gray", "hard", "loss 5%", "stop forwarding"."""
    t_start: float
    """time.monotonic() when the fault took effect."""
    t_end: float
    """time.monotonic() of the restore, or the end of the observation if never restored."""
    restored: bool = True
    """False when no restore followed within the log."""


@dataclass(frozen=True, slots=True)
class Stall:
    """The longest gap between deliveries around a fault."""

    start: float
    """Last delivery before the gap (or the observation start)."""
    end: float
    """First delivery after the gap (or the observation end when open_ended)."""
    open_ended: bool
    """True when nothing was delivered after the gap: the duration is a lower bound."""

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Goodput:
    """Goodput of one flow in fixed bins starting at t0."""

    t0: float
    """Start of the first bin (time.monotonic())."""
    bin_s: float
    """Bin width in seconds."""
    bps: tuple[float, ...]
    """Delivered bits per second in each full bin."""

    def bin_start(self, index: int) -> float:
        return self.t0 + index * self.bin_s

    def times(self) -> list[float]:
        return [self.bin_start(i) for i in range(len(self.bps))]


@dataclass(frozen=True, slots=True)
class FlowTotals:
    """Per-flow totals over the observation."""

    flow: str
    """Flow id."""
    nbytes: int
    """Bytes delivered within [t_begin, t_stop]."""
    deliveries: int
    """Number of delivery records counted."""
    goodput_bps: float
    """nbytes * 8 / (t_stop - t_begin)."""


@dataclass(frozen=True, slots=True)
class FlowFault:
    """What one fault did to one flow."""

    flow: str
    """Flow id."""
    stall: Stall | None
    """Longest stall overlapping the fault window (None: window outside the observation)."""
    baseline_bps: float | None
    """Healthy pre-fault goodput (None: no healthy time before the fault)."""
    target_bps: float | None
    """fraction x surviving x baseline: the level recovery waits for."""
    recovery_s: float | None
    """Seconds from t_start until goodput held target_bps; None if it did not (or no target)."""


@dataclass(frozen=True, slots=True)
class FaultResult:
    """One fault and its effect on every flow."""

    fault: FaultWindow
    """The fault."""
    flows: Mapping[str, FlowFault]
    """Per flow id."""


# -- grouping and bins ------------------------------------------------------------------------


def by_flow(deliveries: Iterable[Delivery]) -> dict[str, list[Delivery]]:
    """Deliveries grouped per flow, each list sorted by time."""
    out: dict[str, list[Delivery]] = {}
    for d in deliveries:
        out.setdefault(d.flow, []).append(d)
    for records in out.values():
        records.sort(key=lambda d: d.t_mono)
    return out


def goodput(records: Iterable[Delivery], t0: float, t1: float, bin_s: float = 0.01) -> Goodput:
    """Bits per second in the full bins of width bin_s between t0 and t1 (a partial last bin
    is dropped so that it cannot look like a dip)."""
    if bin_s <= 0:
        raise ValueError(f"bin width must be positive, not {bin_s}")
    n = max(0, math.floor((t1 - t0) / bin_s + 1e-9))
    counts = [0] * n
    for d in records:
        i = math.floor((d.t_mono - t0) / bin_s)
        if 0 <= i < n:
            counts[i] += d.nbytes
    return Goodput(t0, bin_s, tuple(c * 8 / bin_s for c in counts))


def goodput_per_flow(
    deliveries: Iterable[Delivery], t0: float, t1: float, bin_s: float = 0.01
) -> dict[str, Goodput]:
    return {flow: goodput(rs, t0, t1, bin_s) for flow, rs in by_flow(deliveries).items()}


def flow_totals(
    deliveries: Iterable[Delivery], t_begin: float, t_stop: float
) -> dict[str, FlowTotals]:
    span = t_stop - t_begin
    out: dict[str, FlowTotals] = {}
    for flow, rs in by_flow(deliveries).items():
        inside = [d for d in rs if t_begin <= d.t_mono <= t_stop]
        nbytes = sum(d.nbytes for d in inside)
        out[flow] = FlowTotals(flow, nbytes, len(inside), nbytes * 8 / span if span > 0 else 0.0)
    return out


# -- the fault log ----------------------------------------------------------------------------


def pair_events(events: Iterable[Mapping[str, object]], t_stop: float) -> list[FaultWindow]:
    """Fault windows from the lab's JSONL event records (t_mono, kind, target, action).

    A restore closes every open fault on its target (a link can be degraded then cut);
    faults still open at the end run to t_stop with restored=False. Sorted by t_start.
    """
    open_faults: dict[str, list[tuple[str, str, float]]] = {}
    done: list[FaultWindow] = []
    for ev in sorted(events, key=lambda e: _float(e["t_mono"])):
        kind, target, t = str(ev["kind"]), str(ev["target"]), _float(ev["t_mono"])
        if kind == RESTORE_KIND:
            for k, action, t0 in open_faults.pop(target, []):
                done.append(FaultWindow(k, target, action, t0, t))
        elif kind in FAULT_KINDS:
            open_faults.setdefault(target, []).append((kind, str(ev.get("action", "")), t))
    for target, opened in open_faults.items():
        for k, action, t0 in opened:
            done.append(FaultWindow(k, target, action, t0, max(t0, t_stop), restored=False))
    return sorted(done, key=lambda f: (f.t_start, f.target))


def _float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"t_mono must be a number, not {value!r}")


# -- stalls -----------------------------------------------------------------------------------


def longest_stall(
    times: Sequence[float], w_start: float, w_end: float, t_begin: float, t_stop: float
) -> Stall | None:
    """Longest gap between consecutive delivery times (sorted) that overlaps [w_start, w_end],
    with t_begin and t_stop as virtual deliveries. Ties go to the earliest gap."""
    lo = bisect.bisect_left(times, t_begin)
    hi = bisect.bisect_right(times, t_stop)
    points = [t_begin, *times[lo:hi], t_stop]
    best: Stall | None = None
    # Gap i runs from points[i] to points[i+1]; it overlaps when it starts before w_end and
    # ends after w_start. Start at the last point at or before w_start.
    first = max(0, bisect.bisect_right(points, w_start) - 1)
    for i in range(first, len(points) - 1):
        a, b = points[i], points[i + 1]
        if a >= w_end and not (a == w_end == w_start):
            break
        if b <= w_start:
            continue
        if best is None or b - a > best.duration:
            best = Stall(a, b, open_ended=(i + 1 == len(points) - 1))
    return best


# -- recovery ---------------------------------------------------------------------------------


def healthy_baseline(
    records: Sequence[Delivery],
    t_fault: float,
    faults: Sequence[FaultWindow],
    *,
    t_begin: float,
    margin: float,
    pre_s: float,
    min_s: float,
) -> float | None:
    """Goodput (bit/s) over the most recent pre_s seconds of [t_begin, t_fault) that lie
    outside every fault window [t_start, t_end + margin]; None if under min_s of such time."""
    spans = _healthy_spans(t_begin, t_fault, faults, margin)
    times = [d.t_mono for d in records]
    prefix = [0]
    for d in records:
        prefix.append(prefix[-1] + d.nbytes)
    need, nbytes, seconds = pre_s, 0, 0.0
    for a, b in reversed(spans):
        a = max(a, b - need)
        i, j = bisect.bisect_left(times, a), bisect.bisect_left(times, b)
        nbytes += prefix[j] - prefix[i]
        seconds += b - a
        need -= b - a
        if need <= 1e-12:
            break
    if seconds < min_s:
        return None
    return nbytes * 8 / seconds


def _healthy_spans(
    t_begin: float, t_fault: float, faults: Sequence[FaultWindow], margin: float
) -> list[tuple[float, float]]:
    """[t_begin, t_fault) minus the union of fault windows, as sorted half-open spans."""
    spans = [(t_begin, t_fault)] if t_fault > t_begin else []
    for f in faults:
        cut_a, cut_b = f.t_start, f.t_end + margin
        nxt: list[tuple[float, float]] = []
        for a, b in spans:
            if cut_b <= a or cut_a >= b:
                nxt.append((a, b))
                continue
            if a < cut_a:
                nxt.append((a, cut_a))
            if cut_b < b:
                nxt.append((cut_b, b))
        spans = nxt
    return spans


def healthy_gap_at(
    records: Sequence[Delivery],
    faults: Sequence[FaultWindow],
    *,
    t_begin: float,
    t_stop: float,
    margin: float,
) -> Stall | None:
    """The longest gap between consecutive deliveries that lies wholly outside every fault
    window (and ``margin`` after it), as the deliveries on either side of it: how long the
    flow goes without a delivery when nothing is broken, the floor a stall after a fault
    is to be read against. Pass the faults ``with_aftermath``. None without two
    deliveries in one healthy span."""
    spans = _healthy_spans(t_begin, t_stop, faults, margin)
    times = [d.t_mono for d in records]
    best: Stall | None = None
    for a, b in spans:
        i, j = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
        inside = times[i:j]
        for x, y in itertools.pairwise(inside):
            if best is None or y - x > best.duration:
                best = Stall(x, y, open_ended=False)
    return best


def recovery_time(
    series: Goodput, t_fault: float, target_bps: float, hold_bins: int, t_limit: float
) -> float | None:
    """Seconds from t_fault to the start of the first bin (at or after the fault's bin, and
    starting no later than t_limit) from which the mean goodput over hold_bins full bins is
    at or above target_bps; 0 when it never dropped below. None when that never happens.

    A mean, not every bin: a userspace receiver on a shared machine is descheduled for
    milliseconds at a time and hands over its deliveries in bursts, so 10 ms bins of a
    steady transfer swing to half and twice its rate, and "every bin of a run above 90%"
    would measure that jitter, not the recovery (docs/measurements.md)."""
    if hold_bins < 1:
        raise ValueError("hold_bins must be at least 1")
    first = max(0, math.floor((t_fault - series.t0) / series.bin_s))
    bps = series.bps
    window = sum(bps[first : first + hold_bins])
    need = target_bps * hold_bins
    for i in range(first, len(bps) - hold_bins + 1):
        if i > first:
            window += bps[i + hold_bins - 1] - bps[i - 1]
        if series.bin_start(i) > t_limit:
            return None  # recovery would start too late to count for this fault
        if window >= need * (1 - 1e-12):
            return max(0.0, series.bin_start(i) - t_fault)
    return None


# -- everything per fault ---------------------------------------------------------------------


def _one_surviving(_fault: FaultWindow, _flow: str) -> float:
    return 1.0


@dataclass(frozen=True, slots=True)
class Params:
    """Knobs of the analysis; the defaults are the issue's."""

    bin_s: float = 0.01
    """Goodput bin width (10 ms or finer to see a stall)."""
    margin: float = 0.5
    """Seconds after a fault's end still attributed to it."""
    pre_s: float = 1.0
    """Healthy seconds before a fault that define its baseline goodput."""
    min_baseline_s: float = 0.05
    """Less healthy time than this before a fault: no baseline, no recovery figure."""
    fraction: float = 0.9
    """Recovered = goodput back to this fraction of the surviving capacity."""
    hold_bins: int = 5
    """...as the mean of this many bins (``recovery_time``)."""


def analyse(
    deliveries: Iterable[Delivery],
    faults: Sequence[FaultWindow],
    *,
    t_begin: float,
    t_stop: float,
    surviving: Callable[[FaultWindow, str], float] = _one_surviving,
    capacity_bps: Mapping[str, float] | None = None,
    params: Params = Params(),
    t_stop_of: Mapping[str, float] | None = None,
) -> list[FaultResult]:
    """Per fault, per flow: stall, baseline, recovery. ``surviving(fault, flow)`` is the
    fraction of the flow's pre-fault capacity that the fault leaves; ``capacity_bps`` gives a
    flow's healthy capacity outright instead of measuring it before each fault;
    ``t_stop_of`` a flow's own end of observation, when it was watched longer than the
    others (a stall that outlasts the run is then measured whole, not cut at t_stop)."""
    flows = by_flow(deliveries)
    stop = {f: (t_stop_of or {}).get(f, t_stop) for f in flows}
    series = {f: goodput(rs, t_begin, stop[f], params.bin_s) for f, rs in flows.items()}
    aftermath = with_aftermath(faults, flows, t_begin=t_begin, t_stop=t_stop, params=params)
    out: list[FaultResult] = []
    for fault in faults:
        per_flow: dict[str, FlowFault] = {}
        for flow, rs in flows.items():
            per_flow[flow] = _flow_fault(
                fault,
                flow,
                rs,
                series[flow],
                aftermath,
                t_begin,
                stop[flow],
                surviving(fault, flow),
                (capacity_bps or {}).get(flow),
                params,
            )
        out.append(FaultResult(fault, per_flow))
    return out


def with_aftermath(
    faults: Sequence[FaultWindow],
    flows: Mapping[str, Sequence[Delivery]],
    *,
    t_begin: float,
    t_stop: float,
    params: Params,
) -> list[FaultWindow]:
    """The faults with each window stretched to the end of the longest stall it caused in
    any flow. A healthy baseline must not include a fault's aftermath: a TCP flow still in
    retransmission backoff after the restore leaves its shared port to the other flow, whose
    goodput is then above what it gets once TCP resumes."""
    times = {flow: [d.t_mono for d in rs] for flow, rs in flows.items()}
    out: list[FaultWindow] = []
    for f in faults:
        w_end = min(f.t_end + params.margin, t_stop)
        end = f.t_end
        for ts in times.values():
            stall = longest_stall(ts, max(f.t_start, t_begin), w_end, t_begin, t_stop)
            if stall is not None:
                end = max(end, stall.end - params.margin)
        out.append(replace(f, t_end=end))
    return out


def _flow_fault(
    fault: FaultWindow,
    flow: str,
    records: Sequence[Delivery],
    series: Goodput,
    faults: Sequence[FaultWindow],
    t_begin: float,
    t_stop: float,
    surviving: float,
    capacity: float | None,
    p: Params,
) -> FlowFault:
    w_end = min(fault.t_end + p.margin, t_stop)
    times = [d.t_mono for d in records]
    stall = longest_stall(times, max(fault.t_start, t_begin), w_end, t_begin, t_stop)
    if capacity is not None:
        base: float | None = capacity
    else:
        base = healthy_baseline(
            records,
            fault.t_start,
            faults,
            t_begin=t_begin,
            margin=p.margin,
            pre_s=p.pre_s,
            min_s=p.min_baseline_s,
        )
    if base is None:
        return FlowFault(flow, stall, None, None, None)
    target = p.fraction * surviving * base
    rec = recovery_time(series, fault.t_start, target, p.hold_bins, w_end)
    return FlowFault(flow, stall, base, target, rec)
