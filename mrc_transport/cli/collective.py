"""`mrc collective`: nccl-tests' collectives on a lab's hosts. Parsing and printing only; the
work is in mrc_transport/collective/ (sweep.py, steploop.py).

    mrc collective allreduce|allgather|alltoall [--lab LAB] [--hosts h0,h1,...]
        [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-d float|int32]
        [--transport mrc|mptcp|tcp] [--procs N]
    mrc collective NAME ... --steps N [--schedule FILE|none | --collide] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from mrc_transport.collective.links import Placement
    from mrc_transport.collective.steploop import LoopConfig
    from mrc_transport.collective.sweep import SweepConfig

DEFAULT_LAB = "mrc"
DEFAULT_OUT = "collective-out"
NAMES = ("allreduce", "allgather", "alltoall")


def register(subparsers: Any, help_text: str) -> None:
    p = subparsers.add_parser(
        "collective",
        help=help_text,
        description=f"{help_text}. Every chosen host is a rank, the ranks served by one "
        "process per CPU; the table is nccl-tests' (busbw with its factors), every element "
        "of every result checked. With --steps, a training step's loop through faults.",
    )
    p.add_argument("collective", metavar="NAME", choices=NAMES, help=", ".join(NAMES))
    p.add_argument("--lab", default=DEFAULT_LAB, help=f"a running lab (default {DEFAULT_LAB})")
    p.add_argument("--hosts", metavar="H,...", help="the ranks' hosts in ring order (default all)")
    p.add_argument("-b", "--minbytes", default="1M", help="smallest size (default 1M)")
    p.add_argument("-e", "--maxbytes", default="16M", help="largest size (default 16M)")
    p.add_argument("-f", "--stepfactor", type=int, default=2, help="size factor (default 2)")
    p.add_argument("-n", "--iters", type=int, default=5, help="timed iterations (default 5)")
    p.add_argument("-w", "--warmup_iters", type=int, default=1, help="warm-up (default 1)")
    p.add_argument("-d", "--datatype", choices=("float", "int32"), default="float")
    p.add_argument(
        "--transport",
        choices=("mrc", "mptcp", "tcp"),
        default="mrc",
        help="mrc (default), mptcp (a subflow per plane) or tcp (pinned to its ECMP path)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the MRC endpoints' RNG")
    p.add_argument(
        "--procs",
        type=int,
        default=None,
        metavar="N",
        help="processes serving the ranks, each a contiguous share of them (default: one "
        "per CPU, at most one per rank; 1: this process serves them all)",
    )
    loop = p.add_argument_group("a training step's loop (-e is a step's size)")
    loop.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="timed steps (with --schedule FILE, as many more as its faults and 2 s after take)",
    )
    how = loop.add_mutually_exclusive_group()
    how.add_argument(
        "--schedule",
        metavar="FILE",
        help="YAML faults as `mrc demo failover` reads them, or none (default: the "
        "workshop's, spread over the loop)",
    )
    how.add_argument("--collide", action="store_true", help="no faults; new connections every step")
    loop.add_argument("--out", default=DEFAULT_OUT, help=f"folder (default {DEFAULT_OUT})")
    p.set_defaults(func=run)


def placement(args: argparse.Namespace) -> Placement:
    """The lab and its hosts, checked: the lab is up, every host in it, 2 or more."""
    from labs.state import load_state
    from mrc_transport.collective.links import Placement
    from mrc_transport.perf.oneshot import check_hosts
    from mrc_transport.perf.options import OptionsError

    try:
        check_hosts(args.lab)
        topo = load_state(args.lab).topology
    except OptionsError as exc:
        raise UsageError(str(exc)) from None
    hosts = tuple(h.strip() for h in args.hosts.split(",")) if args.hosts else topo.hosts
    for host in hosts:
        if host not in topo.hosts:
            raise UsageError(f"--hosts: {host!r} is not a host of lab {args.lab!r}")
    if len(set(hosts)) != len(hosts):
        raise UsageError("--hosts: a host is named twice (a host is one rank)")
    if len(hosts) < 2:
        raise UsageError("a collective needs 2 or more hosts")
    return Placement(args.lab, topo, hosts)


def _check_transport(kind: str, where: Placement) -> None:
    """MPTCP on this kernel and in the hosts' namespaces (one line otherwise)."""
    from mrc_transport.harness.errors import Unavailable
    from mrc_transport.harness.mptcp import check_kernel, check_ready

    if kind != "mptcp":
        return
    try:
        check_kernel()
        check_ready(where.lab, where.hosts)
    except Unavailable as exc:
        msg = str(exc).replace("leave mptcp out of --baselines, e.g. --baselines tcp", "")
        raise UsageError(f"--transport mptcp: {msg.rstrip(': ')}") from None


def _procs(args: argparse.Namespace, ranks: int) -> int:
    from mrc_transport.collective.groups import default_procs

    if args.procs is None:
        return default_procs(ranks)
    if not 1 <= args.procs <= ranks:
        raise UsageError(f"--procs must be 1 to {ranks} (a process serves one rank or more)")
    return int(args.procs)


