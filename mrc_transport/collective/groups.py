"""The ranks of a collective, served by this process or split over worker processes.

Theory of operation. One trio loop serving every rank is one core, and at the lab's rates
an 8-rank ring's MRC ends need more than that (docs/collectives.md). So the ranks are split
into groups, contiguous in ring order (``split``), each served by a process of its own
(spawned: a fresh interpreter, not a copy of this one), as `mrc perf --pairs` packs flows
one process per CPU. A group holds its ranks' transport ends, links and buffers and runs
their part of a step (``LocalGroup``; ``WorkerGroup`` asks a worker to, over a pipe).
``Ranks`` drives every group in lockstep, a command sent to all and answered by all:

1. open: each group opens its hosts' MRC endpoints (or TCP listeners), so every process
   listens before any connects;
2. mesh: each connects the pairs its ranks send over and accepts those they receive over;
   over when every group's links are up (no rank starts before every rank can send);
3. size: buffers for a size; prepare i: every rank's data for step i (before the clock);
4. run i: every group runs its ranks and answers with their first start, their last end
   (CLOCK_MONOTONIC: one clock for every process) and their wrong elements; the step runs
   from the earliest start to the latest end and is over when the last rank has its result
   (the barrier);
5. close: the workers close their endpoints, say how much CPU they used, and exit.

With one group (``--procs 1``) it runs in this process's loop, not in a worker.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, Protocol

import trio

from mrc_transport.collective import data
from mrc_transport.collective.algorithms import ALGORITHMS, Algorithm, pairs
from mrc_transport.collective.errors import RunFailed, first_leaf
from mrc_transport.collective.links import Mesh, Placement, Transport, open_transport
from mrc_transport.collective.run import SLICE_BYTES, Buffers, count_wrong, iteration, prepare

CLOSE_GRACE_S = 5.0
"""How long a worker may take to close its endpoints and exit before it is killed (one in
the middle of a step, after a Ctrl-C, does not read its pipe until the step ends)."""


def default_procs(ranks: int) -> int:
    """A process per CPU, at most one per rank."""
    return max(1, min(os.cpu_count() or 1, ranks))


def split(ranks: int, procs: int) -> list[tuple[int, ...]]:
    """Ranks 0..ranks-1 in ``procs`` contiguous groups whose sizes differ by one at most."""
    if not 1 <= procs <= ranks:
        raise ValueError(f"{procs} processes for {ranks} ranks: give 1 to {ranks}")
    return [tuple(range(k * ranks // procs, (k + 1) * ranks // procs)) for k in range(procs)]


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """What one group serves and how (pickled to its worker)."""

    alg: str
    """The collective's name (collective/algorithms.py ``ALGORITHMS``)."""
    where: Placement
    """The lab and every rank's host."""
    ranks: tuple[int, ...]
    """This group's ranks."""
    transport: str
    """mrc, mptcp or tcp."""
    dtype: str = "float"
    """float or int32."""
    slice_bytes: int = SLICE_BYTES
    """The most one message (one TCP write) carries."""
    seed: int | None = None
    """The MRC endpoints' random numbers (rank i's: seed + i)."""
    cookie: int = 0
    """The run's cookie, the same in every group (links.py ``HELLO``)."""


