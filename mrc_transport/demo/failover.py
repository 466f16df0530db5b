"""`mrc demo failover`: break the fabric under an MRC transfer and its baselines.

Theory of operation. On one host pair in different racks, the demo

1. brings up the lab (``labs.apply.up``) under its own name, and with MPTCP among the
   baselines checks that both hosts' namespaces run it (harness/mptcp.py);
2. starts the receivers in the destination host's namespace: one per baseline
   (harness/baselines.py: TCP pinned to its ECMP path, TCP that Linux moves on RTO, MPTCP
   with a subflow per plane; harness/tcpflow.py) and `mrc perf -s -1`, each writing one
   delivery record per receive, and counts each baseline's bytes per port where ECMP
   chooses (harness/flowlinks.py);
3. starts the baseline senders and, from those counters, finds each one's path and the
   pinned TCP flow's T0-T1 link;
4. starts the MRC client (`mrc perf -c --json-stream`); its ``start`` event is t_origin,
   the zero of the schedule and of every figure;
5. plays the schedule (labs/faults.py logs each fault with time.monotonic()) while the live
   view draws the flows, the planes and the faults; just before each fault it reads each
   baseline's path again (a rehash or a cut may have moved it) and fills the fault's
   placeholders (@tcp-link, @tcp-t1, @src-port) from the pinned TCP flow's link then;
6. waits for every flow (a baseline still stalled GRACE_S after its end is stopped, its
   stall then "still stalled"), then analyses (demo/failover_analysis.py) and writes
   report.json and timeline.png.

The lab is torn down in a ``finally`` (also on Ctrl-C) after the children are killed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from labs.faultkinds import Restore, Unfail
from labs.topology import Topology, namespace
from mrc_transport.demo.livestate import LiveState, poll_ports
from mrc_transport.harness import flowlinks
from mrc_transport.harness import schedule as sched
from mrc_transport.harness.baselines import DEFAULT_BASELINES, BaselineKind, baseline
from mrc_transport.harness.errors import HarnessError, unwrap
from mrc_transport.harness.linkload import PLACEHOLDERS, bindings_for
from mrc_transport.harness.pauses import Pause, PauseWatch
from mrc_transport.harness.procs import Child, Children, perf_argv, tcpflow_argv
from mrc_transport.harness.schedule import Step
from mrc_transport.perf.report import EndDoc

MRC_PORT = 4791
BASE_PORT = 5201
"""Baseline i's receiver listens on TCP port BASE_PORT + i."""
MSG_LEN = "16K"
"""MRC message size: one delivery record per message, so it sets the time resolution of a
stall (16 KiB = 1.3 ms at 100 Mbit/s; perf's default 128K would be 10 ms)."""
MEASURE_S = 0.5
"""Seconds of baseline-only traffic over which their paths are found."""
START_SLACK_S = 4.0
"""The baseline senders run this much longer than measure + duration: the MRC client's
start-up (a Python import, the SETUP handshake) must not eat into their share."""
GRACE_S = 15.0
"""How long after its own end a baseline may take to deliver its last bytes (a stall that
outlasts the run, measured whole) before it is stopped as still stalled."""
PATH_BEFORE_S = (0.5, 0.05)
"""A fault's path: the flows' counters from this long before its step to this long before."""
INTERVAL_S = 0.25
"""MRC client's --json-stream interval: the live view's refresh of MRC's numbers."""
MRC_EVENTS = "mrc-events.jsonl"
"""The MRC sender's recovery events (`mrc perf --events`): RTOs, retransmits, retired EVs."""
MRC_SERVER_EVENTS = "mrc-events-server.jsonl"
"""The MRC receiver's."""


@dataclass(frozen=True, slots=True)
class FailoverConfig:
    """One run of the demo."""

    topo: Topology
    """The fabric."""
    lab: str
    """Lab name (namespaces mrc-<lab>-*)."""
    steps: tuple[sched.Step, ...]
    """The fault schedule, placeholders unresolved."""
    duration: float
    """Seconds of transfer from t_origin."""
    out: Path
    """Output folder."""
    live: bool = True
    """Draw the rich live view (else one line per fault)."""
    preset: str | None = None
    """Preset name, for the report."""
    src: str | None = None
    """Sending host (default: the first host of the last rack)."""
    dst: str | None = None
    """Receiving host (default: the first host of rack 0)."""
    bin_s: float = 0.01
    """Goodput bin (10 ms or finer, to see a stall)."""
    baselines: tuple[BaselineKind, ...] = DEFAULT_BASELINES
    """The baselines run beside MRC (harness/baselines.py), in the table's order."""

    def port(self, kind: str) -> int:
        return BASE_PORT + [str(k) for k in self.baselines].index(kind)

    @property
    def placeholder_source(self) -> str | None:
        """The baseline whose path fills @tcp-link and friends: the first single-path one."""
        return next((k for k in self.baselines if baseline(k).single_path), None)