def sweep_config(args: argparse.Namespace, ranks: int) -> SweepConfig:
    from labs.units import parse_size
    from mrc_transport.collective.algorithms import ALGORITHMS
    from mrc_transport.collective.sweep import SweepConfig, check_sizes, size_steps
    from mrc_transport.harness.errors import HarnessError

    if args.iters < 1 or args.warmup_iters < 0:
        raise UsageError("-n must be 1 or more and -w 0 or more")
    procs = _procs(args, ranks)
    low, high = parse_size(args.minbytes, "-b"), parse_size(args.maxbytes, "-e")
    try:
        sizes = (high,) if args.steps else size_steps(low, high, args.stepfactor)
        check_sizes(sizes, ranks)
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    return SweepConfig(
        ALGORITHMS[args.collective], sizes, args.iters, args.warmup_iters, args.datatype,
        args.transport, seed=args.seed, procs=procs,
    )  # fmt: skip


def loop_config(args: argparse.Namespace, sweep: SweepConfig, where: Placement) -> LoopConfig:
    from mrc_transport.collective.steploop import LoopConfig, check_loop
    from mrc_transport.harness import schedule as sched
    from mrc_transport.harness.errors import HarnessError

    if args.steps < 1:
        raise UsageError("--steps must be 1 or more")
    given = args.schedule not in (None, "none")
    try:
        steps = tuple(sched.load_schedule(args.schedule)) if given else ()
        cfg = LoopConfig(
            sweep.alg, sweep.sizes[-1], args.steps, sweep.warmup, sweep.dtype, sweep.transport,
            steps, spread=args.schedule is None and not args.collide, collide=args.collide,
            until_s=sched.natural_duration(steps) if steps else 0.0, seed=sweep.seed,
            procs=sweep.procs,
        )  # fmt: skip
        check_loop(cfg, where)
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    return cfg


def run(args: argparse.Namespace) -> int:
    if args.steps is None and (args.schedule or args.collide):
        raise UsageError("--schedule and --collide go with --steps N")
    where = placement(args)
    sweep = sweep_config(args, len(where.hosts))
    loop = loop_config(args, sweep, where) if args.steps is not None else None
    _check_transport(args.transport, where)
    if os.geteuid() != 0:
        raise UsageError("needs root (network namespaces); try sudo")
    return _guarded(lambda: _loop(loop, where, Path(args.out)) if loop else _sweep(sweep, where))


def _guarded(work: Any) -> int:
    """A run that failed: one line, exit 1; a target the lab lacks: exit 2."""
    import trio

    from labs.errors import LabError
    from mrc_transport.collective.errors import RunFailed, first_leaf
    from mrc_transport.harness.errors import HarnessError, unwrap

    failures = (RunFailed, OSError, trio.TooSlowError)
    try:
        try:
            return int(work())
        except BaseExceptionGroup as group:
            hit = unwrap(group)
            if isinstance(hit, BaseExceptionGroup):  # the first failure of a rank's task
                failed, _ = hit.split(failures)
                hit = first_leaf(failed) if failed is not None else hit
            raise hit from None
    except failures as exc:
        print(f"mrc collective: error: {exc}", file=sys.stderr)
        return 1
    except (HarnessError, LabError) as exc:
        raise UsageError(str(exc)) from None


def _say(line: str) -> None:
    print(line, flush=True)


def _sweep(cfg: SweepConfig, where: Placement) -> int:
    import trio

    from mrc_transport.collective.sweep import run_sweep
    from mrc_transport.harness.machine import cpu_line

    res = trio.run(run_sweep, cfg, where, _say)
    _say(f"# {cpu_line(res.cpu)}")
    return 0 if res.rows and not any(r.wrong for r in res.rows) else 1


def _loop(cfg: LoopConfig, where: Placement, out: Path) -> int:
    import trio

    from mrc_transport.collective.report import write_loop
    from mrc_transport.collective.steploop import run_loop
    from mrc_transport.collective.steps import summarize, summary_lines
    from mrc_transport.harness.machine import cpu_line

    _say(
        f"{cfg.alg.name} of {cfg.size} bytes over {cfg.transport}: {len(where.hosts)} ranks "
        f"({','.join(where.hosts)}) in {cfg.procs} process{'es' if cfg.procs > 1 else ''}, "
        f"{cfg.steps} steps after {cfg.warmup} warm-up"
    )
    res = trio.run(run_loop, cfg, where, _say)
    summary = summarize(res.steps, res.faults, res.ideal_s)
    for line in summary_lines(summary, res.t_origin):
        _say(line)
    if res.unplayed:
        _say(f"not played (the loop ended first): {', '.join(s.describe() for s in res.unplayed)}")
    if res.undone:
        _say(f"undone at the end: {', '.join(res.undone)}")
    _say(cpu_line(res.cpu))
    for path in write_loop(out, cfg, where, res, summary):
        _say(f"wrote {path}")
    ok = summary.wrong == 0
    _say(
        "verified: every element of every step's result"
        if ok
        else f"NOT verified: {summary.wrong} wrong"
    )
    return 0 if ok else 1
