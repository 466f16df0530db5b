"""The failover demo's fault schedule: failures as data (ipmininet's runFailurePlan).

A schedule is a list of ``Step``s, each an action on a lab target at a time offset from the
start of the transfers. The default walks through the faults the paper reports
from production (mrc-protocol-notes.md, "Failure behaviour reported in production"): a gray
cut of a T0-T1 link that carries the TCP baseline (and, since MRC sprays over every path,
MRC too), a hard cut of the same link, a flap, a T1 switch that stops forwarding and a
lost NIC port, each undone a step later.

Targets may be placeholders resolved at run time, because with ECMP nobody knows the TCP
flow's path in advance: ``@tcp-link`` (the T0-T1 link the TCP flow was measured on, see
linkload.py ``pick_tcp_link``), ``@tcp-t1`` (that link's T1) and ``@src-port`` (the sending host's
port in that link's plane, e.g. ``h0:p1``).

YAML (``--schedule FILE``)::

    - {at: 2, action: cut, target: "@tcp-link", mode: gray}
    - {at: 4, action: restore, target: "@tcp-link"}
    - {at: 6, action: degrade, target: "t0-p1-0:t1-p1-0", loss: 5}
    - {at: 8, action: flap, target: "t0-p0-0:t1-p0-1", period: 0.5, count: 3}
    - {at: 10, action: fail, target: t1-p0-1}
    - {at: 12, action: unfail, target: t1-p0-1}
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from labs.errors import LabError
from labs.topology import Topology
from labs.yamlfile import read_yaml
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import PLACEHOLDERS
from mrc_transport.harness.timeline import FaultWindow

ACTIONS = ("cut", "restore", "flap", "degrade", "fail", "unfail")
LINK_ACTIONS = frozenset({"cut", "flap", "degrade"})
NODE_ACTIONS = frozenset({"fail", "unfail"})
MODES = ("gray", "hard")
TAIL_S = 2.0
"""Seconds of transfer after the last step, so its recovery is seen."""
_KEYS = frozenset({"at", "action", "target", "mode", "loss", "period", "count"})
_PORT_RE = re.compile(r"^h\d+:p\d+$")


@dataclass(frozen=True, slots=True)
class Step:
    """One fault action at one time."""

    at: float
    """Seconds after the transfers start."""
    action: str
    """cut, restore, flap, degrade, fail or unfail."""
    target: str
    """Link "a:b", switch, "host:port" or a placeholder (@tcp-link, @tcp-t1, @src-port)."""
    mode: str = "hard"
    """cut only: gray (nft drop, no carrier change) or hard (link down)."""
    loss_pct: float = 0.0
    """degrade only: random loss in percent."""
    period: float = 0.5
    """flap only: seconds of one down+up cycle."""
    count: int = 3
    """flap only: number of cycles."""

    @property
    def busy_s(self) -> float:
        """How long the action itself takes (a flap sleeps through its cycles)."""
        return self.period * self.count if self.action == "flap" else 0.0

    def describe(self) -> str:
        extra = {
            "cut": f" ({self.mode})",
            "degrade": f" ({self.loss_pct:g}% loss)",
            "flap": f" ({self.count} x {self.period:g}s)",
        }.get(self.action, "")
        return f"{self.action} {self.target}{extra}"


# -- scaling -----------------------------------------------------------------------------------


def natural_duration(steps: Sequence[Step]) -> float:
    """Length of a run that plays the whole schedule and shows the last recovery."""
    return max((s.at + s.busy_s for s in steps), default=0.0) + TAIL_S


def scaled(steps: Sequence[Step], duration: float) -> list[Step]:
    """The schedule stretched or squeezed so its natural duration becomes ``duration`` (the
    TAIL_S after the last step stays as it is: recovery takes as long as it takes)."""
    if duration <= TAIL_S:
        raise HarnessError(f"--duration must be more than {TAIL_S:g} s, not {duration:g}")
    factor = (duration - TAIL_S) / (natural_duration(steps) - TAIL_S)
    return [replace(s, at=s.at * factor, period=s.period * factor) for s in steps]


# -- parsing ----------------------------------------------------------------------------------


def load_schedule(path: str | Path) -> list[Step]:
    return parse_schedule(read_yaml(path, HarnessError), str(path))


def parse_schedule(raw: object, where: str = "schedule") -> list[Step]:
    """Validate parsed YAML into steps sorted by time; one-line HarnessError naming the step."""
    if not isinstance(raw, list) or not raw:
        raise HarnessError(f"{where}: a schedule is a non-empty list of steps")
    steps = [_step(item, f"{where}: step {i + 1}") for i, item in enumerate(raw)]
    return sorted(steps, key=lambda s: s.at)


def _step(item: object, where: str) -> Step:
    if not isinstance(item, Mapping):
        raise HarnessError(f"{where}: must be a mapping like {{at: 2, action: cut, target: a:b}}")
    extra = sorted(str(k) for k in item if k not in _KEYS)
    if extra:
        raise HarnessError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(_KEYS))})")
    for key in ("at", "action", "target"):
        if key not in item:
            raise HarnessError(f"{where}: missing {key!r}")
    at = _number(item["at"], f"{where}: at")
    if at < 0:
        raise HarnessError(f"{where}: at must be >= 0 seconds, not {at:g}")
    action = str(item["action"])
    if action not in ACTIONS:
        raise HarnessError(f"{where}: unknown action {action!r} ({', '.join(ACTIONS)})")
    target = _target(item["target"], action, where)
    return Step(at, action, target, **_options(item, action, where))


def _options(item: Mapping[Any, Any], action: str, where: str) -> dict[str, Any]:
    allowed = {"cut": {"mode"}, "degrade": {"loss"}, "flap": {"period", "count"}}.get(action, set())
    given = {k for k in ("mode", "loss", "period", "count") if k in item}
    if given - allowed:
        raise HarnessError(f"{where}: {sorted(given - allowed)[0]!r} does not apply to {action}")
    out: dict[str, Any] = {}
    if "mode" in item:
        if item["mode"] not in MODES:
            raise HarnessError(f"{where}: mode must be gray or hard, not {item['mode']!r}")
        out["mode"] = item["mode"]
    if action == "degrade":
        if "loss" not in item:
            raise HarnessError(f"{where}: degrade needs loss (percent)")
        loss = _number(item["loss"], f"{where}: loss")
        if not 0 < loss <= 100:
            raise HarnessError(f"{where}: loss must be a percentage in (0, 100], not {loss:g}")
        out["loss_pct"] = loss
    if "period" in item:
        out["period"] = _number(item["period"], f"{where}: period")
        if out["period"] <= 0:
            raise HarnessError(f"{where}: period must be positive")
    if "count" in item:
        count = item["count"]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise HarnessError(f"{where}: count must be an integer >= 1, not {count!r}")
        out["count"] = count
    return out


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HarnessError(f"{where} must be a number, not {value!r}")
    return float(value)


def _target(value: object, action: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise HarnessError(f"{where}: target must be a name like t0-p0-0:t1-p0-1, t1-p0-1 or h0:p1")
    if value.startswith("@"):
        if value not in PLACEHOLDERS:
            known = ", ".join(PLACEHOLDERS)
            raise HarnessError(f"{where}: unknown placeholder {value!r} ({known})")
        kind = {"@tcp-link": "link", "@tcp-t1": "switch", "@src-port": "port"}[value]
    else:
        kind = "port" if _PORT_RE.match(value) else "link" if ":" in value else "switch"
    if action in LINK_ACTIONS and kind != "link":
        raise HarnessError(f"{where}: {action} takes a link (a:b), not {value!r}")
    if action in NODE_ACTIONS and kind == "link":
        raise HarnessError(f"{where}: {action} takes a switch or HOST:PORT, not the link {value!r}")
    return value


# -- targets ----------------------------------------------------------------------------------


def resolve(steps: Sequence[Step], bindings: Mapping[str, str]) -> list[Step]:
    """Replace placeholders by the names measured at run time."""
    out = []
    for s in steps:
        if s.target.startswith("@"):
            if s.target not in bindings:
                raise HarnessError(f"no value for {s.target} (measure the TCP path first)")
            s = replace(s, target=bindings[s.target])
        out.append(s)
    return out


def check_targets(steps: Sequence[Step], topo: Topology) -> None:
    """Every resolved target exists in the fabric; HarnessError names the first that does not."""
    for s in steps:
        if s.target.startswith("@"):
            continue
        try:
            if _PORT_RE.match(s.target):
                host, port = s.target.split(":")
                topo.check_node(host)
                if port not in {dev for dev, _, _ in topo.ports(host)}:
                    raise LabError(f"{host} has no port {port}")
            elif ":" in s.target:
                topo.link(s.target)
            else:
                topo.check_node(s.target)
                if topo.kind_of(s.target) == "host":
                    raise LabError(f"{s.target} is a host: fail a switch or HOST:PORT")
        except LabError as exc:
            raise HarnessError(f"schedule step at {s.at:g}s ({s.describe()}): {exc}") from None


# -- playing a schedule -----------------------------------------------------------------------


class FaultInjector(Protocol):
    """What the runner needs from a lab (labs.faults.Lab has exactly this)."""

    def cut(self, link_name: str, mode: Any = ...) -> object: ...
    def restore(self, link_name: str) -> object: ...
    def degrade(self, link_name: str, loss_pct: float) -> object: ...
    def flap(self, link_name: str, period: float, count: int) -> object: ...
    def fail(self, target: str) -> object: ...
    def unfail(self, target: str) -> object: ...


def apply_step(lab: FaultInjector, step: Step) -> object:
    """Do one step (blocking: faults run `ip` and `nft`; a flap sleeps through its cycles)."""
    t = step.target
    if step.action == "cut":
        return lab.cut(t, step.mode)
    if step.action == "restore":
        # A link is "a:b" with a switch after the colon; a port is "h0:p1" (labs restore_any).
        is_link = ":" in t and not _PORT_RE.match(t)
        return lab.restore(t) if is_link else lab.unfail(t)
    if step.action == "degrade":
        return lab.degrade(t, step.loss_pct)
    if step.action == "flap":
        return lab.flap(t, step.period, step.count)
    if step.action == "fail":
        return lab.fail(t)
    return lab.unfail(t)


async def run_schedule(
    lab: FaultInjector,
    steps: Sequence[Step],
    t_origin: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    run_sync: Callable[[Callable[[], object]], Awaitable[object]] | None = None,
    on_step: Callable[[Step, object, float, float], None] | None = None,
) -> None:
    """Play steps at t_origin + step.at (clock() time); each fault runs in a worker thread so
    the trio loop (receivers, live view) keeps going while `ip`/`nft` run. ``on_step`` gets
    the step, its result and the clock() times before and after it ran."""
    import trio

    if run_sync is None:

        async def run_sync(fn: Callable[[], object]) -> object:
            return await trio.to_thread.run_sync(fn)

    for step in sorted(steps, key=lambda s: s.at):
        await trio.sleep(max(0.0, t_origin + step.at - clock()))
        t_before = clock()
        result = await run_sync(partial(apply_step, lab, step))
        if on_step is not None:
            on_step(step, result, t_before, clock())


def label_flaps(
    faults: Sequence[FaultWindow], played: Sequence[tuple[Step, float, float]]
) -> list[FaultWindow]:
    """The lab logs a flap as cut/restore pairs; call those cycles what they were."""
    spans = [(s, a, b) for s, a, b in played if s.action == "flap"]
    out = []
    for f in faults:
        hit = next(
            ((s, a, b) for s, a, b in spans if s.target == f.target and a <= f.t_start <= b), None
        )
        out.append(replace(f, kind="flap", action=f"cycle {f.action}") if hit else f)
    return out
