"""labs.faults.Lab.restore: what a restore re-adds. Only a hard cut (an end admin down,
which flushed its permanent neighbour) deleted anything; re-adding a live link's qdisc,
neighbours and routes disturbs the traffic on it, so a restore of a gray cut or a degrade
only takes its nft chains off."""

from __future__ import annotations

from typing import Any

import pytest

from labs import faults
from labs.topology import preset

LINK = "t0-p0-0:t1-p0-1"


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> tuple[faults.Lab, list[tuple[Any, ...]], set[str]]:
    """A Lab on the tiny preset with its commands recorded, not run; the set names the devs
    that lost their permanent neighbour (admin down)."""
    calls: list[tuple[Any, ...]] = []
    down: set[str] = set()
    lab = faults.Lab.__new__(faults.Lab)
    lab.name, lab.topo, lab._ops = "x", preset("tiny"), []
    monkeypatch.setattr(faults, "_lost_neighbours", lambda _lab, node, dev: dev in down)
    monkeypatch.setattr(
        faults, "_drop_chain", lambda _l, node, dev, kind: calls.append(("drop", node, kind))
    )
    monkeypatch.setattr(faults, "record", lambda *a: {"args": a})
    monkeypatch.setattr(
        faults.Lab, "reapply", lambda self, node, dev: calls.append(("reapply", node))
    )
    return lab, calls, down


def test_a_gray_cut_or_degrade_restored_re_adds_nothing(
    lab: tuple[faults.Lab, list[tuple[Any, ...]], set[str]],
) -> None:
    lab_, calls, _ = lab
    lab_.restore(LINK)
    assert [c[0] for c in calls] == ["drop"] * 4
    assert {c[2] for c in calls} == {"gray", "loss"}


def test_a_hard_cut_restored_re_adds_both_ends(
    lab: tuple[faults.Lab, list[tuple[Any, ...]], set[str]],
) -> None:
    lab_, calls, down = lab
    link = lab_.topo.link(LINK)
    down.add(link.a_dev)
    lab_.restore(LINK)
    assert [c[1] for c in calls if c[0] == "reapply"] == [link.a, link.b]
