"""The one engine behind `mrc repro`: any experiment (repro/spec.py), the same way.

Theory of operation. For an experiment and a fabric, the engine

1. checks the fabric and plans the runs (pure: the experiment's ``check`` and ``plan``);
2. brings up a lab of its own under a unique name (``r<code><4 hex digits>``) and, in a
   ``finally``, kills every child and tears the lab down, also on Ctrl-C and on errors;
3. per run, on that lab: starts every receiver, then every sender, and takes the
   moment the last of them started as the run's origin (time 0); plays the fault schedule,
   one lane per target (harness/schedule.py ``lanes``, ``run_schedule``); waits for
   every flow and judges its bytes (harness/flows.py); reads the records, the lab's fault
   log (paired into windows by harness/timeline.py) and the MRC senders' recovery events;
   samples the CPUs (harness/machine.py) and watches for host pauses (harness/pauses.py);
4. hands the runs to the experiment's ``measure`` and ``plot`` and writes NAME.json,
   NAME.png and NAME.md (repro/result.py).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from labs.errors import LabError
from labs.topology import Topology
from labs.units import format_rate
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.flows import Flows, mrc_counters
from mrc_transport.harness.procs import Children
from mrc_transport.harness.schedule import Step, check_targets, lanes, run_schedule
from mrc_transport.harness.timeline import pair_events
from mrc_transport.repro.spec import Experiment, Run, RunResult, StepLoop


@dataclass(frozen=True, slots=True)
class ReproConfig:
    """One `mrc repro NAME`."""

    topo: Topology
    """The fabric."""
    out: Path
    """Folder for NAME.json, NAME.png, NAME.md, the records and the children's logs."""
    lab: str | None = None
    """Lab name; None: a fresh unique one."""
    quick: bool = False
    """The shortened run (seconds), as the lab tests run it."""
    fabric_label: str = ""
    """Where the fabric came from, for the report ("preset default, ...", a file)."""
    baselines: tuple[str, ...] = ("tcp", "mptcp")
    """The baselines whose runs are played: an experiment's MPTCP runs only with mptcp."""


def unique_lab(exp: Experiment[Any]) -> str:
    """``r`` + the experiment's code + 4 hex digits: at most 12 characters."""
    return f"r{exp.code}{secrets.token_hex(2)}"


def selected(runs: Sequence[Run], baselines: Sequence[str]) -> list[Run]:
    """The runs whose flows (or loop) are MRC's or a chosen baseline's."""
    chosen = {"mrc", *baselines}
    return [r for r in runs if r.kinds <= chosen]


def check_plan(topo: Topology, runs: Sequence[Run]) -> None:
    """Every step's target exists in the fabric (a group's every link); HarnessError otherwise."""
    for run in runs:
        check_targets(run.steps, topo)


def run_experiment(exp: Experiment[Any], cfg: ReproConfig, console: Any = None) -> dict[str, Any]:
    """The whole experiment; returns the report (also written to cfg.out/NAME.json)."""
    from rich.console import Console

    from labs.apply import lab_exists
    from mrc_transport.harness.machine import machine_state
    from mrc_transport.repro import result

    console = console or Console()
    if os.geteuid() != 0:
        raise HarnessError("needs root (network namespaces); try sudo")
    knobs = exp.knobs(cfg.quick)
    exp.check(cfg.topo, knobs)
    runs = selected(exp.plan(cfg.topo, knobs), cfg.baselines)
    check_plan(cfg.topo, runs)
    lab = cfg.lab or unique_lab(exp)
    if lab_exists(lab):  # the user's to fix (exit 2), and never to be torn down by us
        raise LabError(f"lab {lab!r} exists: pick another --name or `mrc lab down --name {lab}`")
    machine = machine_state()
    t0 = time.monotonic()
    results = run_on_lab(runs, cfg, lab, console)
    findings = exp.measure(cfg.topo, knobs, results)
    cfg.out.mkdir(parents=True, exist_ok=True)
    png = cfg.out / f"{exp.name}.png"
    exp.plot(png, cfg.topo, knobs, results)
    doc = result.document(exp, cfg, lab, knobs, results, findings, machine, time.monotonic() - t0)
    result.write(cfg.out, exp.name, doc)
    result.print_result(doc, console)
    return doc


def run_on_lab(runs: Sequence[Run], cfg: ReproConfig, lab: str, console: Any) -> list[RunResult]:
    """Bring the lab up, play every run, ALWAYS kill the children and tear the lab down."""
    from labs.apply import down, up

    cfg.out.mkdir(parents=True, exist_ok=True)
    children = Children(cfg.out / "logs")
    topo = cfg.topo
    _say(
        console,
        f"lab {lab}: {len(topo.hosts)} hosts, {len(topo.switches)} switches, "
        f"{topo.planes} plane{'s' if topo.planes > 1 else ''}, "
        f"{format_rate(topo.host_link.rate_bps, width=0)} per port",
    )
    results: list[RunResult] = []
    try:
        up(topo, lab)
        _check_mptcp(runs, lab)
        for run in runs:
            _say(console, f"run {run.name}: {_describe(run)}")
            results.append(play(run, cfg, lab, children))
    finally:
        try:
            children.kill_all()
        finally:  # the lab goes even if a kill fails
            down(lab)
            _say(console, f"lab {lab}: torn down")
    return results


