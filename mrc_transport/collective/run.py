"""One iteration of a collective on a mesh: each rank this process serves a task in its trio
loop, the iteration over when the last of them has its result, then every byte checked
(collective/groups.py runs it in one process or several, the barrier across them).

Theory of operation. A rank's buffer is split into n chunks and a chunk into slices of at
most ``SLICE_BYTES`` (a slice is one MRC message). A ring rank queues its first step's
chunk, then takes its left neighbour's slices in order, adds each into its own chunk or
puts it in place (the step's ``combine``), and passes it straight on to its right
neighbour as part of its next step: the chunk it sends in step s + 1 is the one it got in
step s (algorithms.py ``forwards``), so the ring is a pipeline of slices, as NCCL's is,
and no rank waits for a whole chunk between steps. An all-to-all rank queues every block
to its peer at once and takes its peers' blocks side by side. Slices are copies, so a
slice still unacknowledged never changes under its sender when the rank's buffer does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import trio

from mrc_transport.collective import data
from mrc_transport.collective.algorithms import Algorithm, Step, Transfer, forwards
from mrc_transport.collective.errors import RunFailed
from mrc_transport.collective.links import Link, Mesh

SLICE_BYTES = 1 << 20
"""The most a slice carries: small enough that a ring's pipeline fills fast, large
enough that a message's bookkeeping is a small share of its time (ours)."""
ITERATION_TIMEOUT_S = 120.0
"""An iteration not over by then failed (a connection that never recovered)."""


@dataclass
class Buffers:
    """The data of some of the ranks (those one process serves): what each puts in and where
    its result builds up, allocated once per size and filled anew for each iteration
    (``prepare``)."""

    n: int
    """Ranks in the collective, these and the others."""
    ranks: tuple[int, ...]
    """The ranks these buffers are for, in order."""
    sends: list[data.Array]
    """Each rank's contribution, which all-to-all sends its blocks from (a ring sends
    from its result buffer: none here)."""
    results: list[data.Array]
    """Each rank's result buffer."""

    @classmethod
    def allocate(
        cls, alg: Algorithm, pattern: data.Array, n: int, ranks: Sequence[int] | None = None
    ) -> Buffers:
        mine = tuple(range(n) if ranks is None else ranks)
        sends = [] if alg.ring else [np.empty_like(pattern) for _ in mine]
        return cls(n, mine, sends, [np.empty_like(pattern) for _ in mine])


def prepare(
    alg: Algorithm, pattern: data.Array, dtype: str, iteration: int, buffers: Buffers
) -> Buffers:
    """Every rank's buffers filled for ``iteration`` (collective/data.py ``start``)."""
    for k, r in enumerate(buffers.ranks):
        send = buffers.sends[k] if buffers.sends else None
        data.start(alg.name, pattern, dtype, buffers.n, r, iteration, buffers.results[k], send)
    return buffers


def count_wrong(
    alg: Algorithm, pattern: data.Array, dtype: str, buffers: Buffers, iteration: int
) -> int:
    """Elements of every rank's result that differ from what it must be."""
    n = buffers.n
    wrong = 0
    same = data.expected(alg.name, pattern, dtype, n, 0, iteration) if alg.ring else None
    for r, result in zip(buffers.ranks, buffers.results, strict=True):
        want = (
            same if same is not None else data.expected(alg.name, pattern, dtype, n, r, iteration)
        )
        wrong += data.count_wrong(result, want)
    return wrong


def slices(chunk: int, chunk_bytes: int, slice_bytes: int = SLICE_BYTES) -> list[tuple[int, int]]:
    """Byte ranges [a, b) of chunk ``chunk``'s slices, in order."""
    start = chunk * chunk_bytes
    return [
        (a, min(a + slice_bytes, start + chunk_bytes))
        for a in range(start, start + chunk_bytes, slice_bytes)
    ]


