"""The EV set: spread, state table, replacement, probes, planes, floor."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mrc_transport.protocol import events, transitions
from mrc_transport.protocol.config import Config
from mrc_transport.protocol.ev import (
    EV_BIT,
    TRANSITIONS,
    Ev,
    EvInput,
    EvSet,
    EvState,
    Role,
    ev_fields,
    ev_value,
)
from tests.unit.helpers import paths


def state(ev: Ev) -> EvState:
    """The state, read through a call (so mypy does not narrow it across calls)."""
    return ev.state


def make(cfg: Config | None = None, **kw: int) -> tuple[EvSet, list[events.Event]]:
    log: list[events.Event] = []
    evs = EvSet(paths(**kw), cfg or Config(), random.Random(7), 42, log.append)
    return evs, log


def test_spread_equally_over_planes_and_paths() -> None:
    evs, _ = make()
    assert len(evs.usable) == 128
    assert Counter(e.plane for e in evs.usable) == {0: 64, 1: 64}
    assert set(Counter(e.path_key for e in evs.usable).values()) == {16}
    assert all(e.value & EV_BIT for e in evs.by_value.values())
    assert len(evs.by_value) == 128 + 32
    assert sum(len(b) for b in evs.backup.values()) == 32


def test_ecn_skips_for_one_rotation() -> None:
    evs, log = make()
    ev = evs.usable[0]
    evs.apply(ev, EvInput.ECN, 1.0)
    assert ev.state is EvState.SKIP
    assert ev not in evs.usable
    assert isinstance(log[-1], events.PathSkipped)
    for _ in range(len(evs.usable) + len(evs.skipped)):
        evs.on_sent(evs.usable[0])
    assert state(ev) is EvState.GOOD
    assert ev in evs.usable


def test_loss_retires_at_once_and_backup_of_same_plane_replaces() -> None:
    evs, log = make()
    ev = evs.usable[5]
    evs.apply(ev, EvInput.LOSS, 1.0)
    assert ev.state is EvState.ASSUMED_BAD
    assert ev.role is Role.RETIRED
    assert len(evs.usable) == 128
    assert evs.active_count[ev.plane] == 64
    assert len(evs.backup[ev.plane]) == 15
    assert any(isinstance(e, events.PathRetired) and e.ev == ev.value for e in log)


def test_probes_readmit_after_enough_successes() -> None:
    cfg = Config(readmit_probes=3)
    evs, log = make(cfg)
    evs.base_rtt = 1e-3
    ev = evs.usable[0]
    evs.apply(ev, EvInput.LOSS, 0.0)
    assert evs.next_probe_time() == pytest.approx(3e-3)  # 3 base RTTs (htsim)
    assert evs.due_probes(2e-3) == []
    now = 3e-3
    for i in range(3):
        assert evs.due_probes(now) == [ev]
        ev.probe_id = 100 + i
        evs.probe_ok(ev, now)
        now = max(now, evs.next_probe_time()) if ev.state is EvState.ASSUMED_BAD else now
    assert ev.state is EvState.GOOD
    assert ev.role is Role.ACTIVE  # back in the active set
    assert evs.active_count[ev.plane] == 64  # which stays at its size: one EV stepped back
    assert isinstance(log[-1], events.PathReadmitted)


def test_unanswered_probe_resets_the_count() -> None:
    evs, _ = make(Config(readmit_probes=2))
    evs.base_rtt = 1e-3
    ev = evs.usable[0]
    evs.apply(ev, EvInput.TIMEOUT, 0.0)
    [_due] = evs.due_probes(3e-3)
    ev.probe_id = 1
    evs.probe_ok(ev, 3e-3)
    assert ev.probe_ok == 1
    evs.due_probes(evs.next_probe_time())
    ev.probe_id = 2
    evs.due_probes(evs.next_probe_time())  # probe 2 never answered
    assert ev.probe_ok == 0
    assert ev.state is EvState.ASSUMED_BAD


def test_repeated_failures_on_one_path_retire_the_whole_path() -> None:
    evs, log = make(Config(path_fail_threshold=3))
    key = evs.usable[0].path_key
    on_path = [e for e in evs.usable if e.path_key == key]
    for ev in on_path[:3]:
        evs.apply(ev, EvInput.LOSS, 1.0)
    assert all(e.state is EvState.ASSUMED_BAD for e in evs.by_value.values() if e.path_key == key)
    assert all(e.path_key != key for e in evs.usable)
    assert sum(isinstance(e, events.PathRetired) and e.reason == "path" for e in log) >= 13


def test_clean_ack_on_the_path_resets_its_failure_count() -> None:
    evs, _ = make(Config(path_fail_threshold=2))
    key = evs.usable[0].path_key
    a, b, c = [e for e in evs.usable if e.path_key == key][:3]
    evs.apply(a, EvInput.LOSS, 1.0)
    evs.on_clean_ack(c)
    evs.apply(b, EvInput.LOSS, 1.0)
    assert c.state is EvState.GOOD


def test_plane_down_then_up() -> None:
    evs, log = make(
        Config(ev_count=8, ev_backup=2, path_fail_threshold=100, ev_min_active=0),
        planes=2,
        per_plane=1,
    )
    plane0 = [e for e in evs.by_value.values() if e.plane == 0]
    for ev in plane0:
        evs.apply(ev, EvInput.LOSS, 1.0)
    assert any(isinstance(e, events.PlaneDown) and e.plane == 0 for e in log)
    assert {e.plane for e in evs.usable} == {1}
    ev = plane0[0]
    for _ in range(evs.cfg.readmit_probes):
        evs.probe_ok(ev, 2.0)
    assert isinstance(log[-1], events.PlaneUp)
    assert log[-1].plane == 0
    assert ev in evs.usable


def test_floor_keeps_a_minimum_of_usable_evs() -> None:
    evs, _ = make(Config(ev_count=8, ev_backup=0, ev_min_active=6, path_fail_threshold=100))
    for ev in list(evs.usable):
        evs.apply(ev, EvInput.LOSS, 1.0)
    assert len(evs.usable) == 6
    assert evs.floor_held == 6


def test_deny_and_allow() -> None:
    evs, _ = make()
    ev = evs.usable[3]
    evs.deny(ev.value, 1.0)
    assert ev.state is EvState.DENIED
    assert ev not in evs.usable
    assert evs.next_probe_time() > 1e9  # denied EVs are not probed
    evs.allow(ev.value, 2.0)
    assert state(ev) is EvState.ASSUMED_BAD
    assert evs.next_probe_time() == 2.0


def test_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(EvState)
    assert all(EvInput.DENY in TRANSITIONS[s] for s in EvState)
    # evidence about a path (SACKs, NACKs, losses) may come in any state, late
    evidence = {EvInput.ECN, EvInput.TRIMMED, EvInput.LOSS, EvInput.TIMEOUT}
    assert all(evidence <= set(TRANSITIONS[s]) for s in EvState)


def test_an_input_with_no_transition_is_counted_and_raised_under_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe success for an EV that is not retired has no transition: the core's bug,
    raised under the suite (tests/conftest.py sets STRICT), counted and ignored else."""
    evs, _ = make()
    ev = evs.usable[0]
    with pytest.raises(transitions.IllegalTransition, match="GOOD has no transition on"):
        evs.apply(ev, EvInput.PROBES_ENOUGH, 1.0)
    monkeypatch.setattr(transitions, "STRICT", False)  # as an endpoint runs
    evs.apply(ev, EvInput.ROTATION, 1.0)
    assert evs.illegal_transitions == 2
    assert state(ev) is EvState.GOOD


def test_an_evs_bits_name_its_path() -> None:
    """As the paper's and OCP's generated EVs: the plane in bits 24-30, the path's index
    among its plane's paths (the T0 uplink, so the T1) in bits 16-23, entropy below; a
    capture's EV names its path (the dissector shows the three fields)."""
    ps = paths(planes=3, per_plane=4)
    evs = EvSet(ps, Config(ev_count=48, ev_backup=12), random.Random(3), 1, lambda e: None)
    for ev in evs.by_value.values():
        plane, path, _ = ev_fields(ev.value)
        in_plane = [p for p in ps if p.plane == ev.plane]
        assert plane == ev.plane
        assert in_plane[path] is ev.path
        assert ev.value & EV_BIT
    assert ev_fields(ev_value(5, 200, 0xBEEF)) == (5, 200, 0xBEEF)
