"""`mrc perf -c HOST`: -P connections to the server, interval lines while they run, then
the summary (iperf3's client)."""

from __future__ import annotations

import random
import secrets
import sys
import time
from collections.abc import Awaitable, Sequence
from functools import partial

import trio

from mrc_transport.io.endpoint import ConnectionLost, MrcEndpoint, open_endpoint
from mrc_transport.perf import config, session, summary
from mrc_transport.perf.interrupt import Interrupt, run_interruptible
from mrc_transport.perf.messages import PerfError, PerfParams
from mrc_transport.perf.options import PerfOptions
from mrc_transport.perf.output import Output, events_to, write_records
from mrc_transport.perf.report import EndDoc
from mrc_transport.perf.reporter import Reporter
from mrc_transport.perf.session import StreamStats
from mrc_transport.protocol import Config
from srv6.path import SrPath


def run_client(opts: PerfOptions, out: Output) -> int:
    """Run the test against -c HOST; the exit code (1: it failed or was not verified).
    OptionsError when the paths cannot be had."""
    paths_from = config.provider(opts)
    paths = config.client_paths(opts, paths_from)
    cfg = config.endpoint_config(opts, paths_from)
    try:
        return trio.run(run_interruptible, partial(_client_main, opts, out, paths, cfg))
    except OSError as exc:
        print(f"mrc perf: error: {exc}", file=sys.stderr)
        return 1


async def _client_main(
    opts: PerfOptions, out: Output, paths: list[SrPath], cfg: Config, interrupt: Interrupt
) -> int:
    cookie = secrets.token_hex(4)
    cpu0, wall0 = session.cpu_seconds(), time.monotonic()
    out.start(summary.client_start(opts, paths, cfg, cookie))
    out.text(
        f"Connecting to host {opts.host}, port {opts.port}: {len(paths)} paths in "
        f"{len({p.plane for p in paths})} planes, {opts.encoding}, {cfg.ev_count} EVs, "
        f"mss {cfg.mss}"
    )
    streams: list[StreamStats] = []
    rng = random.Random(opts.seed)
    async with (
        open_endpoint(
            cfg, port=opts.port, encoding=opts.encoding, rng=rng, moderation=opts.moderation
        ) as ep,
        events_to(opts.events, ep),
    ):
        reporter = Reporter(out, streams, opts.interval)
        with interrupt.scope:
            async with trio.open_nursery() as outer:
                outer.start_soon(reporter.run)
                await _run_streams(opts, ep, paths, cookie, streams)
                outer.cancel_scope.cancel()
        if interrupt.came:
            reporter.last_line()
            for s in streams:
                session.cut_short(s, time.monotonic)
        failure = next((s.error for s in streams if s.error), None)
        await ep.aclose(0.5)
        ep_counters = ep.counters()
    cpu1, wall1 = session.cpu_seconds(), time.monotonic()
    end = summary.end_doc(streams, cpu0, cpu1, wall1 - wall0, ep_counters)
    out.end(end, opts.reverse)
    if interrupt.came:
        out.error(INTERRUPT_CLIENT)
    out.finish()
    write_records(opts, [r for s in streams if not s.sending for r in s.records])
    if interrupt.came:
        print(f"mrc perf: {INTERRUPT_CLIENT}", file=sys.stderr)
        return 1
    return _verdict(failure, end)


INTERRUPT_CLIENT = "interrupt - the client has terminated"
"""What iperf3 says when Ctrl-C stops its client (and exits 1, as this does)."""


async def _run_streams(
    opts: PerfOptions, ep: MrcEndpoint, paths: Sequence[SrPath], cookie: str,
    streams: list[StreamStats],
) -> None:  # fmt: skip
    """-P connections, each from SETUP to CLOSE_ACK; returns when all ended."""
    async with trio.open_nursery() as nursery:
        for i in range(opts.parallel):
            handle = ep.connect(paths)
            params = PerfParams(
                cookie, i, opts.parallel, opts.reverse, opts.seconds, opts.share(i),
                opts.length, opts.rate_bps, opts.planes,
            )  # fmt: skip
            stats = StreamStats(handle, not opts.reverse, keep_records=bool(opts.records))
            streams.append(stats)
            test = session.client_stream(handle, params, stats, time.monotonic)
            nursery.start_soon(guard, test, stats, i)


async def guard(test: Awaitable[None], stats: StreamStats, i: int) -> None:
    """Run one connection's test; a failure is recorded on it, not raised through the
    nursery."""
    try:
        await test
    except (ConnectionLost, PerfError) as exc:
        stats.error = f"connection {i}: {type(exc).__name__}: {exc}"


def _verdict(failure: str | None, end: EndDoc) -> int:
    if failure is not None:
        print(f"mrc perf: error: {failure}", file=sys.stderr)
        return 1
    if not end.verified:
        print(
            "mrc perf: error: transfer NOT verified (byte count or digest differ)", file=sys.stderr
        )
        return 1
    return 0
