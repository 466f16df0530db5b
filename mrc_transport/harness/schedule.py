"""Fault schedules: a fault (labs/faultkinds.py) at each time, checked, resolved, played.

A schedule is a list of ``Step``s, each a fault of the registry at a time offset from the
start of a run's transfers, read from YAML by the registry's one parser (the same words as
`mrc lab`), or built in code by an experiment. Targets may be the placeholders the TCP
baseline's path fills once it is measured (``@tcp-link``, ``@tcp-t1``, ``@src-port``:
harness/linkload.py), because with ECMP nobody knows that path in advance, or the groups
repro plays on (``@links``, ``@t0-t1``, links joined by "+").

``run_schedule`` plays steps one after another and a flap sleeps through its cycles, so
two links flapping together need two schedules: ``lanes`` splits a schedule into one per
target, and repro's engine plays them side by side.

YAML (``--schedule FILE``)::

    - {at: 2, action: cut, target: "@tcp-link", mode: gray}
    - {at: 4, action: restore, target: "@tcp-link"}
    - {at: 6, action: degrade, target: "t0-p1-0:t1-p1-0", loss: 5}
    - {at: 8, action: flap, target: "t0-p0-0:t1-p0-1", period: 0.5, count: 3}
    - {at: 10, action: fail, target: t1-p0-1}
    - {at: 12, action: unfail, target: t1-p0-1}
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from labs.errors import LabError
from labs.faultkinds import (
    OPTION_KEYS,
    Cut,
    Fail,
    Fault,
    FaultError,
    FaultLab,
    Flap,
    Restore,
    Unfail,
    parse_fault,
)
from labs.topology import Topology
from labs.yamlfile import read_yaml
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import PLACEHOLDERS
from mrc_transport.harness.timeline import FaultWindow

TAIL_S = 2.0
"""Seconds of transfer after the last step, so its recovery is seen."""
_KEYS = frozenset({"at", "action", "target", *OPTION_KEYS})
_REPORTED = {"mode": "hard", "loss_pct": 0.0, "period": 0.5, "count": 3}
"""A step's options in a report, each kind's own over these (the report's keys since its
first version, whatever the kind)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One fault at one time."""

    at: float
    """Seconds after the transfers start."""
    fault: Fault
    """What is done, on which target (a placeholder until ``resolve``)."""

    @property
    def action(self) -> str:
        """The fault's verb: cut, restore, flap, degrade, fail or unfail."""
        return self.fault.verb

    @property
    def target(self) -> str:
        return self.fault.target

    @property
    def busy_s(self) -> float:
        """How long the action itself takes (a flap sleeps through its cycles)."""
        return self.fault.busy_s

    def describe(self) -> str:
        return self.fault.describe()

    def to_json(self) -> dict[str, Any]:
        """{"at", "action", "target", "mode", "loss_pct", "period", "count"}."""
        head = {"at": self.at, "action": self.action, "target": self.target}
        return {**head, **_REPORTED, **asdict(self.fault)}


# -- the workshop's schedule ------------------------------------------------------------------

DEFAULT_STEP_S = 2.0


def default_schedule(step_s: float = DEFAULT_STEP_S) -> list[Step]:
    """The workshop's sequence, one fault every step_s seconds, starting after one step: the
    faults the paper reports from production (mrc-protocol-notes.md, "Failure behaviour
    reported in production"): a gray cut of the T0-T1 link that carries the TCP baseline
    (and, since MRC sprays over every path, MRC too), a hard cut of the same link, a flap, a
    T1 switch that stops forwarding and a lost NIC port, each undone a step later. The demo
    and the collectives' step loop play it."""
    link, t1, port = PLACEHOLDERS
    plan = [
        Cut(link, "gray"),
        Restore(link),
        Cut(link, "hard"),
        Restore(link),
        Flap(link, period=step_s / 4, count=2),
        Fail(t1),
        Unfail(t1),
        Fail(port),
        Unfail(port),
    ]
    return [Step((i + 1) * step_s, fault) for i, fault in enumerate(plan)]


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
    return [Step(s.at * factor, s.fault.stretched(factor)) for s in steps]


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
    at = item["at"]
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise HarnessError(f"{where}: at must be a number, not {at!r}")
    if at < 0:
        raise HarnessError(f"{where}: at must be >= 0 seconds, not {at:g}")
    given = {str(k): v for k, v in item.items() if k not in ("at", "action")}
    try:
        return Step(float(at), parse_fault(item["action"], given, PLACEHOLDERS))
    except FaultError as exc:
        raise HarnessError(f"{where}: {exc}") from None


