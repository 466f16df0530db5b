"""harness.schedule: the demo's default, YAML validation, placeholders, playback."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from labs.topology import preset
from mrc_transport.demo.failover import default_schedule
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import bindings_for
from mrc_transport.harness.schedule import (
    Step,
    apply_step,
    check_targets,
    load_schedule,
    natural_duration,
    parse_schedule,
    resolve,
    run_schedule,
    scaled,
)

TINY = preset("tiny")


def test_default_schedule_follows_the_issue() -> None:
    steps = default_schedule(2.0)
    assert [(s.at, s.action, s.target) for s in steps] == [
        (2.0, "cut", "@tcp-link"),
        (4.0, "restore", "@tcp-link"),
        (6.0, "cut", "@tcp-link"),
        (8.0, "restore", "@tcp-link"),
        (10.0, "flap", "@tcp-link"),
        (12.0, "fail", "@tcp-t1"),
        (14.0, "unfail", "@tcp-t1"),
        (16.0, "fail", "@src-port"),
        (18.0, "unfail", "@src-port"),
    ]
    assert [s.mode for s in steps[:4:2]] == ["gray", "hard"]
    assert natural_duration(steps) == pytest.approx(20.0)  # flap at 10 takes 1 s, last at 18


def test_duration_scales_times_and_flap_period() -> None:
    steps = scaled(default_schedule(2.0), 11.0)  # 18 s of steps -> 9 s, plus the 2 s tail
    assert natural_duration(steps) == pytest.approx(11.0)
    assert steps[0].at == pytest.approx(1.0)
    assert steps[-1].at == pytest.approx(9.0)
    assert steps[4].period == pytest.approx(0.25)
    with pytest.raises(HarnessError, match="--duration"):
        scaled(steps, 2.0)


def test_yaml_file_parses_and_sorts(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "- {at: 4, action: restore, target: '@tcp-link'}\n"
        "- {at: 1.5, action: cut, target: '@tcp-link', mode: gray}\n"
        "- {at: 6, action: degrade, target: 't0-p1-0:t1-p1-0', loss: 5}\n"
        "- {at: 8, action: flap, target: 't0-p0-0:t1-p0-1', period: 0.4, count: 2}\n"
        "- {at: 9, action: fail, target: h1:p0}\n"
        "- {at: 10, action: restore, target: h1:p0}\n"
    )
    steps = load_schedule(path)
    assert [s.at for s in steps] == [1.5, 4.0, 6.0, 8.0, 9.0, 10.0]
    assert steps[0] == Step(1.5, "cut", "@tcp-link", mode="gray")
    assert steps[2].loss_pct == 5.0
    assert (steps[3].period, steps[3].count, steps[3].busy_s) == (0.4, 2, pytest.approx(0.8))
    check_targets(steps, TINY)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "non-empty list"),
        ({"at": 1}, "non-empty list"),
        (["cut"], "step 1: must be a mapping"),
        ([{"at": 1, "action": "cut"}], "step 1: missing 'target'"),
        ([{"at": -1, "action": "cut", "target": "a:b"}], "at must be >= 0"),
        ([{"at": "x", "action": "cut", "target": "a:b"}], "at must be a number"),
        ([{"at": 1, "action": "cutt", "target": "a:b"}], "unknown action 'cutt'"),
        ([{"at": 1, "action": "cut", "target": "a:b", "mode": "soft"}], "mode must be gray"),
        ([{"at": 1, "action": "cut", "target": "t1-p0-0"}], "cut takes a link"),
        ([{"at": 1, "action": "fail", "target": "a:b"}], "fail takes a switch or HOST:PORT"),
        ([{"at": 1, "action": "fail", "target": "@tcp-link"}], "not the link '@tcp-link'"),
        ([{"at": 1, "action": "cut", "target": "@nope"}], "unknown placeholder"),
        ([{"at": 1, "action": "degrade", "target": "a:b"}], "degrade needs loss"),
        ([{"at": 1, "action": "degrade", "target": "a:b", "loss": 0}], "loss must be"),
        ([{"at": 1, "action": "fail", "target": "s", "mode": "gray"}], "'mode' does not apply"),
        ([{"at": 1, "action": "flap", "target": "a:b", "count": 0}], "count must be"),
        ([{"at": 1, "action": "flap", "target": "a:b", "period": -1}], "period must be"),
        ([{"at": 1, "action": "cut", "target": "a:b", "when": 3}], "unknown key 'when'"),
        ([{"at": 0, "action": "cut", "target": "a:b"}, 7], "step 2: must be a mapping"),
    ],
)
def test_bad_schedules_fail_with_one_line(raw: object, message: str) -> None:
    with pytest.raises(HarnessError, match=message) as info:
        parse_schedule(raw, "s.yaml")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("s.yaml")


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="No such file"):
        load_schedule(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {at: 1, action: cut\n")
    with pytest.raises(HarnessError, match=r"bad.yaml: line \d+: invalid YAML"):
        load_schedule(bad)


def test_placeholders_resolve_and_targets_are_checked() -> None:
    b = bindings_for(TINY, "t1-p1-0:t0-p1-1", "h0")
    assert b == {"@tcp-link": "t0-p1-1:t1-p1-0", "@tcp-t1": "t1-p1-0", "@src-port": "h0:p1"}
    steps = resolve(default_schedule(), b)
    assert {s.target for s in steps} == {"t0-p1-1:t1-p1-0", "t1-p1-0", "h0:p1"}
    check_targets(steps, TINY)
    with pytest.raises(HarnessError, match="no value for @tcp-link"):
        resolve(default_schedule(), {})
    for bad, why in (
        ("t0-p0-0:t1-p0-9", "no link"),
        ("t1-p7-0", "no node"),
        ("h0:p5", "no port p5"),
        ("h1", "is a host"),
    ):
        action = "cut" if ":" in bad and not bad.startswith("h") else "fail"
        with pytest.raises(HarnessError, match=why):
            check_targets([Step(3, action, bad)], TINY)


class FakeLab:
    def __init__(self, clock: object = None) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.clock = clock

    def _log(self, *call: object) -> str:
        t = trio.current_time() if self.clock else None
        self.calls.append((*call, t))
        return f"event {call[0]}"

    def cut(self, link_name: str, mode: object = "hard") -> object:
        return self._log("cut", link_name, mode)

    def restore(self, link_name: str) -> object:
        return self._log("restore", link_name)

    def degrade(self, link_name: str, loss_pct: float) -> object:
        return self._log("degrade", link_name, loss_pct)

    def flap(self, link_name: str, period: float, count: int) -> object:
        return self._log("flap", link_name, period, count)

    def fail(self, target: str) -> object:
        return self._log("fail", target)

    def unfail(self, target: str) -> object:
        return self._log("unfail", target)


def test_apply_step_dispatch() -> None:
    lab = FakeLab()
    for s in (
        Step(0, "cut", "a:t1", mode="gray"),
        Step(0, "restore", "a:t1"),
        Step(0, "restore", "h0:p1"),
        Step(0, "restore", "t1-p0-0"),
        Step(0, "degrade", "a:t1", loss_pct=2.5),
        Step(0, "flap", "a:t1", period=0.2, count=4),
        Step(0, "fail", "t1-p0-0"),
        Step(0, "unfail", "h0:p1"),
    ):
        apply_step(lab, s)
    assert [c[:-1] for c in lab.calls] == [
        ("cut", "a:t1", "gray"),
        ("restore", "a:t1"),
        ("unfail", "h0:p1"),
        ("unfail", "t1-p0-0"),
        ("degrade", "a:t1", 2.5),
        ("flap", "a:t1", 0.2, 4),
        ("fail", "t1-p0-0"),
        ("unfail", "h0:p1"),
    ]


async def test_run_schedule_plays_steps_on_time(autojump_clock: trio.testing.MockClock) -> None:
    lab = FakeLab(clock=autojump_clock)
    seen: list[tuple[str, object]] = []

    async def direct(fn: object) -> object:
        assert callable(fn)
        return fn()

    t_origin = trio.current_time() + 5.0
    steps = resolve(default_schedule(1.5), bindings_for(TINY, "t0-p0-0:t1-p0-1", "h0"))
    await run_schedule(
        lab,
        list(reversed(steps)),
        t_origin,
        clock=trio.current_time,
        run_sync=direct,
        on_step=lambda s, r, t0, t1: seen.append((s.action, r)),
    )
    assert [round(c[-1] - t_origin, 6) for c in lab.calls] == [1.5 * (i + 1) for i in range(9)]
    assert seen[0] == ("cut", "event cut")
    assert lab.calls[5][:2] == ("fail", "t1-p0-1")
    assert lab.calls[7][:2] == ("fail", "h0:p0")
