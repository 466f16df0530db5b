"""demo.timeline on synthetic timelines whose stalls, baselines and recoveries are known."""

from __future__ import annotations

from typing import Any

import pytest

from mrc_transport.harness.timeline import (
    Delivery,
    FaultWindow,
    Params,
    analyse,
    flow_totals,
    goodput,
    longest_stall,
    pair_events,
    recovery_time,
)

MS = 0.001
CHUNK = 12_500  # bytes per ms = 100 Mbit/s


def flow(
    name: str,
    t0: float,
    t1: float,
    gaps: tuple[tuple[float, float], ...] = (),
    halves: tuple[tuple[float, float], ...] = (),
) -> list[Delivery]:
    """One delivery of CHUNK bytes in the middle of every ms of [t0, t1), none inside a gap,
    every other ms inside a "half" span (half rate)."""
    out: list[Delivery] = []
    k = 0
    while (t := t0 + (k + 0.5) * MS) < t1:
        k += 1
        if any(a <= t < b for a, b in gaps):
            continue
        if any(a <= t < b for a, b in halves) and k % 2:
            continue
        out.append(Delivery(t, CHUNK, name))
    return out


def test_goodput_bins_are_exact_and_drop_the_partial_last_bin() -> None:
    rs = flow("mrc", 0.0, 1.0)
    g = goodput(rs, 0.0, 0.995, bin_s=0.01)
    assert len(g.bps) == 99
    assert set(g.bps) == {100e6}
    g5 = goodput(rs, 0.0, 1.0, bin_s=0.005)
    assert len(g5.bps) == 200
    assert set(g5.bps) == {100e6}
    assert g5.times()[3] == pytest.approx(0.015)


def test_goodput_shows_a_gap_as_empty_bins() -> None:
    rs = flow("tcp", 0.0, 1.0, gaps=((0.30, 0.35),))
    g = goodput(rs, 0.0, 1.0)
    assert g.bps[29] == 100e6
    assert g.bps[35] == 100e6
    assert g.bps[30:35] == (0.0,) * 5


def test_totals() -> None:
    rs = flow("a", 0.0, 2.0) + flow("b", 0.0, 2.0, halves=((0.0, 2.0),))
    tot = flow_totals(rs, 0.0, 2.0)
    assert tot["a"].nbytes == 2000 * CHUNK
    assert tot["a"].goodput_bps == pytest.approx(100e6)
    assert tot["b"].deliveries == 1000
    assert tot["b"].goodput_bps == pytest.approx(50e6)


def test_stall_is_the_gap_across_the_fault() -> None:
    rs = flow("tcp", 0.0, 10.0, gaps=((3.0, 3.2),))
    times = [d.t_mono for d in rs]
    s = longest_stall(times, 3.0, 3.5, 0.0, 10.0)
    assert s is not None
    assert not s.open_ended
    assert s.start == pytest.approx(2.9995)
    assert s.end == pytest.approx(3.2005)
    assert s.duration == pytest.approx(0.201)


def test_stall_that_began_before_the_window_counts_and_later_gaps_do_not() -> None:
    rs = flow("tcp", 0.0, 10.0, gaps=((2.9, 3.1), (6.0, 7.0)))
    times = [d.t_mono for d in rs]
    s = longest_stall(times, 3.0, 3.5, 0.0, 10.0)
    assert s is not None
    assert s.duration == pytest.approx(0.201)


def test_no_delivery_after_the_fault_is_an_open_ended_stall() -> None:
    rs = flow("tcp", 0.0, 4.0)
    times = [d.t_mono for d in rs]
    s = longest_stall(times, 3.5, 5.0, 0.0, 8.0)
    assert s is not None
    assert s.open_ended
    assert s.end == 8.0
    assert s.duration == pytest.approx(8.0 - 3.9995)


def test_fault_at_the_very_start() -> None:
    rs = flow("mrc", 0.3, 5.0)
    fault = FaultWindow("cut", "t0-p0-0:t1-p0-0", "gray", 0.0, 0.2)
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=5.0)
    ff = res.flows["mrc"]
    assert ff.stall is not None
    assert ff.stall.start == 0.0
    assert ff.stall.duration == pytest.approx(0.3005)
    assert ff.baseline_bps is None
    assert ff.recovery_s is None
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=5.0, capacity_bps={"mrc": 100e6})
    assert res.flows["mrc"].recovery_s == pytest.approx(0.3)  # first full bin at 0.30


