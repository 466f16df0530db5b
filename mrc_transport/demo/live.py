"""The failover demo's live terminal view (rich): per-flow and per-plane throughput bars,
active EVs, and the faults as they happen.

The view knows nothing about where numbers come from: a ``LiveSource`` hands it a
``LiveSnapshot`` on every refresh (the demo's, demo/livestate.py, reads the MRC client's
intervals, the baselines' progress lines, the sender's port counters and the lab's event
log). ``render`` is a pure function
of a snapshot, so tests render into a recording Console without a TTY.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from labs.units import format_rate
from mrc_transport.harness.baselines import LABELS

BAR_WIDTH = 36
_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """Everything one frame of the view shows."""

    t: float
    """Seconds since the transfers started."""
    flows: Sequence[tuple[str, str, float]]
    """(flow id, kind "mrc" or a baseline's, bits per second over the last refresh)."""
    planes: Sequence[tuple[int, float]]
    """(plane, MRC bits per second sent on it)."""
    flow_scale_bps: float
    """Full length of a flow bar (e.g. the host's total port rate)."""
    plane_scale_bps: float
    """Full length of a plane bar (one port's rate)."""
    other_planes: Sequence[tuple[str, Sequence[tuple[int, float]]]] = ()
    """Per multipath baseline (MPTCP): its label and (plane, bits per second sent on it)."""
    active_evs: int | None = None
    """EVs in GOOD or SKIP state, over all MRC connections."""
    total_evs: int | None = None
    """EVs the connections hold in total (active + retired + denied)."""
    faults: Sequence[str] = field(default_factory=tuple)
    """Fault lines so far, oldest first (see format_fault)."""
    verified_so_far: bool | None = None
    """No mismatching byte seen yet (None: unknown)."""


class LiveSource(Protocol):
    """Where the view gets its numbers."""

    def snapshot(self) -> LiveSnapshot: ...


def format_fault(event: Mapping[str, Any], t_origin: float) -> str:
    """One line for a lab event-log record: "  2.01s  cut gray  t0-p1-0:t1-p1-1"."""
    t = float(event["t_mono"]) - t_origin
    return f"{t:6.2f}s  {event['kind']} {event.get('action', '')}  {event['target']}"


def bar(value: float, full: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of `width` cells, in eighths of a cell; clipped at full."""
    if full <= 0 or value <= 0:
        return " " * width
    eighths = min(width * 8, round(value / full * width * 8))
    whole, part = divmod(eighths, 8)
    text = "█" * whole + (_EIGHTHS[part] if part else "")
    return text.ljust(width)


def _bars_table(rows: Sequence[tuple[str, str, float]], full: float) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(min_width=14)
    table.add_column()
    table.add_column(justify="right")
    for label, style, bps in rows:
        table.add_row(Text(label, style=style), Text(bar(bps, full), style=style), format_rate(bps))
    return table


STYLES = {"mrc": "cyan", "tcp": "red", "tcp-rehash": "dark_orange", "mptcp": "magenta"}
"""Each kind's colour, as in the timeline (harness/plot.py)."""


def _flow_label(flow: str, kind: str) -> str:
    label = LABELS.get(kind, kind.upper())
    return f"{label} ({flow})" if flow != kind else label


def render(snap: LiveSnapshot, max_faults: int = 8) -> RenderableType:
    """One frame: flows, planes, EVs, the last max_faults faults."""
    flows = [
        (_flow_label(flow, kind), STYLES.get(kind, "red"), bps) for flow, kind, bps in snap.flows
    ]
    planes = [(f"plane {p}", "cyan", bps) for p, bps in snap.planes]
    evs = "-" if snap.active_evs is None else str(snap.active_evs)
    if snap.total_evs is not None and snap.active_evs is not None:
        evs += f" / {snap.total_evs}"
    status = {
        None: "",
        True: "  [green]bytes verified so far[/]",
        False: "  [bold red]MISMATCH[/]",
    }[snap.verified_so_far]
    header = Text.from_markup(f"[bold]t = {snap.t:6.2f} s[/]   active EVs: [bold]{evs}[/]{status}")
    shown = list(snap.faults)[-max_faults:]
    fault_text = Text(
        "\n".join(shown) if shown else "(none yet)", style="yellow" if shown else "dim"
    )
    others = [
        Panel(
            _bars_table(
                [(f"plane {p}", STYLES.get(label.lower(), "magenta"), bps) for p, bps in per],
                snap.plane_scale_bps,
            ),
            title=f"{label} per plane",
            title_align="left",
        )
        for label, per in snap.other_planes
    ]
    return Group(
        header,
        Panel(
            _bars_table(flows, snap.flow_scale_bps), title="goodput per flow", title_align="left"
        ),
        Panel(_bars_table(planes, snap.plane_scale_bps), title="MRC per plane", title_align="left"),
        *others,
        Panel(fault_text, title=f"faults ({len(snap.faults)})", title_align="left"),
    )


async def run_live(
    source: LiveSource,
    *,
    refresh_s: float = 0.2,
    console: Console | None = None,
    until: Callable[[], bool] = lambda: False,
) -> None:
    """Redraw every refresh_s until `until()` is true or the task is cancelled (the demo
    runs this in its nursery and cancels it when the transfers end)."""
    import trio
    from rich.live import Live

    with Live(
        render(source.snapshot()), console=console, auto_refresh=False, transient=False
    ) as live:
        while not until():
            await trio.sleep(refresh_s)
            live.update(render(source.snapshot()), refresh=True)
