"""`mrc perf`: iperf3's flags and output over MRC. Argument parsing and printing only;
the session logic is mrc_transport/io/perf.py, the endpoint mrc_transport/io/endpoint.py.

    mrc perf -s [-1] [-p PORT]                       server (in a lab host or a plain host)
    mrc perf -c h0 [-t 10 | -n 100M] [-P 4] [-R]     client; HOST may be a lab host name
    mrc perf --lab LAB --from h4 --to h0 [...]       both ends, each in its namespace
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from mrc_transport.io.paths import PathProvider

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}  # iperf3: K = 1024
_RATE_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}  # iperf3: -b 100M = 1e8


def register(subparsers: Any, help_text: str) -> None:
    p = subparsers.add_parser("perf", help=help_text, description=help_text)
    mode = p.add_argument_group("mode")
    mode.add_argument("-s", "--server", action="store_true", help="run as server")
    mode.add_argument("-c", "--client", metavar="HOST", help="run as client to HOST")
    mode.add_argument("--from", dest="src", metavar="HOST", help="one-shot: client host (lab)")
    mode.add_argument("--to", dest="dst", metavar="HOST", help="one-shot: server host (lab)")
    p.add_argument("-1", "--one-off", action="store_true", help="server: exit after one test")
    p.add_argument("-p", "--port", type=int, default=4791, help="UDP port (default 4791)")
    p.add_argument("-t", "--time", type=float, default=None, help="seconds (default 10)")
    p.add_argument("-n", "--bytes", default=None, help="bytes to send, e.g. 100M (K = 1024)")
    p.add_argument("-i", "--interval", type=float, default=1.0, help="report every N s (0: off)")
    p.add_argument("-P", "--parallel", type=int, default=1, help="parallel connections")
    p.add_argument("-R", "--reverse", action="store_true", help="the server sends")
    p.add_argument("-b", "--bitrate", default="0", help="target rate per connection, e.g. 100M")
    p.add_argument("-l", "--length", default="128K", help="message size (default 128K)")
    p.add_argument("-J", "--json", action="store_true", help="one JSON document at the end")
    p.add_argument("--json-stream", action="store_true", help="one JSON event per line")
    p.add_argument("--logfile", metavar="FILE", help="write the output here")
    p.add_argument("--evs", type=int, default=128, help="active EVs per connection")
    p.add_argument("--planes", default=None, help="planes the sender uses, e.g. 0,2")
    p.add_argument("--encoding", choices=("usid", "srh"), default="usid")
    p.add_argument("--cc", default="nscc", help="congestion control: nscc or fixed")
    p.add_argument(
        "--cc-scope",
        choices=("plane", "connection"),
        default="plane",
        help="a window per plane (default) or one for the connection (UET)",
    )
    p.add_argument("--scheduler", default="random", help="spraying scheduler: random, rr, reps")
    p.add_argument("--mss", type=int, default=None, help="data bytes per packet (default: MTU)")
    p.add_argument("--lab", metavar="LAB", help="lab name (default: the lab this host is in)")
    p.add_argument("--paths-file", metavar="FILE", help="YAML file of SRv6 paths (no lab)")
    p.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="SPEC",
        help="an SRv6 path to HOST: plane=0,src=A,dst=B,usid=C,segments=S1+S2,port=X",
    )
    p.add_argument("--records", metavar="FILE", help="receiver: per-delivery JSON lines")
    p.add_argument("--flow", default="mrc", help="flow name in --records (default mrc)")
    p.add_argument(
        "--events",
        metavar="FILE",
        help="recovery events (RTOs, retransmits, retired EVs) as JSON lines, at exit",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the endpoint's RNG")
    p.set_defaults(func=run)


# ------------------------------------------------------------------ argument checks


def parse_size(text: str, what: str) -> int:
    m = _SIZE_RE.match(text)
    if m is None:
        raise UsageError(f"{what}: bad size {text!r} (write e.g. 128K or 100M)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def parse_rate(text: str) -> float:
    m = _SIZE_RE.match(text)
    if m is None:
        raise UsageError(f"-b: bad rate {text!r} (write e.g. 100M)")
    return float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]


def parse_planes(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    try:
        planes = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise UsageError(f"--planes: expected numbers like 0,2, got {text!r}") from None
    if not planes or any(p < 0 for p in planes):
        raise UsageError(f"--planes: expected plane numbers like 0,2, got {text!r}")
    return planes


def check_args(args: argparse.Namespace) -> None:
    one_shot = args.src is not None or args.dst is not None
    modes = sum((bool(args.server), args.client is not None, one_shot))
    if modes != 1:
        raise UsageError("give exactly one of -s, -c HOST, or --from HOST --to HOST")
    if one_shot and (args.src is None or args.dst is None or args.lab is None):
        raise UsageError("one-shot mode needs --lab LAB --from HOST --to HOST")
    if args.time is not None and args.bytes is not None:
        raise UsageError("-t and -n exclude each other")
    if args.time is not None and not 0 < args.time <= 86400:
        raise UsageError("-t must be in (0, 86400] seconds")
    if not 1 <= args.parallel <= 128:
        raise UsageError("-P must be in 1..128")
    if args.interval < 0:
        raise UsageError("-i must be >= 0")
    if not 0 < args.port < 65536:
        raise UsageError("-p must be a UDP port 1..65535")
    if not 1 <= args.evs <= 4096:
        raise UsageError("--evs must be in 1..4096")
    if args.json and args.json_stream:
        raise UsageError("-J and --json-stream exclude each other")
    if args.mss is not None and not 256 <= args.mss <= 65000:
        raise UsageError("--mss must be in 256..65000")
    if args.lab is not None and (args.paths_file or args.path):
        raise UsageError("--lab and --paths-file/--path exclude each other")
    from mrc_transport.protocol.cc import CONGESTION_CONTROLS
    from mrc_transport.protocol.scheduler import SCHEDULERS

    if args.cc not in CONGESTION_CONTROLS:
        known = ", ".join(sorted(CONGESTION_CONTROLS))
        raise UsageError(f"--cc: unknown {args.cc!r} (known: {known})")
    if args.scheduler not in SCHEDULERS:
        raise UsageError(
            f"--scheduler: unknown {args.scheduler!r} (known: {', '.join(sorted(SCHEDULERS))})"
        )
    length = parse_size(args.length, "-l")
    if not 1 <= length <= 1 << 30:
        raise UsageError("-l must be in 1..1G")
    if args.bytes is not None and parse_size(args.bytes, "-n") <= 0:
        raise UsageError("-n must be positive")
    parse_rate(args.bitrate)
    parse_planes(args.planes)
    for flag, path in (("--events", args.events), ("--records", args.records)):
        folder = os.path.dirname(os.path.abspath(path)) if path else ""
        if path and not os.path.isdir(folder):
            raise UsageError(f"{flag} {path}: no directory {folder}")


def run(args: argparse.Namespace) -> int:
    check_args(args)
    if args.src is not None:
        return run_one_shot(args)
    out = Output.open(args)
    try:
        if args.server:
            return run_server(args, out)
        return run_client(args, out)
    finally:
        out.close()


# ------------------------------------------------------------------ output


@dataclass
class Output:
    """Text, -J (one document) or --json-stream (one event per line), to stdout or a file."""

    stream: TextIO
    mode: str  # "text", "json", "stream"
    own: bool
    doc: dict[str, Any] = field(default_factory=lambda: {"start": {}, "intervals": [], "end": {}})

    @classmethod
    def open(cls, args: argparse.Namespace) -> Output:
        mode = "json" if args.json else "stream" if args.json_stream else "text"
        if args.logfile:
            try:
                return cls(open(args.logfile, "a"), mode, True)
            except OSError as exc:
                raise UsageError(f"--logfile {args.logfile}: {exc.strerror}") from None
        return cls(sys.stdout, mode, False)

    def text(self, line: str) -> None:
        if self.mode == "text":
            print(line, file=self.stream, flush=True)

    def event(self, name: str, data: dict[str, Any]) -> None:
        if self.mode == "stream":
            print(json.dumps({"event": name, "data": data}), file=self.stream, flush=True)
        elif self.mode == "json":
            if name == "interval":
                self.doc["intervals"].append(data)
            elif name in ("start", "end"):
                self.doc[name] = data

    def finish(self) -> None:
        """Print the -J document and start the next one (a server that is not -1 writes
        one per test, as iperf3's does)."""
        if self.mode == "json":
            print(json.dumps(self.doc, indent=2), file=self.stream, flush=True)
        self.doc = {"start": {}, "intervals": [], "end": {}}

    def close(self) -> None:
        if self.own:
            self.stream.close()


def human_bytes(n: float) -> str:
    for unit, size in (("GBytes", 1024**3), ("MBytes", 1024**2), ("KBytes", 1024)):
        if n >= size:
            return f"{n / size:6.2f} {unit}"
    return f"{n:6.0f} Bytes "


def human_rate(bps: float) -> str:
    for unit, size in (("Gbits/sec", 1e9), ("Mbits/sec", 1e6), ("Kbits/sec", 1e3)):
        if bps >= size:
            return f"{bps / size:6.2f} {unit}"
    return f"{bps:6.0f} bits/sec "


def rate(nbytes: float, seconds: float) -> float:
    return nbytes * 8 / seconds if seconds > 0 else 0.0


# ------------------------------------------------------------------ shared setup


def _provider(args: argparse.Namespace) -> PathProvider:
    from mrc_transport.io.paths import (
        LabPaths,
        PathError,
        StaticPaths,
        load_static,
        parse_path_spec,
    )

    try:
        if args.paths_file or args.path:
            static = load_static(args.paths_file) if args.paths_file else StaticPaths()
            if args.path:
                if args.client is None:
                    raise UsageError("--path lists paths to -c HOST; a server uses --paths-file")
                static.add(args.client, [parse_path_spec(s) for s in args.path])
            return static
        return LabPaths(args.lab)
    except PathError as exc:
        raise UsageError(str(exc)) from None


def _config(args: argparse.Namespace, provider: Any) -> Any:
    from mrc_transport.io.endpoint import IO_HOST_DELAY, default_mss
    from mrc_transport.protocol import Config

    nic_rate, host_delay = 100e9, IO_HOST_DELAY
    mss = args.mss or default_mss(args.encoding)
    topo = getattr(provider, "topo", None)
    if topo is not None:  # the lab's real port rate bounds NSCC's window (Config docstring)
        nic_rate = float(topo.host_link.rate_bps * topo.planes)
        # a loaded path stores and forwards each packet at every hop (host-T0-T1-T0-host)
        # but the min RTT is taken with full tbf buckets, which forward at once
        host_delay += 2 * mss * 8 * (1 / topo.host_link.rate_bps + 1 / topo.fabric_link.rate_bps)
    return Config(
        mss=mss,
        ev_count=args.evs,
        cc=args.cc,
        cc_scope=args.cc_scope,
        scheduler=args.scheduler,
        nic_rate_bps=nic_rate,
        host_delay=host_delay,
    )


def _write_records(args: argparse.Namespace, records: list[tuple[float, int]]) -> None:
    """--records: one delivery record per message, as the demo reads them."""
    if not args.records:
        return
    from mrc_transport import jsonl
    from mrc_transport.demo.records import record

    jsonl.write(args.records, (record(t, n, args.flow) for t, n in records))


@contextlib.asynccontextmanager
async def _events_to(path: str | None, ep: Any) -> AsyncIterator[None]:
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


# ------------------------------------------------------------------ client


def run_client(args: argparse.Namespace, out: Output) -> int:
    import trio

    from mrc_transport.io.paths import PathError

    provider = _provider(args)
    try:
        paths = provider.paths_to(args.client)
    except PathError as exc:
        raise UsageError(str(exc)) from None
    planes = parse_planes(args.planes)
    if planes:
        paths = [p for p in paths if p.plane in planes]
        if not paths:
            raise UsageError(f"--planes {args.planes}: no path to {args.client} in those planes")
    cfg = _config(args, provider)
    try:
        return trio.run(_client_main, args, out, paths, cfg, planes)
    except OSError as exc:
        print(f"mrc perf: error: {exc}", file=sys.stderr)
        return 1


async def _client_main(
    args: argparse.Namespace, out: Output, paths: list[Any], cfg: Any, planes: tuple[int, ...]
) -> int:
    import random

    import trio

    from mrc_transport.io import perf
    from mrc_transport.io.endpoint import open_endpoint

    nbytes = parse_size(args.bytes, "-n") if args.bytes is not None else 0
    duration = args.time if args.time is not None else (0.0 if nbytes else 10.0)
    session = secrets.token_hex(4)
    rng = random.Random(args.seed)
    cpu0, wall0 = perf.cpu_seconds(), time.monotonic()
    start = _start_doc(args, paths, cfg, duration, nbytes, session)
    out.event("start", start)
    out.text(
        f"Connecting to host {args.client}, port {args.port}: {len(paths)} paths in "
        f"{len({p.plane for p in paths})} planes, {args.encoding}, {cfg.ev_count} EVs, "
        f"mss {cfg.mss}"
    )
    streams: list[perf.StreamStats] = []
    failure: str | None = None
    async with (
        open_endpoint(cfg, port=args.port, encoding=args.encoding, rng=rng) as ep,
        _events_to(args.events, ep),
    ):
        async with trio.open_nursery() as outer:
            outer.start_soon(_Reporter(out, streams, args.interval).run)
            async with trio.open_nursery() as nursery:
                for i in range(args.parallel):
                    handle = ep.connect(paths)
                    share = nbytes // args.parallel + (i < nbytes % args.parallel)
                    params = perf.PerfParams(
                        session,
                        i,
                        args.parallel,
                        args.reverse,
                        duration,
                        share,
                        parse_size(args.length, "-l"),
                        parse_rate(args.bitrate),
                        planes,
                    )
                    stats = perf.StreamStats(handle, sending=not args.reverse)
                    streams.append(stats)
                    nursery.start_soon(
                        _guard,
                        perf.client_stream(handle, params, stats, time.monotonic),
                        streams,
                        i,
                    )
            outer.cancel_scope.cancel()
        failure = next((s.local.get("error") for s in streams if s.local.get("error")), None)
        await ep.aclose(0.5)
        ep_counters = ep.counters()
    cpu1, wall1 = perf.cpu_seconds(), time.monotonic()
    end = _end_doc(streams, cpu0, cpu1, wall1 - wall0, ep_counters)
    _print_end(out, streams, end, args.reverse)
    out.event("end", end)
    out.finish()
    receiving = [s for s in streams if not s.sending]
    _write_records(args, [r for s in receiving for r in s.records])
    if failure is not None:
        print(f"mrc perf: error: {failure}", file=sys.stderr)
        return 1
    if not end["verified"]:
        print(
            "mrc perf: error: transfer NOT verified (byte count or digest differ)", file=sys.stderr
        )
        return 1
    return 0


async def _guard(coro: Any, streams: list[Any], i: int) -> None:
    """Run one stream; a failure is recorded on it, not raised through the nursery."""
    from mrc_transport.io.endpoint import ConnectionLost
    from mrc_transport.io.perf import PerfError

    try:
        await coro
    except (ConnectionLost, PerfError) as exc:
        streams[i].local["error"] = f"connection {i}: {type(exc).__name__}: {exc}"


class _Reporter:
    """Prints one line per interval: iperf3's columns plus EVs, ECN marks and sRTT."""

    def __init__(self, out: Output, streams: list[Any], interval: float) -> None:
        self.out, self.streams, self.interval = out, streams, interval
        self.t0 = time.monotonic()
        self._last = (0, 0, 0)

    async def run(self, running: Callable[[], bool] = lambda: True) -> None:
        """A line per interval while ``running()`` (until cancelled, by default)."""
        import trio

        if self.interval <= 0:
            return
        self.out.text(
            "[ ID] Interval           Transfer     Bitrate         Retr  EVs act/ret   ECN     sRTT"
        )
        n = 1
        while True:
            await trio.sleep_until(_trio_time(self.t0 + n * self.interval))
            if not running():
                return
            self.line((n - 1) * self.interval, n * self.interval)
            n += 1

    def line(self, a: float, b: float) -> None:
        from mrc_transport.io.perf import conn_report

        nbytes = sum(s.progress_bytes for s in self.streams)
        counters = [s.handle.conn.counters for s in self.streams]
        retr = sum(c.retransmits for c in counters)
        ecn = sum(c.ecn_echoes + c.ce_received for c in counters)
        db, dr, de = nbytes - self._last[0], retr - self._last[1], ecn - self._last[2]
        self._last = (nbytes, retr, ecn)
        reports = [conn_report(s.handle) for s in self.streams]
        active = sum(p["usable_evs"] for r in reports for p in r["planes"])
        retired = sum(p["retired_evs"] for r in reports for p in r["planes"])
        srtts = [r["srtt_us"] for r in reports if r["srtt_us"] is not None]
        srtt = sum(srtts) / len(srtts) if srtts else None
        seconds = b - a
        self.out.text(
            f"[SUM] {a:6.2f}-{b:<6.2f} sec  {human_bytes(db)}  {human_rate(rate(db, seconds))}"
            f"  {dr:4d}  {active:5d}/{retired:<5d} {de:5d}  "
            + (f"{srtt / 1000:6.2f}ms" if srtt is not None else "     -")
        )
        self.out.event(
            "interval",
            {
                "sum": {
                    "start": a,
                    "end": b,
                    "seconds": seconds,
                    "bytes": db,
                    "bits_per_second": rate(db, seconds),
                    "retransmits": dr,
                    "ecn_marks": de,
                    "active_evs": active,
                    "retired_evs": retired,
                    "srtt_us": srtt,
                    "sender": self.streams[0].sending if self.streams else True,
                }
            },
        )


def _trio_time(t_mono: float) -> float:
    import trio

    return trio.current_time() + (t_mono - time.monotonic())


def _start_doc(
    args: argparse.Namespace, paths: list[Any], cfg: Any, duration: float, nbytes: int, session: str
) -> dict[str, Any]:
    from mrc_transport import wire

    test = _test_start(
        args.parallel, parse_size(args.length, "-l"), duration, nbytes, args.reverse,
        parse_rate(args.bitrate),
    )  # fmt: skip
    test.update(
        evs=cfg.ev_count,
        planes=sorted({p.plane for p in paths}),
        paths=len(paths),
        encoding=args.encoding,
        cc=cfg.cc,
        cc_scope=cfg.cc_scope,
        scheduler=cfg.scheduler,
        mss=cfg.mss,
        codec=wire.BACKEND,
    )
    return _doc_start(session, "connecting_to", {"host": args.client, "port": args.port}, test)


def _doc_start(
    session: str, peer_key: str, peer: dict[str, Any], test: dict[str, Any]
) -> dict[str, Any]:
    """iperf3's ``start`` object, client's or server's: who, when, and the test."""
    from mrc_transport import __version__

    return {
        "version": f"mrc {__version__}",
        "system_info": os.uname().sysname,
        "timestamp": {"timesecs": int(time.time())},
        peer_key: peer,
        "cookie": session,
        "test_start": test,
    }


def _test_start(
    streams: int, blksize: int, duration: float, nbytes: int, reverse: bool, bitrate: float
) -> dict[str, Any]:
    """iperf3's ``test_start`` keys, both ends'."""
    return {
        "protocol": "MRC",
        "num_streams": streams,
        "blksize": blksize,
        "duration": duration,
        "bytes": nbytes,
        "reverse": int(reverse),
        "target_bitrate": bitrate,
    }


def _sender_report(s: Any) -> dict[str, Any]:
    report: dict[str, Any] = s.local if s.sending else s.peer
    return report


def _receiver_report(s: Any) -> dict[str, Any]:
    report: dict[str, Any] = s.peer if s.sending else s.local
    return report


def _cpu_percent(who: str, user: float, system: float, wall: float) -> dict[str, float]:
    """iperf3's ``<who>_total``, ``<who>_user`` and ``<who>_system`` CPU percentages."""
    if wall <= 0:
        return {f"{who}_total": 0.0, f"{who}_user": 0.0, f"{who}_system": 0.0}
    return {
        f"{who}_total": 100 * (user + system) / wall,
        f"{who}_user": 100 * user / wall,
        f"{who}_system": 100 * system / wall,
    }


def _remote_cpu(streams: list[Any]) -> dict[str, float]:
    """iperf3's remote_* CPU keys from the peer's E or R message (its process's CPU over
    its data phase; the busiest stream's); empty when the peer did not say (it failed
    first)."""
    best: dict[str, float] = {}
    for s in streams:
        cpu, seconds = s.peer.get("cpu"), s.peer.get("seconds")
        try:
            user, system, wall = float(cpu["user_s"]), float(cpu["system_s"]), float(seconds)
        except (TypeError, KeyError, ValueError):
            continue
        mine = _cpu_percent("remote", user, system, wall)
        if wall > 0 and mine["remote_total"] > best.get("remote_total", -1.0):
            best = mine
    return best


def _end_doc(
    streams: list[Any],
    cpu0: tuple[float, float],
    cpu1: tuple[float, float],
    wall: float,
    ep_counters: dict[str, Any],
) -> dict[str, Any]:
    out_streams = []
    sent_b = recv_b = retr = 0
    sent_s = recv_s = 0.0
    planes: dict[int, dict[str, Any]] = {}
    evs: list[dict[str, Any]] = []
    for i, s in enumerate(streams):
        snd, rcv = _sender_report(s), _receiver_report(s)
        sb, rb = int(snd.get("bytes", 0)), int(rcv.get("bytes", 0))
        ss, rs = float(snd.get("seconds", 0.0)), float(rcv.get("seconds", 0.0))
        r = int(snd.get("counters", {}).get("retransmits", 0))
        sent_b, recv_b, retr = sent_b + sb, recv_b + rb, retr + r
        sent_s, recv_s = max(sent_s, ss), max(recv_s, rs)
        for p in snd.get("planes", []):
            acc = planes.setdefault(p["plane"], {k: 0 for k in p if k not in ("plane", "up")})
            for k in acc:
                if k == "marked":  # a fraction: the most marked stream's
                    acc[k] = max(acc[k], float(p.get(k, 0.0)))
                else:
                    acc[k] += int(p.get(k, 0))
        evs += [{"stream": i, **e} for e in snd.get("evs", [])]
        out_streams.append(
            {
                "id": i,
                "sender": {
                    "bytes": sb,
                    "seconds": ss,
                    "bits_per_second": rate(sb, ss),
                    "retransmits": r,
                    "srtt_us": snd.get("srtt_us"),
                },
                "receiver": {"bytes": rb, "seconds": rs, "bits_per_second": rate(rb, rs)},
                "verified": bool(s.verified),
                "error": s.local.get("error"),
                "sender_counters": snd.get("counters", {}),
                "receiver_counters": rcv.get("counters", {}),
            }
        )
    total_sent = sum(p["sent"] for p in planes.values()) or 1
    plane_list = [
        {"plane": k, "share": v["sent"] / total_sent, **v} for k, v in sorted(planes.items())
    ]
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return {
        "streams": out_streams,
        "sum_sent": {
            "start": 0,
            "end": sent_s,
            "seconds": sent_s,
            "bytes": sent_b,
            "bits_per_second": rate(sent_b, sent_s),
            "retransmits": retr,
        },
        "sum_received": {
            "start": 0,
            "end": recv_s,
            "seconds": recv_s,
            "bytes": recv_b,
            "bits_per_second": rate(recv_b, recv_s),
        },
        "verified": bool(streams) and all(s.verified for s in streams),
        "planes": plane_list,
        "evs": evs,
        "endpoint": ep_counters,
        "cpu_utilization_percent": {
            **_cpu_percent("host", user, system, wall),
            **_remote_cpu(streams),
        },
        "cpu_seconds": user + system,
    }


def cpu_line(cpu: dict[str, float], reverse: bool) -> str:
    """iperf3's "CPU Utilization: local/sender ..., remote/receiver ..." line."""
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


def _print_end(out: Output, streams: list[Any], end: dict[str, Any], reverse: bool) -> None:
    ss, sr = end["sum_sent"], end["sum_received"]
    out.text("- " * 36)
    out.text("[ ID] Interval           Transfer     Bitrate         Retr")
    out.text(
        f"[SUM]   0.00-{ss['seconds']:<6.2f} sec  {human_bytes(ss['bytes'])}  "
        f"{human_rate(ss['bits_per_second'])}  {ss['retransmits']:4d}   sender"
    )
    out.text(
        f"[SUM]   0.00-{sr['seconds']:<6.2f} sec  {human_bytes(sr['bytes'])}  "
        f"{human_rate(sr['bits_per_second'])}         receiver"
    )
    out.text("Per plane (sender's view):")
    out.text(" plane  share   packets    acked   ECN  lost  EVs usable/retired")
    for p in end["planes"]:
        out.text(
            f" {p['plane']:5d}  {100 * p['share']:5.1f}%  {p['sent']:8d} {p['acked']:8d} "
            f"{p['ecn']:5d} {p['lost']:5d}  {p['usable_evs']:4d}/{p['retired_evs']}"
        )
    out.text(cpu_line(end["cpu_utilization_percent"], reverse))
    bad = end["endpoint"].get("bad_packets") or {}
    if bad:
        out.text(f"dropped malformed packets: {bad}")
    if end["verified"]:
        out.text(f"verified: {sr['bytes']} bytes, xxh3-128 digests equal on both ends")
    else:
        errors = [s["error"] for s in end["streams"] if s["error"]]
        out.text("NOT VERIFIED" + (f": {'; '.join(errors)}" if errors else ""))


# ------------------------------------------------------------------ server


def run_server(args: argparse.Namespace, out: Output) -> int:
    import trio

    provider = _provider(args)
    cfg = _config(args, provider)
    try:
        return trio.run(_server_main, args, out, provider, cfg)
    except OSError as exc:
        print(f"mrc perf: error: {exc}", file=sys.stderr)
        return 1


async def _server_main(args: argparse.Namespace, out: Output, provider: Any, cfg: Any) -> int:
    import random

    import trio

    from mrc_transport.io.endpoint import open_endpoint

    sessions: dict[str, _Session] = {}
    done = trio.Event()
    failed: list[str] = []
    async with (
        open_endpoint(
            cfg,
            paths_for=provider.paths_for,
            port=args.port,
            encoding=args.encoding,
            rng=random.Random(args.seed),
        ) as ep,
        _events_to(args.events, ep),
    ):
        out.text(f"Server listening on {args.port} ({args.encoding})")
        out.event("listening", {"port": args.port})
        print(f"Server listening on {args.port}", file=sys.stderr, flush=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_server_done_watch, done, nursery)
            while not done.is_set():
                handle = await ep.accept()
                nursery.start_soon(
                    _server_conn, args, out, ep, handle, sessions, done, failed, nursery
                )
    return 1 if failed else 0


async def _server_done_watch(done: Any, nursery: Any) -> None:
    await done.wait()
    nursery.cancel_scope.cancel()


@dataclass
class _Session:
    """The connections of one client run, as the server sees them: reported together
    (interval lines and one -J document per test, as iperf3's server does)."""

    streams: list[Any]
    reporter: Any  # trio.CancelScope of the interval reporter
    cpu0: tuple[float, float]
    wall0: float
    finished: int = 0


def _server_session(
    args: argparse.Namespace, out: Output, sessions: dict[str, _Session], nursery: Any,
    params: Any, stats: Any, handle: Any,
) -> None:  # fmt: skip
    """Count a stream that sent its P into its session; the session's first stream
    starts its report."""
    import trio

    from mrc_transport.io import perf

    session = sessions.get(params.session)
    if session is None:
        session = sessions[params.session] = _Session(
            [], trio.CancelScope(), perf.cpu_seconds(), time.monotonic()
        )
        out.event("start", _server_start_doc(args, params, handle))
        nursery.start_soon(_report_session, session, _Reporter(out, session.streams, args.interval))
    session.streams.append(stats)


async def _report_session(session: _Session, reporter: _Reporter) -> None:
    # Lines while a stream of the session runs: a client that died before all its
    # streams sent P leaves the session short of -P streams, never to end.
    with session.reporter:
        await reporter.run(lambda: session.finished < len(session.streams))


def _server_start_doc(args: argparse.Namespace, params: Any, handle: Any) -> dict[str, Any]:
    test = _test_start(
        params.parallel, params.length, params.duration, params.nbytes * params.parallel,
        params.reverse, params.rate_bps,
    )  # fmt: skip
    test.update(planes=list(params.planes), encoding=args.encoding, port=args.port)
    conn = handle.conn
    peer = {"conn": conn.conn, "peer_conn": conn.peer_conn}
    return _doc_start(params.session, "accepted_connection", peer, test)


async def _server_conn(
    args: argparse.Namespace,
    out: Output,
    ep: Any,
    handle: Any,
    sessions: dict[str, _Session],
    done: Any,
    failed: list[str],
    nursery: Any,
) -> None:
    from mrc_transport.io import perf
    from mrc_transport.io.endpoint import ConnectionLost

    box: list[Any] = []

    def on_params(p: Any, s: Any) -> None:
        box.append(p)
        _server_session(args, out, sessions, nursery, p, s, handle)

    try:
        params, stats = await perf.server_stream(handle, time.monotonic, on_params)
    except (ConnectionLost, perf.PerfError) as exc:
        out.text(f"connection failed: {exc}")
        if box:  # a test that started and broke; a connection without valid P is not one
            failed.append(str(exc))
            _stream_finished(args, out, ep, sessions, box[0], done)
            if args.one_off:
                done.set()
        return
    nbytes = stats.data_bytes
    seconds = (stats.t1 - stats.t0) or 1e-9
    role = "sent" if stats.sending else "received"
    verdict = "verified" if stats.verified else "NOT VERIFIED"
    out.text(
        f"[{params.index:3d}] {role} {human_bytes(nbytes)} in {seconds:.2f} s, "
        f"{human_rate(rate(nbytes, seconds))}, {verdict}"
    )
    out.event(
        "stream_end",
        {
            "session": params.session,
            "index": params.index,
            "bytes": nbytes,
            "seconds": seconds,
            "verified": stats.verified,
            "report": stats.local,
            "endpoint": ep.counters(),
        },
    )
    if not stats.verified:
        failed.append(f"session {params.session} stream {params.index} not verified")
    _stream_finished(args, out, ep, sessions, params, done)


def _stream_finished(
    args: argparse.Namespace, out: Output, ep: Any, sessions: dict[str, _Session],
    params: Any, done: Any,
) -> None:  # fmt: skip
    """One more of a session's streams ended (or failed); the last one ends its report:
    the summary lines, the -J document, the --records file."""
    from mrc_transport.io import perf

    session = sessions[params.session]
    session.finished += 1
    if session.finished < params.parallel:
        return
    del sessions[params.session]
    session.reporter.cancel()
    streams = session.streams
    end = _end_doc(
        streams, session.cpu0, perf.cpu_seconds(), time.monotonic() - session.wall0, ep.counters()
    )
    _print_end(out, streams, end, reverse=not params.reverse)
    out.event("end", end)
    out.finish()
    _write_records(args, [r for s in streams if not s.sending for r in s.records])
    if args.one_off:
        done.set()


# ------------------------------------------------------------------ one-shot


def _passthrough(args: argparse.Namespace) -> list[str]:
    """The flags both ends share, in argv form."""
    argv = [
        "-p",
        str(args.port),
        "--lab",
        args.lab,
        "--encoding",
        args.encoding,
        "--evs",
        str(args.evs),
        "--cc",
        args.cc,
        "--cc-scope",
        args.cc_scope,
        "--scheduler",
        args.scheduler,
    ]
    if args.mss:
        argv += ["--mss", str(args.mss)]
    return argv


def server_events_path(path: str) -> str:
    """One-shot mode: the server's --events file beside the client's (a.jsonl ->
    a.server.jsonl)."""
    root, ext = os.path.splitext(path)
    return f"{root}.server{ext or '.jsonl'}"


def run_one_shot(args: argparse.Namespace) -> int:
    """Start the server in --to's namespace, the client in --from's, relay the output."""
    from labs.topology import namespace

    for host in (args.src, args.dst):
        if not os.path.exists(f"/run/netns/{namespace(args.lab, host)}"):
            raise UsageError(f"no host {host!r} in a running lab {args.lab!r}")
    py = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
    server = [*py, "-s", "-1", *_passthrough(args), "-i", "0"]
    client = [
        *py,
        "-c",
        args.dst,
        *_passthrough(args),
        "-i",
        str(args.interval),
        "-P",
        str(args.parallel),
        "-b",
        args.bitrate,
        "-l",
        args.length,
    ]
    if args.time is not None:
        client += ["-t", str(args.time)]
    if args.bytes is not None:
        client += ["-n", args.bytes]
    if args.reverse:
        client.append("-R")
    if args.planes:
        client += ["--planes", args.planes]
    if args.json:
        client.append("-J")
    if args.json_stream:
        client.append("--json-stream")
    if args.logfile:
        client += ["--logfile", args.logfile]
    if args.seed is not None:
        client += ["--seed", str(args.seed)]
    if args.events:
        client += ["--events", os.path.abspath(args.events)]
        server += ["--events", server_events_path(os.path.abspath(args.events))]
    if args.records:
        receiver = client if args.reverse else server
        receiver += ["--records", os.path.abspath(args.records), "--flow", args.flow]
    ns = ["ip", "netns", "exec"]
    srv = subprocess.Popen(
        [*ns, namespace(args.lab, args.dst), *server],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert srv.stderr is not None
        line = srv.stderr.readline()  # "Server listening on PORT", or an error
        if not line.startswith("Server listening"):
            srv.wait(5)
            print(
                f"mrc perf: server failed: {line.strip()} {srv.stderr.read().strip()}",
                file=sys.stderr,
            )
            return 1
        rc = subprocess.call([*ns, namespace(args.lab, args.src), *client])
        try:
            src_rc = srv.wait(15)
        except subprocess.TimeoutExpired:
            srv.kill()
            src_rc = 1
        return rc or src_rc
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
