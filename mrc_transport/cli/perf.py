"""`mrc perf`: iperf3's flags and output over MRC. Argument parsing and checking only; the
run is mrc_transport/perf/ (client.py, server.py, oneshot.py), given a ``PerfOptions``.

    mrc perf -s [-1] [-p PORT]                       server (in a lab host or a plain host)
    mrc perf -c h0 [-t 10 | -n 100M] [-P 4] [-R]     client; HOST may be a lab host name
    mrc perf --lab LAB --from h4 --to h0 [...]       both ends, each in its namespace
    mrc perf --lab LAB --pairs h4:h0,h5:h0 [...]     many pairs in one process, together
"""

from __future__ import annotations

import argparse
import gc
import os

from labs.units import parse_rate, parse_size
from mrc_transport.cli.main import UsageError
from mrc_transport.perf.options import DEFAULT_PORT, OptionsError, PerfOptions


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], help_text: str
) -> None:
    p = subparsers.add_parser("perf", help=help_text, description=help_text)
    _mode_args(p)
    _test_args(p)
    _mrc_args(p)
    _path_args(p)
    p.set_defaults(func=run)


def _mode_args(p: argparse.ArgumentParser) -> None:
    mode = p.add_argument_group("mode")
    mode.add_argument("-s", "--server", action="store_true", help="run as server")
    mode.add_argument("-c", "--client", metavar="HOST", help="run as client to HOST")
    mode.add_argument("--from", dest="src", metavar="HOST", help="one-shot: client host (lab)")
    mode.add_argument("--to", dest="dst", metavar="HOST", help="one-shot: server host (lab)")
    mode.add_argument(
        "--pairs",
        metavar="A:B,...",
        help="many pairs at once in one process, started together (lab), e.g. h4:h0,h5:h0",
    )
    p.add_argument("-1", "--one-off", action="store_true", help="server: exit after one test")


def _test_args(p: argparse.ArgumentParser) -> None:
    """iperf3's flags: the test and its output."""
    p.add_argument("-p", "--port", type=int, default=DEFAULT_PORT, help="UDP port (default 4791)")
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


def _mrc_args(p: argparse.ArgumentParser) -> None:
    """MRC's own: EVs, planes, encoding, congestion control, spraying, recovery."""
    p.add_argument("--evs", type=int, default=128, help="active EVs per connection")
    p.add_argument("--planes", default=None, help="planes the sender uses, e.g. 0,2")
    p.add_argument(
        "--encoding",
        choices=("usid", "srh", "encap"),
        default="usid",
        help="the path in the destination's uSIDs, in an SRH, or uSIDs on an outer header "
        "around an inner one between the NICs (IPv6-in-IPv6, docs/protocol.md)",
    )
    p.add_argument("--cc", default="nscc", help="congestion control: nscc (UEC), nscc-lab or fixed")
    p.add_argument(
        "--cc-scope",
        choices=("connection", "plane"),
        default="connection",
        help="one window for the connection, planes loaded equally (UEC/MRC, default), or "
        "a window per plane with planes weighted by ECN (ours)",
    )
    p.add_argument("--scheduler", default="random", help="spraying scheduler: random, rr, reps")
    p.add_argument(
        "--reverse-evs",
        type=int,
        default=1,
        help="EVs a plane that acknowledgements go on, probed when idle (paper: at least one)",
    )
    p.add_argument(
        "--recovery",
        choices=("sack", "go-back-n"),
        default="sack",
        help="loss recovery: MRC's SACKs (default) or go-back-N, RoCE's reliable connection "
        "emulated (both ends; with --evs 1 it keeps one path)",
    )
    p.add_argument(
        "--no-trim",
        action="store_true",
        help="send data in the no-trim class: a trimming switch drops it above its threshold "
        "instead of trimming it, and loss detection recovers it",
    )
    p.add_argument("--mss", type=int, default=None, help="data bytes per packet (default: MTU)")
    p.add_argument(
        "--moderation",
        choices=("bulk", "paced"),
        default="bulk",
        help="when the receive loop waits 1 ms between reads: at bulk rates (default), or "
        "also at paced ones where the endpoint only receives (about half the CPU of a paced "
        "flow; its SACKs ~1 ms later)",
    )


def _path_args(p: argparse.ArgumentParser) -> None:
    """Where the paths come from, and the files a run may write."""
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


# ------------------------------------------------------------------ argument checks


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


def check_mode(args: argparse.Namespace) -> None:
    one_shot = args.src is not None or args.dst is not None
    pairs = args.pairs is not None
    modes = sum((bool(args.server), args.client is not None, one_shot, pairs))
    if modes != 1:
        raise UsageError(
            "give exactly one of -s, -c HOST, --from HOST --to HOST, or --pairs A:B,..."
        )
    if one_shot and (args.src is None or args.dst is None or args.lab is None):
        raise UsageError("one-shot mode needs --lab LAB --from HOST --to HOST")
    if pairs and args.lab is None:
        raise UsageError("--pairs needs --lab LAB")


