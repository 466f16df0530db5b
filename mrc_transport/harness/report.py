"""Reports: the failover demo's JSON, the collisions demo's document, and the per-flow
entries the paper's experiments reuse (harness/summary.py prints them on a terminal).

The JSON is for scripts: a top-level ``verified`` that is true only when every
byte of every MRC flow matched, and a ``faults`` list whose entries carry at least kind,
target, t_start, t_end, mrc_stall_ms, mrc_recovery_ms, and per baseline that ran (tcp,
tcp-rehash, mptcp: harness/baselines.py) under ``baselines`` whether the fault was on its
path, its stall and recovery. Times in the report are seconds since the transfers started
(``t_origin_mono``); the raw CLOCK_MONOTONIC values are kept alongside so a report joins
with any other log on the machine.

When several flows of one kind run, a fault's figure is the worst flow's (longest stall,
slowest recovery, None when any flow did not recover).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mrc_transport import jsonl
from mrc_transport.harness.baselines import FlowKind
from mrc_transport.harness.fairness import fairness
from mrc_transport.harness.pauses import Pause, longest_overlap
from mrc_transport.harness.timeline import FaultResult, FaultWindow, FlowFault, FlowTotals, Stall

REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class FlowReport:
    """One flow's totals and counters."""

    flow: str
    """Flow id, as in the delivery records."""
    kind: FlowKind
    """mrc or tcp."""
    bytes: int
    """Bytes delivered during the observation."""
    goodput_bps: float
    """bytes * 8 / observation length."""
    verified: bool | None
    """Every byte matched (None: not checked)."""
    retransmits: int | None = None
    """Packets (MRC) or segments (TCP) sent again, when the sender reports it."""
    evs_retired: int | None = None
    """MRC: EVs that went ASSUMED_BAD and were replaced."""
    evs_readmitted: int | None = None
    """MRC: retired EVs that probes brought back."""
    healthy_max_gap_ms: float | None = None
    """Longest gap between deliveries outside every fault, its margin and aftermath: the
    flow's own delivery jitter (a userspace endpoint is descheduled now and then), the
    floor to read a stall after a fault against."""
    healthy_gap_host_pause_ms: float | None = None
    """The longest time the machine stood still during that gap (harness/pauses.py; None:
    not watched)."""


@dataclass(frozen=True, slots=True)
class BaselineFault:
    """What one fault did to one baseline (the worst of its flows)."""

    on_path: bool | None
    """The fault hit a link or switch the baseline's packets crossed when it struck
    (harness/flowlinks.py; None: its path was not measured)."""
    stall_ms: float | None
    """Longest delivery stall overlapping the fault; None when it was not on its path."""
    recovery_ms: float | None
    """Until its goodput held 90% of what it had before; None: not within the window, or
    not on its path."""
    stall_open: bool = False
    """It never delivered again before the run ended: the stall is longer than given."""
    path: tuple[str, ...] = ()
    """The links it was on when the fault struck (data and ACKs)."""


@dataclass(frozen=True, slots=True)
class FaultRow:
    """One fault's line in the summary table and the JSON faults list."""

    kind: str
    """cut, degrade, fail, flap."""
    target: str
    """Link, switch or host:port."""
    action: str
    """gray, hard, loss 5%, cycle 1/2, ..."""
    t_start: float
    """Seconds since the transfers started."""
    t_end: float
    """Seconds since the transfers started (the restore)."""
    mrc_stall_ms: float | None
    """Longest MRC delivery stall overlapping the fault (worst MRC flow)."""
    mrc_recovery_ms: float | None
    """Until MRC goodput held 90% of the surviving capacity; None: not within the window."""
    baselines: Mapping[str, BaselineFault] = field(default_factory=dict)
    """Per baseline kind that ran (tcp, tcp-rehash, mptcp)."""
    mrc_stall_open: bool = False
    """An MRC flow never delivered again after its stall (the figure is a lower bound)."""
    t_start_mono: float = 0.0
    """time.monotonic() of the fault, as in the lab's event log."""
    t_end_mono: float = 0.0
    """time.monotonic() of the restore."""
    mrc_stall_start_mono: float | None = None
    """time.monotonic() of the last delivery before MRC's longest stall."""
    mrc_stall_rtos: int | None = None
    """Retransmission timeouts MRC's sender fired during that stall (its --events log;
    None: no log). A stall ended by an RTO is a loss that loss detection did not find."""
    host_pause_ms: float | None = None
    """The longest time the whole machine stood still during that stall (harness/pauses.py;
    None: not watched). Such a stall is the machine's, not the protocol's."""


