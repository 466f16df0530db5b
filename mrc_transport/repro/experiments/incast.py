"""`incast`: 7 -> 1 incast with a victim flow that shares switch ports with it but not its
receiver; the victim's goodput during the incast against its goodput alone, with MRC,
with TCP over ECMP and with MPTCP (the paper has no MPTCP: a comparison).

Paper (mrc-protocol-notes.md, "Headline comparisons"): with a 7 -> 1 incast beside it,
MRC leaves the victim untouched; DCQCN (RoCE's congestion control) costs the victim
25-75%.

Lab: two racks in one plane. Seven hosts of rack 1 send to h0 in rack 0; the victim runs
from the last host of rack 1 to h1 in rack 0, so it crosses the same T0 uplinks and T1
downlinks as the incast (the ports it shares), but not h0's port, where the incast
queues. Every flow starts at once; each incast sender sends its share of ``incast_s``
seconds of the receiver's line rate, then the victim runs on alone for ``alone_s``. A run
with TCP flows, one with MPTCP flows (in this one-plane fabric one subflow each: hashed
like TCP), then one with MRC flows.

There is no PFC in the lab: what hurts RoCE's victim in the paper (pause frames from the
incast's port spreading upstream) cannot happen here. A single-path victim still loses
what the single-path incast flows that ECMP hashed onto its uplink and downlink take;
sprayed MRC flows spread over every T1 and leave room on each.

Packet trimming: on a fabric whose switch ports trim (``--preset default-trim``, or
``--topology`` with ``trim:``) the incast's losses at h0's port become trimmed stubs that
h0 NACKs, and the senders resend within about an RTT (docs/protocol.md, "Trimmed data
packets"); the victim's measure stays the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.topology import Topology
from mrc_transport.harness.baselines import LABELS, FlowKind
from mrc_transport.harness.fairness import fairness
from mrc_transport.harness.flows import Flow
from mrc_transport.harness.plot import timeline_png
from mrc_transport.harness.timeline import FaultWindow
from mrc_transport.harness.windows import window_rates
from mrc_transport.repro.figures import series_of
from mrc_transport.repro.measure import ends, mbit, merged, pct, rate, ratio, warm
from mrc_transport.repro.spec import (
    MRC_BASE_PORT,
    MSG_LEN,
    ROCE,
    START_SPREAD_S,
    TCP_BASE_PORT,
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    compared,
    end_state,
    need,
    sender_seconds,
)

VICTIM = "victim"
TAIL_S = 0.5
"""Skipped before the incast's last delivery (its last sender finishing alone)."""
UNTOUCHED = 0.9
"""A victim at or above this share of its goodput alone is "untouched"."""


@dataclass(frozen=True, slots=True)
class Knobs:
    senders: int = 7
    """Incast senders (all to one receiver)."""
    incast_s: float = 7.0
    """How long the incast lasts at the receiver's line rate: each sender sends its share
    of that many seconds of the receiver's ports (-n)."""
    alone_s: float = 3.5
    """How long the victim runs on alone after them."""
    settle_s: float = 1.0
    """Skipped at the start of each window."""


@dataclass(frozen=True, slots=True)
class Hosts:
    receiver: str
    senders: tuple[str, ...]
    victim_src: str
    victim_dst: str


def hosts(topo: Topology, k: Knobs) -> Hosts:
    rack0, rack1 = topo.hosts_in_rack(0), topo.hosts_in_rack(1)
    return Hosts(rack0[0], rack1[: k.senders], rack1[-1], rack0[1])


def check(topo: Topology, k: Knobs) -> None:
    need(topo.racks >= 2, "the incast needs at least 2 racks")
    need(
        topo.hosts_per_rack >= k.senders + 1,
        f"the incast needs {k.senders + 1} hosts per rack ({k.senders} senders and the "
        f"victim's sender in rack 1): use hosts_per_rack >= {k.senders + 1}",
    )


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    h = hosts(topo, k)
    incast_s = k.incast_s + START_SPREAD_S
    duration = incast_s + k.alone_s
    share = int(k.incast_s * topo.host_link.rate_bps * topo.planes / 8 / k.senders)
    transports: tuple[tuple[str, FlowKind, int, dict[str, Any]], ...] = (
        ("tcp", "tcp", TCP_BASE_PORT, {}),
        ("mptcp", "mptcp", TCP_BASE_PORT, {}),
        ("roce", "mrc", MRC_BASE_PORT, {"msg_len": MSG_LEN, "evs": 1, "recovery": "go-back-n"}),
        ("mrc", "mrc", MRC_BASE_PORT, {"msg_len": MSG_LEN}),
    )
    runs = []
    for name, kind, base, opts in transports:
        victim = Flow(
            VICTIM, kind, h.victim_src, h.victim_dst, base, sender_seconds(duration), **opts
        )
        flows = [victim] + [
            Flow(
                f"{s}->{h.receiver}",
                kind,
                s,
                h.receiver,
                base + 1 + i,
                incast_s,
                nbytes=share,
                **opts,
            )
            for i, s in enumerate(h.senders)
        ]
        runs.append(Run(name, tuple(flows), duration))
    return tuple(runs)


