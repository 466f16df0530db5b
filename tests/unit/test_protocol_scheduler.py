"""Spraying schedulers: planes in weighted turn with a random EV inside (default), rr, reps."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from mrc_transport.protocol.config import Config
from mrc_transport.protocol.ev import Ev, EvInput, EvSet
from mrc_transport.protocol.scheduler import (
    SCHEDULERS,
    RandomScheduler,
    RepsScheduler,
    RoundRobinScheduler,
    make_scheduler,
)
from tests.unit.helpers import paths

PER_PLANE = 16


def evset(planes: int = 2, backup: int = 0) -> EvSet:
    """``PER_PLANE`` active EVs on each plane; no backups unless asked, so a retired EV
    really leaves its plane with one usable EV fewer."""
    cfg = Config(ev_count=PER_PLANE * planes, ev_backup=backup, ev_min_active=1)
    return EvSet(paths(planes), cfg, random.Random(1), 1, lambda e: None)


def deny(evs: EvSet, plane: int, n: int) -> list[Ev]:
    """Take ``n`` usable EVs of ``plane`` out of use (no path cascade, no replacement)."""
    gone = list(evs.usable_in(plane)[:n])
    for ev in gone:
        evs.deny(ev.value, 0.0)
    return gone


def planes_of(sched: RandomScheduler, evs: EvSet, n: int) -> list[int]:
    return [sched.pick(evs).plane for _ in range(n)]


# -- the default scheduler: planes in weighted turn ----------------------------------------
def test_default_is_random_and_registered() -> None:
    assert Config().scheduler == "random"
    want = {"random": RandomScheduler, "rr": RoundRobinScheduler, "reps": RepsScheduler}
    assert want == SCHEDULERS
    for name, cls in SCHEDULERS.items():
        assert type(make_scheduler(name, random.Random(1))) is cls


def test_equal_planes_alternate_strictly() -> None:
    """Equal weights: plane 0, 1, 0, 1... (a random plane would repeat within 40 picks
    with probability 1 - 2**-39)."""
    evs = evset()
    got = planes_of(RandomScheduler(random.Random(2), equal=False), evs, 40)
    assert all(a != b for a, b in itertools.pairwise(got))
    assert Counter(got) == {0: 20, 1: 20}


def test_three_planes_take_turns() -> None:
    evs = evset(planes=3)
    got = planes_of(RandomScheduler(random.Random(2), equal=False), evs, 30)
    for i in range(0, 30, 3):
        assert sorted(got[i : i + 3]) == [0, 1, 2]


def test_planes_are_loaded_exactly_equally_by_default() -> None:
    """Paper section 4: the planes' load kept equal (an unequal one makes a false incast
    at the busier planes' last hops): 16 usable EVs against 4, still 1:1 in every turn,
    and a plane with no usable EV gets nothing."""
    evs = evset()
    deny(evs, 1, PER_PLANE - 4)
    sched = make_scheduler("random", random.Random(2))
    assert isinstance(sched, RandomScheduler)
    got = planes_of(sched, evs, 200)
    for i in range(0, 200, 2):
        assert sorted(got[i : i + 2]) == [0, 1]
    deny(evs, 1, 4)
    assert set(planes_of(sched, evs, 50)) == {0}


def test_a_plane_with_retired_evs_gets_proportionally_less() -> None:
    """With a window per plane (the option), weights are usable EVs: 16 against 4 is
    exactly 4:1 in every turn of 20 picks."""
    evs = evset()
    deny(evs, 1, PER_PLANE - 4)
    assert [len(evs.usable_in(p)) for p in (0, 1)] == [PER_PLANE, 4]
    got = planes_of(RandomScheduler(random.Random(2), equal=False), evs, 200)
    for i in range(0, 200, 20):
        assert Counter(got[i : i + 20]) == {0: 16, 1: 4}
    # smooth: the light plane's packets are spread out, never back to back
    assert all(not (a == b == 1) for a, b in itertools.pairwise(got))


def test_a_plane_with_no_usable_ev_gets_nothing_until_readmitted() -> None:
    evs = evset()
    sched = RandomScheduler(random.Random(2), equal=False)
    gone = list(evs.usable_in(1))
    evs.port_down(gone[0].plane, 0.0)  # retired, not denied: EvSet.fallback would take them
    assert evs.usable_in(1) == []
    assert set(planes_of(sched, evs, 100)) == {0}
    # probed and readmitted: one EV
    for _ in range(evs.cfg.readmit_probes):
        evs.probe_ok(gone[0], 0.0)
    assert evs.usable_in(1) == [gone[0]]
    got = planes_of(sched, evs, 17 * 10)
    assert got.count(1) == 10  # weight 1 against 16
    assert {e.value for e in (sched.pick(evs) for _ in range(300)) if e.plane == 1} == {
        gone[0].value
    }


def test_weights_follow_the_usable_evs_as_they_change() -> None:
    evs = evset()
    sched = RandomScheduler(random.Random(2), equal=False)
    assert Counter(planes_of(sched, evs, 32)) == {0: 16, 1: 16}
    deny(evs, 0, 8)
    got = planes_of(sched, evs, 24 * 5)
    assert Counter(got) == {0: 8 * 5, 1: 16 * 5}


def test_no_usable_ev_at_all_falls_back() -> None:
    evs = evset()
    sched = RandomScheduler(random.Random(2), equal=False)
    skipped = evs.usable_in(0)[0]
    evs.apply(skipped, EvInput.ECN, 0.0)
    deny(evs, 0, PER_PLANE)
    deny(evs, 1, PER_PLANE)
    assert not evs.usable
    assert sched.pick(evs) is skipped  # EvSet.fallback: a skipped EV first


# -- the default scheduler: a random EV inside the plane ------------------------------------
def test_evs_inside_a_plane_are_random_and_cover_the_plane() -> None:
    evs = evset()
    sched = RandomScheduler(random.Random(5))
    picks = [sched.pick(evs) for _ in range(3200)]
    for plane in (0, 1):
        mine = Counter(e.value for e in picks if e.plane == plane)
        assert set(mine) == {e.value for e in evs.usable_in(plane)}
        # 1600 picks over 16 EVs: 100 each on average; a fixed rotation would give
        # exactly 100, independent uniform picks a spread (binomial sd ~9.7)
        assert all(60 <= c <= 140 for c in mine.values())
        assert len(set(mine.values())) > 1
    # not a rotation: an EV comes back before every other EV of its plane was used
    plane0 = [e.value for e in picks if e.plane == 0][:PER_PLANE]
    assert len(set(plane0)) < PER_PLANE


def test_same_seed_same_picks_other_seed_other_picks() -> None:
    evs = evset()

    def run(seed: int) -> list[int]:
        sched = RandomScheduler(random.Random(seed))
        return [sched.pick(evs).value for _ in range(64)]

    assert run(9) == run(9)
    assert run(9) != run(10)


def test_a_retransmission_avoids_its_old_ev() -> None:
    evs = evset()
    sched = RandomScheduler(random.Random(2), equal=False)
    for old in evs.usable[:8]:
        assert all(sched.pick(evs, avoid=old) is not old for _ in range(200))


def test_only_usable_evs_of_the_plane_are_picked() -> None:
    evs = evset()
    gone = {e.value for e in deny(evs, 0, 5)}
    evs.apply(evs.usable_in(1)[0], EvInput.ECN, 0.0)  # SKIP: not usable either
    sched = RandomScheduler(random.Random(2), equal=False)
    picked = {sched.pick(evs).value for _ in range(2000)}
    assert picked == set(evs.usable_values())
    assert not picked & gone


def test_usable_in_tracks_retirement_and_readmission() -> None:
    evs = evset()
    ev = evs.usable_in(1)[3]
    evs.apply(ev, EvInput.LOSS, 0.0)
    assert ev not in evs.usable_in(1)
    assert len(evs.usable_in(1)) == PER_PLANE - 1
    for _ in range(evs.cfg.readmit_probes):
        evs.probe_ok(ev, 0.0)
    assert ev in evs.usable_in(1)
    assert sorted(e.value for p in evs.planes for e in evs.usable_in(p)) == sorted(
        e.value for e in evs.usable
    )
    assert evs.usable_in(7) == []


# -- rr and reps ----------------------------------------------------------------------------
def test_rr_takes_the_usable_evs_in_turn() -> None:
    evs = evset()
    sched = make_scheduler("rr", random.Random(3))
    n = len(evs.usable)
    picks = [sched.pick(evs) for _ in range(3 * n)]
    assert picks[:n] == picks[n : 2 * n] == picks[2 * n :]
    assert sorted(e.value for e in picks[:n]) == sorted(e.value for e in evs.usable)
    assert [e.value for e in picks[:n]] == [evs.usable[(i + 1) % n].value for i in range(n)]


def test_rr_skips_the_ev_to_avoid() -> None:
    evs = evset()
    sched = make_scheduler("rr", random.Random(3))
    nxt = evs.usable[1]
    assert sched.pick(evs, avoid=nxt) is evs.usable[2]


def test_reps_recycles_clean_evs_then_explores_planes_in_turn() -> None:
    evs = evset(backup=2)  # b's backup takes its place: both planes stay at 16
    sched = make_scheduler("reps", random.Random(3))
    a, b, c = evs.usable_in(0)[0], evs.usable_in(0)[1], evs.usable_in(1)[0]
    for ev in (a, b, c):
        sched.on_clean_ack(ev)
    evs.apply(b, EvInput.LOSS, 0.0)  # retired meanwhile: not recycled
    assert sched.pick(evs, avoid=c) is a  # c is the one to avoid: dropped from the queue
    explored = [sched.pick(evs).plane for _ in range(20)]  # nothing left to recycle
    assert Counter(explored) == {0: 10, 1: 10}
    assert all(x != y for x, y in itertools.pairwise(explored))


def test_unknown_scheduler_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown scheduler 'spray'; known: \['random', 'reps', "
        r"'rr'\]",
    ):
        make_scheduler("spray", random.Random(1))


# -- a busy local port (the IO layer's backpressure) ----------------------------------------
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_a_busy_port_gets_nothing_while_another_is_free(name: str) -> None:
    evs = evset(planes=3)
    sched = make_scheduler(name, random.Random(4))
    for ev in evs.usable_in(1)[:4]:
        sched.on_clean_ack(ev)  # reps would recycle these first
    evs.ports_busy.add(1)
    got = Counter(sched.pick(evs).plane for _ in range(300))
    assert got[1] == 0
    assert got[0] > 100
    assert got[2] > 100
    evs.ports_busy.discard(1)
    assert {sched.pick(evs).plane for _ in range(30)} == {0, 1, 2}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_every_port_busy_sprays_as_usual(name: str) -> None:
    """The IO layer queues per port: nothing is lost by picking a busy one."""
    evs = evset(planes=2)
    evs.ports_busy.update({0, 1})
    sched = make_scheduler(name, random.Random(5))
    assert Counter(sched.pick(evs).plane for _ in range(64)) == {0: 32, 1: 32}


def test_usable_planes_leave_out_busy_ports_and_empty_planes() -> None:
    evs = evset(planes=3)
    deny(evs, 2, PER_PLANE)
    assert evs.usable_planes() == [0, 1]
    evs.ports_busy.add(0)
    assert evs.usable_planes() == [1]
    evs.ports_busy.add(1)
    assert evs.usable_planes() == [0, 1]
