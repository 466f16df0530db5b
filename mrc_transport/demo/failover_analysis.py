"""The failover demo's figures from a finished run (demo/failover.py): per fault, MRC's stall
and its recovery to 90% of the capacity that survives (the share of MRC's SRv6 paths the
fault leaves, harness/paths.py), and each baseline's stall, charged to a fault only when
the fault was on that baseline's path when it struck (harness/flowlinks.py); then
report.json, events.jsonl, timeline.png and the table.

A baseline's deliveries are watched until it ended (or was stopped still stalled), past the
MRC transfer's end, so a stall that outlasts the run is measured whole, or reported as
still open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from labs.paths import paths
from labs.topology import Topology
from mrc_transport.demo.failover import MRC_EVENTS, FailoverConfig, Outcome
from mrc_transport.harness import flowlinks
from mrc_transport.harness import schedule as sched
from mrc_transport.harness.baselines import FlowKind
from mrc_transport.harness.flows import tcp_verified
from mrc_transport.harness.paths import surviving
from mrc_transport.harness.records import read_records
from mrc_transport.harness.report import (
    FaultRow,
    FlowReport,
    explain_stalls,
    failover_report,
    fault_rows,
    flow_reports,
    write_json,
)
from mrc_transport.harness.timeline import (
    Delivery,
    FaultWindow,
    Params,
    Stall,
    analyse,
    by_flow,
    flow_totals,
    healthy_gap_at,
    pair_events,
    with_aftermath,
)
from mrc_transport.io import eventlog
from mrc_transport.perf.report import EndDoc


@dataclass(frozen=True)
class Analysis:
    """What the demo writes and prints."""

    doc: dict[str, Any]
    """report.json."""
    rows: list[FaultRow]
    """The table's rows."""
    faults: list[FaultWindow]
    """The lab's faults as windows (flap cycles named)."""
    deliveries: list[Delivery]
    """Every flow's records."""


def flow_kinds(cfg: FailoverConfig) -> dict[str, FlowKind]:
    """Flow id -> kind: "mrc", and each baseline under its own kind's name."""
    return {"mrc": "mrc", **{k: k for k in cfg.baselines}}


def surviving_fraction(topo: Topology, src: str, dst: str) -> Callable[[FaultWindow, str], float]:
    """MRC's paths alive / paths before, per fault (a baseline: 1, measured against itself)."""
    all_paths = paths(topo, src, dst)

    def fraction(fault: FaultWindow, flow: str) -> float:
        return surviving(fault, src, dst, all_paths) if flow == "mrc" else 1.0

    return fraction


def path_judge(
    topo: Topology, out: Outcome
) -> Callable[[FaultWindow, str], tuple[bool, tuple[str, ...]] | None]:
    """Whether a fault was on a baseline's path when it struck: the path read just before
    the step that caused it, or, when the flow sent nothing then (still stalled by an
    earlier fault), the last path it was seen on."""

    def judge(fault: FaultWindow, kind: str) -> tuple[bool, tuple[str, ...]] | None:
        path = _path_at(out, fault, kind)
        if path is None:
            return None
        return flowlinks.on_path(topo, fault.target, path), tuple(path.to_json())

    return judge


def _path_at(out: Outcome, fault: FaultWindow, kind: str) -> flowlinks.FlowPath | None:
    caused = [
        out.steps.index(step)
        for step, t_before, _t_after in out.played
        if step.target == fault.target and t_before <= fault.t_start + 1e-3 and step in out.steps
    ]
    last = max(caused, default=len(out.steps))
    for i in sorted((j for j in out.fault_paths if j <= last), reverse=True):
        path = out.fault_paths[i].get(kind)
        if path is not None and path.data_bytes > 0:
            return path
    return out.start_paths.get(kind)


def _deliveries(cfg: FailoverConfig) -> list[Delivery]:
    out: list[Delivery] = []
    for name in ("mrc", *cfg.baselines):
        path = cfg.out / f"{name}.jsonl"
        if path.exists():
            out += read_records(path)
    return out


