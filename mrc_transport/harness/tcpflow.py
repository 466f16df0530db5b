"""The TCP baselines with per-receive timestamps: single-path TCP ("RoCE over ECMP"
stand-in) pinned to its first path or moved on each RTO, and MPTCP (harness/mptcp.py).

iperf3 reports at best every 100 ms; the experiments need 10 ms bins and the exact gap a cut
leaves, so this receiver logs (time.monotonic(), nbytes) after every recv(), in the same
record format as the MRC receiver (harness/records.py). The sender writes a deterministic
byte pattern and the receiver checks every byte, so the baseline is verified too.

Pattern: a SHAKE-256 keystream of PERIOD bytes (an odd length, so a lost or repeated
segment cannot line up with the pattern again by chance of alignment), repeated. The
receiver also reports the byte count, which the caller compares with the sender's.

Run inside a lab namespace with ``ip netns exec NS python -m mrc_transport.harness.tcpflow``:

    recv --port 5201 --flow tcp --records tcp.jsonl   # prints {"event": "listening", ...}
    send fd00:6d72:a000:: --port 5201 -t 10           # prints {"event": "end", ...}

``--rehash`` on both ends lets Linux move the flow on RTO; ``--mptcp`` on both ends makes
it one MPTCP connection (to the receiver's plane-0 address in a lab: docs/lab.md, "MPTCP").
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.mptcp import IPPROTO_MPTCP, subflow_addresses
from mrc_transport.harness.records import record_line, write_records
from mrc_transport.harness.timeline import Delivery

PERIOD = (1 << 20) + 7
"""Pattern length in bytes (odd: see the module docstring)."""
DEFAULT_SEED = "mrc"
RECV_BUF = 256 * 1024
SEND_CHUNK = 128 * 1024
SO_TXREHASH = getattr(socket, "SO_TXREHASH", 74)  # Linux 5.19+, asm-generic value
TXREHASH_DISABLED, TXREHASH_ENABLED = 0, 1


class Options(Protocol):
    """A socket's options (a socket.socket, or trio's over one)."""

    def setsockopt(self, level: int, optname: int, value: int, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Stream:
    """How a baseline's sockets are opened."""

    mptcp: bool = False
    """One MPTCP connection (IPPROTO_MPTCP) instead of TCP. Its subflows follow the
    namespace's net.core.txrehash (on by default): MPTCP refuses SO_TXREHASH
    (EOPNOTSUPP), it passes no such option on to them."""
    rehash: bool = False
    """TCP: Linux moves the flow to another path on every RTO, as it does by default (the
    stronger single-path baseline); else it stays pinned to its first path."""

    def open(self) -> socket.socket:
        sock = socket.socket(
            socket.AF_INET6, socket.SOCK_STREAM, IPPROTO_MPTCP if self.mptcp else 0
        )
        self.pin(sock)
        return sock

    def pin(self, sock: Options) -> None:
        """Keep a TCP flow on its first ECMP path, like RoCE (one UDP source port per QP),
        or let it move (``rehash``).

        Linux TCP re-rolls its IPv6 flow label and route on every RTO (net.core.txrehash),
        so one RTO moves it off a cut path. The pinned baseline stands in for single-path
        RoCE, which cannot do that, so it turns rehashing off for its sockets."""
        if not self.mptcp:
            value = TXREHASH_ENABLED if self.rehash else TXREHASH_DISABLED
            sock.setsockopt(socket.SOL_SOCKET, SO_TXREHASH, value)


PINNED = Stream()


class Pattern:
    """The sender's byte stream and the receiver's reference for it."""

    def __init__(self, seed: str = DEFAULT_SEED) -> None:
        one = hashlib.shake_256(b"mrc-tcpflow\0" + seed.encode()).digest(PERIOD)
        # Twice over, so any slice of up to PERIOD bytes at any phase is contiguous.
        self._bytes = one + one
        self._doubled = memoryview(self._bytes)

    def slice(self, offset: int, n: int) -> memoryview:
        """Bytes [offset, offset + n) of the stream, n <= PERIOD."""
        phase = offset % PERIOD
        return self._doubled[phase : phase + n]

    def matches(self, offset: int, data: memoryview) -> bool:
        """True when data equals the stream at offset (any length)."""
        done = 0
        while done < len(data):
            n = min(PERIOD, len(data) - done)
            phase = (offset + done) % PERIOD
            # bytes == bytes is a memcmp; memoryview == memoryview compares item by item
            # (far slower), so copy both sides.
            if bytes(data[done : done + n]) != self._bytes[phase : phase + n]:
                return False
            done += n
        return True