def check_args(args: argparse.Namespace) -> None:
    check_mode(args)
    checks = (
        (args.time is not None and args.bytes is not None, "-t and -n exclude each other"),
        (args.time is not None and not 0 < args.time <= 86400, "-t must be in (0, 86400] seconds"),
        (not 1 <= args.parallel <= 128, "-P must be in 1..128"),
        (args.interval < 0, "-i must be >= 0"),
        (not 0 < args.port < 65536, "-p must be a UDP port 1..65535"),
        (not 1 <= args.evs <= 4096, "--evs must be in 1..4096"),
        (not 1 <= args.reverse_evs <= 64, "--reverse-evs must be in 1..64"),
        (args.json and args.json_stream, "-J and --json-stream exclude each other"),
        (args.mss is not None and not 256 <= args.mss <= 65000, "--mss must be in 256..65000"),
        (args.lab is not None and bool(args.paths_file or args.path),
         "--lab and --paths-file/--path exclude each other"),
    )  # fmt: skip
    for bad, message in checks:
        if bad:
            raise UsageError(message)
    _check_algorithms(args)
    if not 1 <= parse_size(args.length, "-l") <= 1 << 30:
        raise UsageError("-l must be in 1..1G")
    if args.bytes is not None and parse_size(args.bytes, "-n") <= 0:
        raise UsageError("-n must be positive")
    parse_rate(args.bitrate, "-b")
    parse_planes(args.planes)
    for flag, path in (("--events", args.events), ("--records", args.records)):
        folder = os.path.dirname(os.path.abspath(path)) if path else ""
        if path and not os.path.isdir(folder):
            raise UsageError(f"{flag} {path}: no directory {folder}")


def _check_algorithms(args: argparse.Namespace) -> None:
    from mrc_transport.protocol.cc import CONGESTION_CONTROLS
    from mrc_transport.protocol.scheduler import SCHEDULERS

    if args.cc not in CONGESTION_CONTROLS:
        known = ", ".join(sorted(CONGESTION_CONTROLS))
        raise UsageError(f"--cc: unknown {args.cc!r} (known: {known})")
    if args.scheduler not in SCHEDULERS:
        raise UsageError(
            f"--scheduler: unknown {args.scheduler!r} (known: {', '.join(sorted(SCHEDULERS))})"
        )


def options(args: argparse.Namespace) -> PerfOptions:
    """The checked flags (check_args) as the run's options."""
    return PerfOptions(
        host=args.client,
        port=args.port,
        duration=args.time,
        nbytes=parse_size(args.bytes, "-n") if args.bytes is not None else 0,
        interval=args.interval,
        parallel=args.parallel,
        reverse=args.reverse,
        rate_bps=parse_rate(args.bitrate, "-b"),
        length=parse_size(args.length, "-l"),
        output="json" if args.json else "stream" if args.json_stream else "text",
        logfile=args.logfile,
        evs=args.evs,
        planes=parse_planes(args.planes),
        encoding=args.encoding,
        cc=args.cc,
        cc_scope=args.cc_scope,
        scheduler=args.scheduler,
        reverse_evs=args.reverse_evs,
        recovery=args.recovery,
        no_trim=args.no_trim,
        moderation=args.moderation,
        mss=args.mss,
        lab=args.lab,
        paths_file=args.paths_file,
        path_specs=tuple(args.path),
        records=args.records,
        flow=args.flow,
        events=args.events,
        seed=args.seed,
        one_off=args.one_off,
    )


def run(args: argparse.Namespace) -> int:
    check_args(args)
    opts = options(args)
    try:
        if args.src is not None:
            from mrc_transport.perf.oneshot import run_one_shot

            return run_one_shot(opts, args.src, args.dst)
        if args.pairs is not None:
            from mrc_transport.perf.pairs import parse_pairs, run_pairs

            gc.freeze()  # as _run_here does, for the same reason
            return run_pairs(opts, parse_pairs(args.pairs))
        return _run_here(opts, args.server)
    except OptionsError as exc:
        raise UsageError(str(exc)) from None


def _run_here(opts: PerfOptions, server: bool) -> int:
    from mrc_transport.perf.client import run_client
    from mrc_transport.perf.output import Output
    from mrc_transport.perf.server import run_server

    # What is loaded by now (modules, classes, functions: ~35k objects) lives as long as
    # the process; frozen, a full collection skips it. Unfrozen, each full collection
    # scanned it for 10-17 ms, longer than MRC takes to route around a failure, and showed
    # up as delivery stalls in the failover demo (docs/measurements.md).
    gc.freeze()
    out = Output.open(opts)
    try:
        if server:
            return run_server(opts, out)
        return run_client(opts, out)
    finally:
        out.close()