class RankWork(Protocol):
    """A sweep's or a loop's config: what every group is told."""

    @property
    def alg(self) -> Algorithm: ...
    @property
    def transport(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def slice_bytes(self) -> int: ...
    @property
    def seed(self) -> int | None: ...


def spec_for(cfg: RankWork, where: Placement) -> GroupSpec:
    """The groups' spec of a sweep or a loop (each group's ranks filled in by
    ``open_ranks``)."""
    return GroupSpec(cfg.alg.name, where, (), cfg.transport, cfg.dtype, cfg.slice_bytes, cfg.seed)


class Group(Protocol):
    """Some of the ranks, open, wherever they are served."""

    async def mesh(self) -> None: ...
    async def unmesh(self) -> None: ...
    async def size(self, size: int) -> None: ...
    async def prepare(self, i: int) -> None: ...
    async def run(self, i: int) -> tuple[float, float, int]: ...


class LocalGroup:
    """A group served by this process's trio loop."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.alg = ALGORITHMS[spec.alg]
        self.n = len(spec.where.hosts)
        self.plan = self.alg.schedule(self.n)
        self._transport: Transport | None = None
        self._mesh: Mesh | None = None
        self._pattern: data.Array | None = None
        self._buffers: Buffers | None = None

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[LocalGroup]:
        """Its hosts' transport ends open for the duration of the block (entered in the
        task that serves the group: the endpoints' nurseries live in it)."""
        s = self.spec
        async with open_transport(s.transport, s.where, s.seed, frozenset(s.ranks), s.cookie) as t:
            self._transport = t
            try:
                yield self
            finally:
                await self.unmesh()
                self._transport = None

    async def mesh(self) -> None:
        assert self._transport is not None
        assert self._mesh is None
        self._mesh = await self._transport.mesh(pairs(self.plan))

    async def unmesh(self) -> None:
        if self._transport is not None and self._mesh is not None:
            self._transport.close(self._mesh)
        self._mesh = None

    async def size(self, size: int) -> None:
        self._pattern = data.base(self.spec.dtype, size // data.ELEMENT_BYTES)
        self._buffers = Buffers.allocate(self.alg, self._pattern, self.n, self.spec.ranks)

    async def prepare(self, i: int) -> None:
        assert self._pattern is not None
        assert self._buffers is not None
        prepare(self.alg, self._pattern, self.spec.dtype, i, self._buffers)

    async def run(self, i: int) -> tuple[float, float, int]:
        """Step i on this group's ranks (prepared): first start, last end, wrong elements."""
        assert self._mesh is not None
        assert self._pattern is not None
        assert self._buffers is not None
        bufs = self._buffers
        t0, t1 = await iteration(self.alg, self.plan, self._mesh, bufs, self.spec.slice_bytes)
        return t0, t1, count_wrong(self.alg, self._pattern, self.spec.dtype, bufs, i)


class WorkerGroup:
    """A group served by a worker process; each call is a command over its pipe."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        spawn = multiprocessing.get_context("spawn")
        self._conn, theirs = spawn.Pipe()
        name = f"mrc-collective-ranks-{spec.ranks[0]}-{spec.ranks[-1]}"
        self._proc = spawn.Process(target=_serve, args=(theirs, spec), name=name, daemon=True)
        self._proc.start()
        theirs.close()
        self._seq = 0
        """The last command's number (the open is 0): its answer is the one awaited, an
        earlier one's (a call cancelled mid-way, a Ctrl-C) is read and dropped."""

    async def open(self) -> None:
        await self._answer()  # the worker opens as it starts and says when it has

    async def mesh(self) -> None:
        await self._call("mesh")

    async def unmesh(self) -> None:
        await self._call("unmesh")

    async def size(self, size: int) -> None:
        await self._call("size", size)

    async def prepare(self, i: int) -> None:
        await self._call("prepare", i)

    async def run(self, i: int) -> tuple[float, float, int]:
        t0, t1, wrong = await self._call("run", i)
        return float(t0), float(t1), int(wrong)

    async def _call(self, cmd: str, *args: Any) -> Any:
        self._seq += 1
        try:
            self._conn.send((self._seq, cmd, args))
        except OSError:
            raise await self._gone() from None
        return await self._answer()

    async def _answer(self) -> Any:
        """The answer to command ``_seq``: its value, or RunFailed with the worker's line."""
        while True:
            while not self._conn.poll():
                await trio.lowlevel.wait_readable(self._conn.fileno())
            try:
                seq, status, value = self._conn.recv()
            except (EOFError, OSError):
                raise await self._gone() from None
            if seq == self._seq:
                break
        if status != "ok":
            raise RunFailed(str(value))
        return value

    async def _gone(self) -> RunFailed:
        """The worker's pipe broke: it ended (reaped in a thread: the loop serves on)."""
        await trio.to_thread.run_sync(self._proc.join, 1.0)
        return RunFailed(
            f"the process serving ranks {_span(self.spec.ranks)} ended "
            f"(exit code {self._proc.exitcode})"
        )

    async def aclose(self) -> float | None:
        """Ask the worker to close and wait for it, killed after CLOSE_GRACE_S; its CPU
        seconds (None if it did not say)."""
        cpu: float | None = None
        with trio.move_on_after(CLOSE_GRACE_S):
            with suppress(RunFailed):
                cpu = float(await self._call("close"))
        await trio.to_thread.run_sync(self._reap)
        return cpu

    def _reap(self) -> None:
        self._proc.join(1.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()


def _span(ranks: Sequence[int]) -> str:
    return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])


def _serve(conn: Connection, spec: GroupSpec) -> None:
    """A worker's life: a Ctrl-C at the terminal is the parent's to handle (it closes the
    workers), so it is ignored here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    trio.run(_serve_commands, conn, spec)


async def _serve_commands(conn: Connection, spec: GroupSpec) -> None:
    """Open, answer, then each command in turn until close (or the parent's end of the
    pipe closes); a failure is answered with its one line and ends the worker."""
    seq = 0
    try:
        async with LocalGroup(spec).opened() as group:
            conn.send((seq, "ok", None))
            while (cmd := await _command(conn)) is not None and cmd[1] != "close":
                seq, name, args = cmd
                conn.send((seq, "ok", await getattr(group, name)(*args)))
        if cmd is not None:
            t = os.times()
            conn.send((cmd[0], "ok", t.user + t.system))
    except BaseException as exc:
        _tell_failure(conn, seq, exc)


async def _command(conn: Connection) -> tuple[int, str, tuple[Any, ...]] | None:
    """The parent's next command (number, name, arguments); None when it has closed its
    end."""
    while not conn.poll():
        await trio.lowlevel.wait_readable(conn.fileno())
    try:
        cmd: tuple[int, str, tuple[Any, ...]] = conn.recv()
    except EOFError:
        return None
    return cmd


def _tell_failure(conn: Connection, seq: int, exc: BaseException) -> None:
    """The parent's answer to command ``seq``: the failure's one line."""
    if isinstance(exc, BaseExceptionGroup):
        exc = first_leaf(exc)
    line = str(exc) if isinstance(exc, RunFailed | OSError) else f"{type(exc).__name__}: {exc}"
    with suppress(OSError):
        conn.send((seq, "failed", line))


class Ranks:
    """Every group, driven in lockstep."""

    def __init__(self, groups: Sequence[Group]) -> None:
        self.groups = list(groups)
        self.worker_cpu_s: list[float] = []
        """The workers' CPU seconds, known once they have closed."""

    async def each(self, name: str, *args: Any) -> list[Any]:
        """``name(*args)`` in every group at once; their answers in order (the first
        failure, one RunFailed, when a group fails)."""
        out: list[Any] = [None] * len(self.groups)

        async def one(k: int) -> None:
            out[k] = await getattr(self.groups[k], name)(*args)

        try:
            async with trio.open_nursery() as nursery:
                for k in range(len(self.groups)):
                    nursery.start_soon(one, k)
        except BaseExceptionGroup as group:
            failed, rest = group.split(RunFailed)
            if failed is None or rest is not None:
                raise
            raise first_leaf(failed) from None
        return out

    async def mesh(self) -> None:
        """Every group's links up."""
        await self.each("mesh")

    async def unmesh(self) -> None:
        await self.each("unmesh")

    async def size(self, size: int) -> None:
        await self.each("size", size)

    async def step(self, i: int) -> tuple[float, float, int]:
        """Step i: every rank prepared, then every rank run; the first start, the last end
        and the wrong elements of all."""
        await self.each("prepare", i)
        got: list[tuple[float, float, int]] = await self.each("run", i)
        return min(g[0] for g in got), max(g[1] for g in got), sum(g[2] for g in got)


@asynccontextmanager
async def open_ranks(spec: GroupSpec, procs: int) -> AsyncIterator[Ranks]:
    """The ranks of ``spec.where`` split over ``procs`` processes (1: this one), every group
    open, for the duration of the block; closed (the workers reaped) after, even on error."""
    spec = replace(spec, cookie=spec.cookie or secrets.randbits(32))
    n = len(spec.where.hosts)
    if procs == 1:
        async with LocalGroup(replace(spec, ranks=tuple(range(n)))).opened() as group:
            yield Ranks([group])
        return
    workers = [WorkerGroup(replace(spec, ranks=r)) for r in split(n, procs)]
    ranks = Ranks(workers)
    try:
        await ranks.each("open")  # each worker opens as it starts
        yield ranks
    finally:
        with trio.CancelScope(shield=True):
            for worker in workers:
                cpu = await worker.aclose()
                if cpu is not None:
                    ranks.worker_cpu_s.append(cpu)