@dataclass
class Verifier:
    """Checks a received stream chunk by chunk."""

    pattern: Pattern
    offset: int = 0
    first_bad: int | None = None

    def feed(self, data: memoryview) -> None:
        if self.first_bad is None and not self.pattern.matches(self.offset, data):
            self.first_bad = self.offset + _first_difference(self.pattern, self.offset, data)
        self.offset += len(data)

    @property
    def ok(self) -> bool:
        return self.first_bad is None


def _first_difference(pattern: Pattern, offset: int, data: memoryview) -> int:
    for i in range(len(data)):
        if data[i] != pattern.slice(offset + i, 1)[0]:
            return i
    return len(data)


class Stopped(Exception):
    """SIGTERM to a receiver: it ends with what arrived so far (a baseline still stalled
    when an experiment is over is stopped, and its records say how long it had stalled)."""


def _stop(_signum: int, _frame: object) -> None:
    raise Stopped


@dataclass
class RecvResult:
    """What the receiver saw."""

    flow: str
    records: list[Delivery] = field(default_factory=list)
    nbytes: int = 0
    verified: bool = True
    first_bad_offset: int | None = None
    stopped: bool = False

    def summary(self) -> dict[str, Any]:
        return {
            "event": "end",
            "flow": self.flow,
            "bytes": self.nbytes,
            "verified": self.verified,
            "first_bad_offset": self.first_bad_offset,
            "stopped": self.stopped,
            "records": len(self.records),
            "t_first": self.records[0].t_mono if self.records else None,
            "t_last": self.records[-1].t_mono if self.records else None,
        }


def listen(port: int, bind: str = "::", *, stream: Stream = PINNED) -> socket.socket:
    sock = stream.open()  # accepted sockets inherit the pin; _drain sets it again
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bind, port))
    sock.listen(1)
    return sock


def receive(
    sock: socket.socket,
    flow: str,
    pattern: Pattern,
    *,
    accept_timeout: float | None = 30.0,
    on_progress: Callable[[float, int], None] | None = None,
    progress_s: float = 0.0,
    stream: Stream = PINNED,
) -> RecvResult:
    """Accept one connection and read it to EOF, one record per recv()."""
    conn = _accept(sock, accept_timeout)
    with conn:
        return _drain(conn, flow, pattern, on_progress, progress_s, stream)


def receive_streams(
    sock: socket.socket,
    flow: str,
    pattern: Pattern,
    streams: int,
    *,
    accept_timeout: float | None = 30.0,
    stream: Stream = PINNED,
) -> RecvResult:
    """Accept ``streams`` connections (a sender's -P) and read each to EOF in a thread of
    its own, each checked against the pattern from offset 0; one result for all, its
    records in time order under one flow id."""
    conns = [_accept(sock, accept_timeout) for _ in range(streams)]
    results: list[RecvResult] = [RecvResult(flow) for _ in conns]

    def drain(i: int) -> None:
        with conns[i]:
            results[i] = _drain(conns[i], flow, pattern, None, 0.0, stream)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = RecvResult(flow)
    merged.records = sorted((d for r in results for d in r.records), key=lambda d: d.t_mono)
    merged.nbytes = sum(r.nbytes for r in results)
    merged.verified = all(r.verified for r in results)
    bad = [r.first_bad_offset for r in results if r.first_bad_offset is not None]
    merged.first_bad_offset = min(bad) if bad else None
    return merged


def _accept(sock: socket.socket, accept_timeout: float | None) -> socket.socket:
    sock.settimeout(accept_timeout)
    try:
        conn, _ = sock.accept()
    except TimeoutError:
        raise HarnessError(f"no sender connected within {accept_timeout:g} s") from None
    return conn


def _drain(
    conn: socket.socket,
    flow: str,
    pattern: Pattern,
    on_progress: Callable[[float, int], None] | None,
    progress_s: float,
    stream: Stream,
) -> RecvResult:
    """Read one connection to EOF, one record per recv(), every byte checked."""
    result = RecvResult(flow)
    verifier = Verifier(pattern)
    buf = bytearray(RECV_BUF)
    view = memoryview(buf)
    next_progress = time.monotonic() + progress_s
    conn.settimeout(None)
    stream.pin(conn)  # its ACKs keep one path too (or move as the data does)
    try:
        while (n := conn.recv_into(buf)) > 0:
            t = time.monotonic()
            result.records.append(Delivery(t, n, flow))
            result.nbytes += n
            verifier.feed(view[:n])
            if on_progress is not None and progress_s > 0 and t >= next_progress:
                on_progress(t, result.nbytes)
                next_progress = t + progress_s
    except Stopped:
        result.stopped = True
    result.verified, result.first_bad_offset = verifier.ok, verifier.first_bad
    return result