PathJudge = Callable[[FaultWindow, str], tuple[bool, tuple[str, ...]] | None]
"""(fault, baseline kind) -> (on its path, the links of that path), None: not measured."""


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def _worst_stall(ffs: Sequence[FlowFault]) -> tuple[Stall | None, bool]:
    stalls = [ff.stall for ff in ffs if ff.stall is not None]
    if not stalls:
        return None, False
    return max(stalls, key=lambda s: s.duration), any(s.open_ended for s in stalls)


def _duration(stall: Stall | None) -> float | None:
    return None if stall is None else stall.duration


def _worst_recovery(ffs: Sequence[FlowFault]) -> float | None:
    if not ffs or any(ff.recovery_s is None for ff in ffs):
        return None
    return max(ff.recovery_s for ff in ffs if ff.recovery_s is not None)


def fault_rows(
    results: Sequence[FaultResult],
    kinds: Mapping[str, FlowKind],
    t_origin: float,
    judge: PathJudge | None = None,
) -> list[FaultRow]:
    """One row per fault; ``kinds`` says which flow ids are MRC and which a baseline;
    ``judge`` whether a fault was on a baseline's path (a stall then is the fault's;
    otherwise none is charged to it)."""
    rows = []
    for res in results:
        per_kind: dict[str, list[FlowFault]] = {}
        for flow, ff in res.flows.items():
            if flow in kinds:
                per_kind.setdefault(kinds[flow], []).append(ff)
        mrc_stall, mrc_open = _worst_stall(per_kind.get("mrc", []))
        f = res.fault
        baselines = {
            kind: _baseline_fault(f, kind, ffs, judge)
            for kind, ffs in per_kind.items()
            if kind != "mrc"
        }
        rows.append(
            FaultRow(
                kind=f.kind,
                target=f.target,
                action=f.action,
                t_start=round(f.t_start - t_origin, 6),
                t_end=round(f.t_end - t_origin, 6),
                mrc_stall_ms=_ms(_duration(mrc_stall)),
                mrc_recovery_ms=_ms(_worst_recovery(per_kind.get("mrc", []))),
                baselines=baselines,
                mrc_stall_open=mrc_open,
                t_start_mono=f.t_start,
                t_end_mono=f.t_end,
                mrc_stall_start_mono=None if mrc_stall is None else mrc_stall.start,
            )
        )
    return rows


def _baseline_fault(
    fault: FaultWindow, kind: str, ffs: Sequence[FlowFault], judge: PathJudge | None
) -> BaselineFault:
    judged = judge(fault, kind) if judge is not None else None
    on_path, path = judged if judged is not None else (None, ())
    if on_path is False:
        return BaselineFault(False, None, None, path=path)
    stall, open_ended = _worst_stall(ffs)
    return BaselineFault(
        on_path, _ms(_duration(stall)), _ms(_worst_recovery(ffs)), open_ended, path
    )


def flow_reports(
    totals: Mapping[str, FlowTotals],
    kinds: Mapping[str, FlowKind],
    verified: Mapping[str, bool],
    counters: Mapping[str, Mapping[str, int]] | None = None,
    healthy_gaps: Mapping[str, Stall | None] | None = None,
    pauses: Sequence[Pause] | None = None,
) -> list[FlowReport]:
    """Per-flow entries; ``counters[flow]`` may hold retransmits, evs_retired, evs_readmitted.
    A flow in ``kinds`` that delivered nothing still gets an entry (0 bytes)."""
    out = []
    for flow in sorted(kinds):
        tot = totals.get(flow)
        c = (counters or {}).get(flow, {})
        gap = (healthy_gaps or {}).get(flow)
        paused = None
        if gap is not None and pauses is not None:
            paused = _ms(longest_overlap(pauses, gap.start, gap.end))
        out.append(
            FlowReport(
                flow=flow,
                kind=kinds[flow],
                bytes=tot.nbytes if tot else 0,
                goodput_bps=tot.goodput_bps if tot else 0.0,
                verified=verified.get(flow),
                retransmits=c.get("retransmits"),
                evs_retired=c.get("evs_retired"),
                evs_readmitted=c.get("evs_readmitted"),
                healthy_max_gap_ms=_ms(_duration(gap)),
                healthy_gap_host_pause_ms=paused,
            )
        )
    return out


