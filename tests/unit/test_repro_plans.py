"""The repro experiments as data: every plan on its own fabric (full and quick) is well
formed, and each experiment's flows and fault schedule are the ones its docstring says."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from labs.faultkinds import Degrade, Fail, Flap, links_of, target_kind
from labs.paths import path_links, paths
from labs.topology import preset
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.patterns import permutation
from mrc_transport.harness.schedule import Step
from mrc_transport.repro.engine import check_plan, unique_lab
from mrc_transport.repro.experiments import (
    EXPERIMENTS,
    NAMES,
    blackhole,
    cascade,
    flapping,
    incast,
    loss,
)
from mrc_transport.repro.spec import Experiment, Fabric, Run

ISSUE = ("loss", "permutation", "incast", "port-loss", "flapping", "cascade", "t1-blackhole")
"""The experiments of flows (issue 14's seven); issue 37 added a step loop's."""
LOOPS = ("training-step",)
BUDGET_S = 56.0
"""Seconds of runs (not start-up) a default experiment may plan, its MPTCP and emulated
RoCE runs included: the rest of 86 s goes to bringing up the lab and starting its
processes on a busy 2-core machine."""


def _runs(exp: Experiment[Any], quick: bool) -> tuple[Run, ...]:
    topo = exp.fabric.build()
    knobs = exp.knobs(quick)
    exp.check(topo, knobs)
    runs = exp.plan(topo, knobs)
    check_plan(topo, runs)
    return runs


def test_the_issues_experiments_in_their_order() -> None:
    assert NAMES == ISSUE + LOOPS


@pytest.mark.parametrize("name", ISSUE)
@pytest.mark.parametrize("quick", [False, True])
def test_plans_are_well_formed(name: str, quick: bool) -> None:
    exp = EXPERIMENTS[name]
    topo = exp.fabric.build()
    runs = _runs(exp, quick)
    assert runs
    for run in runs:
        assert run.flows
        assert run.duration_s > 0
        for step in run.steps:
            # every fault is played, and done, within the run
            assert 0 < step.at <= run.duration_s
            assert step.at + step.busy_s <= run.duration_s
        receivers = [(f.dst, f.port) for f in run.flows]
        assert len(set(receivers)) == len(receivers), "two receivers on one port of one host"
        assert len({f.name for f in run.flows}) == len(run.flows)
        for f in run.flows:
            assert f.src in topo.hosts
            assert f.dst in topo.hosts
            assert f.src != f.dst
            assert f.seconds > 0


@pytest.mark.parametrize("name", ISSUE + LOOPS)
def test_quick_is_shorter_and_the_default_fits_the_budget(name: str) -> None:
    exp = EXPERIMENTS[name]
    full = sum(r.duration_s for r in _runs(exp, False))
    quick = sum(r.duration_s for r in _runs(exp, True))
    assert quick < full <= BUDGET_S


@pytest.mark.parametrize("name", ISSUE + LOOPS)
def test_lab_names_are_unique_and_valid(name: str) -> None:
    from labs.topology import check_lab_name

    names = {unique_lab(EXPERIMENTS[name]) for _ in range(20)}
    assert len(names) > 15
    for lab in names:
        check_lab_name(lab)


@pytest.mark.parametrize("quick", [False, True])
def test_training_step_is_a_loop_per_transport_through_a_cut_and_a_dead_t1(quick: bool) -> None:
    from labs.faultkinds import Cut, Restore, Unfail
    from mrc_transport.repro.engine import selected

    exp = EXPERIMENTS["training-step"]
    topo, k = exp.fabric.build(), exp.knobs(quick)
    runs = _runs(exp, quick)
    assert [r.name for r in runs] == ["mrc", "tcp", "mptcp"]
    for run in runs:
        assert run.loop is not None
        assert run.flows == ()
        assert run.kinds == {run.name}
        assert run.loop.hosts == topo.hosts  # every host a rank
        cfg = run.loop.config
        assert (cfg.alg.name, cfg.size, cfg.transport) == ("allreduce", k.size, run.name)
        assert cfg.schedule == run.steps
        assert [(s.at, s.fault) for s in run.steps] == [
            (k.cut_at, Cut("@tcp-link", "gray")),
            (k.cut_at + k.cut_s, Restore("@tcp-link")),
            (k.fail_at, Fail("@tcp-t1")),
            (k.fail_at + k.fail_s, Unfail("@tcp-t1")),
        ]
        assert cfg.until_s == run.duration_s > k.fail_at + k.fail_s
        assert cfg.warmup >= 1  # it measures @tcp-link
    assert [r.name for r in selected(runs, ["tcp"])] == ["mrc", "tcp"]


def test_runs_that_share_a_lab_leave_it_healed() -> None:
    # loss plays three runs on one lab: each must take its loss off before the next
    for run in _runs(EXPERIMENTS["loss"], False):
        last = max(run.steps, key=lambda s: s.at)
        assert (last.action, last.target) == ("restore", "@links")


def test_loss_steps_every_level_in_turn_on_every_link() -> None:
    k = loss.Knobs()
    runs = _runs(EXPERIMENTS["loss"], False)
    assert [r.name for r in runs] == ["mrc", "roce", "tcp", "tcp8", "mptcp"]
    assert [(f.kind, f.streams, f.evs, f.recovery) for r in runs for f in r.flows] == [
        ("mrc", 1, None, None),
        ("mrc", 1, 1, "go-back-n"),  # RoCE's reliable connection, emulated
        ("tcp", 1, None, None),
        ("tcp", 8, None, None),
        ("mptcp", 1, None, None),
    ]
    steps = runs[0].steps
    assert [(s.at, s.fault) for s in steps[:-1]] == [
        (k.clean_s, Degrade("@links", 0.1)),
        (k.clean_s + k.phase_s, Degrade("@links", 1.0)),
    ]
    assert runs[0].duration_s == k.clean_s + 2 * k.phase_s
    topo = EXPERIMENTS["loss"].fabric.build()
    assert len(links_of(topo, "@links")) == len(topo.links)
    assert {topo.link(n).kind for n in links_of(topo, "@t0-t1")} == {"t0-t1"}


def test_permutation_is_the_collisions_demo_s() -> None:
    exp = EXPERIMENTS["permutation"]
    topo = exp.fabric.build()
    ecmp, mptcp, mrc = _runs(exp, False)
    pairs = permutation(topo)
    assert [(f.src, f.dst) for f in ecmp.flows] == pairs == [(f.src, f.dst) for f in mrc.flows]
    assert [(f.src, f.dst) for f in mptcp.flows] == pairs
    assert {f.kind for f in ecmp.flows} == {"tcp"}
    assert {f.kind for f in mptcp.flows} == {"mptcp"}
    assert {f.kind for f in mrc.flows} == {"mrc"}
    assert sorted(s for s, _ in pairs) == sorted(d for _, d in pairs) == sorted(topo.hosts)


def test_incast_victim_shares_the_fabric_but_not_the_receiver() -> None:
    exp = EXPERIMENTS["incast"]
    topo = exp.fabric.build()
    k = exp.full
    for run in _runs(exp, False):
        victim = next(f for f in run.flows if f.name == incast.VICTIM)
        crowd = [f for f in run.flows if f is not victim]
        assert len(crowd) == k.senders == 7
        assert len({f.dst for f in crowd}) == 1
        receiver = crowd[0].dst
        assert victim.dst != receiver
        assert victim.src not in {f.src for f in crowd}
        # the victim crosses the T0 uplinks and T1 downlinks the incast crosses
        assert topo.rack_of(victim.src) == topo.rack_of(crowd[0].src) != topo.rack_of(receiver)
        assert topo.rack_of(victim.dst) == topo.rack_of(receiver)
        share = k.incast_s * topo.host_link.rate_bps * topo.planes / 8 / k.senders
        assert all(f.nbytes == int(share) for f in crowd)
        assert victim.nbytes is None
        assert victim.seconds >= run.duration_s


def test_incast_refuses_a_fabric_without_room() -> None:
    with pytest.raises(HarnessError, match="8 hosts per rack"):
        incast.check(preset("default"), incast.Knobs())


def _mrc_and_mptcp(exp: Experiment[Any]) -> Run:
    """The MRC run of a one-flow experiment, checked against its MPTCP twin: the same
    hosts, length and faults."""
    run, twin = _runs(exp, False)
    assert (run.name, twin.name) == ("mrc", "mptcp")
    assert [(f.name, f.kind) for f in twin.flows] == [("mptcp", "mptcp")]
    assert (twin.flows[0].src, twin.flows[0].dst) == (run.flows[0].src, run.flows[0].dst)
    assert (twin.steps, twin.duration_s) == (run.steps, run.duration_s)
    return run


def test_port_loss_fails_and_restores_one_receiver_port() -> None:
    run = _mrc_and_mptcp(EXPERIMENTS["port-loss"])
    fail, unfail = run.steps
    assert (fail.action, unfail.action) == ("fail", "unfail")
    assert fail.target == unfail.target == f"{run.flows[0].dst}:p1"
    assert unfail.at - fail.at == EXPERIMENTS["port-loss"].full.down_s


def test_flapping_flaps_half_the_receiver_s_links_in_step() -> None:
    exp = EXPERIMENTS["flapping"]
    topo = exp.fabric.build()
    run = _mrc_and_mptcp(exp)
    (step,) = run.steps
    links = step.target.split("+")
    assert isinstance(step.fault, Flap)
    assert target_kind(step.target) == "links"
    assert links == flapping.flapping_links(topo)
    assert len(links) == topo.planes // 2
    assert {topo.link(n).a for n in links} == {run.flows[0].dst}
    assert {topo.link(n).kind for n in links} == {"host-t0"}


def test_cascade_cuts_one_per_second_and_keeps_every_plane_connected() -> None:
    exp = EXPERIMENTS["cascade"]
    topo = exp.fabric.build()
    k = exp.full
    run = _mrc_and_mptcp(exp)
    cuts = [s for s in run.steps if s.action == "cut"]
    cut = [s.target for s in cuts]
    assert len(cut) == 20 == len(set(cut))
    assert [s.at for s in cuts] == [k.first_at + i * k.every_s for i in range(20)]
    # every link back at the run's end, so the transfer can finish
    (back,) = [s for s in run.steps if s.action == "restore"]
    assert sorted(back.target.split("+")) == sorted(cut)
    assert back.at == run.duration_s
    assert all(topo.link(n).kind == "t0-t1" for n in cut)
    # every plane still has a path between the racks that avoids every cut link
    src, dst = run.flows[0].src, run.flows[0].dst
    alive = [p for p in paths(topo, src, dst) if not set(path_links(src, dst, p)) & set(cut)]
    assert {p.plane for p in alive} == set(range(topo.planes))
    assert cascade.paths_left(topo, src, dst, cut) == {p: 1 for p in range(topo.planes)}
    # a fabric with fewer links to spare gets fewer cuts, never its last T1
    tiny = preset("tiny")
    assert cascade.cascade_links(tiny, 20) == [
        "t0-p0-0:t1-p0-1",
        "t0-p1-0:t1-p1-1",
        "t0-p0-1:t1-p0-1",
        "t0-p1-1:t1-p1-1",
    ]


def test_t1_blackhole_is_all_to_all_around_one_t1() -> None:
    exp = EXPERIMENTS["t1-blackhole"]
    topo = exp.fabric.build()
    run, twin = _runs(exp, False)
    talkers = blackhole.talkers(topo, exp.full)
    assert [(f.src, f.dst) for f in run.flows] == list(itertools.permutations(talkers, 2))
    assert [(f.src, f.dst) for f in twin.flows] == [(f.src, f.dst) for f in run.flows]
    assert {f.kind for f in twin.flows} == {"mptcp"}
    assert len({(f.dst, f.port) for f in twin.flows}) == 12
    assert len(run.flows) == 12
    fail, unfail = run.steps
    assert fail.target == unfail.target == "t1-p0-0"
    assert topo.t1_per_plane >= 2  # the dead T1 is never the only path
    assert len(blackhole.talkers(topo, exp.quick)) == 2


def test_fabric_reshapes_a_preset_and_refuses_nonsense() -> None:
    topo = Fabric(planes=1, hosts_per_rack=8, t1_per_plane=3, rate_bps=20_000_000).build()
    assert (topo.planes, topo.hosts_per_rack, topo.t1_per_plane) == (1, 8, 3)
    assert topo.host_link.rate_bps == topo.fabric_link.rate_bps == 20_000_000
    assert Fabric(planes=1).build("tiny").racks == 2
    with pytest.raises(HarnessError, match="planes"):
        Fabric(planes=0).build()
    assert "preset tiny" in Fabric(planes=1).describe("tiny")


def test_a_target_not_in_the_fabric_is_refused_before_any_lab() -> None:
    topo = preset("tiny")
    bad = Run("x", _runs(EXPERIMENTS["port-loss"], True)[0].flows, 5, (Step(1, Fail("h9:p0")),))
    with pytest.raises(HarnessError, match="h9"):
        check_plan(topo, [bad])
    plus = Run("x", bad.flows, 5, (Step(1, Flap("h0:t0-p0-0+h0:t0-p9-0")),))
    with pytest.raises(HarnessError, match="no link"):
        check_plan(topo, [plus])


def test_baselines_left_out_drop_their_runs() -> None:
    from mrc_transport.repro.engine import selected

    runs = _runs(EXPERIMENTS["loss"], True)
    assert [r.name for r in selected(runs, ("tcp",))] == ["mrc", "roce", "tcp", "tcp8"]
    assert [r.name for r in selected(runs, ("tcp", "mptcp"))] == [
        "mrc",
        "roce",
        "tcp",
        "tcp8",
        "mptcp",
    ]