@dataclass(frozen=True, slots=True)
class SendResult:
    """What the sender wrote."""

    nbytes: int
    """Bytes handed to the kernel (all of them reached the receiver if it saw as many)."""
    t_start: float
    """time.monotonic() when the connection was up."""
    t_end: float
    """time.monotonic() after the last byte was written and the write side shut down."""
    subflows: tuple[tuple[str, str], ...] = ()
    """MPTCP: each subflow's (local, remote) address when the last byte was written."""


def send(
    host: str,
    port: int,
    pattern: Pattern,
    *,
    seconds: float | None = None,
    nbytes: int | None = None,
    bind: str | None = None,
    cport: int = 0,
    chunk: int = SEND_CHUNK,
    connect_timeout: float = 10.0,
    stream: Stream = PINNED,
    on_start: Callable[[float], None] | None = None,
) -> SendResult:
    """Send the pattern at full speed for `seconds` or `nbytes` (whichever is given);
    ``on_start(t)`` once connected."""
    if (seconds is None) == (nbytes is None):
        raise HarnessError("give exactly one of -t SECONDS or -n BYTES")
    if not 0 < chunk <= PERIOD:
        raise HarnessError(f"chunk must be in 1..{PERIOD}")
    sock = stream.open()
    with sock:
        if bind is not None or cport:
            # A fixed source port pins the ECMP hash (fib_multipath_hash_policy=1: L4).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind or "::", cport))
        sock.settimeout(connect_timeout)
        sock.connect((host, port))
        sock.settimeout(None)
        t_start = time.monotonic()
        if on_start is not None:
            on_start(t_start)
        deadline = t_start + seconds if seconds is not None else float("inf")
        limit = nbytes if nbytes is not None else -1
        sent = 0
        while (limit < 0 and time.monotonic() < deadline) or sent < limit:
            n = chunk if limit < 0 else min(chunk, limit - sent)
            sock.sendall(pattern.slice(sent, n))
            sent += n
        subflows = tuple(subflow_addresses(sock)) if stream.mptcp else ()
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(connect_timeout * 6)
        sock.recv(1)  # wait for the receiver's EOF: every byte was read before we report
        return SendResult(sent, t_start, time.monotonic(), subflows)


