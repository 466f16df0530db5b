"""`t1-blackhole`: a T1 stays up but stops forwarding while every host talks to every
other; connections hit, packets lost, how deep and long the dip was.

Paper (mrc-protocol-notes.md, "Failure behaviour reported in production", "Testbed
figures"): a T1 switch up but not forwarding hit a quarter of the connections and dropped
~580K packets: a brief dip, no job failure; a T1 down costs no steady-state throughput.

Lab: every talker sends to every other talker over its own MRC connection (all ordered
pairs); at ``fail_at`` the first T1 of plane 0 drops everything it receives
(labs/faults.py ``fail``: an nft prerouting chain with policy drop, so its links stay up)
and ``fail_s`` later it forwards again. A connection is hit when its sender resent a
packet or retired a path in the fault's window (its ``--events``); packets lost are the
packets the senders resent then. The dip is that of all flows' goodput together. Every
MRC end is a Python process, so the talkers are the first two hosts of the first two
racks (12 connections, 24 processes; the quick run: one host of each, 2 connections).
The same again over MPTCP connections, a comparison the paper does not make: one is hit
when it delivered nothing for STALLED_S in the fault's window.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from labs.faultkinds import Fail, Unfail
from labs.topology import Topology
from mrc_transport.harness.flows import Flow
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import FaultWindow, analyse, goodput
from mrc_transport.repro.figures import run_timeline
from mrc_transport.repro.measure import dip, first_fault, merged, ms, pct, rate, ratio, warm
from mrc_transport.repro.spec import (
    MRC_BASE_PORT,
    MSG_LEN,
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    as_baseline,
    compared,
    need,
    run_named,
    sender_seconds,
)

BIN_S = 0.1
MARGIN_S = 0.5
"""After the T1 forwards again, still part of the fault's window."""
TALKER_RACKS = 2
BRIEF_S = 1.0


@dataclass(frozen=True, slots=True)
class Knobs:
    fail_at: float = 3.0
    """Seconds into the transfers the T1 stops forwarding."""
    fail_s: float = 2.0
    """How long it forwards nothing."""
    tail_s: float = 3.0
    """Transfers after it forwards again."""
    settle_s: float = 1.0
    """Skipped at the start before the healthy goodput counts."""
    talkers_per_rack: int = 2
    """Hosts of each of the first two racks that talk (every MRC end is a process)."""


def talkers(topo: Topology, k: Knobs) -> list[str]:
    racks = range(min(TALKER_RACKS, topo.racks))
    return [h for r in racks for h in topo.hosts_in_rack(r)[: k.talkers_per_rack]]


def victim_t1(topo: Topology) -> str:
    return topo.t1(0, 0)


def check(topo: Topology, k: Knobs) -> None:
    need(topo.racks >= 2, "a T1 carries traffic only between racks: use 2+ racks")
    need(topo.t1_per_plane >= 2 or topo.planes >= 2, "one T1 must not be the only path")


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    duration = k.fail_at + k.fail_s + k.tail_s
    flows = tuple(
        Flow(
            f"{s}->{d}",
            "mrc",
            s,
            d,
            MRC_BASE_PORT + i,
            sender_seconds(duration),
            msg_len=MSG_LEN,
            events=True,
        )
        for i, (s, d) in enumerate(itertools.permutations(talkers(topo, k), 2))
    )
    t1 = victim_t1(topo)
    steps = (Step(k.fail_at, Fail(t1)), Step(k.fail_at + k.fail_s, Unfail(t1)))
    mrc = Run("mrc", flows, duration, steps)
    return (mrc, as_baseline(mrc, "mptcp"))


def hits(res: RunResult, fault: FaultWindow) -> dict[str, dict[str, int]]:
    """Per flow: packets resent and paths retired in the fault's window."""
    t0, t1 = fault.t_start, fault.t_end + MARGIN_S
    out = {}
    for flow in res.run.flows:
        evs = [e for e in res.recovery.get(flow.name, []) if t0 <= float(e["t_mono"]) <= t1]
        out[flow.name] = {
            "resent": sum(1 for e in evs if e.get("event") == "retransmit"),
            "paths_retired": sum(1 for e in evs if e.get("event") == "path_retired"),
        }
    return out


def together(k: Knobs, res: RunResult, fault: FaultWindow) -> dict[str, Any]:
    """All the run's flows together around the fault: how deep and long their goodput
    dipped, and what they kept once it had lasted a second."""
    names = [f.name for f in res.run.flows]
    before = rate(res.deliveries, names, warm(res, names, k.settle_s), fault.t_start)
    steady = rate(res.deliveries, names, fault.t_start + 1.0, fault.t_end)
    series = goodput(merged(res.deliveries, names, "all"), res.t_origin, res.t_stop, BIN_S)
    low = dip(series, before, fault.t_start, fault.t_end + MARGIN_S)
    return {
        "baseline_bps": before,
        "dip_depth": low.depth,
        "dip_below_90pct_s": low.below_s,
        "steady_fraction": ratio(steady, before),
    }


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    res = run_named(results, "mrc") or results[0]
    fault = first_fault(res, "fail")
    per_flow = hits(res, fault)
    hit = [n for n, c in per_flow.items() if c["resent"] or c["paths_retired"]]
    cross = [f.name for f in res.run.flows if topo.rack_of(f.src) != topo.rack_of(f.dst)]
    numbers: dict[str, Any] = {
        "t1": fault.target,
        "connections": len(res.run.flows),
        "cross_rack": len(cross),
        "hit": sorted(hit),
        "packets_resent": sum(c["resent"] for c in per_flow.values()),
        "per_flow": per_flow,
        **together(k, res, fault),
    }
    rows = _rows(numbers, res)
    mp = run_named(results, "mptcp")
    if mp is not None:
        numbers["mptcp"] = m = _mptcp(k, mp)
        rows += (_mptcp_row(numbers, m),)
    return Findings(rows, numbers)


