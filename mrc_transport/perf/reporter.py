"""The interval lines of a run: every -i seconds, the bytes, retransmissions, ECN marks,
EVs and sRTT of its connections since the last line."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import trio

from mrc_transport.perf.output import INTERVAL_HEADER, Output
from mrc_transport.perf.report import Interval, StreamInterval
from mrc_transport.perf.session import StreamStats, conn_report
from mrc_transport.perf.summary import rate


class Reporter:
    """Prints one line per interval: iperf3's columns plus EVs, ECN marks and sRTT."""

    def __init__(self, out: Output, streams: Sequence[StreamStats], interval: float) -> None:
        self.out, self.streams, self.interval = out, streams, interval
        self.t0 = time.monotonic()
        self._last = (0, 0, 0)
        """(bytes, retransmits, ECN marks) at the last line."""
        self._last_stream: dict[int, tuple[int, int]] = {}
        """Each connection's (bytes, retransmits) at the last line."""
        self.reported = 0.0
        """Seconds since t0 that the lines so far cover."""

    async def run(self, running: Callable[[], bool] = lambda: True) -> None:
        """A line per interval while ``running()`` (until cancelled, by default)."""
        if self.interval <= 0:
            return
        self.out.text(INTERVAL_HEADER)
        n = 1
        while True:
            await trio.sleep_until(_trio_time(self.t0 + n * self.interval))
            if not running():
                return
            self.line((n - 1) * self.interval, n * self.interval)
            n += 1

    def line(self, a: float, b: float) -> None:
        """The line of the interval from a to b seconds."""
        self.out.interval(self.measure(a, b))
        self.reported = b

    def last_line(self) -> None:
        """The part-interval since the last line, as iperf3 prints when Ctrl-C stops it."""
        now = time.monotonic() - self.t0
        if self.interval > 0 and now > self.reported:
            self.line(self.reported, now)

    def measure(self, a: float, b: float) -> Interval:
        """The interval from a to b seconds: the counts since the last one's."""
        nbytes = sum(s.progress_bytes for s in self.streams)
        counters = [s.handle.conn.counters for s in self.streams]
        retr = sum(c.retransmits for c in counters)
        ecn = sum(c.ecn_echoes + c.ce_received for c in counters)
        db, dr, de = nbytes - self._last[0], retr - self._last[1], ecn - self._last[2]
        self._last = (nbytes, retr, ecn)
        reports = [conn_report(s.handle) for s in self.streams]
        srtts = [r.srtt_us for r in reports if r.srtt_us is not None]
        return Interval(
            start=a,
            end=b,
            seconds=b - a,
            bytes=db,
            bits_per_second=rate(db, b - a),
            retransmits=dr,
            ecn_marks=de,
            active_evs=sum(p.usable_evs for r in reports for p in r.planes),
            retired_evs=sum(p.retired_evs for r in reports for p in r.planes),
            srtt_us=sum(srtts) / len(srtts) if srtts else None,
            sender=self.streams[0].sending if self.streams else True,
            streams=self._per_stream(a, b) if len(self.streams) > 1 else (),
        )

    def _per_stream(self, a: float, b: float) -> tuple[StreamInterval, ...]:
        """Each connection's bytes and retransmissions since the last line."""
        out = []
        for i, s in enumerate(self.streams):
            nbytes, retr = s.progress_bytes, s.handle.conn.counters.retransmits
            b0, r0 = self._last_stream.get(i, (0, 0))
            self._last_stream[i] = (nbytes, retr)
            db = nbytes - b0
            out.append(StreamInterval(i, a, b, b - a, db, rate(db, b - a), retr - r0))
        return tuple(out)


def _trio_time(t_mono: float) -> float:
    return trio.current_time() + (t_mono - time.monotonic())
