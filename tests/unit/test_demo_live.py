"""demo.live renders a fake source into a recording Console, no TTY needed."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from rich.console import Console

from mrc_transport.demo.live import BAR_WIDTH, LiveSnapshot, bar, format_fault, render, run_live

T0 = 500.0


def _snap(t: float, faults: tuple[str, ...] = ()) -> LiveSnapshot:
    return LiveSnapshot(
        t=t,
        flows=[("mrc", "mrc", 380e6), ("tcp", "tcp", 0.0)],
        planes=[(0, 95e6), (1, 96e6), (2, 94e6), (3, 95e6)],
        flow_scale_bps=400e6,
        plane_scale_bps=100e6,
        active_evs=120,
        total_evs=128,
        faults=faults,
        verified_so_far=True,
    )


def _text(renderable: object) -> str:
    console = Console(record=True, width=100, force_terminal=False, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_bar_lengths() -> None:
    assert bar(0, 100) == " " * BAR_WIDTH
    assert bar(100, 100) == "█" * BAR_WIDTH
    assert bar(250, 100) == "█" * BAR_WIDTH  # clipped
    assert bar(50, 100, width=10) == "█████     "
    assert bar(1, 8, width=1) == "▏"
    assert bar(5, 0) == " " * BAR_WIDTH


def test_render_shows_flows_planes_evs_and_faults() -> None:
    ev = {"t_mono": T0 + 2.013, "kind": "cut", "action": "gray", "target": "t0-p1-0:t1-p1-1"}
    line = format_fault(ev, T0)
    assert line == "  2.01s  cut gray  t0-p1-0:t1-p1-1"
    text = _text(render(_snap(2.5, (line,))))
    assert "t =   2.50 s" in text
    assert "active EVs: 120 / 128" in text
    assert "MRC " in text
    assert "TCP " in text
    assert "380.00 Mbits/sec" in text
    assert "plane 3" in text
    assert "cut gray  t0-p1-0:t1-p1-1" in text
    assert "bytes verified so far" in text
    mrc_line = next(ln for ln in text.splitlines() if "MRC " in ln and "Mbits/sec" in ln)
    assert mrc_line.count("█") == round(380 / 400 * BAR_WIDTH * 8) // 8


def test_render_keeps_only_the_last_faults() -> None:
    faults = tuple(f"{i:6.2f}s  cut hard  link{i}" for i in range(12))
    text = _text(render(_snap(9.0, faults), max_faults=3))
    assert "link11" in text
    assert "link9" in text
    assert "link8" not in text
    assert "faults (12)" in text


def test_render_without_evs_or_faults() -> None:
    snap = LiveSnapshot(t=0.0, flows=[], planes=[], flow_scale_bps=1.0, plane_scale_bps=1.0)
    text = _text(render(snap))
    assert "active EVs: -" in text
    assert "(none yet)" in text


class FakeSource:
    def __init__(self) -> None:
        self.calls = 0

    def snapshot(self) -> LiveSnapshot:
        self.calls += 1
        return _snap(self.calls * 0.2, tuple(f"fault {i}" for i in range(self.calls)))


async def test_run_live_redraws_until_told_to_stop(autojump_clock: trio.testing.MockClock) -> None:
    source = FakeSource()
    console = Console(record=True, width=100, force_terminal=False, color_system=None)
    start = trio.current_time()
    await run_live(source, refresh_s=0.2, console=console, until=lambda: source.calls >= 4)
    assert source.calls == 4
    assert trio.current_time() - start == pytest.approx(0.2 * 3)
    assert "fault 3" in console.export_text()


def test_a_multipath_baseline_gets_a_panel_per_plane() -> None:
    snap = LiveSnapshot(
        t=1.0,
        flows=[("mrc", "mrc", 200e6), ("mptcp", "mptcp", 150e6), ("tcp-rehash", "tcp-rehash", 0)],
        planes=[(0, 50e6), (1, 50e6)],
        other_planes=[("MPTCP", [(0, 75e6), (1, 0.0)])],
        flow_scale_bps=200e6,
        plane_scale_bps=100e6,
    )
    text = _text(render(snap))
    assert "MPTCP per plane" in text
    assert "TCP rehash" in text
    assert "75.00 Mbits/sec" in text