STALLED_S = 0.2
"""An MPTCP connection was hit when it delivered nothing this long in the fault's window
(the minimum RTO: it had to time out); it logs no recovery events as MRC's senders do."""


def _mptcp(k: Knobs, res: RunResult) -> dict[str, Any]:
    fault = first_fault(res, "fail")
    windows = [replace(fault, t_end=fault.t_end + MARGIN_S)]
    found = analyse(res.deliveries, windows, t_begin=res.t_origin, t_stop=res.t_stop)
    gaps = {n: ff.stall.duration for n, ff in found[0].flows.items() if ff.stall is not None}
    return {
        "hit": sorted(n for n, g in gaps.items() if g >= STALLED_S),
        "longest_gap_s": max(gaps.values(), default=None),
        **together(k, res, fault),
    }


def _mptcp_row(n: dict[str, Any], m: dict[str, Any]) -> Row:
    return compared(
        "A T1 up but not forwarding: Linux MPTCP, a subflow per plane",
        f"{len(m['hit'])} of {n['connections']} connections stalled {ms(STALLED_S)} or more "
        f"(longest {ms(m['longest_gap_s'])}); all together dipped {pct(m['dip_depth'])} deep, "
        f"below 90% for {ms(m['dip_below_90pct_s'])}",
        f"MPTCP: {len(m['hit'])} connections stalled, a dip {pct(m['dip_depth'])} deep; "
        f"MRC: {len(n['hit'])} hit, a dip {pct(n['dip_depth'])} deep",
    )


def _rows(n: dict[str, Any], res: RunResult) -> tuple[Row, ...]:
    share = len(n["hit"]) / n["connections"] if n["connections"] else 0.0
    quarter = 0.15 <= share <= 0.35
    why = (
        "every connection between racks sprays over every T1, so each crossed the dead one"
        if len(n["hit"]) == n["cross_rack"]
        else f"{len(n['hit'])} of the {n['cross_rack']} connections between racks were hit"
    )
    brief = n["dip_below_90pct_s"] < BRIEF_S
    verified = bool(res.verified) and all(res.verified.values())
    steady = n["steady_fraction"]
    return (
        Row(
            "A T1 up but not forwarding: a quarter of the connections hit",
            f"{len(n['hit'])} of {n['connections']} connections hit ({pct(share)}); "
            f"{n['connections'] - n['cross_rack']} stay in their rack",
            "agrees" if quarter else f"differs: {pct(share)}; {why}",
            quarter,
        ),
        Row(
            "~580K packets dropped: a brief dip, no job failure",
            f"{n['packets_resent']} packets resent; all flows together dipped "
            f"{pct(n['dip_depth'])} deep, below 90% for {ms(n['dip_below_90pct_s'])}; "
            + ("every connection finished, every byte verified" if verified else "NOT verified"),
            "agrees (at lab scale)" if brief and verified else "differs: a long dip or a failure",
            brief and verified,
        ),
        Row(
            "A T1 down: no steady-state loss",
            f"with the T1 still dead, after 1 s: {pct(steady)} of before",
            "agrees"
            if steady is not None and steady >= 0.9
            else f"differs: {pct(steady)} of before while the T1 was dead",
            steady is not None and steady >= 0.9,
        ),
    )


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    res = run_named(results, "mrc") or results[0]
    run_timeline(
        path,
        res,
        bin_s=BIN_S,
        title=f"A T1 stops forwarding under {len(res.run.flows)} all-to-all connections: "
        "their goodput together",
        flows={"all connections": [f.name for f in res.run.flows]},
        beside=[r for r in results if r.run.name != "mrc"],
    )


EXPERIMENT = Experiment(
    name="t1-blackhole",
    code="t1bh",
    title="a T1 stops forwarding under all-to-all traffic",
    paper="A T1 switch up but not forwarding: a quarter of the connections hit, ~580K packets "
    "dropped, a brief dip, no job failure; a T1 down costs no steady-state throughput.",
    fabric=Fabric(preset="tiny", t1_per_plane=4, rate_bps=10_000_000),
    full=Knobs(),
    quick=Knobs(fail_at=1.5, fail_s=1.5, tail_s=1.5, settle_s=0.5, talkers_per_rack=1),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
