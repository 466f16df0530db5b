"""The collectives as schedules: which rank sends which chunk to whom at each step.

Theory of operation. A collective over n ranks splits each rank's buffer into n chunks
and runs as a list of steps; in a step every rank sends some chunks and receives some,
each received chunk either added into its own (``reduce``) or put in its place (``copy``).

- ring all-reduce (NCCL's ring, doc/PERFORMANCE.md of nccl-tests): n-1 steps of
  reduce-scatter, in step s rank r sends chunk (r - s) to rank r + 1 and adds the chunk
  (r - s - 1) it gets from rank r - 1 into its own, after which rank r holds the whole sum
  of chunk (r + 1); then n-1 steps of all-gather pass the summed chunks on around the
  ring, in step s rank r sending chunk (r + 1 - s) and keeping chunk (r - s). Each rank
  sends 2(n-1)/n of its buffer: the bus-bandwidth factor.
- ring all-gather: rank r starts with chunk r; n-1 steps, in step s rank r sends chunk
  (r - s) and keeps chunk (r - s - 1). Each rank sends (n-1)/n of the result.
- all-to-all: one step, rank r sends its chunk j to rank j for every j != r and keeps
  chunk r; the chunk it gets from rank j goes to its position j. (n-1)/n of the buffer
  leaves each rank.

In both rings the chunk a rank sends in step s + 1 is the one it received in step s, so a
chunk can go on slice by slice as its slices arrive (NCCL pipelines its ring the same
way): ``forwards`` says so, and the runner (collective/run.py) relies on it.

Pure: no IO.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Combine = Literal["reduce", "copy"]


@dataclass(frozen=True, slots=True)
class Transfer:
    """One chunk from one rank to another in one step."""

    src: int
    """The sending rank."""
    dst: int
    """The receiving rank."""
    chunk: int
    """Which of the sender's n chunks it sends."""
    into: int
    """Which of the receiver's chunks it lands in (a ring's: the same; all-to-all's: the
    sender's rank)."""
    combine: Combine
    """What the receiver does with it: add it into its own chunk, or take it as it is."""


Step = tuple[Transfer, ...]
"""Every transfer of one step, which run at the same time."""


def ring_allreduce(n: int) -> tuple[Step, ...]:
    """Reduce-scatter then all-gather around the ring 0 -> 1 -> ... -> n-1 -> 0."""
    scatter = tuple(_ring_step(n, -s, "reduce") for s in range(n - 1))
    gather = tuple(_ring_step(n, 1 - s, "copy") for s in range(n - 1))
    return scatter + gather


def ring_allgather(n: int) -> tuple[Step, ...]:
    """Each rank's chunk passed on around the ring until every rank has every chunk."""
    return tuple(_ring_step(n, -s, "copy") for s in range(n - 1))


def alltoall(n: int) -> tuple[Step, ...]:
    """One step: chunk j of every rank to rank j, into its chunk r."""
    return (tuple(Transfer(r, j, j, r, "copy") for r in range(n) for j in range(n) if j != r),)


def _ring_step(n: int, offset: int, combine: Combine) -> Step:
    """Every rank r sends chunk r + offset (mod n) to rank r + 1, into the same chunk."""
    chunks = [(r + offset) % n for r in range(n)]
    return tuple(Transfer(r, (r + 1) % n, c, c, combine) for r, c in enumerate(chunks))


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One collective as nccl-tests names and measures it."""

    name: str
    """`mrc collective NAME`."""
    nccl: str
    """nccl-tests' program for it (all_reduce_perf ...)."""
    schedule: Callable[[int], tuple[Step, ...]]
    """The steps for n ranks."""
    redop: str
    """The table's redop column: "sum", or "none" where nothing is reduced."""
    bus_factor: Callable[[int], float]
    """busbw = algbw x this, for n ranks (nccl-tests' doc/PERFORMANCE.md)."""
    count_divisor: Callable[[int], int]
    """The table's count column is size / element size / this (nccl-tests prints the
    count a rank passes to NCCL: the whole buffer for all-reduce, a rank's part for
    all-gather and all-to-all)."""

    @property
    def ring(self) -> bool:
        """Its steps form a ring (each rank sends to one and receives from one)."""
        return self.name != "alltoall"


ALGORITHMS: Mapping[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("allreduce", "all_reduce_perf", ring_allreduce, "sum",
                  lambda n: 2 * (n - 1) / n, lambda n: 1),
        Algorithm("allgather", "all_gather_perf", ring_allgather, "none",
                  lambda n: (n - 1) / n, lambda n: n),
        Algorithm("alltoall", "alltoall_perf", alltoall, "none",
                  lambda n: (n - 1) / n, lambda n: n),
    )
}  # fmt: skip
"""Every collective by its name."""


def pairs(steps: tuple[Step, ...]) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs the steps send over, each once, in first-use order: the
    connections a run opens."""
    seen: dict[tuple[int, int], None] = {}
    for step in steps:
        for t in step:
            seen.setdefault((t.src, t.dst), None)
    return list(seen)


def forwards(steps: tuple[Step, ...], rank: int) -> bool:
    """In every step after the first, ``rank`` sends exactly the chunk it received in the
    step before (a ring that can pipeline)."""
    for before, after in itertools.pairwise(steps):
        got = [t.into for t in before if t.dst == rank]
        sends = [t.chunk for t in after if t.src == rank]
        if len(got) != 1 or got != sends:
            return False
    return True