def send_streams(
    host: str,
    port: int,
    pattern: Pattern,
    streams: int,
    *,
    seconds: float | None = None,
    nbytes: int | None = None,
    on_start: Callable[[float], None] | None = None,
    **options: Any,
) -> SendResult:
    """``streams`` connections at once (iperf3's -P), each a thread sending the pattern from
    offset 0, each hashed by ECMP on its own (RoCE with as many QPs); ``on_start(t)`` once
    every one is connected. The result sums them: bytes, first start, last end."""
    if streams < 1:
        raise HarnessError("streams must be >= 1")
    if streams == 1:
        return send(
            host, port, pattern, seconds=seconds, nbytes=nbytes, on_start=on_start, **options
        )
    if options.get("cport"):
        raise HarnessError("a fixed source port (--cport) takes one stream, not -P")
    shares = [None] * streams if nbytes is None else _split(nbytes, streams)
    results: list[SendResult | BaseException] = []
    lock = threading.Lock()
    connected: list[float] = []

    def started(t: float) -> None:
        with lock:
            connected.append(t)
            if len(connected) == streams and on_start is not None:
                on_start(t)

    def one(share: int | None) -> None:
        try:
            res: SendResult | BaseException = send(
                host, port, pattern, seconds=seconds, nbytes=share, on_start=started, **options
            )
        except (HarnessError, OSError) as exc:
            res = exc
        with lock:
            results.append(res)

    threads = [threading.Thread(target=one, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed
    done = [r for r in results if isinstance(r, SendResult)]
    return SendResult(
        sum(r.nbytes for r in done), min(r.t_start for r in done), max(r.t_end for r in done)
    )


def _split(total: int, parts: int) -> list[int | None]:
    return [total // parts + (i < total % parts) for i in range(parts)]


# -- command line -----------------------------------------------------------------------------


def _emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, separators=(",", ":")), flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mrc_transport.harness.tcpflow",
        description="TCP baseline flow with per-recv records",
    )
    sub = parser.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv", help="accept one connection, record and verify it")
    r.add_argument("--port", type=int, default=5201)
    r.add_argument("--bind", default="::")
    r.add_argument("--flow", default="tcp", help="flow id written into every record")
    r.add_argument("--records", help="write records here (JSONL); default: print them")
    r.add_argument(
        "--progress",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="print a progress line this often",
    )
    r.add_argument("--accept-timeout", type=float, default=30.0)
    r.add_argument(
        "--streams", type=_positive, default=1, help="connections to accept (the sender's -P)"
    )
    s = sub.add_parser("send", help="send the pattern at full speed")
    s.add_argument("host")
    s.add_argument("--port", type=int, default=5201)
    group = s.add_mutually_exclusive_group(required=True)
    group.add_argument("-t", "--time", type=float, dest="seconds")
    group.add_argument("-n", "--bytes", type=int, dest="nbytes")
    s.add_argument("--bind")
    s.add_argument("--cport", type=int, default=0, help="source port (pins the ECMP hash)")
    s.add_argument("--chunk", type=int, default=SEND_CHUNK)
    s.add_argument(
        "-P", "--parallel", type=_positive, default=1, help="connections at once (like iperf3)"
    )
    for p in (r, s):
        p.add_argument("--seed", default=DEFAULT_SEED)
        how = p.add_mutually_exclusive_group()
        how.add_argument(
            "--rehash",
            action="store_true",
            help="let Linux move the flow to another path on RTO (default: pinned)",
        )
        how.add_argument(
            "--mptcp", action="store_true", help="one MPTCP connection (both ends must say so)"
        )
    return parser


def _stream(args: argparse.Namespace) -> Stream:
    return Stream(mptcp=args.mptcp, rehash=args.rehash)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 128:
        raise argparse.ArgumentTypeError(f"must be in 1..128, not {value}")
    return value


def _run_recv(args: argparse.Namespace) -> int:
    sock = listen(args.port, args.bind, stream=_stream(args))
    # the drain runs in this thread, where the signal is handled (the main one, when run
    # as a program; a test may call main in another, without the handler)
    handle = args.streams == 1 and threading.current_thread() is threading.main_thread()
    if handle:
        signal.signal(signal.SIGTERM, _stop)
    with sock:
        _emit({"event": "listening", "port": sock.getsockname()[1], "t_mono": time.monotonic()})
        try:
            result = _receive(args, sock)
        except Stopped:  # before a sender connected
            result = RecvResult(args.flow, stopped=True)
        if handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if args.records:
        write_records(args.records, result.records)
    else:
        for d in result.records:
            print(record_line(d.t_mono, d.nbytes, d.flow))
    _emit(result.summary())
    return 0 if result.verified else 1


def _receive(args: argparse.Namespace, sock: socket.socket) -> RecvResult:
    if args.streams > 1:
        return receive_streams(
            sock,
            args.flow,
            Pattern(args.seed),
            args.streams,
            accept_timeout=args.accept_timeout,
            stream=_stream(args),
        )
    return receive(
        sock,
        args.flow,
        Pattern(args.seed),
        accept_timeout=args.accept_timeout,
        on_progress=lambda t, n: _emit({"event": "progress", "t_mono": t, "bytes": n}),
        progress_s=args.progress,
        stream=_stream(args),
    )


def _run_send(args: argparse.Namespace) -> int:
    res = send_streams(
        args.host,
        args.port,
        Pattern(args.seed),
        args.parallel,
        seconds=args.seconds,
        nbytes=args.nbytes,
        on_start=lambda t: _emit({"event": "start", "t_mono": t}),
        bind=args.bind,
        cport=args.cport,
        chunk=args.chunk,
        stream=_stream(args),
    )
    end = {"event": "end", "bytes_sent": res.nbytes, "t_start": res.t_start, "t_end": res.t_end}
    if args.mptcp:
        end["subflows"] = [list(pair) for pair in res.subflows]
    _emit(end)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # as `mrc perf` does (cli/perf.py): the baseline must not stall for a full collection
    # of this interpreter's modules either
    gc.freeze()
    try:
        return _run_recv(args) if args.role == "recv" else _run_send(args)
    except (HarnessError, OSError) as exc:
        print(f"tcpflow {args.role}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
