"""What `mrc perf` prints, and where: iperf3's text lines, one -J document per test or
--json-stream's one event per line, to stdout or --logfile; and the --records and
--events files."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TextIO

from labs.units import format_rate, format_size
from mrc_transport.perf.interrupt import INTERRUPTED
from mrc_transport.perf.jsonobj import JsonObject
from mrc_transport.perf.report import (
    EndDoc,
    Interval,
    PerfReport,
    ReceivedSum,
    ReceiverEnd,
    SenderEnd,
    SentSum,
    StartDoc,
    StreamInterval,
)

if TYPE_CHECKING:
    from mrc_transport.io.endpoint import MrcEndpoint
    from mrc_transport.perf.options import OutputMode, PerfOptions


@dataclass
class Output:
    """Text, -J (one document) or --json-stream (one event per line), to stdout or a file."""

    stream: TextIO
    mode: OutputMode
    own: bool
    """The stream is ours to close (--logfile)."""
    doc: PerfReport = field(default_factory=PerfReport)
    """The -J document of the test under way."""

    @classmethod
    def open(cls, opts: PerfOptions) -> Output:
        """stdout, or --logfile (appended to, as iperf3's)."""
        from mrc_transport.perf.options import OptionsError

        if opts.logfile:
            try:
                return cls(open(opts.logfile, "a"), opts.output, True)
            except OSError as exc:
                raise OptionsError(f"--logfile {opts.logfile}: {exc.strerror}") from None
        return cls(sys.stdout, opts.output, False)

    @property
    def on_terminal(self) -> bool:
        """Its text lines go to a terminal (a person reads them, not a script)."""
        return self.mode == "text" and not self.own and self.stream.isatty()

    def text(self, line: str) -> None:
        if self.mode == "text":
            print(line, file=self.stream, flush=True)

    def event(self, name: str, data: JsonObject) -> None:
        """An event that only --json-stream shows (listening, stream_end)."""
        if self.mode == "stream":
            print(json.dumps({"event": name, "data": data}), file=self.stream, flush=True)

    def start(self, doc: StartDoc) -> None:
        self.event("start", doc.to_json())
        self.doc = PerfReport(doc, self.doc.intervals, self.doc.end)

    def interval(self, doc: Interval) -> None:
        for line in interval_lines(doc):
            self.text(line)
        self.event("interval", doc.to_json())
        if self.mode == "json":
            self.doc = PerfReport(self.doc.start, (*self.doc.intervals, doc), self.doc.end)

    def end(self, doc: EndDoc, reverse: bool) -> None:
        """The summary lines and the end event; ``reverse``: this end received the data."""
        for line in end_lines(doc, reverse):
            self.text(line)
        self.event("end", doc.to_json())
        self.doc = PerfReport(self.doc.start, self.doc.intervals, doc)

    def error(self, message: str) -> None:
        """Why the test ended early: the -J document's top-level "error", as iperf3's."""
        self.event("error", {"error": message})
        self.doc = replace(self.doc, error=message)

    def finish(self) -> None:
        """Print the -J document and start the next one (a server that is not -1 writes
        one per test, as iperf3's does)."""
        if self.mode == "json":
            print(json.dumps(self.doc.to_json(), indent=2), file=self.stream, flush=True)
        self.doc = PerfReport()

    def close(self) -> None:
        if self.own:
            self.stream.close()


# ------------------------------------------------------------------ text lines

INTERVAL_HEADER = (
    "[ ID] Interval           Transfer     Bitrate         Retr  EVs act/ret   ECN     sRTT"
)


def interval_lines(iv: Interval) -> list[str]:
    """With -P 2 or more, a line per connection and the [SUM] line, after iperf3's separator
    from the second interval on; with one connection the [SUM] line alone."""
    if not iv.streams:
        return [interval_line(iv)]
    lines = [*(_stream_interval_line(s) for s in iv.streams), interval_line(iv)]
    return lines if iv.start == 0 else [SEPARATOR, *lines]


def _stream_interval_line(s: StreamInterval) -> str:
    return (
        f"[{s.id:3d}] {s.start:6.2f}-{s.end:<6.2f} sec  {format_size(s.bytes)}  "
        f"{format_rate(s.bits_per_second)}  {s.retransmits:4d}"
    )


SEPARATOR = "- " * 36


def interval_line(iv: Interval) -> str:
    """iperf3's interval columns plus usable/retired EVs, ECN marks and sRTT."""
    srtt = f"{iv.srtt_us / 1000:6.2f}ms" if iv.srtt_us is not None else "     -"
    return (
        f"[SUM] {iv.start:6.2f}-{iv.end:<6.2f} sec  {format_size(iv.bytes)}  "
        f"{format_rate(iv.bits_per_second)}  {iv.retransmits:4d}  "
        f"{iv.active_evs:5d}/{iv.retired_evs:<5d} {iv.ecn_marks:5d}  {srtt}"
    )


def stream_line(index: int, sent: bool, nbytes: int, seconds: float, verified: bool) -> str:
    """A server's line for one connection that ended."""
    from mrc_transport.perf.summary import rate

    return (
        f"[{index:3d}] {'sent' if sent else 'received'} {format_size(nbytes)} in "
        f"{seconds:.2f} s, {format_rate(rate(nbytes, seconds))}, "
        f"{'verified' if verified else 'NOT VERIFIED'}"
    )


def cpu_line(cpu: Mapping[str, float], reverse: bool) -> str:
    """iperf3's "CPU Utilization: local/sender ..., remote/receiver ..." line, from
    ``cpu_utilization_percent``."""
    local, remote = ("receiver", "sender") if reverse else ("sender", "receiver")
    line = (
        f"CPU Utilization: local/{local} {cpu['host_total']:.1f}% "
        f"({cpu['host_user']:.1f}%u/{cpu['host_system']:.1f}%s)"
    )
    if "remote_total" in cpu:
        line += (
            f", remote/{remote} {cpu['remote_total']:.1f}% "
            f"({cpu['remote_user']:.1f}%u/{cpu['remote_system']:.1f}%s)"
        )
    return line


def end_lines(end: EndDoc, reverse: bool) -> list[str]:
    """iperf3's summary: the sums both ways, then MRC's planes, the CPU, the verdict."""
    ss, sr = end.sum_sent, end.sum_received
    lines = [SEPARATOR, "[ ID] Interval           Transfer     Bitrate         Retr"]
    if len(end.streams) > 1:
        for s in end.streams:
            lines += _sum_lines(f"{s.id:3d}", s.sender, s.receiver)
    lines += _sum_lines("SUM", ss, sr)
    lines += [
        "Per plane (sender's view):",
        " plane  share   packets    acked   ECN  lost  EVs usable/retired",
    ]
    lines += [
        f" {p.plane:5d}  {100 * p.share:5.1f}%  {p.sent:8d} {p.acked:8d} "
        f"{p.ecn:5d} {p.lost:5d}  {p.usable_evs:4d}/{p.retired_evs}"
        for p in end.planes
    ]
    lines.append(cpu_line(end.cpu_utilization_percent.to_json(), reverse))
    bad = end.endpoint.get("bad_packets") or {}
    if bad:
        lines.append(f"dropped malformed packets: {bad}")
    if end.verified:
        lines.append(f"verified: {sr.bytes} bytes, xxh3-128 digests equal on both ends")
    elif any(s.error == INTERRUPTED for s in end.streams):
        lines.append("interrupted: the test did not finish, so nothing was verified")
    else:
        errors = [s.error for s in end.streams if s.error]
        lines.append("NOT VERIFIED" + (f": {'; '.join(errors)}" if errors else ""))
    return lines


def _sum_lines(tag: str, sent: SentSum | SenderEnd, got: ReceivedSum | ReceiverEnd) -> list[str]:
    """iperf3's "sender" and "receiver" lines of a summary, for one connection or the sum."""
    return [
        f"[{tag}]   0.00-{sent.seconds:<6.2f} sec  {format_size(sent.bytes)}  "
        f"{format_rate(sent.bits_per_second)}  {sent.retransmits:4d}   sender",
        f"[{tag}]   0.00-{got.seconds:<6.2f} sec  {format_size(got.bytes)}  "
        f"{format_rate(got.bits_per_second)}         receiver",
    ]


# ------------------------------------------------------------------ files


def write_records(opts: PerfOptions, records: Sequence[tuple[float, int]]) -> None:
    """--records: one delivery record per message, as the demo reads them."""
    if not opts.records:
        return
    from mrc_transport import jsonl
    from mrc_transport.perf.records import record

    jsonl.write(opts.records, (record(t, n, opts.flow) for t, n in records))


@contextlib.asynccontextmanager
async def events_to(path: str | None, ep: MrcEndpoint) -> AsyncIterator[None]:
    """With --events: log every recovery event of ep's connections, written on the way
    out, also when the transfer failed (that is when it is wanted)."""
    if path is None:
        yield
        return
    from mrc_transport.io.eventlog import EventLog

    log = EventLog()
    ep.on_event = log.add
    try:
        yield
    finally:
        log.write(path)
