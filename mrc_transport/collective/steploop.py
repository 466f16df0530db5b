"""`mrc collective NAME --steps N`: a training step's loop through faults or ECMP's hashing.

Theory of operation. A step is one iteration of the collective at the largest size (a
training step's gradient exchange), the next begins when the last rank has its result
(the barrier), and every step's result is checked (collective/run.py). The loop:

1. makes the ranks' mesh (``--collide``: a new mesh for every step, so ECMP hashes every
   TCP flow anew and the collisions fall where they fall from step to step);
2. runs the warm-up steps (-w), counting the bytes of the T0s' and hosts' ports over them
   when the schedule names a placeholder: its busiest T0-T1 link is ``@tcp-link`` (over
   TCP, a link one of the ring's flows hashed onto; over MRC, which sprays, any of them),
   that link's T1 ``@tcp-t1`` and the port in its plane of the busiest host below it
   ``@src-port`` (harness/linkload.py);
3. takes the moment the first timed step starts as time 0 and plays the schedule from it
   (harness/schedule.py, a lane per target) while the N steps run, and with a schedule of
   its own goes on stepping until the schedule's last step and TAIL_S after it (``until_s``);
   the default schedule (the workshop's: a gray cut, a hard cut, a flap, a T1 that stops
   forwarding, a port down, each undone) is spread over the N steps' expected length, from
   the warm-up's step time; a fault still in effect when the loop ends is undone;
4. pairs the lab's fault log into windows (harness/timeline.py) for the summary
   (collective/steps.py), the JSON and the figures.
"""

from __future__ import annotations

import multiprocessing
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import trio

from labs.faultkinds import Degrade, Fault, FaultLab, Flap, Restore, Unfail
from mrc_transport.collective import bandwidth
from mrc_transport.collective.algorithms import Algorithm
from mrc_transport.collective.groups import Ranks, open_ranks, spec_for
from mrc_transport.collective.links import Placement
from mrc_transport.collective.run import SLICE_BYTES
from mrc_transport.collective.steps import StepTime
from mrc_transport.harness import linkload
from mrc_transport.harness import schedule as sched
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.machine import CpuUse, cpu_times, cpu_use, with_workers
from mrc_transport.harness.timeline import FaultWindow, pair_events

DEFAULT_FAULTS = 9
"""Faults and repairs in the workshop's schedule: it spans ten of its steps, then a tail."""


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """One step loop."""

    alg: Algorithm
    """The collective of a step."""
    size: int
    """Its size in bytes (S)."""
    steps: int
    """Timed steps."""
    warmup: int = 1
    """Untimed steps before them (they measure the placeholders' targets)."""
    dtype: str = "float"
    """float or int32."""
    transport: str = "mrc"
    """mrc, mptcp or tcp."""
    schedule: tuple[sched.Step, ...] = ()
    """Faults at seconds from the first timed step (placeholders allowed)."""
    spread: bool = False
    """Play the workshop's schedule, spread over the loop (``schedule`` is ignored)."""
    collide: bool = False
    """A new mesh every step (ECMP hashes TCP's flows anew)."""
    until_s: float = 0.0
    """Steps go on until this long after the first one started, however many that is (a
    given schedule's length and its tail: every fault is played and its aftermath seen)."""
    slice_bytes: int = SLICE_BYTES
    """The most one MRC message (one TCP write) carries."""
    seed: int | None = None
    """The MRC endpoints' random numbers, for a repeatable run."""
    procs: int = 1
    """Processes serving the ranks (1: this one; collective/groups.py)."""

    @property
    def measures_paths(self) -> bool:
        """The warm-up's port counters are needed (a placeholder to fill)."""
        return self.spread or any(s.target in linkload.PLACEHOLDERS for s in self.schedule)


