"""Faults as types: one frozen dataclass per kind with its parse, apply and undo, and the
registry (``FAULTS``) that `mrc lab`, the demo's schedule and repro's schedules all read.

Theory of operation. A fault is a verb on a target, with the options of its kind:

    verb     target                          options          undo
    cut      a link                          mode hard|gray   restore
    degrade  a link, links a+b, a group      loss (percent)   restore
    flap     a link, links a+b, a group      period, count    restore
    fail     a switch or HOST:PORT                            unfail
    restore  any of these                                     (a repair)
    unfail   a switch or HOST:PORT                            (a repair)

A target is a word whose shape alone says what it names (``target_kind``), so a schedule
is checked before any lab exists: "a:b" a link, "h0:p1" a host's port, "a:b+c:d" links
flapped or restored together (restored one by one, two links of one host trip over each
other's multipath route: ``Lab.restore_many``), "@links" or "@t0-t1" a group, degraded in
one batch and logged as one event (``Lab.degrade_many``), anything else a switch. A caller
may name placeholders of its own (the demo's "@tcp-link", filled once the TCP flow's link
is measured): words that stand for a target of a kind. Whether a target exists is a second
check, against a topology (``Fault.check``).

Pure: applying a fault calls the methods of a lab (labs/faults.py ``Lab``), which run the
commands and log the events; this module runs none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from labs.errors import LabError
from labs.topology import Topology

if TYPE_CHECKING:
    from labs.faults import Event

TargetKind = Literal["link", "links", "group", "switch", "port"]
CutMode = Literal["hard", "gray"]
CUT_MODES: tuple[CutMode, ...] = ("hard", "gray")
GROUPS: Mapping[str, str] = {"@links": "every link", "@t0-t1": "every T0-T1 link"}
"""Named groups of links and what each stands for."""
_NAMES: Mapping[TargetKind, str] = {
    "link": "a link (a:b)",
    "links": "links joined by +",
    "group": f"a group ({', '.join(GROUPS)})",
    "switch": "a switch",
    "port": "HOST:PORT",
}
_PORT = re.compile(r"p\d+")
NO_PLACEHOLDERS: Mapping[str, TargetKind] = {}


class FaultError(LabError):
    """A fault that cannot be: an unknown verb, a bad option, a target of the wrong kind.
    One line naming what was given; the CLI exits 2 with it."""


class FaultLab(Protocol):
    """What applying a fault needs of a running lab: labs.faults.Lab has exactly this."""

    topo: Topology

    def cut(self, link_name: str, mode: CutMode = "hard") -> Event: ...
    def restore(self, link_name: str) -> Event: ...
    def restore_many(self, link_names: Sequence[str]) -> list[Event]: ...
    def degrade(self, link_name: str, loss_pct: float) -> Event: ...
    def degrade_many(self, link_names: Sequence[str], loss_pct: float, label: str) -> Event: ...
    def flap(self, link_name: str, period: float, count: int) -> list[Event]: ...
    def flap_many(self, link_names: Sequence[str], period: float, count: int) -> list[Event]: ...
    def fail(self, target: str) -> Event: ...
    def unfail(self, target: str) -> Event: ...


# -- targets ----------------------------------------------------------------------------------


def target_kind(
    target: str, placeholders: Mapping[str, TargetKind] = NO_PLACEHOLDERS
) -> TargetKind:
    """What ``target`` names, from its shape; FaultError for an unknown "@name"."""
    if target.startswith("@"):
        if target in GROUPS:
            return "group"
        if target in placeholders:
            return placeholders[target]
        known = ", ".join([*GROUPS, *placeholders])
        raise FaultError(f"unknown placeholder or group {target!r} ({known})")
    if "+" in target:
        return "links"
    if ":" not in target:
        return "switch"
    return "port" if _PORT.fullmatch(target.partition(":")[2]) else "link"


def links_of(topo: Topology, target: str) -> list[str]:
    """The link names a link, links or group target stands for."""
    if target == "@links":
        return [ln.name for ln in topo.links]
    if target == "@t0-t1":
        return [ln.name for ln in topo.links if ln.kind == "t0-t1"]
    return target.split("+")


def host_port(topo: Topology, target: str) -> tuple[str, str]:
    """(host, port) of "h0:p1" when the host has that port; LabError otherwise."""
    host, _, port = target.partition(":")
    topo.check_node(host)
    if topo.kind_of(host) != "host" or port not in {dev for dev, _, _ in topo.ports(host)}:
        raise LabError(f"{target!r} is not HOST:PORT (e.g. h0:p1)")
    return host, port


def switch(topo: Topology, node: str, verb: str) -> str:
    """``node`` when it is a switch of topo; LabError otherwise."""
    topo.check_node(node)
    if topo.kind_of(node) == "host":
        raise LabError(f"{verb} takes a switch or HOST:PORT, not the host {node!r}")
    return node


def _target(
    verb: str, takes: Sequence[TargetKind], value: object, placeholders: Mapping[str, TargetKind]
) -> str:
    """``value`` when it is a target word of a kind ``verb`` takes; FaultError otherwise."""
    if not isinstance(value, str) or not value:
        raise FaultError("target must be a name like t0-p0-0:t1-p0-1, t1-p0-1 or h0:p1")
    kind = target_kind(value, placeholders)
    if kind not in takes:
        raise FaultError(f"{verb} takes {_either(takes)}, not the {kind} {value!r}")
    if kind == "links":
        for part in value.split("+"):
            if target_kind(part) != "link":
                raise FaultError(f"links joined by + are links (a:b), not {part!r}")
    return value


def _either(kinds: Sequence[TargetKind]) -> str:
    return _one_of([_NAMES[k] for k in kinds])


def _one_of(words: Sequence[str]) -> str:
    """The words as a choice: a; a or b; a, b or c."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a fault kind: a key of a schedule step and a flag of `mrc lab`."""

    key: str
    """The schedule's key, the CLI's flag without "--" (mode, loss, period, count)."""
    field: str
    """The dataclass field it sets."""
    type: type[str] | type[float] | type[int]
    """What its value is: the CLI converts its word to it, a schedule must give one."""
    help: str
    """One line for `mrc lab VERB --help`."""
    choices: tuple[str, ...] = ()
    """The values allowed (none: any of its type)."""
    required: bool = False
    """The kind has no default for it."""
    metavar: str | None = None
    """The CLI's name for its value."""

    def read(self, value: object) -> object:
        """``value`` checked against the type (ranges are the kind's to check)."""
        if self.choices:
            if value not in self.choices:
                raise FaultError(f"{self.key} must be {_one_of(self.choices)}, not {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FaultError(f"{self.key} must be a number, not {value!r}")
        if self.type is int and not isinstance(value, int):
            raise FaultError(f"{self.key} must be an integer, not {value!r}")
        return self.type(value)


# -- the kinds --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fault:
    """A verb on a target. Each kind says which targets it takes, its options and how a
    lab applies and undoes it."""

    target: str
    """A link "a:b", links "a:b+c:d", a group "@links", a switch or "host:port"."""

    verb: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    takes: ClassVar[tuple[TargetKind, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()

    def apply(self, lab: FaultLab) -> list[Event]:
        """Do it on a running lab (blocking: `ip` and `nft`; a flap sleeps its cycles)."""
        raise NotImplementedError

    def undo(self, lab: FaultLab) -> list[Event]:
        """Take it off again; a repair (restore, unfail) has nothing to undo."""
        return []

    @property
    def busy_s(self) -> float:
        """How long applying it takes by design (a flap's cycles), not counting commands."""
        return 0.0

    def stretched(self, factor: float) -> Fault:
        """The same fault with its own durations times ``factor`` (a schedule scaled)."""
        return self

    def describe(self) -> str:
        return f"{self.verb} {self.target}"

    def check(self, topo: Topology) -> None:
        """LabError (one line) unless the target exists in topo as the kind it names."""
        kind = target_kind(self.target)
        if kind in ("link", "links"):
            for name in links_of(topo, self.target):
                topo.link(name)
        elif kind == "port":
            host_port(topo, self.target)
        elif kind == "switch":
            switch(topo, self.target, self.verb)


@dataclass(frozen=True, slots=True)
class Cut(Fault):
    """Cut a link: hard (the lower end admin down; the peer loses carrier) or gray (both
    ends drop everything on ingress, no carrier change)."""

    mode: CutMode = "hard"
    """hard or gray."""

    verb: ClassVar[str] = "cut"
    summary: ClassVar[str] = "cut a link: hard (carrier loss) or gray (silent drop)"
    takes: ClassVar[tuple[TargetKind, ...]] = ("link",)
    options: ClassVar[tuple[Option, ...]] = (
        Option("mode", "mode", str, "hard: carrier loss; gray: silent drop", CUT_MODES),
    )

    def apply(self, lab: FaultLab) -> list[Event]:
        return [lab.cut(self.target, self.mode)]

    def undo(self, lab: FaultLab) -> list[Event]:
        return Restore(self.target).apply(lab)

    def describe(self) -> str:
        return f"cut {self.target} ({self.mode})"


@dataclass(frozen=True, slots=True)
class Degrade(Fault):
    """Random loss on links, both ways; loss 0 takes it off."""

    loss_pct: float
    """Percent of packets dropped, 0..100."""

    verb: ClassVar[str] = "degrade"
    summary: ClassVar[str] = "random loss on a link, both ways (0 removes it)"
    takes: ClassVar[tuple[TargetKind, ...]] = ("link", "links", "group")
    options: ClassVar[tuple[Option, ...]] = (
        Option(
            "loss", "loss_pct", float, "percent of packets dropped", required=True, metavar="PCT"
        ),
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss_pct <= 100.0:
            raise FaultError(f"loss must be a percentage in 0..100, not {self.loss_pct:g}")

    def apply(self, lab: FaultLab) -> list[Event]:
        if target_kind(self.target) == "link":
            return [lab.degrade(self.target, self.loss_pct)]
        return [lab.degrade_many(links_of(lab.topo, self.target), self.loss_pct, self.target)]

    def undo(self, lab: FaultLab) -> list[Event]:
        return Restore(self.target).apply(lab)

    def describe(self) -> str:
        return f"degrade {self.target} ({self.loss_pct:g}% loss)"


@dataclass(frozen=True, slots=True)
class Flap(Fault):
    """Hard-cut and restore links ``count`` times, half a period down and half up; links
    of a group or joined by + go down and come up together."""

    period: float = 0.5
    """Seconds of one down+up cycle."""
    count: int = 3
    """Cycles."""

    verb: ClassVar[str] = "flap"
    summary: ClassVar[str] = "cut and restore a link repeatedly"
    takes: ClassVar[tuple[TargetKind, ...]] = ("link", "links", "group")
    options: ClassVar[tuple[Option, ...]] = (
        Option("period", "period", float, "seconds per down+up cycle"),
        Option("count", "count", int, "cycles"),
    )

    def __post_init__(self) -> None:
        if not self.period > 0:
            raise FaultError(f"period must be > 0 seconds, not {self.period:g}")
        if self.count < 1:
            raise FaultError(f"count must be an integer >= 1, not {self.count}")

    def apply(self, lab: FaultLab) -> list[Event]:
        if target_kind(self.target) == "link":
            return lab.flap(self.target, self.period, self.count)
        return lab.flap_many(links_of(lab.topo, self.target), self.period, self.count)

    def undo(self, lab: FaultLab) -> list[Event]:
        return Restore(self.target).apply(lab)

    @property
    def busy_s(self) -> float:
        return self.period * self.count

    def stretched(self, factor: float) -> Fault:
        return replace(self, period=self.period * factor)

    def describe(self) -> str:
        return f"flap {self.target} ({self.count} x {self.period:g}s)"


@dataclass(frozen=True, slots=True)
class Fail(Fault):
    """A switch stops forwarding (nothing it receives goes on), or a host's port goes down."""

    verb: ClassVar[str] = "fail"
    summary: ClassVar[str] = "a switch stops forwarding, or a HOST:PORT goes down"
    takes: ClassVar[tuple[TargetKind, ...]] = ("switch", "port")

    def apply(self, lab: FaultLab) -> list[Event]:
        return [lab.fail(self.target)]

    def undo(self, lab: FaultLab) -> list[Event]:
        return Unfail(self.target).apply(lab)


@dataclass(frozen=True, slots=True)
class Restore(Fault):
    """Undo whatever is on the target: a link's cut or loss, links together, a group's
    loss, a switch's or port's fail; safe on a healthy target."""

    verb: ClassVar[str] = "restore"
    summary: ClassVar[str] = "undo a cut, degrade or fail (LINK, SWITCH or HOST:PORT)"
    takes: ClassVar[tuple[TargetKind, ...]] = ("link", "links", "group", "switch", "port")

    def apply(self, lab: FaultLab) -> list[Event]:
        kind = target_kind(self.target)
        if kind == "link":
            return [lab.restore(self.target)]
        if kind == "links":
            return lab.restore_many(self.target.split("+"))
        if kind == "group":  # a group can only have been degraded
            return [lab.degrade_many(links_of(lab.topo, self.target), 0.0, self.target)]
        return Unfail(self.target).apply(lab)


@dataclass(frozen=True, slots=True)
class Unfail(Fault):
    """A failed switch forwards again, or a failed port comes back up."""

    verb: ClassVar[str] = "unfail"
    summary: ClassVar[str] = "undo a fail (SWITCH or HOST:PORT)"
    takes: ClassVar[tuple[TargetKind, ...]] = ("switch", "port")

    def apply(self, lab: FaultLab) -> list[Event]:
        return [lab.unfail(self.target)]


FAULTS: Mapping[str, type[Fault]] = {k.verb: k for k in (Cut, Restore, Flap, Degrade, Fail, Unfail)}
"""Every kind by its verb: the CLI's subcommands and a schedule's actions."""
OPTION_KEYS: frozenset[str] = frozenset(o.key for k in FAULTS.values() for o in k.options)
"""Every option's key, of any kind."""


def parse_fault(
    verb: object,
    given: Mapping[str, object],
    placeholders: Mapping[str, TargetKind] = NO_PLACEHOLDERS,
) -> Fault:
    """The fault ``verb`` with ``given``: its "target" and options by key (a schedule step's
    mapping, or the CLI's flags without "--"); FaultError names the first thing wrong."""
    kind = FAULTS.get(str(verb))
    if kind is None:
        raise FaultError(f"unknown action {verb!r} ({', '.join(FAULTS)})")
    if "target" not in given:
        raise FaultError("missing 'target'")
    keys = {o.key for o in kind.options}
    extra = sorted(k for k in given if k != "target" and k not in keys)
    if extra:
        raise FaultError(f"{extra[0]!r} does not apply to {kind.verb}")
    target = _target(kind.verb, kind.takes, given["target"], placeholders)
    for o in kind.options:
        if o.required and o.key not in given:
            raise FaultError(f"{kind.verb} needs {o.key} ({o.help})")
    values: dict[str, Any] = {o.field: o.read(given[o.key]) for o in kind.options if o.key in given}
    return kind(target, **values)
