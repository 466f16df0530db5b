"""harness.schedule: the demo's default, YAML validation, placeholders, playback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from labs.faultkinds import Cut, Degrade, Fail, Flap, Restore
from labs.topology import preset
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import bindings_for
from mrc_transport.harness.schedule import (
    Step,
    check_targets,
    default_schedule,
    lanes,
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
    assert [s.fault for s in steps[:4:2]] == [Cut("@tcp-link", "gray"), Cut("@tcp-link", "hard")]
    assert natural_duration(steps) == pytest.approx(20.0)  # flap at 10 takes 1 s, last at 18


def test_duration_scales_times_and_flap_period() -> None:
    steps = scaled(default_schedule(2.0), 11.0)  # 18 s of steps -> 9 s, plus the 2 s tail
    assert natural_duration(steps) == pytest.approx(11.0)
    assert steps[0].at == pytest.approx(1.0)
    assert steps[-1].at == pytest.approx(9.0)
    flap = steps[4].fault
    assert isinstance(flap, Flap)
    assert (flap.period, flap.count) == (pytest.approx(0.25), 2)
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
    assert steps[0] == Step(1.5, Cut("@tcp-link", mode="gray"))
    assert steps[2].fault == Degrade("t0-p1-0:t1-p1-0", 5.0)
    assert (steps[3].fault, steps[3].busy_s) == (
        Flap("t0-p0-0:t1-p0-1", 0.4, 2),
        pytest.approx(0.8),
    )
    assert steps[5].fault == Restore("h1:p0")
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
        (
            [{"at": 1, "action": "cut", "target": "a:b", "mode": "soft"}],
            "mode must be hard or gray",
        ),
        ([{"at": 1, "action": "cut", "target": "t1-p0-0"}], "cut takes a link"),
        ([{"at": 1, "action": "fail", "target": "a:b"}], "fail takes a switch or HOST:PORT"),
        ([{"at": 1, "action": "fail", "target": "@tcp-link"}], "not the link '@tcp-link'"),
        ([{"at": 1, "action": "cut", "target": "@nope"}], "unknown placeholder"),
        ([{"at": 1, "action": "unfail", "target": "@t0-t1"}], "not the group '@t0-t1'"),
        ([{"at": 1, "action": "degrade", "target": "a:b"}], "degrade needs loss"),
        ([{"at": 1, "action": "degrade", "target": "a:b", "loss": 101}], "loss must be"),
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
        ("h0:p5", "'h0:p5' is not HOST:PORT"),
        ("h1", "not the host 'h1'"),
    ):
        fault = Cut(bad) if ":" in bad and not bad.startswith("h") else Fail(bad)
        with pytest.raises(HarnessError, match=f"step at 3s .*{why}"):
            check_targets([Step(3, fault)], TINY)
    with pytest.raises(HarnessError, match="no link 'h0:t0-p9-0'"):
        check_targets([Step(1, Flap("h0:t0-p0-0+h0:t0-p9-0"))], TINY)
    check_targets([Step(1, Degrade("@links", 1)), Step(2, Restore("@links"))], TINY)


class FakeLab:
    """The lab methods the default schedule's faults call, logged with the (mock) time."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def _log(self, *call: object) -> Any:
        self.calls.append((*call, trio.current_time()))
        return f"event {call[0]}"

    def cut(self, link_name: str, mode: object = "hard") -> Any:
        return self._log("cut", link_name, mode)

    def restore(self, link_name: str) -> Any:
        return self._log("restore", link_name)

    def flap(self, link_name: str, period: float, count: int) -> Any:
        return [self._log("flap", link_name, period, count)]

    def fail(self, target: str) -> Any:
        return self._log("fail", target)

    def unfail(self, target: str) -> Any:
        return self._log("unfail", target)


def test_lanes_split_by_target_in_time_order() -> None:
    a1, b1, a2 = Step(0.5, Cut("a:b")), Step(1, Flap("c:d")), Step(3, Restore("a:b"))
    assert lanes([a2, b1, a1]) == [[a1, a2], [b1]]


def test_a_step_in_a_report_keeps_every_key() -> None:
    """The failover report's "schedule": the same keys for every kind, as always."""
    keys = ["at", "action", "target", "mode", "loss_pct", "period", "count"]
    flap = Step(2, Flap("a:b", 0.4, 2)).to_json()
    assert list(flap) == keys
    assert flap == {"at": 2, "action": "flap", "target": "a:b", "mode": "hard",
                    "loss_pct": 0.0, "period": 0.4, "count": 2}  # fmt: skip
    assert Step(1, Cut("a:b", "gray")).to_json()["mode"] == "gray"
    assert Step(1, Degrade("a:b", 5)).to_json()["loss_pct"] == 5.0
    assert list(Step(1, Fail("t1-p0-0")).to_json()) == keys


async def test_run_schedule_plays_steps_on_time(autojump_clock: trio.testing.MockClock) -> None:
    lab = FakeLab()
    seen: list[tuple[str, object]] = []

    async def direct(fn: object) -> object:
        assert callable(fn)
        return fn()

    t_origin = trio.current_time() + 5.0
    steps = resolve(default_schedule(1.5), bindings_for(TINY, "t0-p0-0:t1-p0-1", "h0"))
    await run_schedule(
        lab,  # type: ignore[arg-type]
        list(reversed(steps)),
        t_origin,
        clock=trio.current_time,
        run_sync=direct,
        on_step=lambda s, r, t0, t1: seen.append((s.action, r)),
    )
    assert [round(c[-1] - t_origin, 6) for c in lab.calls] == [1.5 * (i + 1) for i in range(9)]
    assert seen[0] == ("cut", ["event cut"])
    assert seen[4] == ("flap", ["event flap"])
    assert lab.calls[5][:2] == ("fail", "t1-p0-1")
    assert lab.calls[7][:2] == ("fail", "h0:p0")