@dataclass
class LoopResult:
    """What a loop measured."""

    steps: list[StepTime] = field(default_factory=list)
    """Every timed step, in order."""
    warmup_s: list[float] = field(default_factory=list)
    """The warm-up steps' times."""
    t_origin: float = 0.0
    """time.monotonic() of the first timed step's start."""
    t_stop: float = 0.0
    """time.monotonic() of the last step's end."""
    bindings: dict[str, str] = field(default_factory=dict)
    """The placeholders' targets, as the warm-up measured them."""
    schedule: list[sched.Step] = field(default_factory=list)
    """The schedule as played (resolved, spread)."""
    played: list[tuple[sched.Step, float, float]] = field(default_factory=list)
    """Each step of it with the monotonic times before and after it ran."""
    undone: list[str] = field(default_factory=list)
    """Faults still in effect at the end, undone then."""
    faults: list[FaultWindow] = field(default_factory=list)
    """The lab's fault log during the loop, as windows."""
    ideal_s: float = 0.0
    """The fabric's least time for one step."""
    cpu: CpuUse | None = None
    """The CPUs over the loop."""
    worker_cpu_s: list[float] = field(default_factory=list)
    """The CPU seconds of each process that served ranks (none: this one served them)."""

    @property
    def unplayed(self) -> list[sched.Step]:
        done = {id(s) for s, _, _ in self.played}
        return [s for s in self.schedule if id(s) not in done]


def check_loop(cfg: LoopConfig, where: Placement) -> None:
    """HarnessError (one line) for a loop that cannot run: a placeholder with no warm-up
    to measure it, a target that is not in the lab."""
    if cfg.measures_paths and cfg.warmup < 1:
        raise HarnessError(
            "the schedule's @tcp-link (and friends) is measured over the warm-up steps: "
            "give -w 1 or more"
        )
    racks = {where.topo.rack_of(h) for h in where.hosts}
    if cfg.measures_paths and len(racks) < 2:
        raise HarnessError(
            "the schedule's @tcp-link is a T0-T1 link the ranks' bytes cross, and every host "
            f"is in rack {racks.pop()}: give --hosts from 2 racks or a schedule of named targets"
        )
    sched.check_targets(cfg.schedule, where.topo)


async def run_loop(cfg: LoopConfig, where: Placement, say: Callable[[str], None]) -> LoopResult:
    """The warm-up, then the timed steps with the schedule played beside them."""
    res = LoopResult()
    n = len(where.hosts)
    fabric = bandwidth.Fabric.of(where.topo, where.hosts)
    res.ideal_s = bandwidth.ideal_seconds(
        cfg.alg.schedule(n), bandwidth.chunk_bytes(cfg.size, n), fabric
    )
    before = cpu_times()
    worker = FaultWorker()
    await worker.run_sync(_ready)  # started now, not when the first fault is due
    try:
        async with open_ranks(spec_for(cfg, where), cfg.procs) as ranks:
            await _run(cfg, where, say, res, worker, ranks)
    finally:
        worker.close()
    res.worker_cpu_s = ranks.worker_cpu_s
    res.cpu = with_workers(cpu_use(before, cpu_times()), res.worker_cpu_s)
    res.faults = _faults(where.lab, res)
    return res


async def _run(
    cfg: LoopConfig, where: Placement, say: Callable[[str], None], res: LoopResult,
    worker: FaultWorker, ranks: Ranks,
) -> None:  # fmt: skip
    loop = _Loop(cfg, where, ranks, say)
    await ranks.size(cfg.size)
    if not cfg.collide:
        await ranks.mesh()
    counted = partial(linkload.read_tx_counters, where.lab, _counted_nodes(where))
    counts = await trio.to_thread.run_sync(counted) if cfg.measures_paths else {}
    for i in range(cfg.warmup):
        t0, t1, _ = await loop.step(i)
        res.warmup_s.append(t1 - t0)
    if cfg.measures_paths:
        res.bindings = _bindings(cfg, where, counts, await trio.to_thread.run_sync(counted))
    res.schedule = _schedule(cfg, where, res)
    await _timed(loop, res, worker)
    if not cfg.collide:
        await ranks.unmesh()


