"""`mrc perf -s`: accept clients' connections, run each one's test, and report each client
run (a session: its -P connections) together, as iperf3's server reports a test."""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from functools import partial

import trio

from mrc_transport.io.endpoint import ConnectionLost, ConnHandle, MrcEndpoint, open_endpoint
from mrc_transport.perf import config, session, summary
from mrc_transport.perf.interrupt import Interrupt, run_interruptible
from mrc_transport.perf.messages import PerfError, PerfParams
from mrc_transport.perf.options import PerfOptions
from mrc_transport.perf.output import Output, events_to, stream_line, write_records
from mrc_transport.perf.reporter import Reporter
from mrc_transport.perf.session import StreamStats
from mrc_transport.protocol import Config
from mrc_transport.protocol.endpoint import PathsFor


def run_server(opts: PerfOptions, out: Output) -> int:
    """Serve until -1's one test ended (or forever); the exit code (1: a test failed or
    was not verified). OptionsError when the paths cannot be had."""
    paths_from = config.provider(opts)
    cfg = config.endpoint_config(opts, paths_from)
    try:
        return trio.run(
            run_interruptible, partial(_server_main, opts, out, paths_from.paths_for, cfg)
        )
    except OSError as exc:
        print(f"mrc perf: error: {exc}", file=sys.stderr)
        return 1


async def _server_main(
    opts: PerfOptions, out: Output, paths_for: PathsFor, cfg: Config, interrupt: Interrupt
) -> int:
    rng = random.Random(opts.seed)
    async with (
        open_endpoint(
            cfg,
            paths_for=paths_for,
            port=opts.port,
            encoding=opts.encoding,
            rng=rng,
            moderation=opts.moderation,
        )
        as ep,
        events_to(opts.events, ep),
    ):  # fmt: skip
        out.text(f"Server listening on {opts.port} ({opts.encoding})")
        out.event("listening", {"port": opts.port})
        if not out.on_terminal:
            print(READY_LINE.format(port=opts.port), file=sys.stderr, flush=True)
        with interrupt.scope:
            async with trio.open_nursery() as nursery:
                server = _Server(opts, out, ep, nursery)
                nursery.start_soon(server.stop_when_done)
                while not server.done.is_set():
                    handle = await ep.accept()
                    nursery.start_soon(server.connection, handle)
        if interrupt.came:
            server.cut_short()
            await ep.aclose(0.5)  # the clients hear the close, not silence until their RTOs
    if interrupt.came:
        print(f"mrc perf: {INTERRUPT_SERVER}", file=sys.stderr)
        return 1
    return 1 if server.failed else 0


READY_LINE = "Server listening on {port}"
"""What a server says on stderr once its socket is open, for a script (or the one-shot
runner) to wait for; not when its text output already says it on the terminal."""
INTERRUPT_SERVER = "interrupt - the server has terminated"
"""What iperf3 says when Ctrl-C stops its server (and exits 1, as this does)."""


@dataclass
class _Session:
    """The connections of one client run, as the server sees them: reported together
    (interval lines and one -J document per test, as iperf3's server does)."""

    streams: list[StreamStats]
    reporter: trio.CancelScope
    """The scope of its interval lines."""
    cpu0: tuple[float, float]
    wall0: float
    received: bool
    """This end receives the data (the client's test is not -R)."""
    finished: int = 0
    """Its connections that ended, or failed."""


class _Server:
    """The server's tests under way, and whether it is done (-1 after its test)."""

    def __init__(
        self, opts: PerfOptions, out: Output, ep: MrcEndpoint, nursery: trio.Nursery
    ) -> None:
        self.opts, self.out, self.ep, self.nursery = opts, out, ep, nursery
        self.sessions: dict[str, _Session] = {}
        self.done = trio.Event()
        self.failed: list[str] = []
        """Why tests failed."""

    async def stop_when_done(self) -> None:
        await self.done.wait()
        self.nursery.cancel_scope.cancel()

    async def connection(self, handle: ConnHandle) -> None:
        """One connection's test, from its P message to the client's CLOSE."""
        joined: list[PerfParams] = []

        def on_params(params: PerfParams, stats: StreamStats) -> None:
            joined.append(params)
            self._join(params, stats, handle)

        try:
            params, stats = await session.server_stream(
                handle, time.monotonic, on_params, bool(self.opts.records)
            )
        except (ConnectionLost, PerfError) as exc:
            self.out.text(f"connection failed: {exc}")
            if joined:  # a test that started and broke; a connection without valid P is not one
                self.failed.append(str(exc))
                for stats in self.sessions[joined[0].session].streams:
                    if stats.handle is handle:  # its summary shows what got through
                        session.cut_short(stats, time.monotonic, str(exc))
                self._ended(joined[0])
                if self.opts.one_off:
                    self.done.set()
            return
        nbytes, seconds = stats.data_bytes, (stats.t1 - stats.t0) or 1e-9
        report = stats.own_report
        self.out.text(
            stream_line(params.index, stats.sending, nbytes, seconds, bool(stats.verified))
        )
        self.out.event(
            "stream_end",
            {
                "session": params.session,
                "index": params.index,
                "bytes": nbytes,
                "seconds": seconds,
                "verified": stats.verified,
                "report": None if report is None else report.to_json(),
                "endpoint": self.ep.counters(),
            },
        )
        if not stats.verified:
            self.failed.append(f"session {params.session} stream {params.index} not verified")
        self._ended(params)

    def cut_short(self) -> None:
        """Ctrl-C: every test under way ends with its summary so far (iperf3's)."""
        for run in self.sessions.values():
            for stats in run.streams:
                session.cut_short(stats, time.monotonic)
            self._report_end(run, INTERRUPT_SERVER)
        self.sessions.clear()

    def _join(self, params: PerfParams, stats: StreamStats, handle: ConnHandle) -> None:
        """Count a connection that sent its P into its session; the session's first
        connection starts its report."""
        run = self.sessions.get(params.session)
        if run is None:
            run = self.sessions[params.session] = _Session(
                [], trio.CancelScope(), session.cpu_seconds(), time.monotonic(), not params.reverse
            )
            self.out.start(summary.server_start(self.opts, params, handle))
            reporter = Reporter(self.out, run.streams, self.opts.interval)
            self.nursery.start_soon(_report, run, reporter)
        run.streams.append(stats)

    def _ended(self, params: PerfParams) -> None:
        """One more of a session's connections ended (or failed); the last one ends its
        report: the summary lines, the -J document, the --records file."""
        run = self.sessions[params.session]
        run.finished += 1
        if run.finished < params.parallel:
            return
        del self.sessions[params.session]
        self._report_end(run)
        if self.opts.one_off:
            self.done.set()

    def _report_end(self, run: _Session, error: str | None = None) -> None:
        """A session's end: the summary lines, the -J document, the --records file."""
        run.reporter.cancel()
        end = summary.end_doc(
            run.streams, run.cpu0, session.cpu_seconds(), time.monotonic() - run.wall0,
            self.ep.counters(),
        )  # fmt: skip
        self.out.end(end, reverse=run.received)
        if error is not None:
            self.out.error(error)
        self.out.finish()
        write_records(self.opts, [r for s in run.streams if not s.sending for r in s.records])


async def _report(run: _Session, reporter: Reporter) -> None:
    # Lines while a connection of the session runs: a client that died before all its
    # connections sent P leaves the session short of -P of them, never to end.
    with run.reporter:
        await reporter.run(lambda: run.finished < len(run.streams))