async def iteration(
    alg: Algorithm, steps: Sequence[Step], mesh: Mesh, buffers: Buffers, slice_bytes: int
) -> tuple[float, float]:
    """Run the collective once on every rank of ``buffers`` (the mesh holds their links);
    the monotonic times of their first start and their last end. RunFailed when it does
    not end within ITERATION_TIMEOUT_S."""
    chunk_bytes = buffers.results[0].nbytes // buffers.n
    t0 = time.monotonic()
    with trio.move_on_after(ITERATION_TIMEOUT_S) as scope:
        async with trio.open_nursery() as nursery:
            for k, r in enumerate(buffers.ranks):
                ring = _RingRank(r, steps, mesh, chunk_bytes, slice_bytes)
                result = buffers.results[k]
                if alg.ring:
                    nursery.start_soon(ring.run, result)
                else:
                    nursery.start_soon(_alltoall_rank, ring, buffers.sends[k], result)
    if scope.cancelled_caught:
        raise RunFailed(f"an iteration did not end within {ITERATION_TIMEOUT_S:g} s")
    return t0, time.monotonic()


class _RingRank:
    """One rank's part: its transfers per step and its links."""

    def __init__(
        self, rank: int, steps: Sequence[Step], mesh: Mesh, chunk_bytes: int, slice_bytes: int
    ) -> None:
        self.rank, self.steps, self.mesh = rank, steps, mesh
        self.chunk_bytes, self.slice_bytes = chunk_bytes, slice_bytes

    def _slices(self, chunk: int) -> list[tuple[int, int]]:
        return slices(chunk, self.chunk_bytes, self.slice_bytes)

    def _mine(self, step: Step, sending: bool) -> Transfer:
        return next(t for t in step if (t.src if sending else t.dst) == self.rank)

    async def run(self, result: data.Array) -> None:
        """Send the first step's chunk, then take each step's slices, combine them and
        pass each on in the next step."""
        assert forwards(tuple(self.steps), self.rank)
        view = result.data.cast("B")
        first = self._mine(self.steps[0], sending=True)
        out = self.mesh.out[(self.rank, first.dst)]
        for a, b in self._slices(first.chunk):
            out.send(bytes(view[a:b]))
        for s, step in enumerate(self.steps):
            got = self._mine(step, sending=False)
            inn = self.mesh.into[(got.src, self.rank)]
            last = s == len(self.steps) - 1
            for a, b in self._slices(got.into):
                msg = await inn.receive(b - a)
                _combine(result, view, a, b, msg, got)
                inn.recycle(msg)
                if not last:
                    out.send(bytes(view[a:b]))


def _combine(
    result: data.Array, view: memoryview, a: int, b: int, msg: bytearray, t: Transfer
) -> None:
    """A received slice into the rank's buffer at bytes [a, b): added or put in place."""
    if t.combine == "copy":
        view[a:b] = msg
        return
    size = result.itemsize
    part = result[a // size : b // size]
    np.add(part, np.frombuffer(msg, dtype=result.dtype), out=part)


async def _alltoall_rank(rank: _RingRank, send: data.Array, result: data.Array) -> None:
    """Queue every block to its peer, take every peer's block into its place."""
    source, view = send.data.cast("B"), result.data.cast("B")
    transfers = [t for step in rank.steps for t in step]
    for t in transfers:
        if t.src == rank.rank:
            out = rank.mesh.out[(t.src, t.dst)]
            for a, b in rank._slices(t.chunk):
                out.send(bytes(source[a:b]))
    async with trio.open_nursery() as nursery:
        for t in transfers:
            if t.dst == rank.rank:
                inn = rank.mesh.into[(t.src, t.dst)]
                nursery.start_soon(_take, inn, view, rank._slices(t.into))


async def _take(inn: Link, view: memoryview, ranges: list[tuple[int, int]]) -> None:
    for a, b in ranges:
        msg = await inn.receive(b - a)
        view[a:b] = msg
        inn.recycle(msg)
