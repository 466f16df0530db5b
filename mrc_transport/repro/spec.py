"""What an experiment is, as data: a fabric, runs of flows and faults, and what it measures.

Theory of operation. Each of the paper's experiments (mrc-protocol-notes.md, "Headline
comparisons", "Testbed figures (Fig. 9)", "Failure behaviour reported in production") is an
``Experiment``: which fabric it wants, two sets of knobs (``full``, the default run, and
``quick``, seconds long, for the lab tests), and three pure functions of the topology and
the knobs:

- ``plan``: the runs, each a set of flows (harness/flows.py) started together and a fault
  schedule (harness/schedule.py steps, on ``@links``/``@t0-t1`` groups too), with a length;
- ``measure``: from the finished runs (``RunResult``: delivery records, verification, the
  lab's fault log, the senders' recovery events, the CPU), the paper's claims side by side
  with the lab's figures (``Row``) and the figures themselves for the JSON;
- ``plot``: the PNG.

One engine (repro/engine.py) runs every experiment the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from labs.errors import LabError
from labs.topology import Topology, preset
from labs.units import format_rate
from mrc_transport.collective.steploop import LoopConfig, LoopResult
from mrc_transport.harness.baselines import BaselineKind
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.flows import Flow
from mrc_transport.harness.machine import CpuUse
from mrc_transport.harness.pauses import Pause
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import Delivery, FaultWindow
from mrc_transport.perf.report import EndDoc

START_SLACK_S = 0.5
"""A sender started with the first flows runs this much longer than the run: the run's
origin is when the LAST of them started (each is a Python process that imports for ~0.5 s,
more on a loaded machine), and the earlier ones must still be sending at the run's end.
The observation ends when the first of them may have stopped, if that is earlier."""
START_SPREAD_S = 3.0
"""How much later the last of 8-16 senders launched at once may start than the first on a
busy 2-core machine (each spends about a CPU second importing; docs/measurements.md).
A flow that must run for a while after all have started sends this much longer."""
MSG_LEN = "16K"
"""MRC message size: one delivery record per message, so the time resolution of a gap
(16 KiB: 6.6 ms at 20 Mbit/s; perf's default 128 KiB would be 52 ms)."""
MRC_BASE_PORT = 4791
TCP_BASE_PORT = 5201
ROCE = "RoCE-style RC, emulated (go-back-N, one path)"
"""What the ``roce`` runs are: the paper's baseline as far as this kernel allows (it has
no RDMA): `mrc perf --evs 1 --recovery go-back-n`, NSCC standing in for DCQCN."""


def roce_flow(name: str, src: str, dst: str, port: int, seconds: float, **kw: Any) -> Flow:
    """An MRC flow made RoCE's reliable connection: one EV on one plane, go-back-N."""
    return Flow(name, "mrc", src, dst, port, seconds, msg_len=MSG_LEN, evs=1,
                recovery="go-back-n", **kw)  # fmt: skip


def end_state(res: RunResult, flow: str) -> dict[str, float | None]:
    """A perf flow's window (bytes, every plane's summed) and sRTT (ms) at its end, from
    its sender's end document: what a go-back-N resend has to send again."""
    end = res.mrc_ends.get(flow)
    if end is None or not end.streams:
        return {"window_bytes": None, "srtt_ms": None}
    srtt = end.streams[0].sender.srtt_us
    return {
        "window_bytes": float(sum(p.window for p in end.planes)),
        "srtt_ms": None if srtt is None else srtt / 1000,
    }


@dataclass(frozen=True, slots=True)
class StepLoop:
    """A training step's loop (collective/steploop.py) that a run plays in place of flows:
    every host a rank in this process, each step a collective, the faults beside it."""

    config: LoopConfig
    """The loop; its schedule is the run's ``steps``."""
    hosts: tuple[str, ...]
    """The ranks' hosts, in ring order."""


@dataclass(frozen=True, slots=True)
class Run:
    """Flows that run together on one lab (or a step loop), the faults played meanwhile,
    and a length."""

    name: str
    """Short name, also the prefix of the run's files ("mrc", "tcp", "tcp8")."""
    flows: tuple[Flow, ...]
    """Started together; the run's origin (time 0) is when the last of them started."""
    duration_s: float
    """Seconds from the origin that the run observes."""
    steps: tuple[Step, ...] = ()
    """Fault schedule, ``at`` in seconds after the origin; steps on one target play in
    order, steps on different targets at the same time (a flap sleeps through its cycles)."""
    loop: StepLoop | None = None
    """A step loop instead of flows (``flows`` empty): its first timed step is the origin."""

    @property
    def kinds(self) -> set[str]:
        """Its transports: its flows' kinds, or its loop's."""
        if self.loop is not None:
            return {self.loop.config.transport}
        return {f.kind for f in self.flows}


@dataclass
class RunResult:
    """A finished run, as the engine hands it to ``measure``."""

    run: Run
    """What was run."""
    t_origin: float = 0.0
    """time.monotonic() of the run's time 0 (every first flow sending)."""
    t_stop: float = 0.0
    """End of the observation: the first moment a first flow may have stopped."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Every receiver's records."""
    verified: dict[str, bool] = field(default_factory=dict)
    """Per flow: every byte arrived and matched."""
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per MRC flow: retransmits, lost, evs_retired, evs_readmitted (harness/flows.py)."""
    recovery: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per MRC flow with ``events``: its sender's recovery events (io/eventlog.py)."""
    receiver_recovery: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per MRC flow with ``events``: its receiver's (e.g. the trimmed stubs it NACKed)."""
    played: list[tuple[Step, float, float]] = field(default_factory=list)
    """Each step with the monotonic times before and after it ran."""
    faults: list[FaultWindow] = field(default_factory=list)
    """The lab's fault log during the run, as windows (harness/timeline.py)."""
    cpu: CpuUse | None = None
    """How busy the machine was during the run."""
    pauses: list[Pause] = field(default_factory=list)
    """Times the whole machine stood still (harness/pauses.py)."""
    mrc_cpu_s: float = 0.0
    """CPU seconds the MRC clients reported spending (their end documents)."""
    mrc_ends: dict[str, EndDoc] = field(default_factory=dict)
    """Per MRC flow: its client's end document (both ends' counters, sRTT)."""
    loop: LoopResult | None = None
    """A step loop's steps, its schedule as played and its faults."""

    def flow_deliveries(self, names: Sequence[str]) -> list[Delivery]:
        wanted = set(names)
        return [d for d in self.deliveries if d.flow in wanted]


@dataclass(frozen=True, slots=True)
class Row:
    """One claim of the paper against the lab's measurement."""

    claim: str
    """What the paper reports, in its words where it has them."""
    lab: str
    """What this run measured."""
    verdict: str
    """In words: "agrees", or how and why it differs."""
    agrees: bool | None
    """True/False; None when the lab cannot test the claim as stated."""


@dataclass(frozen=True)
class Findings:
    """``measure``'s answer."""

    rows: tuple[Row, ...]
    """The table."""
    numbers: Mapping[str, Any]
    """The measured figures, for the JSON (plain numbers, lists and dicts)."""


@dataclass(frozen=True, slots=True)
class Fabric:
    """An experiment's fabric: a preset, reshaped where the experiment needs it."""

    preset: str = "default"
    """Base preset when the user gives none."""
    planes: int | None = None
    """Planes (None: the preset's)."""
    hosts_per_rack: int | None = None
    """Hosts per rack (None: the preset's)."""
    t1_per_plane: int | None = None
    """T1 switches per plane (None: the preset's)."""
    rate_bps: int | None = None
    """Every link's rate: low enough that the Python MRC ends are not CPU-bound."""

    def build(self, base: str | None = None) -> Topology:
        """The preset ``base`` (default: this fabric's) with this fabric's changes."""
        topo = preset(base or self.preset)
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("planes", self.planes),
                ("hosts_per_rack", self.hosts_per_rack),
                ("t1_per_plane", self.t1_per_plane),
            )
            if v is not None
        }
        if self.rate_bps is not None:
            changes["host_link"] = replace(topo.host_link, rate_bps=self.rate_bps)
            changes["fabric_link"] = replace(topo.fabric_link, rate_bps=self.rate_bps)
        try:
            return replace(topo, **changes)
        except LabError as exc:
            raise HarnessError(str(exc)) from None

    def describe(self, base: str | None = None) -> str:
        parts = [f"preset {base or self.preset}"]
        for name, value in (
            ("planes", self.planes),
            ("hosts per rack", self.hosts_per_rack),
            ("T1 per plane", self.t1_per_plane),
        ):
            if value is not None:
                parts.append(f"{name} {value}")
        if self.rate_bps is not None:
            parts.append(f"links at {format_rate(self.rate_bps, width=0)}")
        return ", ".join(parts)


