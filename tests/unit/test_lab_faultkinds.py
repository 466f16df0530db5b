"""labs.faultkinds: targets by shape, one parser for the CLI's words and a schedule's mapping,
each kind applied and undone on a lab (a recording fake here; tests/lab/ the real one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from labs.errors import LabError
from labs.faultkinds import (
    FAULTS,
    Cut,
    Degrade,
    Fail,
    Fault,
    FaultError,
    Flap,
    Restore,
    Unfail,
    parse_fault,
    target_kind,
)
from labs.topology import preset

TINY = preset("tiny")
EVERY = [ln.name for ln in TINY.links]
FABRIC = [ln.name for ln in TINY.links if ln.kind == "t0-t1"]


class FakeLab:
    """labs.faults.Lab's fault methods, recorded with their arguments."""

    def __init__(self) -> None:
        self.topo = TINY
        self.calls: list[tuple[object, ...]] = []

    def _log(self, *call: object) -> Any:
        self.calls.append(call)
        return call[0]

    def cut(self, link_name: str, mode: str = "hard") -> Any:
        return self._log("cut", link_name, mode)

    def restore(self, link_name: str) -> Any:
        return self._log("restore", link_name)

    def restore_many(self, link_names: Sequence[str]) -> Any:
        return [self._log("restore_many", list(link_names))]

    def degrade(self, link_name: str, loss_pct: float) -> Any:
        return self._log("degrade", link_name, loss_pct)

    def degrade_many(self, link_names: Sequence[str], loss_pct: float, label: str) -> Any:
        return self._log("degrade_many", list(link_names), loss_pct, label)

    def flap(self, link_name: str, period: float, count: int) -> Any:
        return [self._log("flap", link_name, period, count)]

    def flap_many(self, link_names: Sequence[str], period: float, count: int) -> Any:
        return [self._log("flap_many", list(link_names), period, count)]

    def fail(self, target: str) -> Any:
        return self._log("fail", target)

    def unfail(self, target: str) -> Any:
        return self._log("unfail", target)


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("t0-p0-0:t1-p0-1", "link"),
        ("h0:t0-p0-0", "link"),
        ("h0:p1", "port"),
        ("t1-p0-0", "switch"),
        ("a:b+c:d", "links"),
        ("@links", "group"),
        ("@t0-t1", "group"),
    ],
)
def test_a_target_is_named_by_its_shape(target: str, kind: str) -> None:
    assert target_kind(target) == kind


def test_placeholders_name_a_kind_and_unknown_ones_are_refused() -> None:
    assert target_kind("@tcp-t1", {"@tcp-t1": "switch"}) == "switch"
    with pytest.raises(FaultError, match=r"unknown placeholder or group '@nope' \(@links"):
        target_kind("@nope")


def test_the_registry_has_every_verb_once() -> None:
    assert list(FAULTS) == ["cut", "restore", "flap", "degrade", "fail", "unfail"]
    assert all(kind.verb == verb and kind.summary for verb, kind in FAULTS.items())


def test_one_parser_for_every_kind() -> None:
    assert parse_fault("cut", {"target": "a:t1", "mode": "gray"}) == Cut("a:t1", "gray")
    assert parse_fault("cut", {"target": "a:t1"}) == Cut("a:t1", "hard")
    assert parse_fault("degrade", {"target": "@links", "loss": 5}) == Degrade("@links", 5.0)
    assert parse_fault("degrade", {"target": "a:t1", "loss": 0}) == Degrade("a:t1", 0.0)
    flap = parse_fault("flap", {"target": "a:b+c:d", "period": 0.4, "count": 2})
    assert flap == Flap("a:b+c:d", 0.4, 2)
    assert parse_fault("flap", {"target": "a:b"}) == Flap("a:b", 0.5, 3)
    assert parse_fault("fail", {"target": "h0:p1"}) == Fail("h0:p1")
    assert parse_fault("restore", {"target": "t1-p0-0"}) == Restore("t1-p0-0")
    assert parse_fault("unfail", {"target": "@s"}, {"@s": "switch"}) == Unfail("@s")


@pytest.mark.parametrize(
    ("verb", "given", "message"),
    [
        ("cutt", {"target": "a:b"}, "unknown action 'cutt' (cut, restore, flap"),
        ("cut", {}, "missing 'target'"),
        ("cut", {"target": ""}, "target must be a name"),
        ("cut", {"target": 7}, "target must be a name"),
        ("cut", {"target": "t1-p0-0"}, "cut takes a link (a:b), not the switch 't1-p0-0'"),
        ("cut", {"target": "@links"}, "cut takes a link (a:b), not the group '@links'"),
        ("cut", {"target": "a:b", "mode": "soft"}, "mode must be hard or gray, not 'soft'"),
        ("fail", {"target": "a:b"}, "fail takes a switch or HOST:PORT, not the link 'a:b'"),
        ("fail", {"target": "s", "mode": "gray"}, "'mode' does not apply to fail"),
        ("degrade", {"target": "a:b"}, "degrade needs loss"),
        ("degrade", {"target": "a:b", "loss": "5"}, "loss must be a number, not '5'"),
        ("degrade", {"target": "a:b", "loss": True}, "loss must be a number"),
        ("degrade", {"target": "a:b", "loss": 101}, "loss must be a percentage in 0..100"),
        ("degrade", {"target": "a:b", "loss": -1}, "loss must be a percentage in 0..100"),
        ("degrade", {"target": "h0:p1", "loss": 1}, "not the port 'h0:p1'"),
        ("flap", {"target": "a:b", "count": 0}, "count must be an integer >= 1, not 0"),
        ("flap", {"target": "a:b", "count": 1.5}, "count must be an integer, not 1.5"),
        ("flap", {"target": "a:b", "period": -1}, "period must be > 0 seconds, not -1"),
        ("flap", {"target": "a:b+h0:p1"}, "links joined by + are links (a:b), not 'h0:p1'"),
        ("unfail", {"target": "@links"}, "unfail takes a switch or HOST:PORT, not the group"),
    ],
)
def test_bad_words_are_one_typed_line(verb: str, given: dict[str, object], message: str) -> None:
    with pytest.raises(FaultError) as info:
        parse_fault(verb, given)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, LabError)  # the CLI's exit 2


