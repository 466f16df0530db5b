"""`mrc perf`'s interval reporter: a line per interval while its streams run."""

from __future__ import annotations

import io

import trio
import trio.testing

from mrc_transport.perf.output import Output
from mrc_transport.perf.reporter import Reporter as _Reporter


async def _run(ticks_running: int) -> list[str]:
    out = Output(io.StringIO(), "text", False)
    reporter = _Reporter(out, [], 0.1)
    ticks = iter(range(100))
    await reporter.run(lambda: next(ticks) < ticks_running)
    assert isinstance(out.stream, io.StringIO)
    return out.stream.getvalue().splitlines()


def test_the_reporter_stops_once_nothing_runs() -> None:
    """A server's session that never gets all its streams (a client died before each
    sent its parameters) must not print empty lines forever."""
    for ticks in (0, 3):
        clock = trio.testing.MockClock(autojump_threshold=0)
        lines = trio.run(_run, ticks, clock=clock)
        assert lines[0].startswith("[ ID] Interval")
        assert len(lines) == 1 + ticks
        assert all(line.startswith("[SUM]") for line in lines[1:])
