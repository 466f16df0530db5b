"""`mrc repro`: the paper's experiments at lab scale. Parsing and printing only; the work is
in mrc_transport/repro/ (engine.py runs the descriptions of experiments/).

    mrc repro NAME [--preset P | --topology FILE] [--out DIR] [--name LAB] [--quick]
                   [--baselines tcp,mptcp]
    mrc repro all  [--preset P | --topology FILE] [--out DIR] [--quick] [--baselines ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from labs.topology import Topology
    from mrc_transport.repro.engine import ReproConfig
    from mrc_transport.repro.spec import Experiment

DEFAULT_OUT = "repro-out"


def register(subparsers: Any, help_text: str) -> None:
    from labs.topology import PRESETS
    from mrc_transport.repro.experiments import EXPERIMENTS

    names = ", ".join(EXPERIMENTS)
    p = subparsers.add_parser(
        "repro",
        help=help_text,
        description=f"{help_text}. Each brings up a lab of its own, writes NAME.json, "
        f"NAME.png and NAME.md under --out/NAME and prints the paper's claims against the "
        f"lab's figures. Experiments: {names}.",
    )
    p.add_argument(
        "experiment", metavar="NAME", choices=(*EXPERIMENTS, "all"), help=f"{names} or all"
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--preset",
        choices=PRESETS,
        default=None,
        help="base fabric, shaped as the experiment needs (default: the experiment's)",
    )
    src.add_argument("--topology", metavar="FILE", help="YAML topology file, used as it is")
    p.add_argument(
        "--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default {DEFAULT_OUT})"
    )
    p.add_argument(
        "--name", type=_lab_name, default=None, help="lab name (default: a fresh unique one)"
    )
    p.add_argument(
        "--quick", action="store_true", help="a shortened run of seconds (what the lab tests run)"
    )
    p.add_argument(
        "--baselines",
        default="tcp,mptcp",
        metavar="LIST",
        help="tcp (the paper's single-path baseline, always run) and mptcp (each experiment "
        "again with Linux MPTCP, a subflow per plane) (default tcp,mptcp)",
    )
    p.set_defaults(func=run)


def _lab_name(text: str) -> str:
    from labs.errors import TopologyError
    from labs.topology import check_lab_name

    try:
        return check_lab_name(text)
    except TopologyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fabric(exp: Experiment[Any], args: argparse.Namespace) -> tuple[Topology, str]:
    """The experiment's fabric: a file as it is, else a preset shaped by the experiment."""
    from labs.errors import LabError
    from labs.topology import load_yaml
    from mrc_transport.harness.errors import HarnessError

    try:
        if args.topology:
            return load_yaml(args.topology), f"topology file {args.topology}"
        return exp.fabric.build(args.preset), exp.fabric.describe(args.preset)
    except (LabError, HarnessError) as exc:
        raise UsageError(str(exc)) from None


def configs(args: argparse.Namespace) -> list[tuple[Experiment[Any], ReproConfig]]:
    """Every selected experiment with its config, all checked before any lab is built."""
    from mrc_transport.harness.errors import HarnessError
    from mrc_transport.repro.engine import ReproConfig, check_plan
    from mrc_transport.repro.experiments import EXPERIMENTS

    chosen = (
        list(EXPERIMENTS.values()) if args.experiment == "all" else [EXPERIMENTS[args.experiment]]
    )
    if args.name and len(chosen) > 1:
        raise UsageError("--name names one lab: give it with one experiment, not all")
    baselines = _baselines(args.baselines)
    out = []
    for exp in chosen:
        topo, label = fabric(exp, args)
        try:
            knobs = exp.knobs(args.quick)
            exp.check(topo, knobs)
            check_plan(topo, exp.plan(topo, knobs))
        except HarnessError as exc:
            raise UsageError(f"{exp.name}: {exc}") from None
        folder = Path(args.out) / exp.name
        out.append((exp, ReproConfig(topo, folder, args.name, args.quick, label, baselines)))
    return out


def _baselines(text: str) -> tuple[str, ...]:
    """--baselines: tcp always (the experiments compare MRC with it), mptcp or not; on a
    kernel without MPTCP, mptcp is one line (exit 2) before any lab is built."""
    from mrc_transport.harness.baselines import parse_baselines
    from mrc_transport.harness.errors import HarnessError
    from mrc_transport.harness.mptcp import check_kernel

    try:
        kinds = parse_baselines(text)
        if "tcp" not in kinds or "tcp-rehash" in kinds:
            raise HarnessError("--baselines takes tcp (always) and mptcp: tcp or tcp,mptcp")
        if "mptcp" in kinds:
            check_kernel()
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    return tuple(kinds)


def run(args: argparse.Namespace) -> int:
    todo = configs(args)
    if os.geteuid() != 0:
        raise UsageError("needs root (network namespaces); try sudo")
    outcomes: list[tuple[str, str, float]] = []
    for exp, cfg in todo:
        t0 = time.monotonic()
        outcomes.append((exp.name, _one(exp, cfg), time.monotonic() - t0))
    if len(todo) > 1:
        _summary(outcomes)
    return 0 if all(o == "verified" for _, o, _ in outcomes) else 1


def _one(exp: Experiment[Any], cfg: ReproConfig) -> str:
    """Run one experiment: "verified", "NOT verified" or the one-line error it ended with.
    A lab that exists is the user's to fix (exit 2)."""
    from labs.errors import ApplyError, LabError
    from mrc_transport.harness.errors import HarnessError, Unavailable
    from mrc_transport.repro.engine import run_experiment

    try:
        doc = run_experiment(exp, cfg)
    except Unavailable as exc:  # MPTCP off in a namespace: the user's to change
        raise UsageError(f"{exp.name}: {exc}") from None
    except (HarnessError, ApplyError) as exc:
        print(f"mrc repro {exp.name}: error: {exc}", file=sys.stderr)
        return f"error: {exc}"
    except LabError as exc:
        raise UsageError(f"{exp.name}: {exc}") from None
    return "verified" if doc["verified"] else "NOT verified"


def _summary(outcomes: list[tuple[str, str, float]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="mrc repro all", title_justify="left")
    for name in ("experiment", "outcome", "seconds"):
        table.add_column(name, justify="right" if name == "seconds" else "left")
    for name, outcome, seconds in outcomes:
        table.add_row(name, outcome, f"{seconds:.0f}")
    Console().print(table)
