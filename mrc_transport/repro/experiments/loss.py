"""`loss`: random loss on every link; one MRC connection, RoCE's reliable connection
emulated (go-back-N on one path: `mrc perf --evs 1 --recovery go-back-n`), one TCP flow
over ECMP, TCP with 8 parallel streams and one MPTCP connection (a subflow per plane, what a
Linux user would pick for multipath), each as a fraction of its lossless goodput.

Paper (mrc-protocol-notes.md, "Headline comparisons"): under 0.1% loss MRC is barely
affected while single-path RoCE collapses; at 1% loss MRC keeps about a third of line
rate and RoCE is unusable.

Lab: one run per transport, each in phases of ``phase_s``: no loss, then every link of the
fabric (host-T0 and T0-T1, both directions: a packet between racks crosses four) drops
each level in turn, then the loss is taken off. A phase's goodput is measured after
``settle_s``. Losses are drawn by nft's numgen on every link (labs/faults.py
``degrade_many``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labs.faultkinds import Degrade, Restore
from labs.topology import Topology
from mrc_transport.harness.flows import Flow
from mrc_transport.harness.patterns import pick_hosts
from mrc_transport.harness.plot import COLOURS, TCP_COLOURS, grouped_bars_png
from mrc_transport.harness.schedule import Step
from mrc_transport.repro.measure import mbit, pct, rate, ratio, warm
from mrc_transport.repro.spec import (
    MRC_BASE_PORT,
    MSG_LEN,
    ROCE,
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
    roce_flow,
    sender_seconds,
)

TRANSPORTS = {
    "mrc": "MRC, 1 connection",
    "roce": ROCE,
    "tcp": "TCP, 1 flow",
    "tcp8": "TCP, 8 streams",
    "mptcp": "MPTCP, 1 connection",
}


@dataclass(frozen=True, slots=True)
class Knobs:
    clean_s: float = 3.0
    """Seconds of the lossless start."""
    phase_s: float = 4.0
    """Seconds per loss level: applying it takes 0.3-2.5 s (an `nft` per node; the more,
    the busier the machine), its goodput counts from when it is in place + settle_s."""
    settle_s: float = 1.0
    """Skipped at the start of each phase before its goodput counts."""
    levels: tuple[float, ...] = (0.1, 1.0)
    """Loss levels in percent, in order."""
    links: str = "@links"
    """Which links lose packets: @links (every link) or @t0-t1."""


def check(topo: Topology, k: Knobs) -> None:
    pick_hosts(topo, None, None)
    need(bool(k.levels) and all(0 < x <= 100 for x in k.levels), "loss levels in (0, 100]")


def schedule(k: Knobs) -> list[Step]:
    """Each level at the end of the phase before; the loss taken off at the run's end."""
    steps = [
        Step(k.clean_s + k.phase_s * i, Degrade(k.links, level)) for i, level in enumerate(k.levels)
    ]
    return [*steps, Step(duration(k), Restore(k.links))]


def duration(k: Knobs) -> float:
    return k.clean_s + k.phase_s * len(k.levels)


def plan(topo: Topology, k: Knobs) -> tuple[Run, ...]:
    src, dst = pick_hosts(topo, None, None)
    seconds = sender_seconds(duration(k))
    flows = {
        "mrc": Flow("mrc", "mrc", src, dst, MRC_BASE_PORT, seconds, msg_len=MSG_LEN),
        "roce": roce_flow("roce", src, dst, MRC_BASE_PORT, seconds),
        "tcp": Flow("tcp", "tcp", src, dst, TCP_BASE_PORT, seconds),
        "tcp8": Flow("tcp8", "tcp", src, dst, TCP_BASE_PORT, seconds, streams=8),
        "mptcp": Flow("mptcp", "mptcp", src, dst, TCP_BASE_PORT, seconds),
    }
    steps = tuple(schedule(k))
    return tuple(Run(name, (flow,), duration(k), steps) for name, flow in flows.items())