class _Loop:
    """The state a loop's steps share."""

    def __init__(
        self, cfg: LoopConfig, where: Placement, ranks: Ranks, say: Callable[[str], None]
    ) -> None:
        self.cfg, self.where, self.ranks, self.say = cfg, where, ranks, say

    async def step(self, i: int) -> tuple[float, float, int]:
        """Iteration i of the collective: its start, its end and its wrong elements (with
        --collide, on connections made for it alone)."""
        if self.cfg.collide:
            await self.ranks.mesh()
        t0, t1, wrong = await self.ranks.step(i)
        if self.cfg.collide:
            await self.ranks.unmesh()
        return t0, t1, wrong


class FaultWorker:
    """Faults applied in a process of its own. In a thread of this one, a fault's Python
    (the lab's plan, which a restore reads whole; starting `ip` and `nft`) holds the
    interpreter's lock while it runs, and every rank's loop waits: a restore of a healthy
    link cost a 4 MB all-reduce step 0.15 s that way. The worker is started once (spawn:
    a fresh interpreter, not a copy of this one and its buffers) before the warm-up."""

    def __init__(self) -> None:
        spawn = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(1, mp_context=spawn, initializer=_leave_ctrl_c)

    async def run_sync(self, fn: Callable[[], object]) -> object:
        """fn() in the worker (fn and its result pickled); a thread here only waits."""
        return await trio.to_thread.run_sync(self.pool.submit(fn).result)

    def close(self) -> None:
        self.pool.shutdown()