def test_kinds_built_in_code_are_checked_too() -> None:
    with pytest.raises(FaultError, match="period"):
        Flap("a:b", period=0)
    with pytest.raises(FaultError, match="loss"):
        Degrade("a:b", 150)


@pytest.mark.parametrize(
    ("fault", "calls"),
    [
        (Cut("a:t1", "gray"), [("cut", "a:t1", "gray")]),
        (Degrade("a:t1", 2.5), [("degrade", "a:t1", 2.5)]),
        (Degrade("@links", 1.0), [("degrade_many", EVERY, 1.0, "@links")]),
        (Degrade("@t0-t1", 1.0), [("degrade_many", FABRIC, 1.0, "@t0-t1")]),
        (Degrade("a:b+c:d", 1.0), [("degrade_many", ["a:b", "c:d"], 1.0, "a:b+c:d")]),
        (Flap("a:t1", 0.2, 4), [("flap", "a:t1", 0.2, 4)]),
        (Flap("a:b+c:d", 2, 1), [("flap_many", ["a:b", "c:d"], 2, 1)]),
        (Fail("t1-p0-0"), [("fail", "t1-p0-0")]),
        (Fail("h0:p1"), [("fail", "h0:p1")]),
        (Unfail("h0:p1"), [("unfail", "h0:p1")]),
        (Restore("a:t1"), [("restore", "a:t1")]),
        (Restore("a:b+c:d"), [("restore_many", ["a:b", "c:d"])]),
        (Restore("@links"), [("degrade_many", EVERY, 0.0, "@links")]),
        (Restore("h0:p1"), [("unfail", "h0:p1")]),
        (Restore("t1-p0-0"), [("unfail", "t1-p0-0")]),
    ],
)
def test_apply_calls_the_lab(fault: Fault, calls: list[tuple[object, ...]]) -> None:
    lab = FakeLab()
    events = fault.apply(lab)
    assert lab.calls == calls
    assert events == [c[0] for c in calls]  # every event the lab logged, in order


@pytest.mark.parametrize(
    ("fault", "calls"),
    [
        (Cut("a:t1"), [("restore", "a:t1")]),
        (Degrade("@links", 3), [("degrade_many", EVERY, 0.0, "@links")]),
        (Flap("a:b+c:d"), [("restore_many", ["a:b", "c:d"])]),
        (Fail("t1-p0-0"), [("unfail", "t1-p0-0")]),
        (Restore("a:t1"), []),
        (Unfail("h0:p1"), []),
    ],
)
def test_undo_takes_the_fault_off(fault: Fault, calls: list[tuple[object, ...]]) -> None:
    lab = FakeLab()
    fault.undo(lab)
    assert lab.calls == calls


def test_check_against_a_topology() -> None:
    for fault in (Cut("t1-p1-0:t0-p1-1"), Fail("h0:p1"), Fail("t1-p0-0"), Degrade("@links", 1)):
        fault.check(TINY)
    for fault, why in (
        (Cut("t0-p0-0:t1-p0-9"), "no link"),
        (Flap("h0:t0-p0-0+h0:t0-p9-0"), "no link 'h0:t0-p9-0'"),
        (Fail("t1-p7-0"), "no node"),
        (Fail("h0:p5"), "'h0:p5' is not HOST:PORT"),
        (Fail("h1"), "fail takes a switch or HOST:PORT, not the host 'h1'"),
        (Restore("h1"), "restore takes a switch or HOST:PORT, not the host 'h1'"),
    ):
        with pytest.raises(LabError, match=why):
            fault.check(TINY)


def test_describe_busy_and_stretched() -> None:
    assert Cut("a:b", "gray").describe() == "cut a:b (gray)"
    assert Degrade("a:b", 5).describe() == "degrade a:b (5% loss)"
    assert Flap("a:b", 0.5, 3).describe() == "flap a:b (3 x 0.5s)"
    assert Fail("t1-p0-0").describe() == "fail t1-p0-0"
    assert Flap("a:b", 0.4, 2).busy_s == pytest.approx(0.8)
    assert Cut("a:b").busy_s == 0.0
    assert Flap("a:b", 0.4, 2).stretched(0.5) == Flap("a:b", 0.2, 2)
    assert Cut("a:b").stretched(0.5) == Cut("a:b")