def test_recovery_to_the_surviving_capacity() -> None:
    # Full rate, a 50 ms stall at 5.0, half rate for a second, then full rate again.
    rs = flow("mrc", 0.0, 10.0, gaps=((5.0, 5.05),), halves=((5.05, 6.05),))
    fault = FaultWindow("cut", "t0-p0-0:t1-p0-0", "hard", 5.0, 8.0)
    half = analyse(rs, [fault], t_begin=0.0, t_stop=10.0, surviving=lambda f, fl: 0.5)
    full = analyse(rs, [fault], t_begin=0.0, t_stop=10.0)
    h, f = half[0].flows["mrc"], full[0].flows["mrc"]
    assert h.baseline_bps == pytest.approx(100e6)
    assert h.target_bps == pytest.approx(45e6)
    assert h.recovery_s == pytest.approx(0.05)
    # the 5-bin mean from the last half-rate bin on is (50 + 4 x 100) / 5 = 90%
    assert f.recovery_s == pytest.approx(1.04)
    # 4.9995 -> 5.0515: the half-rate span skips its first ms (5.0505) too.
    assert h.stall is not None
    assert h.stall.duration == pytest.approx(0.052)


def test_no_recovery_within_the_fault_window_is_none() -> None:
    rs = flow("tcp", 0.0, 10.0, halves=((5.0, 10.0),))
    fault = FaultWindow("degrade", "t0-p0-0:t1-p0-0", "loss 5%", 5.0, 6.0)
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=10.0)
    assert res.flows["tcp"].recovery_s is None
    assert res.flows["tcp"].baseline_bps == pytest.approx(100e6)


def test_no_dip_is_zero_recovery() -> None:
    rs = flow("mrc", 0.0, 3.0)
    fault = FaultWindow("cut", "x:y", "gray", 1.234, 2.0)
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=3.0)
    assert res.flows["mrc"].recovery_s == 0.0
    assert res.flows["mrc"].stall is not None
    assert res.flows["mrc"].stall.duration == pytest.approx(0.001)


def test_overlapping_faults_keep_the_healthy_baseline() -> None:
    # 100 Mbit/s until 2.0, half rate while fault A [2, 4] and B [3, 5] overlap, full after.
    rs = flow("mrc", 0.0, 8.0, halves=((2.0, 5.0),))
    a = FaultWindow("cut", "l1", "hard", 2.0, 4.0)
    b = FaultWindow("cut", "l2", "hard", 3.0, 5.0)
    ra, rb = analyse(
        rs, [a, b], t_begin=0.0, t_stop=8.0, surviving=lambda f, fl: 0.5, params=Params(margin=0.1)
    )
    assert rb.flows["mrc"].baseline_bps == pytest.approx(100e6)  # not the depressed 50
    assert rb.flows["mrc"].recovery_s == 0.0  # 50 >= 0.9 * 0.5 * 100
    assert ra.flows["mrc"].recovery_s == 0.0
    # With full capacity expected, B recovers only when the rate comes back at 5.0.
    (_, rb_full) = analyse(rs, [a, b], t_begin=0.0, t_stop=8.0, params=Params(margin=0.1))
    assert rb_full.flows["mrc"].recovery_s == pytest.approx(1.99)  # a mean of 90% (above)


def test_baseline_skips_a_faults_aftermath_in_any_flow() -> None:
    # Fault A [1, 2]: TCP stalls from 1.0 until 3.2, long past A's restore and margin, and
    # MRC runs at full rate (100) only while TCP is stalled, at half rate otherwise. Fault B
    # at 3.5: its MRC baseline must come from before A (half rate: TCP running), not from
    # [2.1, 3.2], where MRC had TCP's share too.
    mrc = flow("mrc", 0.0, 5.0, halves=((0.0, 1.0), (3.2, 5.0)))
    tcp = flow("tcp", 0.0, 5.0, gaps=((1.0, 3.2),))
    a = FaultWindow("cut", "l1", "gray", 1.0, 2.0)
    b = FaultWindow("cut", "l2", "hard", 3.5, 4.0)
    _, rb = analyse(mrc + tcp, [a, b], t_begin=0.0, t_stop=5.0, params=Params(margin=0.1))
    assert rb.flows["mrc"].baseline_bps == pytest.approx(50e6, rel=0.02)
    assert rb.flows["mrc"].recovery_s == 0.0  # 50 stays >= 0.9 x 50


def test_baseline_uses_only_the_last_pre_seconds() -> None:
    rs = flow("mrc", 0.0, 3.0, halves=((0.0, 1.0),))
    fault = FaultWindow("cut", "l1", "hard", 2.0, 2.5)
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=3.0, params=Params(pre_s=1.0))
    assert res.flows["mrc"].baseline_bps == pytest.approx(100e6)
    (res,) = analyse(rs, [fault], t_begin=0.0, t_stop=3.0, params=Params(pre_s=2.0))
    assert res.flows["mrc"].baseline_bps == pytest.approx(75e6)


def test_recovery_time_needs_the_mean_of_hold_bins() -> None:
    from mrc_transport.harness.timeline import Goodput

    g = Goodput(0.0, 0.01, (100.0, 0.0, 100.0, 0.0, 100.0, 100.0, 100.0, 0.0))
    assert recovery_time(g, 0.0, 90.0, 1, 1.0) == 0.0
    assert recovery_time(g, 0.0, 90.0, 3, 1.0) == pytest.approx(0.04)
    assert recovery_time(g, 0.0, 90.0, 3, 0.03) is None  # it starts after the limit
    assert recovery_time(g, 0.0, 90.0, 4, 1.0) is None
    assert recovery_time(g, 0.0, 75.0, 4, 1.0) == pytest.approx(0.02)  # mean 75
    assert recovery_time(g, 0.015, 90.0, 3, 1.0) == pytest.approx(0.025)  # from the fault's bin
    with pytest.raises(ValueError, match="hold_bins"):
        recovery_time(g, 0.0, 90.0, 0, 1.0)