def analyse_run(cfg: FailoverConfig, src: str, dst: str, out: Outcome) -> Analysis:
    """Report, table rows, fault windows and records of a finished transfer."""
    deliveries = _deliveries(cfg)
    events = [e for e in out.events if float(e["t_mono"]) >= out.t_origin - 1e-3]
    faults = sched.label_flaps(pair_events(events, out.t_stop), out.played)
    params = Params(bin_s=cfg.bin_s)
    kinds = flow_kinds(cfg)
    results = analyse(
        deliveries,
        faults,
        t_begin=out.t_origin,
        t_stop=out.t_stop,
        surviving=surviving_fraction(cfg.topo, src, dst),
        params=params,
        t_stop_of={k: max(out.t_stop, e.t_seen) for k, e in out.ends.items()},
    )
    rows = fault_rows(results, kinds, out.t_origin, path_judge(cfg.topo, out))
    log = cfg.out / MRC_EVENTS
    rows = explain_stalls(rows, eventlog.read(str(log)) if log.exists() else None, out.pauses)
    verified = {
        "mrc": out.mrc_rc == 0 and out.mrc_end is not None and out.mrc_end.verified,
        **{k: tcp_verified(e.rx, e.tx) for k, e in out.ends.items()},
    }
    flows = flow_reports(
        flow_totals(deliveries, out.t_origin, out.t_stop),
        kinds,
        verified,
        {"mrc": _mrc_counters(out.mrc_end)},
        healthy_gaps(deliveries, faults, out.t_origin, out.t_stop, params),
        out.pauses,
    )
    doc = failover_report(
        flows,
        rows,
        t_origin=out.t_origin,
        duration_s=cfg.duration,
        bin_s=cfg.bin_s,
        meta=_meta(cfg, src, dst, out, params),
    )
    return Analysis(doc, rows, faults, deliveries)


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


def _baselines_meta(cfg: FailoverConfig, out: Outcome) -> dict[str, Any]:
    """Per baseline: its port, its path before MRC started, how it ended, and for MPTCP
    its subflows when its last byte was written."""
    meta: dict[str, Any] = {}
    for kind in cfg.baselines:
        end = out.ends.get(kind)
        path = out.start_paths.get(kind)
        meta[kind] = {
            "port": cfg.port(kind),
            "path_at_start": path.to_json() if path is not None else None,
            "stopped_still_stalled": bool(end and end.rx.get("stopped")),
            "watched_until_s": round(end.t_seen - out.t_origin, 3) if end else None,
            **({"subflows": end.tx.get("subflows")} if end and "subflows" in end.tx else {}),
        }
    return meta


def _meta(cfg: FailoverConfig, src: str, dst: str, out: Outcome, params: Params) -> dict[str, Any]:
    return {
        "lab": cfg.lab,
        "preset": cfg.preset,
        "src": src,
        "dst": dst,
        "tcp_link": out.tcp_link,
        "planes": cfg.topo.planes,
        "mrc_paths": len(paths(cfg.topo, src, dst)),
        "host_port_rate_bps": cfg.topo.host_link.rate_bps,
        "schedule": [s.to_json() for s in out.steps],
        "baselines": _baselines_meta(cfg, out),
        "mptcp": out.mptcp,
        **_mrc_meta(out.mrc_end),
        "host_pauses": [
            {"t_s": round(p.t_mono - out.t_origin, 4), "ms": round(p.late_s * 1e3, 1)}
            for p in out.pauses
        ],
        "cpu_steal_s": out.steal_s,
        "analysis": asdict(params),
    }


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


def write_outputs(cfg: FailoverConfig, out: Outcome, a: Analysis, console: Any) -> None:
    """report.json, events.jsonl, timeline.png, and the table on the terminal."""
    from mrc_transport import jsonl
    from mrc_transport.harness.plot import timeline_png
    from mrc_transport.harness.summary import print_summary
    from mrc_transport.harness.timeline import goodput_per_flow

    write_json(cfg.out / "report.json", a.doc)
    jsonl.write(cfg.out / "events.jsonl", out.events)
    series = goodput_per_flow(a.deliveries, out.t_origin, out.t_stop, cfg.bin_s)
    if series:
        timeline_png(cfg.out / "timeline.png", series, flow_kinds(cfg), a.faults, out.t_origin)
    print_summary(
        a.rows,
        bool(a.doc["verified"]),
        console,
        flows_of(a.doc),
        pauses=out.pauses,
        t_origin=out.t_origin,
        steal_s=out.steal_s,
    )
    console.print(
        f"wrote {cfg.out / 'report.json'} and {cfg.out / 'timeline.png'}", highlight=False
    )