def all_mrc_verified(flows: Sequence[FlowReport]) -> bool:
    """True only when there is at least one MRC flow and every one was verified."""
    mrc = [f for f in flows if f.kind == "mrc"]
    return bool(mrc) and all(f.verified is True for f in mrc)


def explain_stalls(
    rows: Sequence[FaultRow],
    events: Sequence[Mapping[str, Any]] | None = None,
    pauses: Sequence[Pause] | None = None,
) -> list[FaultRow]:
    """rows with what happened during each worst MRC stall: ``mrc_stall_rtos`` counted
    from an MRC sender's event log (io/eventlog.py records: ``t_mono``, ``event``) and
    ``host_pause_ms``, the longest time the machine stood still then (harness/pauses.py)."""
    fired = sorted(float(e["t_mono"]) for e in events or () if e.get("event") == "rto_fired")
    out = []
    for r in rows:
        if r.mrc_stall_start_mono is None or r.mrc_stall_ms is None:
            out.append(r)
            continue
        t0 = r.mrc_stall_start_mono
        t1 = t0 + r.mrc_stall_ms / 1e3
        if events is not None:
            r = replace(
                r, mrc_stall_rtos=bisect.bisect_right(fired, t1) - bisect.bisect_left(fired, t0)
            )
        if pauses is not None:
            r = replace(r, host_pause_ms=_ms(longest_overlap(pauses, t0, t1)))
        out.append(r)
    return out


def failover_report(
    flows: Sequence[FlowReport],
    faults: Sequence[FaultRow],
    *,
    t_origin: float,
    duration_s: float,
    bin_s: float,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "version": REPORT_VERSION,
        "demo": "failover",
        "verified": all_mrc_verified(flows),
        "t_origin_mono": t_origin,
        "duration_s": duration_s,
        "bin_s": bin_s,
        "flows": [asdict(f) for f in flows],
        "faults": [asdict(r) for r in faults],
        "meta": dict(meta or {}),
    }


def collisions_report(
    ecmp_bps: Mapping[str, float],
    mrc_bps: Mapping[str, float],
    line_rate_bps: float,
    *,
    verified: bool,
    meta: Mapping[str, Any] | None = None,
    mptcp_bps: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Per-pair throughput of each run (TCP over ECMP, MPTCP when it ran, MRC) with its
    fairness (min/max, Jain's index)."""
    runs = {"ecmp": ecmp_bps, **({"mptcp": mptcp_bps} if mptcp_bps is not None else {})}
    return {
        "version": REPORT_VERSION,
        "demo": "collisions",
        "verified": verified,
        "line_rate_bps": line_rate_bps,
        **{k: {"flows": dict(v), **fairness(list(v.values())).to_dict()} for k, v in runs.items()},
        "mrc": {"flows": dict(mrc_bps), **fairness(list(mrc_bps.values())).to_dict()},
        "meta": dict(meta or {}),
    }


def fault_json(f: FaultWindow, t_origin: float) -> dict[str, Any]:
    """A fault window for a report, its times in seconds since ``t_origin``."""
    return {
        "kind": f.kind,
        "target": f.target,
        "action": f.action,
        "t_start": round(f.t_start - t_origin, 4),
        "t_end": round(f.t_end - t_origin, 4),
        "restored": f.restored,
    }


def played_json(played: Sequence[tuple[Any, float, float]], t_origin: float) -> list[Any]:
    """Each schedule step as played (harness/schedule.py ``run_schedule``'s ``on_step``):
    what it did, when it was due and when it had been applied."""
    return [
        {"step": s.describe(), "at": s.at, "applied_at": round(t1 - t_origin, 4)}
        for s, _t0, t1 in played
    ]


def write_json(path: str | Path, doc: Mapping[str, Any]) -> None:
    """The report, atomically (mrc_transport/jsonl.py), its folder made if need be."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonl.write_json(path, doc)
