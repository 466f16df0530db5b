"""The repro experiments' measures on synthetic runs whose answers are known: phases of
loss, an incast's victim, a port lost, a cascade, a blackhole; the shared dip and warm-up;
the report document and its Markdown; the CPU sampling."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from mrc_transport.harness.machine import CpuTimes, cpu_use, parse_cpu_line
from mrc_transport.harness.timeline import Delivery, FaultWindow, Goodput
from mrc_transport.repro import result
from mrc_transport.repro.engine import ReproConfig
from mrc_transport.repro.experiments import EXPERIMENTS, blackhole, cascade, flapping, incast, loss
from mrc_transport.repro.measure import dip, warm
from mrc_transport.repro.spec import Findings, Row, RunResult

T0 = 1000.0
STEP = 0.01


def steady(
    name: str, t0: float, t1: float, bps: float, gaps: Sequence[tuple[float, float]] = ()
) -> list[Delivery]:
    """A delivery every STEP seconds at bps, none inside a gap (absolute times)."""
    out = []
    n = round((t1 - t0) / STEP)
    for i in range(n):
        t = t0 + (i + 0.5) * STEP
        if not any(a <= t < b for a, b in gaps):
            out.append(Delivery(t, round(bps * STEP / 8), name))
    return out


def test_dip_depth_and_time_below() -> None:
    g = Goodput(T0, 0.1, (100.0, 100.0, 40.0, 85.0, 100.0))
    d = dip(g, 100.0, T0, T0 + 0.5)
    assert d.depth == pytest.approx(0.6)
    assert d.below_s == pytest.approx(0.2)
    assert d.lowest_at == pytest.approx(T0 + 0.2)
    assert dip(g, 100.0, T0 + 0.4, T0 + 0.5).depth == 0.0


def test_a_healthy_window_starts_after_the_last_flow_delivered() -> None:
    exp = EXPERIMENTS["permutation"]
    run = exp.plan(exp.fabric.build(), exp.quick)[0]
    res = RunResult(run, t_origin=T0, t_stop=T0 + 5)
    res.deliveries = steady("a", T0 + 0.2, T0 + 5, 1e6) + steady("b", T0 + 0.7, T0 + 5, 1e6)
    assert warm(res, ["a", "b"], 0.5) == pytest.approx(T0 + 0.705 + 0.5)
    assert warm(res, ["none"], 0.5) == T0 + 0.5


def _loss_run(name: str, bps: Sequence[float], k: loss.Knobs) -> RunResult:
    """A run whose flow delivers bps[i] in phase i; applying a level takes LAG seconds
    (longer than the settling time: on a busy machine it does)."""
    topo = loss.EXPERIMENT.fabric.build()
    run = next(r for r in loss.plan(topo, k) if r.name == name)
    res = RunResult(run, t_origin=T0, t_stop=T0 + run.duration_s)
    bounds = [T0, *(T0 + s.at + LAG for s in run.steps)]
    for i, rate in enumerate(bps):
        res.deliveries += steady(run.flows[0].name, bounds[i], bounds[i + 1], rate)
    res.played = [(s, T0 + s.at, T0 + s.at + LAG) for s in run.steps]
    return res


LAG = 1.6


def test_loss_phases_and_verdicts() -> None:
    k = loss.Knobs()
    topo = loss.EXPERIMENT.fabric.build()
    results = [
        _loss_run("mrc", [80e6, 78e6, 30e6], k),  # barely affected, then a third
        _loss_run("tcp", [20e6, 2e6, 0.5e6], k),  # collapses
        _loss_run("tcp8", [80e6, 60e6, 20e6], k),
    ]
    assert loss.phases(results[0], k) == pytest.approx([80e6, 78e6, 30e6], rel=0.02)
    found = loss.measure(topo, k, results)
    frac = found.numbers["fraction_of_lossless"]
    assert frac["mrc"] == pytest.approx([0.975, 0.375], rel=0.03)
    assert frac["tcp"] == pytest.approx([0.1, 0.025], rel=0.03)
    # per level: MRC's claim, RoCE's (TCP standing in: no emulated RoCE ran), TCP compared
    assert [r.agrees for r in found.rows] == [True, True, None, True, True, None]
    # the same MRC at 1% keeping all its goodput did better than the paper
    better = _loss_run("mrc", [80e6, 80e6, 76e6], k)
    rows = loss.measure(topo, k, [better, *results[1:]]).rows
    assert "did better" in rows[3].verdict
    tcp_kept = _loss_run("tcp", [20e6, 20e6, 19e6], k)
    rows = loss.measure(topo, k, [results[0], tcp_kept, results[2]]).rows
    assert rows[1].agrees is False
    assert rows[1].verdict.startswith("differs: TCP kept 100%")


def test_loss_judges_roce_s_claim_by_the_emulated_roce() -> None:
    k = loss.Knobs()
    topo = loss.EXPERIMENT.fabric.build()
    results = [
        _loss_run("mrc", [80e6, 78e6, 30e6], k),
        _loss_run("roce", [19e6, 1e6, 0.1e6], k),  # go-back-N collapses
        _loss_run("tcp", [20e6, 15e6, 8e6], k),  # TCP does not: it is not RoCE
    ]
    rows = loss.measure(topo, k, results).rows
    assert rows[1].claim.startswith("0.1% loss: single-path RoCE collapses")
    assert rows[1].agrees is True
    assert rows[1].lab.startswith("RoCE-style RC, emulated")
    assert rows[2].agrees is None  # TCP: a comparison, not the paper's claim
    assert "TCP is not RoCE" in rows[2].verdict


def _incast_run(kind: str, victim_during: float, k: incast.Knobs) -> RunResult:
    topo = incast.EXPERIMENT.fabric.build()
    run = next(r for r in incast.plan(topo, k) if r.name == kind)
    res = RunResult(run, t_origin=T0, t_stop=T0 + run.duration_s)
    end = T0 + 8.0
    res.deliveries = steady(incast.VICTIM, T0, end, victim_during) + steady(
        incast.VICTIM, end, res.t_stop, 20e6
    )
    for f in run.flows[1:]:
        res.deliveries += steady(f.name, T0, end, 20e6 / k.senders)
    return res


def test_incast_victim_during_against_alone() -> None:
    k = incast.Knobs()
    topo = incast.EXPERIMENT.fabric.build()
    found = incast.measure(topo, k, [_incast_run("tcp", 10e6, k), _incast_run("mrc", 19.8e6, k)])
    assert found.numbers["tcp"]["victim_fraction"] == pytest.approx(0.5, rel=0.03)
    assert found.numbers["mrc"]["victim_fraction"] == pytest.approx(0.99, rel=0.03)
    assert found.numbers["mrc"]["incast_jain"] == pytest.approx(1.0)
    assert [r.agrees for r in found.rows] == [True, True]
    hurt = incast.measure(topo, k, [_incast_run("tcp", 19e6, k), _incast_run("mrc", 12e6, k)])
    assert [r.agrees for r in hurt.rows] == [False, False]


def _one_flow_run(
    name: str,
    gaps: Sequence[tuple[float, float]],
    slow: tuple[float, float, float],
    kind: str = "mrc",
) -> RunResult:
    exp = EXPERIMENTS[name]
    run = next(r for r in exp.plan(exp.fabric.build(), exp.full) if r.name == kind)
    res = RunResult(run, t_origin=T0, t_stop=T0 + run.duration_s)
    a, b, share = slow
    res.deliveries = (
        steady(kind, T0, T0 + a, 100e6, gaps)
        + steady(kind, T0 + a, T0 + b, 100e6 * share, gaps)
        + steady(kind, T0 + b, res.t_stop, 100e6, gaps)
    )
    return res


def test_port_loss_stall_settle_and_the_plane_taken_out() -> None:
    exp = EXPERIMENTS["port-loss"]
    k = exp.full
    res = _one_flow_run("port-loss", [(T0 + 3.0, T0 + 3.05)], (3.05, 7.0, 0.75))
    dst = res.run.flows[0].dst
    res.faults = [FaultWindow("fail", f"{dst}:p1", "port down", T0 + 3.0, T0 + 7.0)]
    res.recovery = {"mrc": [{"t_mono": T0 + 3.08, "event": "plane_down", "plane": 1}]}
    found = exp.measure(exp.fabric.build(), k, [res])
    n = found.numbers
    assert n["surviving_share"] == 0.75
    assert n["stall_s"] == pytest.approx(0.05, abs=0.011)
    assert n["settle_s"] is not None
    assert n["settle_s"] < 0.1
    assert n["down_fraction"] == pytest.approx(0.75, rel=0.02)
    assert n["plane_down_after_s"] == pytest.approx(0.08)
    assert [r.agrees for r in found.rows] == [True, True]
    res.deliveries = [d for d in res.deliveries if not T0 + 3.0 <= d.t_mono < T0 + 4.5]
    assert exp.measure(exp.fabric.build(), k, [res]).rows[0].agrees is False


def test_cascade_minimal_impact_or_not() -> None:
    exp = EXPERIMENTS["cascade"]
    k = exp.full
    topo = exp.fabric.build()
    res = _one_flow_run("cascade", [(T0 + 2.0 + i, T0 + 2.01 + i) for i in range(20)], (0, 0, 1))
    links = cascade.cascade_links(topo, 20)
    res.faults = [
        FaultWindow("cut", n, "hard", T0 + 2.0 + i, res.t_stop, restored=False)
        for i, n in enumerate(links)
    ]
    found = exp.measure(topo, k, [res])
    assert found.rows[0].agrees is True
    assert found.numbers["lowest_bin_fraction"] > 0.9
    assert len(found.numbers["links_cut"]) == 20
    res.deliveries = [d for d in res.deliveries if not T0 + 9.0 <= d.t_mono < T0 + 9.3]
    found = exp.measure(topo, k, [res])
    assert found.rows[0].agrees is False
    assert found.numbers["lowest_bin_fraction"] < 0.5


def test_blackhole_counts_the_connections_it_hit() -> None:
    exp = EXPERIMENTS["t1-blackhole"]
    topo = exp.fabric.build()
    run = exp.plan(topo, exp.full)[0]
    res = RunResult(run, t_origin=T0, t_stop=T0 + run.duration_s)
    fault = FaultWindow("fail", "t1-p0-0", "stop forwarding", T0 + 3.0, T0 + 5.0)
    res.faults = [fault]
    names = [f.name for f in run.flows]
    for name in names:
        res.deliveries += steady(name, T0, res.t_stop, 5e6)
        res.verified[name] = True
    res.recovery = {
        names[0]: [
            {"t_mono": T0 + 3.1, "event": "retransmit"},
            {"t_mono": T0 + 3.2, "event": "retransmit"},
            {"t_mono": T0 + 9.0, "event": "retransmit"},  # after the window: not counted
        ],
        names[1]: [{"t_mono": T0 + 5.4, "event": "path_retired"}],
        names[2]: [{"t_mono": T0 + 2.0, "event": "retransmit"}],  # before: not counted
    }
    assert blackhole.hits(res, fault)[names[0]] == {"resent": 2, "paths_retired": 0}
    found = exp.measure(topo, exp.full, [res])
    assert found.numbers["hit"] == sorted(names[:2])
    assert found.numbers["packets_resent"] == 2
    assert found.numbers["steady_fraction"] == pytest.approx(1.0, rel=0.02)
    quarter, brief, steady_row = found.rows
    assert quarter.agrees is True  # 2 of 12: about a quarter
    assert brief.agrees is True
    assert steady_row.agrees is True
    cross = [f.name for f in run.flows if topo.rack_of(f.src) != topo.rack_of(f.dst)]
    res.recovery = {n: [{"t_mono": T0 + 3.1, "event": "retransmit"}] for n in cross}
    quarter = exp.measure(topo, exp.full, [res]).rows[0]
    assert quarter.agrees is False
    assert "8 of 12" in quarter.lab
    assert "sprays over every T1" in quarter.verdict


def test_document_markdown_and_verification(tmp_path: Path) -> None:
    exp = EXPERIMENTS["port-loss"]
    topo = exp.fabric.build()
    run = exp.plan(topo, exp.quick)[0]
    res = RunResult(run, t_origin=T0, t_stop=T0 + 5)
    res.deliveries = steady("mrc", T0, T0 + 5, 1e6)
    res.verified = {"mrc": True}
    res.cpu = cpu_use(CpuTimes(10, 90, 0, own=1), CpuTimes(19.5, 90.5, 0.2, own=3))
    res.played = [(s, T0 + s.at, T0 + s.at + 0.1) for s in run.steps]
    findings = Findings((Row("claim | a", "lab", "agrees", True),), {"x": 1})
    machine = {"date": "2026-12-04 12:00 UTC", "kernel": "6.18", "cpus": 2, "load_before": [1.0]}
    cfg = ReproConfig(topo, tmp_path, None, True, "preset default")
    doc = result.document(exp, cfg, "rport1234", exp.quick, [res], findings, machine, 12.0)
    assert doc["verified"] is True
    assert doc["experiment"] == "port-loss"
    assert doc["rows"] == [
        {"claim": "claim | a", "lab": "lab", "verdict": "agrees", "agrees": True}
    ]
    (r,) = doc["runs"]
    assert r["flows"][0]["verified"] is True
    assert r["flows"][0]["bytes"] > 0
    assert [s["at"] for s in r["steps"]] == [s.at for s in run.steps]
    assert doc["machine"]["cpu_bound_runs"] == ["mrc"]  # 95% busy + 2% stolen
    result.write(tmp_path, "port-loss", doc)
    md = (tmp_path / "port-loss.md").read_text()
    assert "| claim / a | lab | agrees |" in md
    assert "CPU-bound: mrc" in md
    assert "every byte of all 1 flows verified" in md
    res.verified = {"mrc": False}
    doc = result.document(exp, cfg, "rport1234", exp.quick, [res], findings, machine, 12.0)
    assert doc["verified"] is False
    assert result.verified_line(doc) == "NOT verified: mrc/mrc"


def test_cpu_line_and_use() -> None:
    t = parse_cpu_line("cpu  100 0 50 800 20 5 5 20 0 0")
    assert (t.busy, t.idle, t.steal) == (1.6, 8.2, 0.2)
    with pytest.raises(ValueError, match="cpu line"):
        parse_cpu_line("intr 1 2 3")
    use = cpu_use(CpuTimes(0, 0, 0), CpuTimes(1, 8, 1))
    assert use is not None
    assert (use.busy, use.steal, use.cpu_bound) == (0.1, 0.1, False)
    assert cpu_use(None, CpuTimes(1, 1, 1)) is None


def _permutation_runs(ecmp: Sequence[float], mrc: Sequence[float]) -> list[RunResult]:
    exp = EXPERIMENTS["permutation"]
    out = []
    runs = [r for r in exp.plan(exp.fabric.build(), exp.full) if r.name != "mptcp"]
    for run, rates in zip(runs, (ecmp, mrc), strict=True):
        res = RunResult(run, t_origin=T0, t_stop=T0 + run.duration_s)
        for flow, bps in zip(run.flows, rates, strict=True):
            res.deliveries += steady(flow.name, T0, res.t_stop, bps)
            res.verified[flow.name] = True
        out.append(res)
    return out


def test_permutation_collisions_and_mrc_at_full_rate() -> None:
    exp = EXPERIMENTS["permutation"]
    topo = exp.fabric.build()
    line = topo.host_link.rate_bps
    ecmp = [0.5 * line, 0.5 * line, 0.33 * line] + [0.98 * line] * 5
    found = exp.measure(topo, exp.full, _permutation_runs(ecmp, [0.9 * line] * 8))
    collided, full = found.rows
    assert collided.agrees is True
    assert "3 flows on shared uplinks" in collided.verdict
    assert full.agrees is True
    assert found.numbers["mrc"]["jain"] == pytest.approx(1.0)
    lucky = exp.measure(topo, exp.full, _permutation_runs([0.98 * line] * 8, [0.9 * line] * 8))
    assert lucky.rows[0].agrees is False
    held = exp.measure(topo, exp.full, _permutation_runs(ecmp, [0.9 * line] * 7 + [0.5 * line]))
    assert held.rows[1].agrees is False


def _flapping_run(gaps: Sequence[tuple[float, float]]) -> RunResult:
    exp = EXPERIMENTS["flapping"]
    k = exp.full
    t_a, t_b = T0 + k.flap_at, T0 + k.flap_at + k.period * k.count
    res = _one_flow_run("flapping", [(T0 + a, T0 + b) for a, b in gaps], (k.flap_at, t_b - T0, 0.5))
    links = flapping.flapping_links(exp.fabric.build())
    res.faults = [FaultWindow("flap", n, "cycle hard", t_a, t_b) for n in links]
    return res


def test_flapping_half_the_rate_or_a_stall() -> None:
    exp = EXPERIMENTS["flapping"]
    topo = exp.fabric.build()
    found = exp.measure(topo, exp.full, [_flapping_run([])])
    half, back = found.rows
    assert found.numbers["flapping_fraction"] == pytest.approx(0.5, rel=0.03)
    assert half.agrees is True
    assert back.agrees is True
    assert found.numbers["back_to_full_s"] == pytest.approx(0.0, abs=0.1)
    # as much on average, but a 2 s gap with half the links up is a stall
    stalled = exp.measure(topo, exp.full, [_flapping_run([(3.0, 5.0)])])
    assert stalled.rows[0].agrees is False
    assert "nothing was delivered for 2010 ms" in stalled.rows[0].verdict  # a record per 10 ms


def test_mptcp_runs_add_rows_in_words_beside_the_paper_s() -> None:
    exp = EXPERIMENTS["port-loss"]
    k = exp.full
    runs = []
    for kind, gap in (("mrc", 0.05), ("mptcp", 0.6)):
        res = _one_flow_run("port-loss", [(T0 + 3.0, T0 + 3.0 + gap)], (3.0, 7.0, 0.5), kind)
        dst = res.run.flows[0].dst
        res.faults = [FaultWindow("fail", f"{dst}:p1", "port down", T0 + 3.0, T0 + 7.0)]
        runs.append(res)
    found = exp.measure(exp.fabric.build(), k, runs)
    *paper, mptcp = found.rows
    assert len(paper) == 2
    assert mptcp.agrees is None  # the paper has no MPTCP: a comparison, not a verdict
    assert mptcp.claim.endswith("(not in the paper)")
    assert mptcp.verdict.startswith("for comparison: MPTCP's longest gap 610 ms, MRC's 60 ms")
    assert found.numbers["mptcp"]["stall_s"] == pytest.approx(0.61, abs=0.011)
    # without the MPTCP run (--baselines tcp): the paper's rows alone
    assert len(exp.measure(exp.fabric.build(), k, runs[:1]).rows) == 2


def test_loss_has_an_mptcp_row_per_level() -> None:
    k = loss.Knobs()
    topo = loss.EXPERIMENT.fabric.build()
    results = [
        _loss_run("mrc", [80e6, 78e6, 30e6], k),
        _loss_run("tcp", [20e6, 2e6, 0.5e6], k),
        _loss_run("tcp8", [80e6, 60e6, 20e6], k),
        _loss_run("mptcp", [80e6, 40e6, 8e6], k),
    ]
    found = loss.measure(topo, k, results)
    assert found.numbers["fraction_of_lossless"]["mptcp"] == pytest.approx([0.5, 0.1], rel=0.03)
    mptcp = [r for r in found.rows if "MPTCP" in r.claim]
    assert [r.agrees for r in mptcp] == [None, None]
    assert "MPTCP kept less of its lossless goodput than MRC (50% against 9" in mptcp[0].verdict


def test_a_gap_still_open_at_the_end_is_a_lower_bound_in_words() -> None:
    from mrc_transport.repro.measure import gap

    assert gap(0.25) == "250 ms"
    assert gap(3.2, open_ended=True) == "> 3200 ms (still stalled)"
    assert gap(None, open_ended=True) == "-"


def test_an_incast_that_outlasts_the_run_is_not_measured_not_an_error() -> None:
    k = incast.Knobs()
    topo = incast.EXPERIMENT.fabric.build()
    tcp = _incast_run("tcp", 10e6, k)
    starved = tcp.run.flows[1].name  # one sender starved until after the run's end
    tcp.deliveries.append(Delivery(tcp.t_stop + 1.0, 1000, starved))
    found = incast.measure(topo, k, [tcp, _incast_run("mrc", 19.8e6, k)])
    (row,) = found.rows
    assert row.agrees is None
    assert "outlasted the tcp run" in row.lab
    assert found.numbers["tcp"]["victim_alone_bps"] is None