K = TypeVar("K")

Planner = Callable[[Topology, K], tuple[Run, ...]]
Measurer = Callable[[Topology, K, Sequence[RunResult]], Findings]
Plotter = Callable[[Path, Topology, K, Sequence[RunResult]], None]
Checker = Callable[[Topology, K], None]


@dataclass(frozen=True)
class Experiment(Generic[K]):
    """One of the paper's experiments at lab scale."""

    name: str
    """`mrc repro NAME`."""
    code: str
    """2-4 letters for the lab's name (lab names have at most 12 characters)."""
    title: str
    """One line."""
    paper: str
    """The paper's figure or claim in words (docs/repro.md, the report)."""
    fabric: Fabric
    """The fabric it runs on unless told otherwise."""
    full: K
    """Knobs of the default run (under 60 s on 2 cores)."""
    quick: K
    """Knobs of the shortened run (`--quick`, the lab tests)."""
    check: Checker[K]
    """Raise HarnessError (one line) when the fabric cannot host the experiment."""
    plan: Planner[K]
    measure: Measurer[K]
    plot: Plotter[K]

    def knobs(self, quick: bool) -> K:
        return self.quick if quick else self.full


def as_baseline(run: Run, kind: BaselineKind) -> Run:
    """The same run with a baseline's flows in place of MRC's (the same hosts, length and
    faults): each on a TCP port of its own, a flow named after MRC ("mrc") named after
    the baseline. The paper has no MPTCP; the runs measure what Linux's multipath does
    under the same faults."""
    flows = []
    for i, f in enumerate(run.flows):
        name = kind if f.name == "mrc" else f.name
        port = TCP_BASE_PORT + i
        flows.append(Flow(name, kind, f.src, f.dst, port, f.seconds, f.streams, nbytes=f.nbytes))
    return replace(run, name=kind, flows=tuple(flows))


