"""`mrc demo`: the workshop demos. Parsing and printing only; the work is in
mrc_transport/demo/ (failover.py, collisions.py).

    mrc demo failover [--preset P | --topology FILE] [--schedule FILE] [--duration S]
                      [--baselines tcp,tcp-rehash,mptcp] [--out DIR] [--name LAB] [--no-live]
    mrc demo collisions [--preset P | --topology FILE] [--duration S] [--baselines tcp,mptcp]
                        [--out DIR] [--name LAB]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from labs.topology import Topology

DEFAULT_LAB = "demo"
DEFAULT_OUT = "demo-out"


def register(subparsers: Any, help_text: str) -> None:
    demo = subparsers.add_parser("demo", help=help_text, description=help_text)
    sub = demo.add_subparsers(dest="demo_command", metavar="DEMO", parser_class=type(demo))
    demo.set_defaults(func=_no_demo)
    _register_failover(sub)
    _register_collisions(sub)


def _register_failover(sub: Any) -> None:
    p = sub.add_parser(
        "failover",
        help="cut links under an MRC transfer and its baselines (TCP, MPTCP)",
        description="cut links under an MRC transfer and its baselines (single-path TCP, "
        "TCP that Linux moves on RTO, MPTCP); measure stalls and recovery",
    )
    _common(p)
    _baselines(p, "tcp,tcp-rehash,mptcp")
    p.add_argument(
        "--schedule", metavar="FILE", help="YAML list of faults (default: the workshop's)"
    )
    p.add_argument(
        "--duration",
        type=_seconds,
        default=None,
        metavar="S",
        help="scale the schedule to this many seconds of transfer",
    )
    p.add_argument(
        "--no-live", dest="live", action="store_false", help="no live view: one line per fault"
    )
    p.add_argument(
        "--from", dest="src", metavar="HOST", help="sender (default: first host of the last rack)"
    )
    p.add_argument("--to", dest="dst", metavar="HOST", help="receiver (default: h0)")
    p.set_defaults(func=_failover)


def _register_collisions(sub: Any) -> None:
    p = sub.add_parser(
        "collisions",
        help="two-rack permutation: ECMP TCP and MPTCP versus MRC",
        description="two-rack permutation traffic: single-path TCP over ECMP and MPTCP "
        "versus one MRC connection per pair",
    )
    _common(p)
    _baselines(p, "tcp,mptcp")
    p.add_argument(
        "--duration", type=_seconds, default=8.0, metavar="S", help="seconds per run (default 8)"
    )
    p.add_argument(
        "--planes",
        type=int,
        default=1,
        metavar="N",
        help="planes of the fabric (default 1: the paper's permutation is within "
        "a plane; 0 keeps the preset's)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=20.0,
        metavar="MBIT",
        help="link rate in Mbit/s (default 20: 2 Python MRC processes per pair "
        "must not be CPU-bound; 0 keeps the preset's)",
    )
    p.add_argument(
        "--scheduler",
        choices=("random", "rr", "reps"),
        default="random",
        help="MRC spraying scheduler (default random, the paper's)",
    )
    p.set_defaults(func=_collisions)


def _baselines(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--baselines",
        default=default,
        metavar="LIST",
        help=f"the flows beside MRC, comma-separated: tcp (pinned to its ECMP path), "
        f"tcp-rehash (moved on RTO), mptcp (a subflow per plane) (default {default})",
    )


def _common(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=("tiny", "default", "large"), default=None)
    src.add_argument("--topology", metavar="FILE", help="YAML topology file")
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"folder for the report and PNGs (default {DEFAULT_OUT})",
    )
    p.add_argument(
        "--name", default=DEFAULT_LAB, type=_lab_name, help=f"lab name (default {DEFAULT_LAB})"
    )


def _lab_name(text: str) -> str:
    from labs.errors import TopologyError
    from labs.topology import check_lab_name

    try:
        return check_lab_name(text)
    except TopologyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be in (0, 3600] seconds, not {text}")
    return value


def _no_demo(args: argparse.Namespace) -> int:
    raise UsageError("missing DEMO (failover or collisions)")


def _topology(args: argparse.Namespace) -> tuple[Topology, str | None]:
    from labs.errors import LabError
    from labs.topology import load_yaml, preset

    try:
        if args.topology:
            return load_yaml(args.topology), None
        name = args.preset or "default"
        return preset(name), name
    except LabError as exc:
        raise UsageError(str(exc)) from None


def _need_root() -> None:
    if os.geteuid() != 0:
        raise UsageError("needs root (network namespaces); try sudo")


def failover_config(args: argparse.Namespace) -> Any:
    """Everything checked before anything is built: topology, schedule, targets, hosts."""
    from mrc_transport.demo.failover import FailoverConfig, check_placeholders
    from mrc_transport.harness import schedule as sched
    from mrc_transport.harness.errors import HarnessError
    from mrc_transport.harness.patterns import pick_hosts

    topo, preset = _topology(args)
    try:
        baselines = checked_baselines(args.baselines)
        steps = sched.load_schedule(args.schedule) if args.schedule else sched.default_schedule()
        if args.duration is not None:
            steps = sched.scaled(steps, args.duration)
        duration = sched.natural_duration(steps)
        sched.check_targets(steps, topo)
        pick_hosts(topo, args.src, args.dst)
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    cfg = FailoverConfig(
        topo=topo,
        lab=args.name,
        steps=tuple(steps),
        duration=duration,
        out=Path(args.out),
        live=args.live,
        preset=preset,
        src=args.src,
        dst=args.dst,
        baselines=baselines,
    )
    try:
        check_placeholders(cfg)
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    return cfg


def checked_baselines(text: str) -> Any:
    """--baselines parsed; MPTCP among them on a kernel without it: HarnessError (one line,
    before any lab is built)."""
    from mrc_transport.harness.baselines import parse_baselines, uses_mptcp
    from mrc_transport.harness.mptcp import check_kernel

    kinds = parse_baselines(text)
    if uses_mptcp(kinds):
        check_kernel()
    return kinds


def _failover(args: argparse.Namespace) -> int:
    from mrc_transport.demo.failover import run_failover

    cfg = failover_config(args)
    _need_root()
    return _guarded(args, lambda: run_failover(cfg))


def _guarded(args: argparse.Namespace, run: Callable[[], dict[str, Any]]) -> int:
    """A lab that exists or a bad target: usage (2). A run that went wrong (a child that
    failed, a command in the lab that failed): one line, exit 1. Not verified: exit 1."""
    from labs.errors import ApplyError, LabError
    from mrc_transport.harness.errors import HarnessError, Unavailable

    try:
        doc = run()
    except Unavailable as exc:  # this machine cannot run what was asked: the user's to change
        raise UsageError(str(exc)) from None
    except (HarnessError, ApplyError) as exc:
        print(f"mrc demo {args.demo_command}: error: {exc}", file=sys.stderr)
        return 1
    except LabError as exc:
        raise UsageError(str(exc)) from None
    return 0 if doc["verified"] else 1


def _collisions(args: argparse.Namespace) -> int:
    from mrc_transport.demo.collisions import (
        CollisionsConfig,
        check_fabric,
        reshape,
        run_collisions,
    )
    from mrc_transport.harness.errors import HarnessError

    topo, preset = _topology(args)
    try:
        baselines = checked_baselines(args.baselines)
        if "tcp-rehash" in baselines:
            raise HarnessError("collisions runs tcp and mptcp (no fault moves a flow here)")
        topo = reshape(topo, args.planes, int(args.rate * 1e6))
        check_fabric(topo)
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    _need_root()
    cfg = CollisionsConfig(
        topo=topo,
        lab=args.name,
        duration=args.duration,
        out=Path(args.out),
        preset=preset,
        scheduler=args.scheduler,
        baselines=baselines,
    )
    return _guarded(args, lambda: run_collisions(cfg))
