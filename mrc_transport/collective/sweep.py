"""`mrc collective NAME`: nccl-tests' sweep of sizes on a lab's hosts, its table line by line.

Theory of operation. The ranks' mesh is made once (collective/links.py); then for each
size, from -b to -e by -f, -w warm-up iterations and -n timed ones, each on fresh data
(collective/data.py: a rank's contribution depends on the iteration), each followed by a
check of every element of every rank's result. A row is the timed iterations' mean time,
its algbw and busbw (collective/bandwidth.py) and the wrong elements of all iterations.
The ranks are served by one process per CPU (collective/groups.py), ``procs`` in all; the
CPUs are sampled over the whole sweep (harness/machine.py), so a busy machine shows in the
figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from labs.units import format_size
from mrc_transport.collective import bandwidth, data, table
from mrc_transport.collective.algorithms import Algorithm
from mrc_transport.collective.groups import Ranks, open_ranks, spec_for
from mrc_transport.collective.links import Placement
from mrc_transport.collective.run import SLICE_BYTES
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.machine import CpuUse, cpu_times, cpu_use, with_workers

MAX_FACTOR = 1 << 10
MAX_BUFFER_BYTES = 1 << 30
"""The most all ranks' buffers may hold together (each rank keeps its contribution and its
result)."""


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """One `mrc collective NAME` run."""

    alg: Algorithm
    """The collective."""
    sizes: tuple[int, ...]
    """Bytes, in order (``size_steps``)."""
    iters: int = 5
    """Timed iterations per size (nccl-tests' -n)."""
    warmup: int = 1
    """Untimed iterations before them (-w)."""
    dtype: str = "float"
    """float or int32 (-d)."""
    transport: str = "mrc"
    """mrc, mptcp or tcp."""
    slice_bytes: int = SLICE_BYTES
    """The most one message (MRC) or write (TCP) carries."""
    seed: int | None = None
    """The MRC endpoints' random numbers (spraying), for a repeatable run."""
    procs: int = 1
    """Processes serving the ranks (1: this one; collective/groups.py)."""


@dataclass
class SweepResult:
    """What a sweep measured."""

    rows: list[table.Row] = field(default_factory=list)
    """A row per size."""
    ideal_busbw: float = 0.0
    """The fabric's ideal busbw for the largest size, GB/s."""
    cpu: CpuUse | None = None
    """The CPUs over the sweep."""


def size_steps(low: int, high: int, factor: int) -> tuple[int, ...]:
    """-b, -e, -f: low, low x factor, ... up to high (nccl-tests' step factor)."""
    if low <= 0 or high < low:
        raise HarnessError(f"-b {low} -e {high}: sizes need 0 < MIN <= MAX")
    if not 2 <= factor <= MAX_FACTOR:
        raise HarnessError(f"-f must be an integer in 2..{MAX_FACTOR}, not {factor}")
    out = [low]
    while out[-1] * factor <= high:
        out.append(out[-1] * factor)
    return tuple(out)


def check_sizes(sizes: Sequence[int], ranks: int) -> None:
    """Every size splits into n chunks of whole elements, and all buffers fit in memory;
    HarnessError naming the first size that does not."""
    unit = data.ELEMENT_BYTES * ranks
    for size in sizes:
        if size % unit:
            raise HarnessError(
                f"size {size} is not a multiple of {unit} bytes (4-byte elements in {ranks} "
                f"chunks, one per rank): pick sizes that are, e.g. {max(unit, size // unit * unit)}"
            )
    biggest = max(sizes) * ranks * 2
    if biggest > MAX_BUFFER_BYTES:
        raise HarnessError(
            f"-e {max(sizes)}: {ranks} ranks' buffers would take {format_size(biggest, 0)}, "
            f"more than {format_size(MAX_BUFFER_BYTES, 0)}"
        )


def preamble(cfg: SweepConfig, where: Placement) -> list[str]:
    """nccl-tests' opening comment lines, with what runs where."""
    sizes = cfg.sizes
    factor = sizes[1] // sizes[0] if len(sizes) > 1 else 2
    lines = [
        f"# mrc collective {cfg.alg.name} (nccl-tests' {cfg.alg.nccl}) over {cfg.transport}, "
        f"lab {where.lab}: {len(where.hosts)} ranks, {_processes(cfg.procs)}",
        f"# minBytes {sizes[0]} maxBytes {sizes[-1]} step: {factor}(factor) warmup iters: "
        f"{cfg.warmup} iters: {cfg.iters} validation: 1",
        "#",
        "# Using hosts",
    ]
    for rank, host in enumerate(where.hosts):
        lines.append(f"#  Rank {rank:2d} on {host:>4} (rack {where.topo.rack_of(host)})")
    return [*lines, *table.header()]


def _processes(procs: int) -> str:
    return "one process" if procs == 1 else f"{procs} processes"


async def run_sweep(cfg: SweepConfig, where: Placement, say: Callable[[str], None]) -> SweepResult:
    """The whole sweep; ``say`` gets each line of the table as it is known."""
    n = len(where.hosts)
    out = SweepResult()
    fabric = bandwidth.Fabric.of(where.topo, where.hosts)
    out.ideal_busbw = bandwidth.ideal_busbw(cfg.alg, cfg.sizes[-1], n, fabric)
    for line in preamble(cfg, where):
        say(line)
    before = cpu_times()
    async with open_ranks(spec_for(cfg, where), cfg.procs) as ranks:
        await ranks.mesh()
        for size in cfg.sizes:
            row = await _size(cfg, ranks, size, n)
            out.rows.append(row)
            say(table.row_line(cfg.alg, row))
        await ranks.unmesh()
    out.cpu = with_workers(cpu_use(before, cpu_times()), ranks.worker_cpu_s)
    for line in table.footer(out.rows, out.ideal_busbw):
        say(line)
    return out


async def _size(cfg: SweepConfig, ranks: Ranks, size: int, n: int) -> table.Row:
    """-w untimed then -n timed iterations of one size, every result checked."""
    await ranks.size(size)
    seconds, wrong = 0.0, 0
    for i in range(cfg.warmup + cfg.iters):
        t0, t1, bad = await ranks.step(i)
        seconds += t1 - t0 if i >= cfg.warmup else 0.0
        wrong += bad
    return _row(cfg, size, n, seconds / cfg.iters, wrong)


def _row(cfg: SweepConfig, size: int, n: int, seconds: float, wrong: int) -> table.Row:
    alg_bw = bandwidth.algbw(size, seconds)
    count = size // data.ELEMENT_BYTES // cfg.alg.count_divisor(n)
    return table.Row(
        size, count, cfg.dtype, seconds, alg_bw, bandwidth.busbw(cfg.alg, n, alg_bw), wrong
    )