def run_named(results: Sequence[RunResult], name: str) -> RunResult | None:
    """The run called name, None when it did not run (a baseline left out)."""
    return next((r for r in results if r.run.name == name), None)


def compared(claim: str, lab: str, verdict: str) -> Row:
    """A row the paper has no claim for (MPTCP beside MRC): a verdict in words, not a
    judgement."""
    return Row(f"{claim} (not in the paper)", lab, f"for comparison: {verdict}", None)


def one_mrc_flow(topo: Topology, duration_s: float, steps: Sequence[Step]) -> Run:
    """One MRC connection across the fabric (failover's hosts: the first host of the last
    rack to the first of rack 0) for duration_s, its recovery events kept, and faults."""
    from mrc_transport.harness.patterns import pick_hosts

    src, dst = pick_hosts(topo, None, None)
    flow = Flow(
        "mrc", "mrc", src, dst, MRC_BASE_PORT, sender_seconds(duration_s), msg_len=MSG_LEN,
        events=True,
    )  # fmt: skip
    return Run("mrc", (flow,), duration_s, tuple(steps))


def sender_seconds(run_s: float) -> float:
    """How long a first flow's sender runs for a run of run_s seconds."""
    return run_s + START_SLACK_S


def need(ok: bool, message: str) -> None:
    """A fabric check: HarnessError(message) unless ok."""
    if not ok:
        raise HarnessError(message)