def _leave_ctrl_c() -> None:
    """In the fault worker: a Ctrl-C at the terminal is the loop's to handle (it undoes
    what is broken and stops the worker), not a traceback of the worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _ready() -> None:
    """In the fault worker: the modules a fault needs, imported before the steps."""
    import labs.faults  # noqa: F401


async def _timed(loop: _Loop, res: LoopResult, worker: FaultWorker) -> None:
    """The timed steps, the schedule played beside them from the first one's start; what
    is still broken at the end is undone."""
    from labs.faults import Lab

    lab = Lab(loop.where.lab)

    def played(step: sched.Step, _result: object, t_before: float, t_after: float) -> None:
        res.played.append((step, t_before, t_after))

    res.t_origin = time.monotonic()
    try:
        async with trio.open_nursery() as nursery:
            for lane in sched.lanes(res.schedule):
                play = partial(
                    sched.run_schedule, lab, lane, res.t_origin, run_sync=worker.run_sync,
                    on_step=played,
                )  # fmt: skip
                nursery.start_soon(play)
            await _steps(loop, res)
            nursery.cancel_scope.cancel()  # a fault being applied finishes first
    finally:  # also after an error or Ctrl-C: the lab is the user's, left whole
        with trio.CancelScope(shield=True):
            await _undo(lab, res)


async def _steps(loop: _Loop, res: LoopResult) -> None:
    """The timed steps: at least N, and until ``until_s`` has passed."""
    k = 0
    while k < loop.cfg.steps or time.monotonic() < res.t_origin + loop.cfg.until_s:
        t0, t1, wrong = await loop.step(loop.cfg.warmup + k)
        res.steps.append(StepTime(k, t0, t1, wrong))
        loop.say(_step_line(res.steps[-1], res))
        k += 1
    res.t_stop = time.monotonic()


async def _undo(lab: FaultLab, res: LoopResult) -> None:
    """Undo every fault still in effect, in a thread here (the steps are over; the fault
    worker may have gone with a Ctrl-C)."""
    for fault in still_broken(res.played):
        await trio.to_thread.run_sync(partial(fault.undo, lab))
        res.undone.append(fault.describe())


def _step_line(step: StepTime, res: LoopResult) -> str:
    """``step  12  at   6.21 s  0.612 s  0 wrong  (cut t0-p0-0:t1-p0-0 (hard))``: the
    faults in effect at some moment of the step are named."""
    named = [f.describe() for f in active_during(res.played, step.t_start, step.t_end)]
    faults = f"  ({', '.join(named)})" if named else ""
    return (
        f"step {step.index:4d}  at {step.t_start - res.t_origin:7.2f} s  {step.seconds:7.3f} s"
        f"  {step.wrong} wrong{faults}"
    )


def _repairs(f: Fault) -> bool:
    """It leaves its target whole: a restore or unfail, a flap (it ends restored), a
    degrade with no loss."""
    return isinstance(f, Restore | Unfail | Flap) or (isinstance(f, Degrade) and f.loss_pct == 0)


def still_broken(played: Sequence[tuple[sched.Step, float, float]]) -> list[Fault]:
    """The faults played and not repaired since, each as played."""
    out: dict[str, Fault] = {}
    for step, _, _ in sorted(played, key=lambda p: p[1]):
        if _repairs(step.fault):
            out.pop(step.fault.target, None)
        else:
            out[step.fault.target] = step.fault
    return list(out.values())


def active_during(
    played: Sequence[tuple[sched.Step, float, float]], t0: float, t1: float
) -> list[Fault]:
    """The faults in effect at some moment of [t0, t1]: applied before t1 and not repaired
    before t0 (a flap while it plays)."""
    out: dict[str, tuple[Fault, float]] = {}
    hit: list[Fault] = []
    for step, t_before, t_after in sorted(played, key=lambda p: p[1]):
        f = step.fault
        if isinstance(f, Flap) and t_before < t1 and t_after > t0:
            hit.append(f)
        if _repairs(f):
            begun = out.pop(f.target, None)
            if begun is not None and begun[1] < t1 and t_after > t0:
                hit.append(begun[0])
        else:
            out[f.target] = (f, t_after)
    hit += [f for f, t in out.values() if t < t1]
    return hit


def _counted_nodes(where: Placement) -> list[str]:
    t0s = [s for s in where.topo.switches if where.topo.kind_of(s) == "t0"]
    return [*t0s, *where.hosts]


def _bindings(
    cfg: LoopConfig, where: Placement, before: linkload.Counters, after: linkload.Counters
) -> dict[str, str]:
    """@tcp-link and friends from the warm-up's bytes (the module docstring)."""
    chunk = bandwidth.chunk_bytes(cfg.size, len(where.hosts))
    link = linkload.pick_tcp_link(where.topo, before, after, min(chunk, 1 << 16) * cfg.warmup)
    src = linkload.busiest_host(where.topo, where.hosts, link, before, after)
    return linkload.bindings_for(where.topo, link, src)


def _schedule(cfg: LoopConfig, where: Placement, res: LoopResult) -> list[sched.Step]:
    """The schedule to play: the workshop's spread over the loop's expected length, or
    the given one, placeholders filled; their targets checked against the lab."""
    steps: Sequence[sched.Step] = cfg.schedule
    if cfg.spread:
        typical = statistics.median(res.warmup_s) if res.warmup_s else res.ideal_s
        steps = sched.default_schedule(cfg.steps * typical / (DEFAULT_FAULTS + 1))
    resolved = sched.resolve(steps, res.bindings)
    sched.check_targets(resolved, where.topo)
    return resolved


def _faults(lab: str, res: LoopResult) -> list[FaultWindow]:
    """The lab's log over the loop as windows (a flap's cycles named), those that touched
    no step's time included."""
    from labs.faults import read_events

    events = [e for e in read_events(lab) if float(e["t_mono"]) >= res.t_origin - 1e-3]
    windows = sched.label_flaps(pair_events(events, res.t_stop), res.played)
    return [w for w in windows if w.t_start <= res.t_stop]
