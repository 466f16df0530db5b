"""training-step's measure on synthetic loops whose answers are known: a step loop that
rides through the cut and the dead T1 (agrees) and one a cut holds for seconds (differs),
single-path TCP beside it; and its report document."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrc_transport.collective.steploop import LoopResult
from mrc_transport.collective.steps import StepTime
from mrc_transport.harness.timeline import FaultWindow
from mrc_transport.repro import result
from mrc_transport.repro.engine import ReproConfig
from mrc_transport.repro.experiments import training_step
from mrc_transport.repro.spec import RunResult

T0 = 1000.0
EXP = training_step.EXPERIMENT
K = EXP.full
TOPO = EXP.fabric.build()


def loop_run(name: str, step_s: float, cut_extra: float, fail_extra: float) -> RunResult:
    """Steps of step_s back to back; the step that starts in the cut (the T1's failure)
    takes cut_extra (fail_extra) longer."""
    run = next(r for r in training_step.plan(TOPO, K) if r.name == name)
    cut = FaultWindow("cut", "t0-p1-0:t1-p1-3", "gray", T0 + K.cut_at, T0 + K.cut_at + K.cut_s)
    fail = FaultWindow("fail", "t1-p1-3", "stop forwarding", T0 + K.fail_at, T0 + K.fail_at + 3)
    steps, t, i = [], T0, 0
    while t < T0 + run.duration_s:
        extra = 0.0
        if cut.t_start <= t < cut.t_start + step_s:
            extra = cut_extra
        elif fail.t_start <= t < fail.t_start + step_s:
            extra = fail_extra
        steps.append(StepTime(i, t, t + step_s + extra, 0))
        t, i = t + step_s + extra, i + 1
    loop = LoopResult(steps=steps, t_origin=T0, t_stop=t, ideal_s=0.147)
    res = RunResult(run, t_origin=T0, t_stop=t, faults=[cut, fail], loop=loop)
    res.verified = {name: True}
    return res


def test_a_loop_that_rides_through_agrees_and_tcp_stalls() -> None:
    mrc = loop_run("mrc", 0.25, 0.02, 0.05)
    tcp = loop_run("tcp", 0.6, 3.0, 0.1)
    found = EXP.measure(TOPO, K, [mrc, tcp])
    rows = {r.claim: r for r in found.rows}
    assert [r.agrees for r in found.rows] == [True, True, True, True]
    cut = found.numbers["mrc"]["cut"]
    assert cut["steps"] >= 1
    assert cut["slowdown_p99"] == pytest.approx(1.08)
    assert (
        "1.08x the fault-free p50 0.250 s"
        in rows["A T0-T1 link lost: no measurable impact on the job"].lab
    )
    tail = next(r for r in found.rows if r.claim.startswith("Tail latency"))
    assert "TCP's longest step 3.600 s = 6.00x its median" in tail.lab
    ring = next(r for r in found.rows if r.claim.startswith("Ring all-reduce"))
    assert "agrees: 2.40x TCP's" in ring.verdict  # 0.6 s against 0.25 s a step


def test_a_cut_that_holds_the_step_differs() -> None:
    mrc = loop_run("mrc", 0.25, 1.5, 1.5)
    found = EXP.measure(TOPO, K, [mrc])
    assert [r.agrees for r in found.rows] == [False, False]
    assert found.rows[0].verdict == "differs: above 1.2x the median"
    assert "the longest 1.750 s (7.00x)" in found.rows[1].lab


def test_mptcp_is_compared_in_words() -> None:
    runs = [loop_run("mrc", 0.25, 0.0, 0.0), loop_run("tcp", 0.6, 3.0, 0.0)]
    runs.append(loop_run("mptcp", 0.3, 0.3, 0.2))
    row = EXP.measure(TOPO, K, runs).rows[-1]
    assert row.agrees is None
    assert row.claim.endswith("(not in the paper)")
    assert "MPTCP's cut tail 2.00x, MRC's 1.00x" in row.verdict


def test_the_report_has_each_loops_steps(tmp_path: Path) -> None:
    runs = [loop_run("mrc", 0.25, 0.02, 0.05), loop_run("tcp", 0.6, 3.0, 0.1)]
    cfg = ReproConfig(TOPO, tmp_path, quick=False, fabric_label="preset default")
    machine = {"date": "d", "kernel": "k", "cpus": 2, "load_before": []}
    doc = result.document(EXP, cfg, "lab", K, runs, EXP.measure(TOPO, K, runs), machine, 1.0)
    assert doc["verified"] is True
    loop = doc["runs"][0]["loop"]
    assert (loop["collective"], loop["transport"], loop["size"]) == ("allreduce", "mrc", K.size)
    assert runs[0].loop is not None
    assert len(loop["steps"]) == len(runs[0].loop.steps)
    assert doc["runs"][0]["flows"] == []
    assert "every element of all" in result.verified_line(doc)
    EXP.plot(tmp_path / "t.png", TOPO, K, runs)
    assert (tmp_path / "t-cdf.png").exists()