def check_placeholders(cfg: FailoverConfig) -> None:
    """A schedule that names @tcp-link (or its friends) needs a single-path baseline."""
    named = sorted({s.target for s in cfg.steps if s.target in PLACEHOLDERS})
    if named and cfg.placeholder_source is None:
        raise HarnessError(
            f"the schedule names {named[0]}, the path of a TCP baseline: add tcp or "
            "tcp-rehash to --baselines"
        )


# -- the run ----------------------------------------------------------------------------------


@dataclass
class BaselineEnd:
    """How one baseline finished."""

    rx: dict[str, Any] = field(default_factory=dict)
    """Its receiver's end event (bytes, verified, stopped)."""
    tx: dict[str, Any] = field(default_factory=dict)
    """Its sender's end event ({} when it was stopped)."""
    t_seen: float = 0.0
    """time.monotonic() until which its deliveries were watched: its sender's end, or when
    it was stopped still stalled."""


@dataclass
class Outcome:
    """What the transfer phase produced, for the analysis."""

    t_origin: float = 0.0
    t_stop: float = 0.0
    tcp_link: str = ""
    steps: list[sched.Step] = field(default_factory=list)
    played: list[tuple[sched.Step, float, float]] = field(default_factory=list)
    mrc_end: EndDoc | None = None
    """The MRC client's end document (None: it printed none)."""
    mrc_rc: int | None = None
    ends: dict[str, BaselineEnd] = field(default_factory=dict)
    """Per baseline kind."""
    start_paths: dict[str, flowlinks.FlowPath] = field(default_factory=dict)
    """Each baseline's path before MRC started, the fabric whole."""
    fault_paths: dict[int, dict[str, flowlinks.FlowPath]] = field(default_factory=dict)
    """Each baseline's path just before the fault of steps[i]."""
    mptcp: dict[str, Any] = field(default_factory=dict)
    """How MPTCP was set up on both hosts (harness/mptcp.py ``settings``)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    """Times the whole machine stood still during the transfers (harness/pauses.py)."""
    steal_s: float | None = None
    """CPU steal over the transfers, summed over CPUs (/proc/stat)."""


def _say(console: Any, text: str) -> None:
    console.print(text, highlight=False)


def baseline_recv_argv(cfg: FailoverConfig, kind: str) -> list[str]:
    """A baseline's receiver: records every delivery, reports progress every 0.1 s."""
    return tcpflow_argv(
        *baseline(kind).recv_args(cfg.port(kind), kind), "--records",
        str(cfg.out / f"{kind}.jsonl"), "--progress", "0.1", "--accept-timeout", "60",
    )  # fmt: skip


def sender_seconds(cfg: FailoverConfig) -> float:
    """How long a baseline sends: longer than the MRC transfer, since their paths are
    measured first and MRC starts late."""
    return cfg.duration + MEASURE_S + START_SLACK_S


def baseline_send_argv(cfg: FailoverConfig, kind: str, src: str, dst: str) -> list[str]:
    args = baseline(kind).send_args(cfg.topo, src, dst, cfg.port(kind))
    return tcpflow_argv(*args, "-t", f"{sender_seconds(cfg):.3f}")


def mrc_server_argv(cfg: FailoverConfig) -> list[str]:
    """`mrc perf -s -1`: records every delivered message and its recovery events."""
    return perf_argv(
        "-s", "-1", "--lab", cfg.lab, "-p", str(MRC_PORT), "--json-stream", "-i", "0",
        "--records", str(cfg.out / "mrc.jsonl"), "--flow", "mrc",
        "--events", str(cfg.out / MRC_SERVER_EVENTS),
    )  # fmt: skip