def _check_mptcp(runs: Sequence[Run], lab: str) -> None:
    """Every host of an MPTCP flow runs MPTCP (harness/mptcp.py; Unavailable if not)."""
    from mrc_transport.harness.mptcp import check_ready

    hosts = {h for r in runs for f in r.flows if f.kind == "mptcp" for h in (f.src, f.dst)}
    hosts |= {h for r in runs if r.loop and "mptcp" in r.kinds for h in r.loop.hosts}
    if hosts:
        check_ready(lab, sorted(hosts))


def _describe(run: Run) -> str:
    if run.loop is not None:
        c = run.loop.config
        text = f"{c.alg.name} of {c.size} B over {c.transport}, {len(run.loop.hosts)} ranks"
        return f"{text}, {len(run.steps)} fault steps, {run.duration_s:g} s or more"
    flows = run.flows
    kinds = sorted({f.kind.upper() for f in flows})
    text = f"{len(flows)} {'/'.join(kinds)} flow{'s' if len(flows) > 1 else ''}"
    if run.steps:
        text += f", {len(run.steps)} fault step{'s' if len(run.steps) > 1 else ''}"
    return f"{text}, {run.duration_s:g} s"


def play(run: Run, cfg: ReproConfig, lab: str, children: Children) -> RunResult:
    """One run on the running lab (blocking)."""
    import trio

    from labs.faults import read_events
    from mrc_transport.harness.errors import unwrap
    from mrc_transport.harness.machine import cpu_times, cpu_use, with_workers
    from mrc_transport.harness.pauses import PauseWatch
    from mrc_transport.harness.schedule import label_flaps

    res = RunResult(run)
    before = cpu_times()
    try:
        with PauseWatch() as watch:
            if run.loop is not None:
                trio.run(_play_loop, run.loop, cfg, lab, res)
            else:
                trio.run(_play, run, cfg, lab, children, res)
    except BaseExceptionGroup as group:
        raise unwrap(group) from None
    workers = res.loop.worker_cpu_s if res.loop is not None else []
    res.cpu = with_workers(cpu_use(before, cpu_times()), workers)
    res.pauses = watch.pauses
    if run.loop is not None:  # the loop paired its own faults
        return res
    events = [e for e in read_events(lab) if float(e["t_mono"]) >= res.t_origin - 1e-3]
    res.faults = label_flaps(pair_events(events, res.t_stop), res.played)
    return res


async def _play(run: Run, cfg: ReproConfig, lab: str, children: Children, res: RunResult) -> None:
    import trio

    from labs.faults import Lab

    flows = Flows(lab, cfg.topo, cfg.out, run.name, children)
    faults = Lab(lab)

    def played(step: Step, _result: object, t_before: float, t_after: float) -> None:
        res.played.append((step, t_before, t_after))

    async with trio.open_nursery() as nursery:
        await flows.start_receivers(nursery, run.flows)
        await flows.start_senders(nursery, run.flows, wait_start=True, together=True)
        res.t_origin = max(flows.started.values())
        # flows meant to outlast the run (not an incast's shorter ones) bound the observation
        whole = [f for f in run.flows if f.nbytes is None and f.seconds >= run.duration_s]
        whole = whole or list(run.flows)
        first_stop = min(flows.started[f.name] + f.seconds for f in whole)
        res.t_stop = min(res.t_origin + run.duration_s, first_stop)
        # the schedule may outlast the flows by its last step's apply time (a restore at
        # the run's end): it plays on beside finish(), the nursery waits for both
        for lane in lanes(run.steps):
            nursery.start_soon(partial(run_schedule, faults, lane, res.t_origin, on_step=played))
        res.verified = await flows.finish()
    _collect(flows, run, res)


async def _play_loop(loop: StepLoop, cfg: ReproConfig, lab: str, res: RunResult) -> None:
    """A step loop on the running lab (collective/steploop.py), quietly: the report says
    what it measured."""
    from mrc_transport.collective.links import Placement
    from mrc_transport.collective.steploop import run_loop

    res.loop = out = await run_loop(loop.config, Placement(lab, cfg.topo, loop.hosts), _quiet)
    res.t_origin, res.t_stop = out.t_origin, out.t_stop
    res.played, res.faults = out.played, out.faults
    res.verified = {res.run.name: bool(out.steps) and not any(s.wrong for s in out.steps)}


def _quiet(_line: str) -> None:
    pass


def _collect(flows: Flows, run: Run, res: RunResult) -> None:
    res.deliveries = flows.deliveries()
    for flow in run.flows:
        if flow.kind != "mrc":
            continue
        end = flows.mrc_end(flow.name)
        res.counters[flow.name] = mrc_counters(end)
        res.mrc_cpu_s += end.cpu_seconds if end is not None else 0.0
        if end is not None:
            res.mrc_ends[flow.name] = end
        if flow.events:
            res.recovery[flow.name] = flows.recovery_events(flow.name)
            res.receiver_recovery[flow.name] = flows.recovery_events(flow.name, receiver=True)


def _say(console: Any, text: str) -> None:
    console.print(text, highlight=False)


__all__ = ["ReproConfig", "run_experiment"]
