"""`mrc perf --lab LAB --pairs A:B[,C:D...]`: many host pairs' transfers in one process.

Theory of operation. One trio loop serves the MRC end of every host named: an endpoint per
host, its sockets made in that host's namespace (io/endpoint.py ``netns``: a socket stays
in the namespace it was made in), where `--from/--to` runs two processes per pair. The
transfers start together: every connection is established before any sends (a start
barrier), so an incast or a permutation happens every time, not as its processes come up.
Each pair is named once at the start ("[  0] h4 -> h0"), as iperf3 names its streams, and
its lines carry that number; the summary has each connection's sender and receiver lines
and their sum, every byte verified. The CPU line is this one process's: both ends of every
pair.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from functools import partial

import trio

from mrc_transport.io.endpoint import (
    ConnectionLost,
    ConnHandle,
    MrcEndpoint,
    default_mss,
    in_netns,
    open_endpoint,
)
from mrc_transport.io.paths import LabPaths, PathError
from mrc_transport.perf import session, summary
from mrc_transport.perf.client import INTERRUPT_CLIENT, guard
from mrc_transport.perf.config import endpoint_config
from mrc_transport.perf.interrupt import Interrupt, run_interruptible
from mrc_transport.perf.messages import PerfError, PerfParams
from mrc_transport.perf.options import OptionsError, PerfOptions
from mrc_transport.perf.output import Output
from mrc_transport.perf.report import StartDoc
from mrc_transport.perf.reporter import Reporter
from mrc_transport.perf.session import StreamStats
from mrc_transport.protocol import Config


@dataclass(frozen=True, slots=True)
class Pair:
    """One transfer: the client host and the server host (the sender is the client, or
    the server with -R)."""

    src: str
    dst: str


def parse_pairs(text: str) -> tuple[Pair, ...]:
    """ "h4:h0,h5:h0" -> pairs; OptionsError naming what is wrong."""
    pairs = []
    for item in text.split(","):
        src, sep, dst = item.strip().partition(":")
        if not sep or not src or not dst or ":" in dst:
            raise OptionsError(f"--pairs: {item.strip()!r} is not SRC:DST (e.g. h4:h0)")
        if src == dst:
            raise OptionsError(f"--pairs: {item.strip()!r} sends to itself")
        pairs.append(Pair(src, dst))
    return tuple(pairs)


def run_pairs(opts: PerfOptions, pairs: Sequence[Pair]) -> int:
    """Run every pair's test in this process; the exit code (1: one failed, was not
    verified, or Ctrl-C stopped them). OptionsError for a lab or host that is not there."""
    from labs.topology import namespace
    from mrc_transport.perf.oneshot import check_hosts

    assert opts.lab is not None
    hosts = sorted({h for p in pairs for h in (p.src, p.dst)})
    check_hosts(opts.lab, *hosts)
    try:
        paths = {h: LabPaths(opts.lab, host=h) for h in hosts}
        for p in pairs:
            paths[p.src].paths_to(p.dst)
    except PathError as exc:
        raise OptionsError(str(exc)) from None
    if opts.mss is None:  # the ports' MTU, read in a host's namespace (they are all alike)
        with in_netns(namespace(opts.lab, hosts[0])):
            opts = replace(opts, mss=default_mss(opts.encoding))
    cfg = endpoint_config(opts, paths[hosts[0]])
    out = Output.open(opts)
    try:
        return trio.run(run_interruptible, partial(_main, opts, pairs, paths, cfg, out))
    except OSError as exc:
        print(f"mrc perf: error: {exc}", file=sys.stderr)
        return 1
    finally:
        out.close()


@dataclass
class _Run:
    """What one run of pairs holds while it goes."""

    opts: PerfOptions
    pairs: Sequence[Pair]
    paths: dict[str, LabPaths]
    eps: dict[str, MrcEndpoint]
    cookie: str
    clients: list[StreamStats]
    """Every connection as its client sees it (the lines and the summary)."""
    servers: list[StreamStats]
    """Every connection as its server sees it (the receivers' records)."""


async def _main(
    opts: PerfOptions,
    pairs: Sequence[Pair],
    paths: dict[str, LabPaths],
    cfg: Config,
    out: Output,
    interrupt: Interrupt,
) -> int:
    cpu0, wall0 = session.cpu_seconds(), time.monotonic()
    run = _Run(opts, pairs, paths, {}, secrets.token_hex(4), [], [])
    out.start(_start_doc(run, cfg))
    async with AsyncExitStack() as stack:
        await _open_endpoints(run, cfg, stack)
        reporter = Reporter(out, run.clients, opts.interval)
        with interrupt.scope:
            async with trio.open_nursery() as nursery:
                await _run_tests(run, out, reporter, nursery)
        if interrupt.came:
            reporter.last_line()
            for s in run.clients:
                session.cut_short(s, time.monotonic)
        for ep in run.eps.values():
            await ep.aclose(0.5)
        counters = _counters(list(run.eps.values()))
    cpu1, wall = session.cpu_seconds(), time.monotonic() - wall0
    end = summary.end_doc(run.clients, cpu0, cpu1, wall, counters)
    out.end(end, opts.reverse)
    if interrupt.came:
        out.error(INTERRUPT_CLIENT)
    out.finish()
    _write_records(run)
    return _verdict(run, interrupt)


def _start_doc(run: _Run, cfg: Config) -> StartDoc:
    """The -J ``start``: the pairs as the peer, every connection in ``num_streams``."""
    named = ",".join(f"{p.src}:{p.dst}" for p in run.pairs)
    whole = replace(run.opts, host=named, parallel=run.opts.parallel * len(run.pairs))
    all_paths = [x for p in run.pairs for x in run.paths[p.src].paths_to(p.dst)]
    return summary.client_start(whole, all_paths, cfg, run.cookie)


async def _open_endpoints(run: _Run, cfg: Config, stack: AsyncExitStack) -> None:
    """An endpoint per host, each in its namespace, each with its own random numbers."""
    from labs.topology import namespace

    assert run.opts.lab is not None
    seed = run.opts.seed
    for i, (host, provider) in enumerate(sorted(run.paths.items())):
        rng = random.Random(None if seed is None else seed + i)
        ep = open_endpoint(
            cfg, paths_for=provider.paths_for, port=run.opts.port, encoding=run.opts.encoding,
            rng=rng, netns=namespace(run.opts.lab, host), moderation=run.opts.moderation,
        )  # fmt: skip
        run.eps[host] = await stack.enter_async_context(ep)


async def _run_tests(run: _Run, out: Output, reporter: Reporter, nursery: trio.Nursery) -> None:
    """Connect every pair, wait until all are established (the start barrier), then run
    every test at once; returns when all ended."""
    for host, ep in run.eps.items():
        expected = sum(p.dst == host for p in run.pairs) * run.opts.parallel
        if expected:
            nursery.start_soon(_serve, ep, expected, run.servers, bool(run.opts.records))
    handles: list[tuple[int, Pair, ConnHandle]] = []
    for p in run.pairs:
        for _ in range(run.opts.parallel):
            handle = run.eps[p.src].connect(run.paths[p.src].paths_to(p.dst))
            out.text(f"[{len(handles):3d}] {p.src} -> {p.dst}")
            handles.append((len(handles), p, handle))
    for _, _, handle in handles:
        await handle.wait_established()
    nursery.start_soon(reporter.run)
    async with trio.open_nursery() as tests:
        for i, _, handle in handles:
            stats = StreamStats(handle, not run.opts.reverse, keep_records=bool(run.opts.records))
            run.clients.append(stats)
            params = _params(run, i % run.opts.parallel)
            test = session.client_stream(handle, params, stats, time.monotonic)
            tests.start_soon(guard, test, stats, i)
    nursery.cancel_scope.cancel()


def _params(run: _Run, k: int) -> PerfParams:
    """The P message of a pair's k-th connection: each pair is a test of its own."""
    o = run.opts
    return PerfParams(
        run.cookie, k, o.parallel, o.reverse, o.seconds, o.share(k), o.length, o.rate_bps,
        o.planes,
    )  # fmt: skip


async def _serve(ep: MrcEndpoint, expected: int, out: list[StreamStats], keep: bool) -> None:
    """A host's server side: accept its pairs' connections and run each one's test."""
    async with trio.open_nursery() as nursery:
        for _ in range(expected):
            handle = await ep.accept()
            nursery.start_soon(_served, handle, out, keep)


async def _served(handle: ConnHandle, out: list[StreamStats], keep_records: bool) -> None:
    def keep(_params: PerfParams, stats: StreamStats) -> None:
        out.append(stats)

    # a failure is the client side's to report: its R or E never came
    with contextlib.suppress(ConnectionLost, PerfError):
        await session.server_stream(handle, time.monotonic, keep, keep_records)


def _counters(eps: Sequence[MrcEndpoint]) -> dict[str, object]:
    """Every endpoint's counters, summed: numbers, and dicts of numbers key by key."""
    total: dict[str, object] = {}
    for ep in eps:
        for key, value in ep.counters().items():
            if isinstance(value, int):
                before = total.get(key, 0)
                total[key] = (before if isinstance(before, int) else 0) + value
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                assert isinstance(merged, dict)
                for k, v in value.items():
                    merged[k] = merged.get(k, 0) + v
    return total


def _write_records(run: _Run) -> None:
    """--records: each connection's deliveries as flow FLOW-i, i its number in the lines."""
    if not run.opts.records:
        return
    from mrc_transport import jsonl
    from mrc_transport.perf.records import record

    by_conn = {s.handle.conn.peer_conn: s for s in run.servers}
    out = []
    for i, client in enumerate(run.clients):
        receiver = client if run.opts.reverse else by_conn.get(client.handle.conn.conn)
        if receiver is not None:
            out += [record(t, n, f"{run.opts.flow}-{i}") for t, n in receiver.records]
    jsonl.write(run.opts.records, sorted(out, key=lambda r: r["t_mono"]))


def _verdict(run: _Run, interrupt: Interrupt) -> int:
    if interrupt.came:
        print(f"mrc perf: {INTERRUPT_CLIENT}", file=sys.stderr)
        return 1
    failed = [s.error for s in run.clients if s.error]
    if failed:
        print(f"mrc perf: error: {failed[0]}", file=sys.stderr)
        return 1
    if not all(s.verified for s in run.clients):
        print("mrc perf: error: transfer NOT verified (byte count or digest)", file=sys.stderr)
        return 1
    return 0