def incast_names(res: RunResult) -> list[str]:
    return [f.name for f in res.run.flows if f.name != VICTIM]


def windows(res: RunResult, k: Knobs) -> tuple[tuple[float, float], tuple[float, float]]:
    """(during the incast, victim alone after it), from the incast's deliveries: from the
    run's time 0 (every sender started) to the incast's last delivery, and from then to
    the end. (Not to the first sender's last delivery: TCP shares h0's port unevenly, and
    one TCP sender of three finished in a quarter of the others' time.)"""
    last = max(ends(res.deliveries, incast_names(res)), default=res.t_origin + k.incast_s)
    during = (warm(res, [f.name for f in res.run.flows], k.settle_s), last - TAIL_S)
    alone = (last + k.settle_s, res.t_stop)
    return during, alone


def _rate(res: RunResult, names: list[str], t0: float, t1: float) -> float | None:
    """None for an empty window: an incast sender that took longer than the run (TCP
    starved one for 8 s on a busy machine) leaves the victim no time alone."""
    return rate(res.deliveries, names, t0, t1) if t1 > t0 else None


def run_numbers(res: RunResult, k: Knobs) -> dict[str, Any]:
    (a, b), (c, d) = windows(res, k)
    names = incast_names(res)
    per_flow = window_rates(res.deliveries, names, a, b) if b > a else {}
    victim_in, victim_alone = _rate(res, [VICTIM], a, b), _rate(res, [VICTIM], c, d)
    return {
        "victim_during_bps": victim_in,
        "victim_alone_bps": victim_alone,
        "victim_fraction": ratio(victim_in, victim_alone),
        "incast_bps": sum(per_flow.values()),
        "incast_jain": fairness(list(per_flow.values())).jain,
        "incast_flows_bps": per_flow,
        "windows_s": [round(x - res.t_origin, 3) for x in (a, b, c, d)],
    }


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    nums = {r.run.name: run_numbers(r, k) for r in results}
    mrc, tcp = nums["mrc"]["victim_fraction"], nums["tcp"]["victim_fraction"]
    if mrc is None or tcp is None:
        return _unmeasured(k, nums)
    untouched = mrc is not None and mrc >= UNTOUCHED
    tcp_cost = None if tcp is None else 1 - tcp
    in_range = tcp_cost is not None and 0.25 <= tcp_cost <= 0.75

    def lab(kind: str) -> str:
        n = nums[kind]
        return (
            f"{kind.upper()} victim {mbit(n['victim_during_bps'])} during the incast, "
            f"{mbit(n['victim_alone_bps'])} alone: {pct(n['victim_fraction'])}"
        )

    rows = [
        Row(
            f"{k.senders} -> 1 incast: MRC leaves the victim untouched",
            lab("mrc"),
            "agrees"
            if untouched
            else f"differs: the MRC victim kept {_pct1(mrc)}, under {pct(UNTOUCHED)}",
            untouched,
        ),
        _tcp_row(k, lab, tcp_cost, in_range, "roce" in nums),
    ]
    if "roce" in nums:
        rows.append(_roce_row(k, nums, results, lab))
    if "mptcp" in nums:
        mptcp = nums["mptcp"]["victim_fraction"]
        rows.append(
            compared(
                f"{k.senders} -> 1 incast: Linux MPTCP",
                lab("mptcp"),
                f"the MPTCP victim kept {pct(mptcp)} of its goodput alone, MRC's "
                f"{pct(mrc)}, TCP's {pct(tcp)}",
            )
        )
    return Findings(tuple(rows), {"senders": k.senders, **nums})


