"""harness/plot.py's drawing choices for a projector: the drawn line smooths a receiver's
burst, a flap is named once with its count, names in the strip do not overlap, and a
timeline with every baseline draws a panel each."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrc_transport.harness.plot import (
    CHAR_OF_AXIS,
    LEVELS,
    _groups,
    _label,
    _label_levels,
    centred_mean,
    timeline_png,
)
from mrc_transport.harness.timeline import FaultWindow, Goodput


def test_a_burst_in_one_bin_is_spread_over_the_drawn_window() -> None:
    # 100 Mbit/s, but a stalled receiver hands 10 bins' worth over in one 10 ms bin
    bins = [100e6] * 20 + [0.0] * 9 + [1000e6] + [100e6] * 20
    drawn = centred_mean(bins, 10)
    assert max(drawn) == pytest.approx(190e6)  # not the 1000 Mbit/s the fine bin says
    assert drawn[0] == pytest.approx(100e6)
    assert len(drawn) == len(bins)
    assert centred_mean(bins, 1) == bins


def _flap(i: int, t: float) -> FaultWindow:
    return FaultWindow("flap", "t0-p2-1:t1-p2-3", f"cycle {i}/10", t, t + 0.1)


def test_a_flap_is_named_once_with_its_count() -> None:
    cut = FaultWindow("cut", "t0-p2-1:t1-p2-3", "gray", 1.0, 2.0)
    flaps = [_flap(i + 1, 3.0 + 0.2 * i) for i in range(10)]
    groups = _groups([cut, *flaps])
    assert [(f.kind, n) for f, n in groups] == [("cut", 1), ("flap", 10)]
    assert _label(*groups[1]) == " flap x10\n t0-p2-1:t1-p2-3"
    assert _label(*groups[0]) == " gray cut\n t0-p2-1:t1-p2-3"


def test_names_that_would_overlap_go_one_height_down() -> None:
    span = 20.0
    width = len(" t0-p2-1:t1-p2-3") * CHAR_OF_AXIS * span
    texts = [(2.0, " gray cut\n t0-p2-1:t1-p2-3"), (2.0 + width / 2, " flap x2\n h4:p2"),
             (2.0 + width + 0.01, " blackhole\n t1-p2-0")]  # fmt: skip
    assert _label_levels(texts, span) == [LEVELS[0], LEVELS[1], LEVELS[0]]


def test_every_baseline_gets_a_panel(tmp_path: Path) -> None:
    series = {
        k: Goodput(100.0, 0.01, tuple([50e6] * 300 + [0.0] * 100 + [50e6] * 200))
        for k in ("mrc", "tcp", "tcp-rehash", "mptcp")
    }
    faults = [FaultWindow("cut", "t0-p0-1:t1-p0-0", "gray", 103.0, 104.0)]
    path = tmp_path / "timeline.png"
    timeline_png(path, series, {k: k for k in series}, faults, 100.0)
    from PIL import Image

    with Image.open(path) as im:
        width, height = im.size
    assert height > width * 0.7  # four panels stacked and a strip, not one axis
