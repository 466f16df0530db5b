"""A training step's loop in numbers: each step's time, its tail, the slowdown faults cause.

Theory of operation. A synchronous training step ends at its slowest rank (the barrier),
so one slow flow holds every rank: the paper's reason for MRC (tail latency dominates
synchronous pretraining). Each step is timed from its first rank's start to its last
rank's end (collective/run.py). A step is *fault-free* when no fault of the lab's log was
in effect at any moment of it; the slowdown is the tail (p99, max) over the fault-free
steps' median, the step time a job would plan for. Percentiles are nearest-rank: p99 of
fewer than 100 steps is the slowest step, a step that happened.

Pure: no IO, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mrc_transport.harness.timeline import FaultWindow


@dataclass(frozen=True, slots=True)
class StepTime:
    """One step of the loop."""

    index: int
    """0 for the first step after the warm-up."""
    t_start: float
    """time.monotonic() when its first rank started."""
    t_end: float
    """time.monotonic() when its last rank had its result."""
    wrong: int
    """Elements of the ranks' results that differed from the expected ones."""

    @property
    def seconds(self) -> float:
        return self.t_end - self.t_start


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile (0 < q <= 1) of values (at least one)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def overlapping(step: StepTime, faults: Sequence[FaultWindow]) -> list[FaultWindow]:
    """The faults in effect at some moment of the step."""
    return [f for f in faults if f.t_start < step.t_end and f.t_end > step.t_start]


@dataclass(frozen=True, slots=True)
class Tail:
    """Step times of a set of steps, seconds."""

    steps: int
    """How many."""
    p50: float
    """Their median."""
    p99: float
    """Their nearest-rank 99th percentile."""
    max: float
    """The slowest."""

    @classmethod
    def of(cls, steps: Sequence[StepTime]) -> Tail | None:
        if not steps:
            return None
        times = [s.seconds for s in steps]
        return cls(len(times), percentile(times, 0.5), percentile(times, 0.99), max(times))


@dataclass(frozen=True, slots=True)
class FaultSteps:
    """The steps one fault touched."""

    fault: FaultWindow
    """The fault, from the lab's log."""
    steps: int
    """Steps in effect while it was."""
    longest_s: float | None
    """The longest of them (None: it fell between steps)."""


@dataclass(frozen=True, slots=True)
class StepSummary:
    """The loop's tail against its fault-free steps."""

    all: Tail
    """Every step."""
    fault_free: Tail | None
    """Steps no fault touched (None: every step was)."""
    faulted: Tail | None
    """Steps a fault touched."""
    ideal_s: float
    """The fabric's least time for one step (collective/bandwidth.py)."""
    wrong: int
    """Wrong elements over every step."""
    per_fault: tuple[FaultSteps, ...]
    """Each fault of the lab's log with the steps it touched."""

    @property
    def reference_s(self) -> float:
        """What the slowdown is against: the fault-free median, else every step's."""
        return (self.fault_free or self.all).p50

    @property
    def slowdown_p99(self) -> float:
        return self.all.p99 / self.reference_s

    @property
    def slowdown_max(self) -> float:
        return self.all.max / self.reference_s


def summarize(
    steps: Sequence[StepTime], faults: Sequence[FaultWindow], ideal_s: float
) -> StepSummary:
    """The summary of a loop of at least one step."""
    touched = [s for s in steps if overlapping(s, faults)]
    free = [s for s in steps if not overlapping(s, faults)]
    whole = Tail.of(steps)
    assert whole is not None, "a loop has at least one step"
    per_fault = []
    for f in faults:
        hit = [s.seconds for s in steps if overlapping(s, [f])]
        per_fault.append(FaultSteps(f, len(hit), max(hit) if hit else None))
    return StepSummary(
        whole, Tail.of(free), Tail.of(touched), ideal_s, sum(s.wrong for s in steps),
        tuple(per_fault),
    )  # fmt: skip


def summary_lines(summary: StepSummary, t_origin: float) -> list[str]:
    """The summary as the command prints it."""
    s, ref = summary, summary.reference_s
    out = [
        _tail_line("every step", s.all) + f"   (the fabric's ideal {s.ideal_s:.3f} s)",
    ]
    if s.faulted is not None:
        out.append(_tail_line("fault-free", s.fault_free) if s.fault_free else "fault-free: none")
        out.append(_tail_line("during faults", s.faulted))
    against = "the fault-free p50" if s.fault_free and s.faulted else "the p50"
    out.append(
        f"slowdown: p99 {s.slowdown_p99:.2f}x, max {s.slowdown_max:.2f}x {against} "
        f"({ref:.3f} s); p50 {s.all.p50 / s.ideal_s:.2f}x the ideal"
    )
    for fs in s.per_fault:
        f = fs.fault
        what = f"{f.kind} {f.target} ({f.action}) at {f.t_start - t_origin:.1f} s"
        if fs.longest_s is None:
            out.append(f"  {what}: between steps")
        else:
            out.append(
                f"  {what}: {fs.steps} step{'s' if fs.steps != 1 else ''}, the longest "
                f"{fs.longest_s:.3f} s ({fs.longest_s / ref:.2f}x)"
            )
    return out


def _tail_line(label: str, tail: Tail | None) -> str:
    if tail is None:
        return f"{label}: none"
    return (
        f"{label}: {tail.steps} steps, p50 {tail.p50:.3f} s, p99 {tail.p99:.3f} s, "
        f"max {tail.max:.3f} s"
    )