# -- targets ----------------------------------------------------------------------------------


def resolve(steps: Sequence[Step], bindings: Mapping[str, str]) -> list[Step]:
    """Replace placeholders by the names measured at run time."""
    out = []
    for s in steps:
        if s.target in PLACEHOLDERS:
            if s.target not in bindings:
                raise HarnessError(f"no value for {s.target} (measure the TCP path first)")
            s = replace(s, fault=replace(s.fault, target=bindings[s.target]))
        out.append(s)
    return out


def check_targets(steps: Sequence[Step], topo: Topology) -> None:
    """Every resolved target exists in the fabric (every link of a group); HarnessError
    names the first step that names one that does not."""
    for s in steps:
        if s.target in PLACEHOLDERS:
            continue
        try:
            s.fault.check(topo)
        except LabError as exc:
            raise HarnessError(f"schedule step at {s.at:g}s ({s.describe()}): {exc}") from None


# -- playing a schedule -----------------------------------------------------------------------


def lanes(steps: Sequence[Step]) -> list[list[Step]]:
    """The steps split by target, each lane in time order, lanes in order of first step."""
    out: dict[str, list[Step]] = {}
    for step in sorted(steps, key=lambda s: s.at):
        out.setdefault(step.target, []).append(step)
    return list(out.values())


async def run_schedule(
    lab: FaultLab,
    steps: Sequence[Step],
    t_origin: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    run_sync: Callable[[Callable[[], object]], Awaitable[object]] | None = None,
    on_step: Callable[[Step, object, float, float], None] | None = None,
) -> None:
    """Play steps at t_origin + step.at (clock() time); each fault runs in a worker thread so
    the trio loop (receivers, live view) keeps going while `ip`/`nft` run. ``on_step`` gets
    the step, the lab's events and the clock() times before and after it ran."""
    import trio

    if run_sync is None:

        async def run_sync(fn: Callable[[], object]) -> object:
            return await trio.to_thread.run_sync(fn)

    for step in sorted(steps, key=lambda s: s.at):
        await trio.sleep(max(0.0, t_origin + step.at - clock()))
        t_before = clock()
        result = await run_sync(partial(step.fault.apply, lab))
        if on_step is not None:
            on_step(step, result, t_before, clock())


def label_flaps(
    faults: Sequence[FaultWindow], played: Sequence[tuple[Step, float, float]]
) -> list[FaultWindow]:
    """The lab logs a flap as cut/restore pairs; call those cycles what they were:
    "cycle 1/2", "cycle 2/2" (of the flap's count; ``faults`` in time order, as
    timeline.pair_events gives them)."""
    spans = [(s, a, b) for s, a, b in played if isinstance(s.fault, Flap)]
    seen: dict[int, int] = {}
    out = []
    for f in faults:
        hit = next(
            (
                i
                for i, (s, a, b) in enumerate(spans)
                if s.target == f.target and a <= f.t_start <= b
            ),
            None,
        )
        if hit is None:
            out.append(f)
            continue
        seen[hit] = seen.get(hit, 0) + 1
        flap = spans[hit][0].fault
        assert isinstance(flap, Flap)
        out.append(replace(f, kind="flap", action=f"cycle {seen[hit]}/{flap.count}"))
    return out
