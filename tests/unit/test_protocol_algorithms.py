"""Schedulers, congestion control and serial arithmetic in isolation."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mrc_transport.protocol.cc import CONGESTION_CONTROLS, FixedWindow, LabNscc, Nscc, make_cc
from mrc_transport.protocol.config import Config
from mrc_transport.protocol.ev import EvInput, EvSet
from mrc_transport.protocol.scheduler import SCHEDULERS, make_scheduler
from mrc_transport.protocol.serial import MASK32, expand
from tests.unit.helpers import paths


def evset(n: int = 16) -> EvSet:
    return EvSet(paths(), Config(ev_count=n, ev_backup=4), random.Random(1), 1, lambda e: None)


def test_random_covers_every_usable_ev_and_avoids_the_old_one() -> None:
    evs = evset()
    sched = make_scheduler("random", random.Random(3))
    seen = Counter(sched.pick(evs).value for _ in range(2000))
    assert set(seen) == {e.value for e in evs.usable}
    old = evs.usable[0]
    assert all(sched.pick(evs, avoid=old) is not old for _ in range(500))


def test_rr_visits_each_usable_ev_once_per_rotation() -> None:
    evs = evset()
    sched = make_scheduler("rr", random.Random(3))
    picks = [sched.pick(evs).value for _ in range(len(evs.usable))]
    assert sorted(picks) == sorted(e.value for e in evs.usable)


def test_reps_recycles_cleanly_acked_evs_first() -> None:
    evs = evset()
    sched = make_scheduler("reps", random.Random(3))
    a, b = evs.usable[2], evs.usable[7]
    sched.on_clean_ack(a)
    sched.on_clean_ack(b)
    assert sched.pick(evs) is a
    assert sched.pick(evs) is b
    evs.apply(a, EvInput.ECN, 0.0)
    sched.on_clean_ack(a)  # skipped meanwhile: not recycled
    assert sched.pick(evs) is not a


def test_schedulers_never_pick_unusable_evs() -> None:
    for name in SCHEDULERS:
        evs = evset()
        bad = evs.usable[:5]
        for ev in bad:
            evs.apply(ev, EvInput.LOSS, 0.0)
        sched = make_scheduler(name, random.Random(5))
        assert not {sched.pick(evs).value for _ in range(300)} & {e.value for e in bad}


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError, match="scheduler"):
        make_scheduler("nope", random.Random(1))
    with pytest.raises(ValueError, match="congestion"):
        make_cc(Config(cc="nope"))
    assert set(CONGESTION_CONTROLS) == {"nscc", "nscc-lab", "fixed"}


def lab() -> LabNscc:
    cc = LabNscc(Config(nic_rate_bps=10e9, mss=1000))
    cc.on_rtt_sample(100e-6)  # BDP 125 kB, max window 187.5 kB, target 100 us
    cc.on_ack(0, 100e-6, False, 0.0)  # the first data sample sets the base RTT
    cc.window = 100_000
    return cc


def test_lab_nscc_quadrants() -> None:
    """The project's former NSCC, kept as "nscc-lab" for side-by-side runs."""
    low, high = 110e-6, 250e-6  # delay 10 us (below target) and 150 us (above)
    pi = lab()
    pi.on_ack(10_000, low, False, 1.0)
    fi = lab()
    fi.on_ack(10_000, high, False, 1.0)
    md = lab()
    md.on_ack(10_000, high, True, 1.0)
    nc = lab()
    nc.on_ack(10_000, low, True, 1.0)
    assert pi.window > fi.window > 100_000  # proportional > fair increase
    assert md.window < 100_000  # multiplicative decrease
    assert md.window >= 50_000  # by at most half
    assert nc.window == 100_000  # ECN below target: only switch path


def test_lab_nscc_quick_adapts_on_every_loss() -> None:
    cc = lab()
    for i in range(20):
        cc.on_ack(2000, 110e-6, False, 1.0 + i * 20e-6)
    cc.on_loss(1000, 1.0 + 400e-6)
    assert cc.window < 100_000 - 1000
    for i in range(10_000):
        cc.on_ack(10_000, 100e-6, False, 2.0 + i * 1e-6)
    assert cc.window == cc.max_window()


def test_nscc_ecn_at_zero_rtt_and_zero_target() -> None:
    """A peer can reflect a timestamp equal to now (an RTT of 0); with no host delay the
    target is then 0 as well: an ECN echo must not divide by the zero delay."""
    for cls in (Nscc, LabNscc):
        cc = cls(Config(nic_rate_bps=10e9, mss=1000))
        cc.on_rtt_sample(0.0)
        w = cc.window
        cc.on_ack(1000, 0.0, True, 1.0)
        assert cc.window == w


def test_fixed_window_never_moves() -> None:
    cc = FixedWindow(Config(fixed_window=12345))
    cc.on_loss(1000, 1.0)
    cc.on_ack(1000, 1e-3, True, 1.0)
    assert cc.window == 12345
    assert cc.can_send(12000, 345)
    assert not cc.can_send(12000, 346)


@pytest.mark.parametrize(
    ("wire", "ref", "want"),
    [
        (5, 3, 5),
        (0, MASK32, MASK32 + 1),
        (MASK32, 1 << 32, MASK32),
        (2, (1 << 32) + 1, (1 << 32) + 2),
    ],
)
def test_serial_expand(wire: int, ref: int, want: int) -> None:
    assert expand(wire, ref) == want
