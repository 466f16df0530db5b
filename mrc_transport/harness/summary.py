"""The failover report on a terminal: a table of every fault's stalls that fits 80 columns
(a projector's terminal), then the lines that say how to read it.

One row per fault: when, what, where, MRC's stall and recovery, and each baseline's stall
and recovery (harness/baselines.py), or "off path" when the fault hit none of that
baseline's links.
A stall that outlasts the run reads "> N s (still stalled)": the figure is how long it had
lasted when the run ended, a lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mrc_transport.harness.baselines import LABELS
from mrc_transport.harness.pauses import Pause
from mrc_transport.harness.report import BaselineFault, FaultRow, FlowReport

OFF_PATH = "off path"
WIDTH = 80
"""Columns the table fits in: the default terminal, on a projector too."""


def duration(ms: float) -> str:
    """9.0 ms, 13 ms, 3.56 s."""
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def stall_cell(
    ms: float | None,
    open_ended: bool = False,
    rtos: int | None = None,
    pause_ms: float | None = None,
) -> str:
    """A stall with what happened during it: "84 ms (1 RTO)", "> 3.20 s (still stalled)"."""
    if ms is None:
        return "-"
    notes = [f"{rtos} RTO{'s' if rtos > 1 else ''}"] if rtos else []
    if pause_ms:
        notes.append(f"host paused {pause_ms:.0f} ms")
    if open_ended:
        notes.insert(0, "still stalled")
        text = f"> {duration(ms)}"
    else:
        text = duration(ms)
    return f"{text} ({', '.join(notes)})" if notes else text


def baseline_cell(b: BaselineFault | None) -> str:
    """A baseline's stall, and under it its recovery ("rec -": not within the fault's
    window); "off path" when the fault was not on its path."""
    if b is None:
        return "-"
    if b.on_path is False:
        return OFF_PATH
    rec = "-" if b.recovery_ms is None else duration(b.recovery_ms)
    return f"{stall_cell(b.stall_ms, b.stall_open)}\nrec {rec}"


def fault_label(kind: str, action: str) -> str:
    """The fault in a word or two: "gray cut", "flap 1/2", "blackhole" (a switch that
    stops forwarding), "port down", "loss 5%"."""
    if kind == "cut":
        return f"{action} cut"
    if kind == "flap":
        return f"flap {action.removeprefix('cycle ')}"
    if kind == "fail":
        return "port down" if action == "port down" else "blackhole"
    if kind == "degrade":
        return action
    return f"{kind} {action}".strip()


def baseline_kinds(rows: Sequence[FaultRow]) -> list[str]:
    """The baselines of the rows, in the order they were given."""
    out: list[str] = []
    for r in rows:
        out += [k for k in r.baselines if k not in out]
    return out


def summary_table(rows: Sequence[FaultRow], kinds: Sequence[str] | None = None) -> Any:
    """A rich Table: per fault, MRC's stall and recovery and each baseline's stall. The
    fault and its target share a column, one above the other, so that three baselines fit
    in WIDTH columns without cutting a target."""
    from rich.table import Table

    kinds = list(kinds) if kinds is not None else baseline_kinds(rows)
    longest = max((len(r.target) for r in rows), default=6)
    table = Table(
        title="Faults: the longest stall of each flow",
        title_justify="left",
        box=None,
        pad_edge=False,
        show_edge=False,
    )
    table.add_column("at", justify="right", no_wrap=True)
    table.add_column("fault, target", width=min(longest, 24), overflow="fold")
    table.add_column("MRC stall", justify="right")
    table.add_column("MRC recov.", justify="right")
    for kind in kinds:
        table.add_column(LABELS.get(kind, kind), justify="right")
    for r in rows:
        table.add_row(
            f"{r.t_start:.1f}s",
            f"[bold]{fault_label(r.kind, r.action)}[/]\n{r.target}",
            stall_cell(r.mrc_stall_ms, r.mrc_stall_open, r.mrc_stall_rtos, r.host_pause_ms),
            stall_cell(r.mrc_recovery_ms),
            *(baseline_cell(r.baselines.get(kind)) for kind in kinds),
        )
    return table


def _floor(f: FlowReport) -> str:
    """ "MRC 104 ms (host paused 100 ms)": a flow's longest gap with nothing broken."""
    text = f"{LABELS.get(f.kind, f.flow)} {f.healthy_max_gap_ms:.0f} ms"
    if f.healthy_gap_host_pause_ms:
        text += f" (host paused {f.healthy_gap_host_pause_ms:.0f} ms)"
    return text


def _legend(kinds: Sequence[str]) -> str:
    words = {
        "tcp": "TCP: no rehash on RTO (SO_TXREHASH off)",
        "tcp-rehash": "TCP rehash: Linux's default, another path on each RTO",
        "mptcp": "MPTCP: a subflow per plane",
    }
    said = "; ".join(words[k] for k in kinds if k in words)
    return (
        f"{said}. {OFF_PATH}: the fault hit none of that flow's links or switches when it "
        "struck; > N s (still stalled): it had not delivered again when the run ended; "
        "rec: until its goodput held 90% of its own before (-: not within the fault's window)"
    )


def print_summary(
    rows: Sequence[FaultRow],
    verified: bool,
    console: Any = None,
    flows: Sequence[FlowReport] = (),
    pauses: Sequence[Pause] = (),
    t_origin: float = 0.0,
    steal_s: float | None = None,
) -> None:
    from rich.console import Console

    console = console or Console()
    kinds = baseline_kinds(rows)
    console.print(summary_table(rows, kinds))
    if kinds:
        console.print(_legend(kinds), highlight=False)
    if pauses:
        worst = max(pauses, key=lambda p: p.late_s)
        steal = "" if steal_s is None else f"; CPU steal {steal_s:.2f} s during the run"
        console.print(
            f"the machine stood still {len(pauses)} time{'s' if len(pauses) > 1 else ''} "
            f"(longest {worst.late_s * 1e3:.0f} ms at {worst.t_mono - t_origin:.2f} s{steal}): "
            "a stall then is the machine's, not the protocol's"
        )
    floors = [_floor(f) for f in flows if f.healthy_max_gap_ms is not None]
    if floors:
        console.print(f"longest gap between deliveries with nothing broken: {', '.join(floors)}")
    console.print(
        "[bold green]verified[/]: every MRC byte matched"
        if verified
        else "[bold red]NOT verified[/]: some MRC bytes did not match or never came"
    )