def mrc_client_argv(cfg: FailoverConfig, dst: str) -> list[str]:
    """`mrc perf -c`: intervals for the live view, recovery events for the report."""
    return perf_argv(
        "-c", dst, "--lab", cfg.lab, "-p", str(MRC_PORT), "-t", f"{cfg.duration:.3f}",
        "-l", MSG_LEN, "--json-stream", "-i", str(INTERVAL_S),
        "--events", str(cfg.out / MRC_EVENTS),
    )  # fmt: skip


@dataclass
class Run:
    """One transfer phase: its config, hosts, children and what they said so far."""

    cfg: FailoverConfig
    src: str
    dst: str
    children: Children
    out: Outcome
    console: Any
    state: LiveState
    rx: dict[str, Child] = field(default_factory=dict)
    tx: dict[str, Child] = field(default_factory=dict)
    counted: list[str] = field(default_factory=list)
    """Nodes with per-flow counters (harness/flowlinks.py)."""

    @property
    def flows(self) -> list[flowlinks.Flow]:
        return [flowlinks.Flow(self.cfg.port(k), self.src, self.dst) for k in self.cfg.baselines]

    def read(self) -> dict[flowlinks.Key, int]:
        return flowlinks.read(self.cfg.lab, self.counted)

    def paths_between(
        self, before: flowlinks.Counts, after: flowlinks.Counts
    ) -> dict[str, flowlinks.FlowPath]:
        return {
            k: flowlinks.flow_path(self.cfg.topo, before, after, f)
            for k, f in zip(self.cfg.baselines, self.flows, strict=True)
        }

    def source_link(self, before: flowlinks.Counts, after: flowlinks.Counts) -> str | None:
        """The T0-T1 link the placeholders' baseline (the pinned TCP flow) carried most of
        its data on; None without one, or when it sent nothing then (stalled)."""
        source = self.cfg.placeholder_source
        if source is None:
            return None
        flow = self.flows[[str(k) for k in self.cfg.baselines].index(source)]
        try:
            return flowlinks.busiest_uplink(self.cfg.topo, before, after, flow)
        except HarnessError:
            return None


async def _start_baselines(run: Run, nursery: Any) -> None:
    """Receivers, the per-flow counters, then every sender; returns once each delivers."""
    import trio

    cfg = run.cfg
    ns_src, ns_dst = namespace(cfg.lab, run.src), namespace(cfg.lab, run.dst)
    for kind in cfg.baselines:
        rx = await run.children.start(
            nursery, f"{kind}-recv", ns_dst, baseline_recv_argv(cfg, kind)
        )
        rx.on_event = partial(run.state.on_baseline, kind)
        run.rx[kind] = rx
    for kind in cfg.baselines:
        await run.rx[kind].wait_event("listening", 30)
    run.counted = await trio.to_thread.run_sync(flowlinks.install, cfg.lab, cfg.topo, run.flows)
    for kind in cfg.baselines:
        argv = baseline_send_argv(cfg, kind, run.src, run.dst)
        run.tx[kind] = await run.children.start(nursery, f"{kind}-send", ns_src, argv)
    for kind in cfg.baselines:
        await run.rx[kind].wait_event("progress", 30)


async def _measure_paths(run: Run) -> None:
    """Each baseline's path while they run alone; the pinned one's link."""
    import trio

    cfg, out = run.cfg, run.out
    before = await trio.to_thread.run_sync(run.read)
    await trio.sleep(MEASURE_S)  # the measurement window itself, not a wait for a condition
    after = await trio.to_thread.run_sync(run.read)
    out.start_paths = run.paths_between(before, after)
    if cfg.placeholder_source is None:
        return
    link = run.source_link(before, after)
    if link is None:
        raise HarnessError(
            f"no T0-T1 link carried the {cfg.placeholder_source} flow {run.src} -> {run.dst}"
        )
    out.tcp_link = link
    _say(
        run.console,
        f"{cfg.placeholder_source.upper()} flow {run.src} -> {run.dst} hashed onto "
        f"[bold]{link}[/] (plane {cfg.topo.link(link).plane}); starting MRC",
    )


