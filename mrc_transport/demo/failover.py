"""`mrc demo failover`: break the fabric under an MRC transfer and a single-path TCP flow.

Theory of operation. On one host pair in different racks, the demo

1. brings up the lab (``labs.apply.up``) under its own name;
2. starts the receivers in the destination host's namespace: the TCP baseline
   (harness/tcpflow.py) and `mrc perf -s -1`, both writing one delivery record per receive;
3. starts the TCP sender alone and finds its T0-T1 link from the switches' tx counters
   (ECMP hashes it; nobody can predict it: harness/linkload.py ``measure_tcp_link``), which
   fills the schedule's placeholders (@tcp-link, @tcp-t1, @src-port);
4. starts the MRC client (`mrc perf -c --json-stream`); its ``start`` event is t_origin,
   the zero of the schedule and of every figure;
5. plays the schedule (labs/faults.py logs each fault with time.monotonic()) while the live
   view draws the flows, the planes and the faults;
6. waits for every flow to end verified, reads the records and the fault log, and computes
   per fault the MRC stall, MRC recovery to 90% of the capacity that survives (the fraction
   of MRC's SRv6 paths the fault leaves alive, labs/paths.py) and the TCP stall
   (harness/timeline.py), then writes report.json and timeline.png.

The lab is torn down in a ``finally`` (also on Ctrl-C) after the children are killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from labs import addressing
from labs.faultkinds import Cut, Fail, Flap, Restore, Unfail
from labs.paths import paths
from labs.topology import Topology, namespace
from mrc_transport.demo.live import LiveSnapshot, format_fault
from mrc_transport.harness import schedule as sched
from mrc_transport.harness.baselines import FlowKind
from mrc_transport.harness.errors import HarnessError, unwrap
from mrc_transport.harness.linkload import (
    PLACEHOLDERS,
    bindings_for,
    measure_tcp_link,
    read_tx_counters,
)
from mrc_transport.harness.paths import surviving
from mrc_transport.harness.patterns import pick_hosts
from mrc_transport.harness.pauses import Pause, PauseWatch
from mrc_transport.harness.records import read_records
from mrc_transport.harness.report import (
    FaultRow,
    FlowReport,
    explain_stalls,
    failover_report,
    fault_rows,
    flow_reports,
    print_summary,
    write_json,
)
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import (
    Delivery,
    FaultWindow,
    Params,
    Stall,
    analyse,
    by_flow,
    flow_totals,
    goodput_per_flow,
    healthy_gap_at,
    pair_events,
    with_aftermath,
)
from mrc_transport.io import eventlog
from mrc_transport.perf.report import EndDoc, Interval, ReportError

MRC_PORT = 4791
TCP_PORT = 5201
MSG_LEN = "16K"
"""MRC message size: one delivery record per message, so it sets the time resolution of a
stall (16 KiB = 1.3 ms at 100 Mbit/s; perf's default 128K would be 10 ms)."""
MEASURE_S = 0.5
"""Seconds of TCP-only traffic over which its T0-T1 link is found."""
MEASURE_MIN_BYTES = 500_000
START_SLACK_S = 4.0
"""The TCP sender runs this much longer than measure + duration: the MRC client's start-up
(a Python import, the SETUP handshake) must not eat into TCP's share of the schedule."""
INTERVAL_S = 0.25
"""MRC client's --json-stream interval: the live view's refresh of MRC's numbers."""
FLOWS: Mapping[str, FlowKind] = {"mrc": "mrc", "tcp": "tcp"}
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


# -- the default schedule ---------------------------------------------------------------------

DEFAULT_STEP_S = 2.0


def default_schedule(step_s: float = DEFAULT_STEP_S) -> list[Step]:
    """The workshop's sequence, one fault every step_s seconds, starting after one step: the
    faults the paper reports from production (mrc-protocol-notes.md, "Failure behaviour
    reported in production"): a gray cut of the T0-T1 link that carries the TCP baseline
    (and, since MRC sprays over every path, MRC too), a hard cut of the same link, a flap, a
    T1 switch that stops forwarding and a lost NIC port, each undone a step later."""
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


# -- which MRC paths a fault kills --------------------------------------------------------


def surviving_fraction(topo: Topology, src: str, dst: str) -> Callable[[FaultWindow, str], float]:
    """MRC's paths alive / paths before, per fault (TCP: 1, it has no other path)."""
    all_paths = paths(topo, src, dst)

    def fraction(fault: FaultWindow, flow: str) -> float:
        if FLOWS.get(flow) != "mrc":
            return 1.0
        return surviving(fault, src, dst, all_paths)

    return fraction


# -- the live view's numbers ------------------------------------------------------------------


@dataclass
class LiveState:
    """What the children told us so far; the live view reads it (a LiveSource)."""

    t_origin: float
    lab: str
    planes: int
    flow_scale_bps: float
    plane_scale_bps: float
    tcp_plane: int | None = None
    mrc_bps: float = 0.0
    active_evs: int | None = None
    retired_evs: int | None = None
    tcp_bps: float = 0.0
    plane_bps: dict[int, float] = field(default_factory=dict)
    _tcp_last: tuple[float, int] | None = None

    def on_mrc(self, ev: Mapping[str, Any]) -> None:
        if ev.get("event") != "interval":
            return
        try:
            iv = Interval.from_json(ev.get("data"))
        except ReportError:
            return
        self.mrc_bps = iv.bits_per_second
        self.active_evs, self.retired_evs = iv.active_evs, iv.retired_evs

    def on_tcp(self, ev: Mapping[str, Any]) -> None:
        if ev.get("event") != "progress":
            return
        t, n = float(ev["t_mono"]), int(ev["bytes"])
        if self._tcp_last is not None and t > self._tcp_last[0]:
            self.tcp_bps = (n - self._tcp_last[1]) * 8 / (t - self._tcp_last[0])
        self._tcp_last = (t, n)

    def on_ports(self, bps: Mapping[int, float]) -> None:
        """Sender's port tx rate per plane; TCP's share is taken off its plane."""
        self.plane_bps = {
            p: max(0.0, v - (self.tcp_bps if p == self.tcp_plane else 0.0)) for p, v in bps.items()
        }

    def snapshot(self) -> LiveSnapshot:
        from labs.faults import read_events

        faults = [
            format_fault(e, self.t_origin)
            for e in read_events(self.lab)
            if float(e["t_mono"]) >= self.t_origin
        ]
        total = None
        if self.active_evs is not None and self.retired_evs is not None:
            total = self.active_evs + self.retired_evs
        return LiveSnapshot(
            t=time.monotonic() - self.t_origin,
            flows=[("mrc", "mrc", self.mrc_bps), ("tcp", "tcp", self.tcp_bps)],
            planes=[(p, self.plane_bps.get(p, 0.0)) for p in range(self.planes)],
            flow_scale_bps=self.flow_scale_bps,
            plane_scale_bps=self.plane_scale_bps,
            active_evs=self.active_evs,
            total_evs=total,
            faults=faults,
        )


async def poll_ports(state: LiveState, lab: str, host: str, every: float) -> None:
    """Sample the sender's port tx counters (port pN is plane N) for the plane bars."""
    import trio

    last: tuple[float, dict[tuple[str, str], int]] | None = None
    while True:
        snap = await trio.to_thread.run_sync(read_tx_counters, lab, [host])
        t = time.monotonic()
        if last is not None and t > last[0]:
            rates = {}
            for p in range(state.planes):
                key = (host, f"p{p}")
                rates[p] = max(0, snap.get(key, 0) - last[1].get(key, 0)) * 8 / (t - last[0])
            state.on_ports(rates)
        last = (t, snap)
        await trio.sleep(every)


# -- the run ----------------------------------------------------------------------------------


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
    tcp_rx_end: dict[str, Any] = field(default_factory=dict)
    tcp_tx_end: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    """Times the whole machine stood still during the transfers (harness/pauses.py)."""
    steal_s: float | None = None
    """CPU steal over the transfers, summed over CPUs (/proc/stat)."""


def _say(console: Any, text: str) -> None:
    console.print(text, highlight=False)


def tcp_recv_argv(cfg: FailoverConfig) -> list[str]:
    """The baseline TCP receiver: records every delivery, reports progress every 0.1 s."""
    from mrc_transport.harness.procs import tcpflow_argv

    return tcpflow_argv(
        "recv", "--port", str(TCP_PORT), "--flow", "tcp", "--records",
        str(cfg.out / "tcp.jsonl"), "--progress", "0.1", "--accept-timeout", "60",
    )  # fmt: skip


def tcp_send_argv(cfg: FailoverConfig, dst: str) -> list[str]:
    """The baseline TCP sender, over the fabric's ECMP routes to dst. It runs longer than
    the MRC transfer: the link it hashed onto is measured first, and MRC starts late."""
    from mrc_transport.harness.procs import tcpflow_argv

    seconds = cfg.duration + MEASURE_S + START_SLACK_S
    address = str(addressing.baseline_address(cfg.topo, dst))
    return tcpflow_argv("send", address, "--port", str(TCP_PORT), "-t", f"{seconds:.3f}")


def mrc_server_argv(cfg: FailoverConfig) -> list[str]:
    """`mrc perf -s -1`: records every delivered message and its recovery events."""
    from mrc_transport.harness.procs import perf_argv

    return perf_argv(
        "-s", "-1", "--lab", cfg.lab, "-p", str(MRC_PORT), "--json-stream", "-i", "0",
        "--records", str(cfg.out / "mrc.jsonl"), "--flow", "mrc",
        "--events", str(cfg.out / MRC_SERVER_EVENTS),
    )  # fmt: skip


def mrc_client_argv(cfg: FailoverConfig, dst: str) -> list[str]:
    """`mrc perf -c`: intervals for the live view, recovery events for the report."""
    from mrc_transport.harness.procs import perf_argv

    return perf_argv(
        "-c", dst, "--lab", cfg.lab, "-p", str(MRC_PORT), "-t", f"{cfg.duration:.3f}",
        "-l", MSG_LEN, "--json-stream", "-i", str(INTERVAL_S),
        "--events", str(cfg.out / MRC_EVENTS),
    )  # fmt: skip


async def _transfer(
    cfg: FailoverConfig, src: str, dst: str, children: Any, out: Outcome, console: Any
) -> None:
    """Start TCP, find its link, start MRC, play the faults, wait for every child."""
    import trio

    topo, lab = cfg.topo, cfg.lab
    ns_src, ns_dst = namespace(lab, src), namespace(lab, dst)
    for name in ("mrc.jsonl", "tcp.jsonl", MRC_EVENTS, MRC_SERVER_EVENTS):
        (cfg.out / name).unlink(missing_ok=True)
    rate = float(topo.host_link.rate_bps)
    state = LiveState(0.0, lab, topo.planes, rate * topo.planes, rate)
    async with trio.open_nursery() as nursery:
        tcp_rx = await children.start(nursery, "tcp-recv", ns_dst, tcp_recv_argv(cfg))
        tcp_rx.on_event = state.on_tcp
        srv = await children.start(nursery, "mrc-server", ns_dst, mrc_server_argv(cfg))
        await tcp_rx.wait_event("listening", 30)
        await srv.wait_event("listening", 30)
        tcp_tx = await children.start(nursery, "tcp-send", ns_src, tcp_send_argv(cfg, dst))
        await tcp_rx.wait_event("progress", 30)
        out.tcp_link = await trio.to_thread.run_sync(
            measure_tcp_link, lab, topo, MEASURE_S, MEASURE_MIN_BYTES
        )
        state.tcp_plane = topo.link(out.tcp_link).plane
        out.steps = sched.resolve(cfg.steps, bindings_for(topo, out.tcp_link, src))
        sched.check_targets(out.steps, topo)
        _say(
            console,
            f"TCP flow {src} -> {dst} hashed onto [bold]{out.tcp_link}[/] "
            f"(plane {state.tcp_plane}); starting MRC",
        )
        cli = await children.start(nursery, "mrc-client", ns_src, mrc_client_argv(cfg, dst))
        cli.on_event = state.on_mrc
        await cli.wait_event("start", 30)
        out.t_origin = state.t_origin = time.monotonic()
        out.t_stop = out.t_origin + cfg.duration
        out.mrc_rc = await _play_faults(cfg, src, cli, out, state, console)
        await tcp_tx.wait_exit(START_SLACK_S + MEASURE_S + 120)
        await tcp_rx.wait_exit(60)
        await srv.wait_exit(60)
        out.mrc_end = cli.perf_end()
        out.tcp_rx_end = tcp_rx.find("end") or {}
        out.tcp_tx_end = tcp_tx.find("end") or {}
        if out.mrc_rc != 0:
            _say(console, f"[red]mrc perf client exited {out.mrc_rc}[/]{cli.stderr_tail()}")


async def _play_faults(
    cfg: FailoverConfig, src: str, cli: Any, out: Outcome, state: LiveState, console: Any
) -> int:
    """The fault schedule (and the live view) while the MRC client runs; its exit code."""
    import trio

    from labs.faults import Lab
    from mrc_transport.demo.live import run_live

    def played(step: sched.Step, _result: object, t_before: float, t_after: float) -> None:
        out.played.append((step, t_before, t_after))
        if not cfg.live:
            _say(console, f"{t_before - out.t_origin:6.2f}s  {step.describe()}")

    async with trio.open_nursery() as flows:
        done = trio.Event()
        flows.start_soon(
            partial(sched.run_schedule, Lab(cfg.lab), out.steps, out.t_origin, on_step=played)
        )
        if cfg.live:
            flows.start_soon(poll_ports, state, cfg.lab, src, 0.25)
            flows.start_soon(_live, run_live, state, console, done)
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
    from mrc_transport.harness.procs import Children

    cfg.out.mkdir(parents=True, exist_ok=True)
    children = Children(cfg.out / "logs")
    out = Outcome()
    _say(
        console,
        f"lab {cfg.lab}: bringing up {len(cfg.topo.hosts)} hosts, "
        f"{len(cfg.topo.switches)} switches, {cfg.topo.planes} planes",
    )
    try:
        up(cfg.topo, cfg.lab)
        try:
            with PauseWatch() as watch:
                trio.run(_transfer, cfg, src, dst, children, out, console)
        except BaseExceptionGroup as group:
            raise unwrap(group) from None
        out.pauses, out.steal_s = watch.pauses, watch.steal_s
        out.events = read_events(cfg.lab)
    finally:
        children.kill_all()
        down(cfg.lab)
        _say(console, f"lab {cfg.lab}: torn down")
    return out


# -- the analysis -----------------------------------------------------------------------------


def _mrc_counters(end: EndDoc | None) -> dict[str, int]:
    evs = end.evs if end is not None else ()
    return {
        "retransmits": end.sum_sent.retransmits if end is not None else 0,
        "evs_retired": sum(e.retired for e in evs),
        "evs_readmitted": sum(e.readmitted for e in evs),
    }


def _mrc_meta(end: EndDoc | None) -> dict[str, object]:
    """The report's numbers of the MRC client's end document."""
    if end is None:
        return {"mrc_sum_received_bps": None, "mrc_planes": None, "mrc_endpoint": None}
    return {
        "mrc_sum_received_bps": end.sum_received.bits_per_second,
        "mrc_planes": [p.to_json() for p in end.planes],
        "mrc_endpoint": end.endpoint,
    }


def tcp_verified(rx_end: Mapping[str, Any], tx_end: Mapping[str, Any]) -> bool:
    return bool(rx_end.get("verified")) and rx_end.get("bytes") == tx_end.get("bytes_sent")


def analyse_run(
    cfg: FailoverConfig, src: str, dst: str, out: Outcome
) -> tuple[dict[str, Any], list[FaultRow], list[FaultWindow], list[Delivery]]:
    """Report, table rows, fault windows and records of a finished transfer."""
    deliveries: list[Delivery] = []
    for name in ("mrc.jsonl", "tcp.jsonl"):
        path = cfg.out / name
        if path.exists():
            deliveries += read_records(path)
    events = [e for e in out.events if float(e["t_mono"]) >= out.t_origin - 1e-3]
    faults = sched.label_flaps(pair_events(events, out.t_stop), out.played)
    params = Params(bin_s=cfg.bin_s)
    results = analyse(
        deliveries,
        faults,
        t_begin=out.t_origin,
        t_stop=out.t_stop,
        surviving=surviving_fraction(cfg.topo, src, dst),
        params=params,
    )
    rows = fault_rows(results, FLOWS, out.t_origin)
    log = cfg.out / MRC_EVENTS
    rows = explain_stalls(rows, eventlog.read(str(log)) if log.exists() else None, out.pauses)
    verified = {
        "mrc": out.mrc_rc == 0 and out.mrc_end is not None and out.mrc_end.verified,
        "tcp": tcp_verified(out.tcp_rx_end, out.tcp_tx_end),
    }
    counters = {"mrc": _mrc_counters(out.mrc_end)}
    flows = flow_reports(
        flow_totals(deliveries, out.t_origin, out.t_stop),
        FLOWS,
        verified,
        counters,
        healthy_gaps(deliveries, faults, out.t_origin, out.t_stop, params),
        out.pauses,
    )
    meta = {
        "lab": cfg.lab,
        "preset": cfg.preset,
        "src": src,
        "dst": dst,
        "tcp_link": out.tcp_link,
        "planes": cfg.topo.planes,
        "mrc_paths": len(paths(cfg.topo, src, dst)),
        "host_port_rate_bps": cfg.topo.host_link.rate_bps,
        "schedule": [s.to_json() for s in out.steps],
        **_mrc_meta(out.mrc_end),
        "host_pauses": [
            {"t_s": round(p.t_mono - out.t_origin, 4), "ms": round(p.late_s * 1e3, 1)}
            for p in out.pauses
        ],
        "cpu_steal_s": out.steal_s,
        "analysis": asdict(params),
    }
    doc = failover_report(
        flows, rows, t_origin=out.t_origin, duration_s=cfg.duration, bin_s=cfg.bin_s, meta=meta
    )
    return doc, rows, faults, deliveries


def healthy_gaps(
    deliveries: Sequence[Delivery],
    faults: Sequence[FaultWindow],
    t_begin: float,
    t_stop: float,
    params: Params,
) -> dict[str, Stall | None]:
    """Per flow, the longest delivery gap with nothing broken (timeline.healthy_gap_at)."""
    flows = by_flow(deliveries)
    after = with_aftermath(faults, flows, t_begin=t_begin, t_stop=t_stop, params=params)
    return {
        flow: healthy_gap_at(rs, after, t_begin=t_begin, t_stop=t_stop, margin=params.margin)
        for flow, rs in flows.items()
    }


def flows_of(doc: Mapping[str, Any]) -> list[FlowReport]:
    """The report's flows as FlowReport records again."""
    return [FlowReport(**f) for f in doc["flows"]]


def run_failover(cfg: FailoverConfig, console: Any = None) -> dict[str, Any]:
    """The whole demo; returns the report (also written to cfg.out/report.json)."""
    from rich.console import Console

    from mrc_transport.harness.plot import timeline_png

    console = console or Console()
    if os.geteuid() != 0:
        raise HarnessError("needs root (network namespaces); try sudo")
    src, dst = pick_hosts(cfg.topo, cfg.src, cfg.dst)
    sched.check_targets(cfg.steps, cfg.topo)
    out = run_transfer(cfg, src, dst, console)
    doc, rows, faults, deliveries = analyse_run(cfg, src, dst, out)
    write_json(cfg.out / "report.json", doc)
    _write_events(cfg.out / "events.jsonl", out.events)
    series = goodput_per_flow(deliveries, out.t_origin, out.t_stop, cfg.bin_s)
    if series:
        timeline_png(cfg.out / "timeline.png", series, FLOWS, faults, out.t_origin)
    print_summary(
        rows,
        bool(doc["verified"]),
        console,
        flows_of(doc),
        pauses=out.pauses,
        t_origin=out.t_origin,
        steal_s=out.steal_s,
    )
    _say(console, f"wrote {cfg.out / 'report.json'} and {cfg.out / 'timeline.png'}")
    return doc


def _write_events(path: Path, events: Sequence[Mapping[str, Any]]) -> None:
    from mrc_transport import jsonl

    jsonl.write(path, events)


__all__ = ["FailoverConfig", "run_failover"]