def _tcp_row(k: Knobs, lab: Any, tcp_cost: float | None, in_range: bool, roce: bool) -> Row:
    """The paper's DCQCN claim judged by single-path TCP, its stand-in, when no emulated
    RoCE ran; beside the emulated RoCE, TCP is a comparison."""
    if roce:
        return compared(
            f"{k.senders} -> 1 incast: single-path TCP over ECMP",
            lab("tcp"),
            f"the TCP victim lost {pct(tcp_cost)} (TCP is not RoCE)",
        )
    return Row(
        f"{k.senders} -> 1 incast: DCQCN costs the victim 25-75%",
        lab("tcp"),
        f"agrees in size, not in cause: the TCP victim lost {pct(tcp_cost)} to the incast "
        "flows ECMP hashed onto its links (no PFC here)"
        if in_range
        else f"differs: the TCP victim lost {pct(tcp_cost)}; without PFC only the incast "
        "flows ECMP hashed onto its links can take from it",
        in_range,
    )


def _roce_row(k: Knobs, nums: dict[str, Any], results: Sequence[RunResult], lab: Any) -> Row:
    """The paper's RoCE, as far as the lab can: go-back-N on one path, NSCC for DCQCN and
    no PFC; with its victim's window and sRTT at the end, what a loss resends."""
    roce = nums["roce"]["victim_fraction"]
    cost = None if roce is None else 1 - roce
    in_range = cost is not None and 0.25 <= cost <= 0.75
    run = next(r for r in results if r.run.name == "roce")
    end = end_state(run, VICTIM)
    depth = ""
    if end["window_bytes"] is not None and end["srtt_ms"] is not None:
        depth = (
            f"; victim's window {end['window_bytes'] / 1024:.0f} KiB, sRTT {end['srtt_ms']:.1f} ms"
        )
    nums["roce"]["victim_at_end"] = end
    return Row(
        f"{k.senders} -> 1 incast: DCQCN costs the victim 25-75% ({ROCE})",
        lab("roce") + depth,
        f"agrees in size: the go-back-N victim lost {pct(cost)} (no PFC, no DCQCN here)"
        if in_range
        else f"differs: the go-back-N victim lost {pct(cost)}; without PFC only the incast "
        "flows ECMP put on its links take from it",
        in_range,
    )


def _unmeasured(k: Knobs, nums: dict[str, Any]) -> Findings:
    """A run whose incast outlasted it: its victim was never alone, nothing to compare."""
    short = [kind for kind, n in nums.items() if n["victim_fraction"] is None]
    row = Row(
        f"{k.senders} -> 1 incast: MRC leaves the victim untouched; DCQCN costs it 25-75%",
        f"the incast outlasted the {', '.join(short)} run: its victim was never alone",
        "not measured: run it again (a longer --topology run, or a quieter machine)",
        None,
    )
    return Findings((row,), {"senders": k.senders, **nums})


def _pct1(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    """Victim and incast goodput of both runs, each against its own run's time 0."""
    series, kinds, legend = {}, {}, {}
    for res in results:
        kind = res.run.name
        for role, names in (("victim", [VICTIM]), (f"incast {k.senders}->1", incast_names(res))):
            key = f"{kind} {role}"
            flow = merged(res.deliveries, names, key)
            series[key] = series_of(flow, res.t_origin, res.t_stop, 0.1, res.t_origin)
            kinds[key] = kind
            legend[key] = f"{role}, {LABELS.get(kind, kind)}"
    mrc = next(r for r in results if r.run.name == "mrc")
    (_, b), _ = windows(mrc, k)
    shade = FaultWindow(
        "incast", f"{k.senders} -> {hosts(topo, k).receiver}", "", 0.0, b - mrc.t_origin
    )
    timeline_png(
        path,
        series,
        kinds,
        [shade],
        0.0,
        title=f"{k.senders} -> 1 incast beside a victim flow: MRC, TCP over ECMP and MPTCP",
        legend=legend,
    )


EXPERIMENT = Experiment(
    name="incast",
    code="inc",
    title="7 -> 1 incast beside a victim flow: MRC vs TCP over ECMP and MPTCP",
    paper="7 -> 1 incast with a victim flow that shares a switch port but not the receiver: "
    "MRC leaves the victim untouched; DCQCN costs the victim 25-75%.",
    fabric=Fabric(
        preset="default", planes=1, hosts_per_rack=8, t1_per_plane=3, rate_bps=20_000_000
    ),
    full=Knobs(),
    quick=Knobs(senders=3, incast_s=2.0, alone_s=1.5, settle_s=0.5),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