async def _transfer(run: Run) -> None:
    """Start the baselines, find their paths, start MRC, play the faults, wait for all."""
    import trio

    cfg, out = run.cfg, run.out
    for name in (
        "mrc.jsonl",
        MRC_EVENTS,
        MRC_SERVER_EVENTS,
        *(f"{k}.jsonl" for k in cfg.baselines),
    ):
        (cfg.out / name).unlink(missing_ok=True)
    async with trio.open_nursery() as nursery:
        srv = await run.children.start(
            nursery, "mrc-server", namespace(cfg.lab, run.dst), mrc_server_argv(cfg)
        )
        await _start_baselines(run, nursery)
        await srv.wait_event("listening", 30)
        await _measure_paths(run)
        ns_src = namespace(cfg.lab, run.src)
        cli = await run.children.start(nursery, "mrc-client", ns_src, mrc_client_argv(cfg, run.dst))
        cli.on_event = run.state.on_mrc
        await cli.wait_event("start", 30)
        out.t_origin = run.state.t_origin = time.monotonic()
        out.t_stop = out.t_origin + cfg.duration
        out.mrc_rc = await _play_faults(run, cli)
        await _finish_baselines(run)
        await srv.wait_exit(60)
        out.mrc_end = cli.perf_end()
        if out.mrc_rc != 0:
            _say(run.console, f"[red]mrc perf client exited {out.mrc_rc}[/]{cli.stderr_tail()}")


async def _finish_baselines(run: Run) -> None:
    """Wait for each baseline to end; one still stalled GRACE_S after its end is stopped
    (its receiver keeps what arrived; the stall is then open: "still stalled")."""
    import trio

    t_end = run.out.t_origin - START_SLACK_S + sender_seconds(run.cfg)
    for kind in run.cfg.baselines:
        tx, rx = run.tx[kind], run.rx[kind]
        end = BaselineEnd()
        with trio.move_on_after(max(0.0, t_end + GRACE_S - time.monotonic())):
            await tx.wait_exit(sender_seconds(run.cfg) + GRACE_S)
        end.t_seen = time.monotonic()
        if not tx.reaped:
            _say(
                run.console, f"[yellow]{kind} still stalled {GRACE_S:g} s after its end: stopped[/]"
            )
            rx.terminate()
            tx.kill()
        await rx.wait_exit(60)
        end.rx, end.tx = rx.find("end") or {}, tx.find("end") or {}
        run.out.ends[kind] = end


async def _read_before(
    run: Run, step: Step
) -> tuple[dict[str, flowlinks.FlowPath], str | None] | None:
    """Each baseline's path, and the pinned one's link, just before a step (PATH_BEFORE_S);
    None when there is no time left for it."""
    import trio

    t_a, t_b = (run.out.t_origin + step.at - lead for lead in PATH_BEFORE_S)
    if t_b <= time.monotonic():
        return None  # too close to the step before: its reading stands
    await trio.sleep(max(0.0, t_a - time.monotonic()))
    before = await trio.to_thread.run_sync(run.read)
    await trio.sleep(max(0.0, t_b - time.monotonic()))
    after = await trio.to_thread.run_sync(run.read)
    return run.paths_between(before, after), run.source_link(before, after)


def _bound(run: Run, step: Step, link: str, bound: dict[str, str]) -> Step:
    """The step with its placeholder given a target: a fault's from the pinned flow's link
    now, an undo the target its fault was given."""
    if step.target not in PLACEHOLDERS:
        return step
    if isinstance(step.fault, Restore | Unfail) and step.target in bound:
        target = bound[step.target]
    else:
        target = bindings_for(run.cfg.topo, link, run.src)[step.target]
        bound[step.target] = target
    return replace(step, fault=replace(step.fault, target=target))


async def _play_schedule(run: Run, on_step: Any) -> None:
    """The schedule in time order. Just before each fault, every baseline's path is read
    again, and the fault's placeholders are bound to the link the pinned flow is on then:
    it moves (a hard cut deletes its route at once; after a few RTOs in a row the kernel
    looks its route up again, which may pick another plane), and "@tcp-link" means the
    link that carries it when the fault strikes."""
    import trio

    from labs.faults import Lab

    cfg, out = run.cfg, run.out
    lab, link = Lab(cfg.lab), out.tcp_link
    bound: dict[str, str] = {}
    for step in sorted(cfg.steps, key=lambda s: s.at):
        if not isinstance(step.fault, Restore | Unfail):
            read = await _read_before(run, step)
            if read is not None:
                out.fault_paths[len(out.steps)] = read[0]
                link = read[1] or link
        step = _bound(run, step, link, bound)
        out.steps.append(step)
        await trio.sleep(max(0.0, out.t_origin + step.at - time.monotonic()))
        t_before = time.monotonic()
        result = await trio.to_thread.run_sync(partial(step.fault.apply, lab))
        on_step(step, result, t_before, time.monotonic())