def test_recovery_time_looks_past_bursty_bins() -> None:
    """A receiver that delivers in bursts: bins alternate 40 and 160 around a mean of
    100; every-bin criteria would never call it recovered."""
    from mrc_transport.harness.timeline import Goodput

    g = Goodput(0.0, 0.01, (0.0, 0.0) + (40.0, 160.0) * 10)
    assert recovery_time(g, 0.0, 90.0, 4, 1.0) == pytest.approx(0.02)
    assert recovery_time(g, 0.0, 110.0, 4, 1.0) is None


def test_pair_events_from_the_lab_log() -> None:
    log = [
        {"t_mono": 10.0, "t_wall": 1.0, "kind": "cut", "target": "a:b", "action": "gray"},
        {"t_mono": 12.0, "t_wall": 3.0, "kind": "restore", "target": "a:b", "action": "up"},
        {"t_mono": 13.0, "t_wall": 4.0, "kind": "degrade", "target": "c:d", "action": "loss 5%"},
        {"t_mono": 13.5, "t_wall": 4.5, "kind": "cut", "target": "c:d", "action": "hard"},
        {"t_mono": 14.0, "t_wall": 5.0, "kind": "restore", "target": "c:d", "action": "up"},
        {"t_mono": 11.0, "t_wall": 2.0, "kind": "fail", "target": "t1-p0-1", "action": "x"},
        {"t_mono": 15.0, "t_wall": 6.0, "kind": "restore", "target": "zz", "action": "up"},
    ]
    got = pair_events(log, t_stop=20.0)
    assert [(f.kind, f.target, f.t_start, f.t_end, f.restored) for f in got] == [
        ("cut", "a:b", 10.0, 12.0, True),
        ("fail", "t1-p0-1", 11.0, 20.0, False),
        ("degrade", "c:d", 13.0, 14.0, True),
        ("cut", "c:d", 13.5, 14.0, True),
    ]
    assert got[2].action == "loss 5%"
    with pytest.raises(ValueError, match="t_mono"):
        pair_events([{"t_mono": "x", "kind": "cut", "target": "a"}], 1.0)


def test_healthy_gap_is_the_longest_gap_with_nothing_broken() -> None:
    from mrc_transport.harness.timeline import healthy_gap_at

    def healthy_gap(*args: Any, **kwargs: Any) -> float | None:
        gap = healthy_gap_at(*args, **kwargs)
        return None if gap is None else gap.duration

    # deliveries every 10 ms, a 40 ms hole at 0.99 (healthy) and a 210 ms one in a fault
    times = [i * 0.01 for i in range(100)] + [1.03 + i * 0.01 for i in range(50)]
    times += [1.73 + i * 0.01 for i in range(100)]
    rs = [Delivery(t, 1000, "mrc") for t in times]
    fault = FaultWindow("cut", "x:y", "hard", 1.5, 1.6)
    gap = healthy_gap(rs, [fault], t_begin=0.0, t_stop=2.8, margin=0.05)
    assert gap == pytest.approx(0.04)
    assert healthy_gap(rs, [], t_begin=0.0, t_stop=2.8, margin=0.05) == pytest.approx(0.21)
    assert healthy_gap(rs[:1], [], t_begin=0.0, t_stop=2.8, margin=0.05) is None
    at = healthy_gap_at(rs, [fault], t_begin=0.0, t_stop=2.8, margin=0.05)
    assert at is not None
    assert (at.start, at.end) == (pytest.approx(0.99), pytest.approx(1.03))


def test_a_flow_watched_past_the_run_has_its_stall_measured_whole() -> None:
    # the run ends at 10 s; the baseline stalls from the fault at 8 s until 12 s
    mrc = flow("mrc", 0.0, 10.0)
    tcp = flow("tcp", 0.0, 8.0) + flow("tcp", 12.0, 13.0)
    fault = FaultWindow("cut", "a:b", "gray", 8.0, 9.0)
    cut, whole = (
        analyse(mrc + tcp, [fault], t_begin=0.0, t_stop=10.0, t_stop_of=stop)[0].flows["tcp"]
        for stop in ({}, {"tcp": 13.5})
    )
    assert cut.stall is not None
    assert whole.stall is not None
    assert cut.stall.open_ended  # cut at the run's end: a lower bound
    assert cut.stall.duration == pytest.approx(2.0, abs=0.002)  # from the last delivery
    assert not whole.stall.open_ended
    assert whole.stall.duration == pytest.approx(4.0, abs=0.002)