def windows(res: RunResult, k: Knobs) -> list[tuple[float, float]]:
    """Each phase's measurement window (lossless first): from when its loss was in place
    (the step's apply returned) plus ``settle_s``, to when the next was asked for."""
    played = sorted(res.played, key=lambda p: p[1])
    name = res.run.flows[0].name
    begins = [warm(res, [name], 0.0), *(t_after for _s, _t, t_after in played)]
    stops = [*(t_before for _s, t_before, _t in played), res.t_stop]
    return [(begins[i] + k.settle_s, min(stops[i], res.t_stop)) for i in range(len(k.levels) + 1)]


def phases(res: RunResult, k: Knobs) -> list[float]:
    """Goodput of the run's flow in each phase's window."""
    return [rate(res.deliveries, [res.run.flows[0].name], a, b) for a, b in windows(res, k)]


def line_rate(topo: Topology, name: str) -> float:
    """What the transport could reach: MRC and MPTCP every port, 8 TCP streams up to 8,
    1 TCP flow and RoCE's one path one."""
    ports = {
        "mrc": topo.planes, "roce": 1, "tcp": 1, "tcp8": min(8, topo.planes),
        "mptcp": topo.planes,
    }[name]  # fmt: skip
    return float(topo.host_link.rate_bps * ports)


def measure(topo: Topology, k: Knobs, results: Sequence[RunResult]) -> Findings:
    goodputs = {r.run.name: phases(r, k) for r in results}
    frac = {n: [ratio(g, gs[0]) for g in gs[1:]] for n, gs in goodputs.items()}
    roce_end = next((end_state(r, "roce") for r in results if r.run.name == "roce"), None)
    numbers: dict[str, Any] = {
        "roce_at_end": roce_end,
        "levels_pct": list(k.levels),
        "goodput_bps": goodputs,
        "fraction_of_lossless": frac,
        "fraction_of_line_rate": {
            n: [ratio(g, line_rate(topo, n)) for g in gs] for n, gs in goodputs.items()
        },
        "line_rate_bps": {n: line_rate(topo, n) for n in goodputs},
        "windows_s": {
            r.run.name: [
                [round(a - r.t_origin, 3), round(b - r.t_origin, 3)] for a, b in windows(r, k)
            ]
            for r in results
        },
    }
    return Findings(tuple(_rows(topo, k, goodputs, frac, roce_end)), numbers)


def _lab(frac: dict[str, list[float | None]], i: int) -> str:
    return "; ".join(f"{TRANSPORTS[n]} {pct(f[i])}" for n, f in frac.items()) + " of lossless"


def _rows(
    topo: Topology,
    k: Knobs,
    goodputs: dict[str, list[float]],
    frac: dict[str, list[float | None]],
    roce_end: dict[str, float | None] | None,
) -> list[Row]:
    rows = []
    for i, level in enumerate(k.levels):
        rows.append(_mrc_row(topo, level, i, goodputs, frac))
        rows.append(_roce_row(level, i, goodputs, frac, roce_end))
        rows.append(_tcp_row(level, i, frac))
        if "mptcp" in frac:
            rows.append(_mptcp_row(level, i, goodputs, frac))
    return rows


def _roce_row(
    level: float,
    i: int,
    goodputs: dict[str, list[float]],
    frac: dict[str, list[float | None]],
    end: dict[str, float | None] | None,
) -> Row:
    """The paper's claim, judged by the emulated RoCE when it ran, else by single-path TCP
    (its stand-in before go-back-N)."""
    claim = f"{level:g}% loss: single-path RoCE collapses" + (" (unusable)" if level >= 1 else "")
    if "roce" not in frac:
        tcp = frac["tcp"][i]
        ok = tcp is not None and tcp < 0.2
        verdict = "agrees (TCP standing in for RoCE)" if ok else f"differs: TCP kept {pct(tcp)}"
        return Row(claim, _lab(frac, i), verdict, ok)
    roce = frac["roce"][i]
    collapsed = roce is not None and roce < 0.2
    depth = ""
    if end and end["window_bytes"] is not None and end["srtt_ms"] is not None:
        depth = (
            f"; at the end its window was {end['window_bytes'] / 1024:.0f} KiB and its sRTT "
            f"{end['srtt_ms']:.1f} ms: what one loss sends again"
        )
    lab = f"{ROCE} {pct(roce)} of lossless ({mbit(goodputs['roce'][i + 1])}){depth}"
    verdict = (
        "agrees: each loss resends every packet in flight after it"
        if collapsed
        else f"differs: go-back-N kept {pct(roce)}"
    )
    return Row(claim, lab, verdict, collapsed)


