"""Ctrl-C as iperf3 takes it: the test stops, the summary so far is printed, and the run
exits 1 with "interrupt - the client (or server) has terminated"; no traceback.

trio turns SIGINT into KeyboardInterrupt raised through whatever task runs, which unwinds
the endpoint before any summary. Instead a receiver of the signal cancels the test's scope
(``Interrupt.scope``), and the code after that scope reports what got through. A second
Ctrl-C while the run winds up (at most the endpoint's close grace) is taken and ignored.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import trio

INTERRUPTED = "interrupted"
"""A connection's error when Ctrl-C cut its test short."""


class Interrupt:
    """Whether Ctrl-C came, and the scope it cancels."""

    def __init__(self) -> None:
        self.came = False
        """Ctrl-C came: the test was cut short."""
        self.scope = trio.CancelScope()
        """The test's scope: Ctrl-C cancels it (once it has been entered)."""

    async def _watch(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            self.came = True
            self.scope.cancel()


async def run_interruptible(main: Callable[[Interrupt], Awaitable[int]]) -> int:
    """``main(interrupt)``'s exit code, with SIGINT routed to ``interrupt`` for as long as
    it runs (trio.run's entry point for the client and the server)."""
    interrupt = Interrupt()
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupt._watch, signals)
            rc = await main(interrupt)
            nursery.cancel_scope.cancel()
    return rc
