"""The collectives' schedules: which rank sends which chunk to whom at each step, and that
running a schedule on the ranks' data gives every rank the result it must have."""

from __future__ import annotations

import numpy as np
import pytest

from mrc_transport.collective import data
from mrc_transport.collective.algorithms import (
    ALGORITHMS,
    Step,
    Transfer,
    alltoall,
    forwards,
    pairs,
    ring_allgather,
    ring_allreduce,
)


def test_ring_allreduce_of_four_step_by_step() -> None:
    steps = ring_allreduce(4)
    assert len(steps) == 6  # 3 of reduce-scatter, 3 of all-gather
    # reduce-scatter step 0: rank r sends its chunk r to r + 1, which adds it
    assert steps[0] == tuple(Transfer(r, (r + 1) % 4, r, r, "reduce") for r in range(4))
    # its last step: rank r gets chunk r - 3 = r + 1, now summed over all four
    assert [(t.src, t.dst, t.chunk) for t in steps[2]] == [
        (0, 1, 2),
        (1, 2, 3),
        (2, 3, 0),
        (3, 0, 1),
    ]
    # all-gather step 0: rank r passes on the chunk it has whole, r + 1
    assert steps[3] == tuple(
        Transfer(r, (r + 1) % 4, (r + 1) % 4, (r + 1) % 4, "copy") for r in range(4)
    )
    assert [t.chunk for t in steps[5]] == [3, 0, 1, 2]


def test_ring_allgather_and_alltoall_of_three() -> None:
    assert ring_allgather(3) == (
        (Transfer(0, 1, 0, 0, "copy"), Transfer(1, 2, 1, 1, "copy"), Transfer(2, 0, 2, 2, "copy")),
        (Transfer(0, 1, 2, 2, "copy"), Transfer(1, 2, 0, 0, "copy"), Transfer(2, 0, 1, 1, "copy")),
    )
    (step,) = alltoall(3)
    # rank r's chunk j goes to rank j, into its chunk r
    assert sorted((t.src, t.dst, t.chunk, t.into) for t in step) == [
        (0, 1, 1, 0), (0, 2, 2, 0), (1, 0, 0, 1), (1, 2, 2, 1), (2, 0, 0, 2), (2, 1, 1, 2),
    ]  # fmt: skip


@pytest.mark.parametrize("n", [2, 3, 8])
def test_a_ring_rank_sends_one_chunk_and_takes_one_per_step_and_forwards_it(n: int) -> None:
    for steps in (ring_allreduce(n), ring_allgather(n)):
        for step in steps:
            assert sorted(t.src for t in step) == list(range(n))
            assert sorted(t.dst for t in step) == list(range(n))
            assert all(t.dst == (t.src + 1) % n for t in step)
        assert all(forwards(steps, r) for r in range(n))
        assert pairs(steps) == [(r, (r + 1) % n) for r in range(n)]


def test_alltoall_does_not_forward_and_uses_every_ordered_pair() -> None:
    steps = alltoall(8)
    assert len(pairs(steps)) == 56
    assert not forwards(alltoall(3) * 2, 0)  # a rank takes n - 1 chunks in a step


def test_a_schedule_that_sends_another_chunk_does_not_forward() -> None:
    bad: tuple[Step, ...] = (
        (Transfer(0, 1, 0, 0, "copy"), Transfer(1, 0, 1, 1, "copy")),
        (Transfer(0, 1, 0, 0, "copy"), Transfer(1, 0, 0, 0, "copy")),
    )
    assert not forwards(bad, 0)  # rank 0 got chunk 1, then sends chunk 0


def simulate(name: str, n: int, pattern: data.Array, dtype: str, it: int) -> list[data.Array]:
    """The schedule played in memory: every step's sends read before any receive writes."""
    sends = [np.empty_like(pattern) for _ in range(n)]
    results = [np.zeros_like(pattern) for _ in range(n)]
    for r in range(n):
        data.start(name, pattern, dtype, n, r, it, results[r], sends[r])
    size = len(pattern) // n
    for step in ALGORITHMS[name].schedule(n):
        source = sends if name == "alltoall" else results
        moved = [(t, source[t.src][t.chunk * size : (t.chunk + 1) * size].copy()) for t in step]
        for t, part in moved:
            place = results[t.dst][t.into * size : (t.into + 1) * size]
            if t.combine == "reduce":
                np.add(place, part, out=place)
            else:
                place[:] = part
    return results


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("dtype", ["float", "int32"])
@pytest.mark.parametrize("n", [2, 5, 8])
def test_every_rank_ends_with_the_expected_result(name: str, dtype: str, n: int) -> None:
    pattern = data.base(dtype, 64 * n)
    for it in (0, 3):
        results = simulate(name, n, pattern, dtype, it)
        for r, result in enumerate(results):
            assert data.count_wrong(result, data.expected(name, pattern, dtype, n, r, it)) == 0


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_wrong_stale_or_misplaced_chunk_is_counted(name: str) -> None:
    n, dtype = 4, "int32"
    pattern = data.base(dtype, 16 * n)
    results = simulate(name, n, pattern, dtype, 1)
    want = [data.expected(name, pattern, dtype, n, r, 1) for r in range(n)]
    results[2][5] += 1  # one element changed
    assert sum(data.count_wrong(res, w) for res, w in zip(results, want, strict=True)) == 1
    stale = simulate(name, n, pattern, dtype, 0)  # the iteration before's result
    assert data.count_wrong(stale[0], want[0]) == 16 * n
    swapped = np.concatenate([results[1][16:32], results[1][:16], results[1][32:]])
    assert data.count_wrong(swapped, want[1]) == 32  # chunks 0 and 1 in each other's place


def test_the_float_sums_are_exact_up_to_64_ranks() -> None:
    pattern = data.base("float", 1024)
    assert pattern.max() < data.FLOAT_BASE
    worst = int(pattern.max()) + data.offset("float", data.MAX_RANKS - 1, 63)
    assert worst * data.MAX_RANKS < 1 << 24  # float32 is exact for integers below 2^24
    total = data.expected("allreduce", pattern, "float", 64, 0, 63)
    direct = sum(pattern.astype(np.int64) + data.offset("float", r, 63) for r in range(64))
    assert (total.astype(np.int64) == direct).all()


def test_int32_wraps_as_the_sum_does() -> None:
    pattern = data.base("int32", 8)
    assert data.offset("int32", 7, 10**9) == data.offset("int32", 7, 10**9 + (1 << 32))
    total = data.expected("allreduce", pattern, "int32", 3, 0, 5)
    direct = sum(pattern.astype(np.int64) + data.offset("int32", r, 5) for r in range(3))
    assert (total == ((direct + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)).all()