async def _play_faults(run: Run, cli: Child) -> int:
    """The fault schedule, the path watch and the live view while the MRC client runs; its
    exit code."""
    import trio

    from mrc_transport.demo.live import run_live

    cfg, out = run.cfg, run.out

    def played(step: sched.Step, _result: object, t_before: float, t_after: float) -> None:
        out.played.append((step, t_before, t_after))
        if not cfg.live:
            _say(run.console, f"{t_before - out.t_origin:6.2f}s  {step.describe()}")

    async with trio.open_nursery() as flows:
        done = trio.Event()
        flows.start_soon(_play_schedule, run, played)
        if cfg.live:
            ports: dict[str, int] = {k: cfg.port(k) for k in cfg.baselines}
            flows.start_soon(poll_ports, run.state, cfg.lab, run.src, ports, 0.25)
            flows.start_soon(_live, run_live, run.state, run.console, done)
        rc: int = await cli.wait_exit(cfg.duration + 120)
        done.set()
        flows.cancel_scope.cancel()
    return rc


async def _live(run_live: Any, state: LiveState, console: Any, done: Any) -> None:
    await run_live(state, refresh_s=0.2, console=console, until=done.is_set)


def run_transfer(cfg: FailoverConfig, src: str, dst: str, console: Any) -> Outcome:
    """Bring the lab up, run the flows and the schedule, ALWAYS kill the children and tear
    the lab down (also on Ctrl-C and on errors). The fault log is read before teardown."""
    import trio

    from labs.apply import down, up
    from labs.faults import read_events

    cfg.out.mkdir(parents=True, exist_ok=True)
    children = Children(cfg.out / "logs")
    out = Outcome()
    rate = float(cfg.topo.host_link.rate_bps)
    state = LiveState(0.0, cfg.lab, cfg.topo.planes, rate * cfg.topo.planes, rate, cfg.baselines)
    run = Run(cfg, src, dst, children, out, console, state)
    _say(
        console,
        f"lab {cfg.lab}: bringing up {len(cfg.topo.hosts)} hosts, "
        f"{len(cfg.topo.switches)} switches, {cfg.topo.planes} planes",
    )
    try:
        up(cfg.topo, cfg.lab)
        _check_mptcp(run)
        try:
            with PauseWatch() as watch:
                trio.run(_transfer, run)
        except BaseExceptionGroup as group:
            raise unwrap(group) from None
        out.pauses, out.steal_s = watch.pauses, watch.steal_s
        out.events = read_events(cfg.lab)
    finally:
        children.kill_all()
        down(cfg.lab)
        _say(console, f"lab {cfg.lab}: torn down")
    return out


def _check_mptcp(run: Run) -> None:
    """With MPTCP among the baselines: both hosts run it (Unavailable, one line, if not),
    and how it is set up goes into the report."""
    from mrc_transport.harness import mptcp

    if not any(baseline(k).mptcp for k in run.cfg.baselines):
        return
    mptcp.check_ready(run.cfg.lab, [run.src, run.dst])
    run.out.mptcp = {h: mptcp.settings(run.cfg.lab, h) for h in (run.src, run.dst)}


def run_failover(cfg: FailoverConfig, console: Any = None) -> dict[str, Any]:
    """The whole demo; returns the report (also written to cfg.out/report.json)."""
    from rich.console import Console

    from mrc_transport.demo.failover_analysis import analyse_run, write_outputs
    from mrc_transport.harness.patterns import pick_hosts

    console = console or Console()
    if os.geteuid() != 0:
        raise HarnessError("needs root (network namespaces); try sudo")
    src, dst = pick_hosts(cfg.topo, cfg.src, cfg.dst)
    sched.check_targets(cfg.steps, cfg.topo)
    check_placeholders(cfg)
    out = run_transfer(cfg, src, dst, console)
    analysis = analyse_run(cfg, src, dst, out)
    write_outputs(cfg, out, analysis, console)
    return analysis.doc


__all__ = ["FailoverConfig", "run_failover"]
