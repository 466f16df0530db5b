"""`port-loss` (Fig. 9a): a NIC port of the receiving host goes down in the middle of an
MRC transfer and comes back; goodput over time and the time to settle.

Paper (mrc-protocol-notes.md, "Testbed figures (Fig. 9)", "Failure behaviour reported in
production"): a NIC port lost is a brief interruption, under a second on the testbed (a
few seconds in production); the peers learn it from the SACK port bitmap.

Lab: one MRC connection between racks; at ``fail_at`` the receiver's port in plane 1 goes
admin down (labs/faults.py ``fail HOST:PORT``), ``down_s`` later it comes back. Measured
with the failover demo's analysis (harness/timeline.py): the longest delivery gap, the time
until goodput holds 90% of what the ports left can carry (the share of MRC's paths the
fault leaves, harness/paths.py), when the sender took the plane out of use (its
``plane_down`` event), and the time back to full rate after the port returns. The same
run again with one MPTCP connection (a subflow per plane; the same share of its subflows
lost) gives Linux's multipath figures beside MRC's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.faultkinds import Fail, Unfail
from labs.paths import paths
from labs.topology import Topology
from mrc_transport.harness.paths import surviving
from mrc_transport.harness.patterns import pick_hosts
from mrc_transport.harness.schedule import Step
from mrc_transport.harness.timeline import FaultWindow, FlowFault, Params, analyse, goodput
from mrc_transport.repro.figures import run_timeline
from mrc_transport.repro.measure import back_to, first_fault, gap, mbit, ms, pct, rate, ratio
from mrc_transport.repro.spec import (
    Experiment,
    Fabric,
    Findings,
    Row,
    Run,
    RunResult,
    as_baseline,
    compared,
    need,
    one_mrc_flow,
    run_named,
)

BIN_S = 0.01
"""Goodput bins for the stall and settle figures (the failover demo's)."""
BRIEF_S = 1.0
"""The paper's testbed bound on the interruption."""


@dataclass(frozen=True, slots=True)
class Knobs:
    fail_at: float = 3.0
    """Seconds into the transfer the port goes down."""
    down_s: float = 4.0
    """How long it stays down."""
    tail_s: float = 3.0
    """Transfer after it comes back."""
    plane: int = 1
    """The plane (port) that fails."""


def check(topo: Topology, k: Knobs) -> None:
    pick_hosts(topo, None, None)
    need(topo.planes >= 2, "a lost port must leave another: use a fabric with 2+ planes")
    need(k.plane < topo.planes, f"no plane {k.plane} in a {topo.planes}-plane fabric")


def port(topo: Topology, k: Knobs) -> str:
    _src, dst = pick_hosts(topo, None, None)
    return f"{dst}:p{k.plane}"


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    steps = (
        Step(k.fail_at, Fail(port(topo, k))),
        Step(k.fail_at + k.down_s, Unfail(port(topo, k))),
    )
    mrc = one_mrc_flow(topo, k.fail_at + k.down_s + k.tail_s, steps)
    return (mrc, as_baseline(mrc, "mptcp"))


def _around(
    res: RunResult, fault: FaultWindow, share: float
) -> tuple[FlowFault, float | None, float]:
    """The run's one flow around the fault: its stall and settle (timeline.analyse), the
    time back to full after the port returns, and its goodput while the port was down."""
    name = res.run.flows[0].name
    (result,) = analyse(
        res.deliveries,
        [fault],
        t_begin=res.t_origin,
        t_stop=res.t_stop,
        surviving=lambda _f, _flow: share,
        params=Params(bin_s=BIN_S),
    )
    ff = result.flows[name]
    series = goodput(res.deliveries, res.t_origin, res.t_stop, BIN_S)
    before = ff.baseline_bps
    back = None if before is None else back_to(series, fault.t_end, 0.9 * before, res.t_stop)
    return ff, back, rate(res.deliveries, [name], fault.t_start + 1.0, fault.t_end)


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    res = run_named(results, "mrc") or results[0]
    fault = first_fault(res, "fail")
    flow = res.run.flows[0]
    share = surviving(fault, flow.src, flow.dst, paths(topo, flow.src, flow.dst))
    ff, back, during = _around(res, fault, share)
    before = ff.baseline_bps
    learnt = _plane_down_after(res, fault, k.plane)
    stall = None if ff.stall is None else ff.stall.duration
    numbers: dict[str, Any] = {
        "port": fault.target,
        "surviving_share": share,
        "stall_s": stall,
        "stall_open": bool(ff.stall and ff.stall.open_ended),
        "settle_s": ff.recovery_s,
        "baseline_bps": before,
        "down_bps": during,
        "down_fraction": ratio(during, before),
        "plane_down_after_s": learnt,
        "back_to_full_s": back,
        "fault_s": [round(fault.t_start - res.t_origin, 3), round(fault.t_end - res.t_origin, 3)],
    }
    settle = ff.recovery_s
    brief = stall is not None and stall < BRIEF_S and settle is not None and settle < BRIEF_S
    rows = [
        Row(
            "A NIC port lost: a brief interruption, under a second on the testbed",
            f"longest gap {gap(stall, numbers['stall_open'])}; at 90% of the {pct(share)} of "
            f"paths left after {ms(ff.recovery_s)}",
            "agrees" if brief else "differs: the interruption lasted a second or more",
            brief,
        ),
        Row(
            "Peers learn it from the SACK port bitmap (a few seconds in production)",
            f"the sender took plane {k.plane} out of use {ms(learnt)} after the port went "
            f"down; goodput then {mbit(during)}, {pct(ratio(during, before))} of before",
            "agrees: the sender stopped using the port within a second"
            if learnt is not None and learnt < BRIEF_S
            else "differs: the sender did not take the plane out of use within a second",
            learnt is not None and learnt < BRIEF_S,
        ),
    ]
    mp = run_named(results, "mptcp")
    if mp is not None:
        numbers["mptcp"] = _mptcp(rows, mp, share, stall)
    return Findings(tuple(rows), numbers)


def _mptcp(
    rows: list[Row], res: RunResult, share: float, mrc_stall: float | None
) -> dict[str, Any]:
    """MPTCP's row and figures for the same port lost."""
    fault = first_fault(res, "fail")
    ff, back, during = _around(res, fault, share)
    stall = None if ff.stall is None else ff.stall.duration
    still = bool(ff.stall and ff.stall.open_ended)
    rows.append(
        compared(
            "A NIC port lost: Linux MPTCP, a subflow per plane",
            f"longest gap {gap(stall, still)}; at 90% of the {pct(share)} of subflows left "
            f"after {ms(ff.recovery_s)}; back to full {ms(back)} after the port returned",
            f"MPTCP's longest gap {gap(stall, still)}, MRC's {ms(mrc_stall)}",
        )
    )
    return {
        "stall_s": stall,
        "stall_open": still,
        "settle_s": ff.recovery_s,
        "down_fraction": ratio(during, ff.baseline_bps),
        "back_to_full_s": back,
    }


def _plane_down_after(res: RunResult, fault: FaultWindow, plane: int) -> float | None:
    """Seconds from the fault to the sender's plane_down event for that plane."""
    times = [
        float(e["t_mono"])
        for e in res.recovery.get("mrc", [])
        if e.get("event") == "plane_down"
        and e.get("plane") == plane
        and float(e["t_mono"]) >= fault.t_start
    ]
    return min(times) - fault.t_start if times else None


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    run_timeline(
        path,
        run_named(results, "mrc") or results[0],
        bin_s=0.05,
        title="A NIC port of the receiver lost and back (Fig. 9a at lab scale)",
        beside=[r for r in results if r.run.name != "mrc"],
    )


EXPERIMENT = Experiment(
    name="port-loss",
    code="port",
    title="a NIC port down mid-transfer (Fig. 9a)",
    paper="Fig. 9a: a NIC port goes down during a transfer; a brief interruption of under a "
    "second on the testbed (a few seconds in production), the peers learning it from the "
    "SACK port bitmap.",
    fabric=Fabric(preset="default", rate_bps=25_000_000),
    full=Knobs(),
    quick=Knobs(fail_at=1.5, down_s=2.0, tail_s=1.5),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
