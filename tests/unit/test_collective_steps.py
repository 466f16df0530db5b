"""The step loop's numbers: percentiles, which steps a fault touched, the slowdown against
the fault-free steps, the faults in effect during a step, and its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.faultkinds import Cut, Fail, Flap, Restore, Unfail
from mrc_transport.collective.figures import Series, cdf_png, timeline_png
from mrc_transport.collective.steploop import active_during, still_broken
from mrc_transport.collective.steps import (
    StepTime,
    overlapping,
    percentile,
    summarize,
    summary_lines,
)
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import FaultWindow

T0 = 1000.0


def steps_of(times: list[float], gap: float = 0.01) -> list[StepTime]:
    out, t = [], T0
    for i, s in enumerate(times):
        out.append(StepTime(i, t, t + s, 0))
        t += s + gap
    return out


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 0.5) == 5.0
    assert percentile(values, 0.99) == 10.0  # fewer than 100 steps: the slowest
    assert percentile([3.0], 0.99) == 3.0
    assert percentile(list(range(1, 201)), 0.99) == 198


def test_a_fault_touches_the_steps_it_overlaps() -> None:
    steps = steps_of([1.0, 1.0, 1.0])  # [1000, 1001], [1001.01, 1002.01], ...
    cut = FaultWindow("cut", "a:b", "hard", 1001.5, 1001.6)
    assert [s.index for s in steps if overlapping(s, [cut])] == [1]
    edge = FaultWindow("cut", "a:b", "hard", 1001.0, 1001.005)  # between steps 0 and 1
    assert [s.index for s in steps if overlapping(s, [edge])] == []


def test_slowdown_is_the_tail_over_the_fault_free_median() -> None:
    steps = steps_of([0.5, 0.5, 0.52, 0.9, 0.5, 0.48])
    t3 = steps[3]
    fault = FaultWindow("cut", "t0-p0-0:t1-p0-0", "hard", t3.t_start + 0.1, t3.t_start + 0.2)
    between = FaultWindow("fail", "t1-p0-0", "stop forwarding", 2000.0, 2000.1)
    s = summarize(steps, [fault, between], ideal_s=0.4)
    assert s.fault_free is not None
    assert s.faulted is not None
    assert (s.fault_free.steps, s.faulted.steps) == (5, 1)
    assert s.fault_free.p50 == pytest.approx(0.5)
    assert s.all.p99 == pytest.approx(0.9)
    assert s.slowdown_p99 == pytest.approx(1.8)
    assert s.per_fault[0].longest_s == pytest.approx(0.9)
    assert s.per_fault[1].longest_s is None
    lines = summary_lines(s, T0)
    assert lines[0].startswith("every step: 6 steps, p50 0.500 s, p99 0.900 s")
    assert "slowdown: p99 1.80x, max 1.80x the fault-free p50 (0.500 s)" in lines[3]
    assert any("between steps" in ln for ln in lines)


def test_without_faults_the_slowdown_is_against_every_steps_median() -> None:
    s = summarize(steps_of([1.0, 1.0, 2.0]), [], ideal_s=0.5)
    assert s.faulted is None
    assert s.reference_s == pytest.approx(1.0)
    assert s.slowdown_max == pytest.approx(2.0)
    assert "p50 2.00x the ideal" in summary_lines(s, T0)[-1]


def test_what_is_still_broken_and_what_was_in_effect() -> None:
    link = "t0-p0-0:t1-p0-0"
    played = [
        (Step(1, Cut(link, "gray")), 1.0, 1.1),
        (Step(2, Restore(link)), 2.0, 2.1),
        (Step(3, Fail("t1-p0-1")), 3.0, 3.1),
        (Step(4, Flap(link, 0.5, 2)), 4.0, 5.0),
        (Step(6, Fail("h0:p1")), 6.0, 6.1),
        (Step(7, Unfail("h0:p1")), 7.0, 7.1),
    ]
    assert [f.target for f in still_broken(played)] == ["t1-p0-1"]
    assert [f.verb for f in active_during(played, 0.0, 1.05)] == []
    assert [f.verb for f in active_during(played, 1.5, 1.6)] == ["cut"]
    during = active_during(played, 4.5, 6.05)
    assert sorted(f.verb for f in during) == ["fail", "flap"]
    assert [f.target for f in active_during(played, 8.0, 9.0)] == ["t1-p0-1"]


def test_the_figures_are_drawn(tmp_path: Path) -> None:
    steps = steps_of([0.5, 0.9, 0.5])
    fault = FaultWindow("cut", "t0-p0-0:t1-p0-0", "hard", steps[1].t_start, steps[1].t_end)
    one = Series("mrc", steps, [fault], T0, 0.5)
    other = Series("tcp", steps_of([2.0, 2.1, 6.0]), [], T0, 2.0)
    timeline_png(tmp_path / "t.png", [one, other], "steps")
    cdf_png(tmp_path / "c.png", [one, other], "cdf", relative=True, target=1.2)
    for name in ("t.png", "c.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