def _tcp_row(level: float, i: int, frac: dict[str, list[float | None]]) -> Row:
    tcp, tcp8 = frac["tcp"][i], frac.get("tcp8", [None] * (i + 1))[i]
    return compared(
        f"{level:g}% loss: single-path TCP over ECMP",
        f"TCP 1 flow {pct(tcp)}, 8 streams {pct(tcp8)} of lossless",
        "TCP is not RoCE: its SACKs resend only the lost segment, as MRC's do",
    )


def _mptcp_row(
    level: float, i: int, goodputs: dict[str, list[float]], frac: dict[str, list[float | None]]
) -> Row:
    mptcp, mrc = frac["mptcp"][i], frac["mrc"][i]
    kept = "more" if (mptcp or 0) > (mrc or 0) else "less"
    return compared(
        f"{level:g}% loss: Linux MPTCP, a subflow per plane",
        f"MPTCP {pct(mptcp)} of lossless ({mbit(goodputs['mptcp'][i + 1])})",
        f"MPTCP kept {kept} of its lossless goodput than MRC ({pct(mptcp)} against {pct(mrc)})",
    )


def _mrc_row(
    topo: Topology,
    level: float,
    i: int,
    goodputs: dict[str, list[float]],
    frac: dict[str, list[float | None]],
) -> Row:
    mrc = frac["mrc"][i]
    if level < 1:
        ok = mrc is not None and mrc >= 0.9
        return Row(
            f"{level:g}% loss: MRC barely affected",
            f"MRC {pct(mrc)} of lossless ({mbit(goodputs['mrc'][i + 1])})",
            "agrees" if ok else f"differs: MRC lost {pct(None if mrc is None else 1 - mrc)}",
            ok,
        )
    of_line = ratio(goodputs["mrc"][i + 1], line_rate(topo, "mrc"))
    ok = of_line is not None and 0.2 <= of_line <= 0.5
    better = of_line is not None and of_line > 0.5
    verdict = (
        "agrees"
        if ok
        else f"MRC did better than the paper's third: {pct(of_line)} of line rate"
        if better
        else f"differs: MRC kept {pct(of_line)} of line rate"
    )
    return Row(
        f"{level:g}% loss: MRC keeps about a third of line rate",
        f"MRC {pct(of_line)} of line rate ({mbit(goodputs['mrc'][i + 1])}), {pct(mrc)} of lossless",
        verdict,
        ok or better,
    )


def plot(path: Path, topo: Topology, k: Knobs, results: Sequence[RunResult]) -> None:
    goodputs = {r.run.name: phases(r, k) for r in results}
    groups = ["no loss", *(f"{x:g}% loss" for x in k.levels)]
    grouped_bars_png(
        path,
        groups,
        {TRANSPORTS[n]: [ratio(g, gs[0]) or 0.0 for g in gs] for n, gs in goodputs.items()},
        [COLOURS.get(n, TCP_COLOURS[1]) for n in goodputs],
        title=f"Random loss on {'every link' if k.links == '@links' else 'every T0-T1 link'}: "
        "goodput as a fraction of the lossless run",
        ylabel="fraction of lossless goodput",
        line=(1.0, "lossless"),
        top=1.3,
    )


EXPERIMENT = Experiment(
    name="loss",
    code="loss",
    title="random loss on every link: MRC vs RoCE's go-back-N, TCP and MPTCP",
    paper="Under 0.1% loss MRC is barely affected while single-path RoCE collapses; at 1% "
    "loss MRC keeps about a third of line rate and RoCE is unusable.",
    fabric=Fabric(preset="default", rate_bps=20_000_000),
    full=Knobs(),
    quick=Knobs(clean_s=1.5, phase_s=2.0, settle_s=0.5, levels=(1.0,)),
    check=check,
    plan=plan,
    measure=measure,
    plot=plot,
)
