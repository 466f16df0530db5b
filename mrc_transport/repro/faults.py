"""Fault schedules on groups of links, and schedules played a lane per target.

The demo's schedule (harness/schedule.py) names one target per step. The paper's loss
experiment puts random loss on every link at once, so a repro step may name a group:
``@links`` (every link of the fabric) or ``@t0-t1`` (every T0-T1 link); degrade and
restore of a group are done in one batch (``Lab.degrade_many``) and logged as one event.
Links joined by ``+`` ("h0:t0-p0-0+h0:t0-p1-0") flap and are restored together
(``Lab.flap_many``, ``Lab.restore_many``): links of one node restored one by one trip over
each other's multipath routes. ``FabricFaults`` is the lab
(labs/faults.py ``Lab``) as harness/schedule.py's FaultInjector with these targets.

``run_schedule`` plays its steps one after another and a flap sleeps through its cycles,
so two links flapping together need two schedules: ``lanes`` splits a schedule into one
per target, and the engine plays them side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labs.faults import Event, Lab
from labs.topology import Topology
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.schedule import Step

GROUPS = {"@links": "every link", "@t0-t1": "every T0-T1 link"}


def is_group(target: str) -> bool:
    return target in GROUPS or "+" in target


def group_links(topo: Topology, group: str) -> list[str]:
    """The link names a group target stands for."""
    if "+" in group:
        return group.split("+")
    if group == "@links":
        return [ln.name for ln in topo.links]
    if group == "@t0-t1":
        return [ln.name for ln in topo.links if ln.kind == "t0-t1"]
    raise HarnessError(f"unknown link group {group!r} ({', '.join(GROUPS)})")


def lanes(steps: Sequence[Step]) -> list[list[Step]]:
    """The steps split by target, each lane in time order, lanes in order of first step."""
    out: dict[str, list[Step]] = {}
    for step in sorted(steps, key=lambda s: s.at):
        out.setdefault(step.target, []).append(step)
    return list(out.values())


class FabricFaults:
    """A running lab as a FaultInjector whose degrade and restore also take a group."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def _group(self, target: str) -> list[str] | None:
        return group_links(self.lab.topo, target) if is_group(target) else None

    def cut(self, link_name: str, mode: Any = "hard") -> Event:
        if is_group(link_name):
            raise HarnessError(f"cut takes one link, not the group {link_name}")
        return self.lab.cut(link_name, mode)

    def restore(self, link_name: str) -> Event | list[Event]:
        """A link; links joined by "+" together (``Lab.restore_many``); a named group's
        loss taken off (a named group can only be degraded)."""
        if "+" in link_name:
            return self.lab.restore_many(link_name.split("+"))
        links = self._group(link_name)
        if links is None:
            return self.lab.restore(link_name)
        return self.lab.degrade_many(links, 0.0, link_name)

    def degrade(self, link_name: str, loss_pct: float) -> Event:
        links = self._group(link_name)
        if links is None:
            return self.lab.degrade(link_name, loss_pct)
        return self.lab.degrade_many(links, loss_pct, link_name)

    def flap(self, link_name: str, period: float, count: int) -> list[Event]:
        links = self._group(link_name)
        if links is None:
            return self.lab.flap(link_name, period, count)
        return self.lab.flap_many(links, period, count)

    def fail(self, target: str) -> Event:
        return self.lab.fail(target)

    def unfail(self, target: str) -> Event | list[Event]:
        # harness/schedule.py's apply_step sends a restore of a target without "a:b" here
        return self.restore(target) if is_group(target) else self.lab.unfail(target)
