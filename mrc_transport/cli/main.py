"""The `mrc` command: argument parsing and dispatch only.

Each subcommand lives in its own module under mrc_transport/cli/ with two functions:
``register(subparsers, help_text)`` adds its parser and sets ``func``; the function takes
the parsed namespace and returns an exit code. A subcommand module keeps its heavy imports
(scapy, matplotlib, trio) inside its functions so `mrc --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from labs.units import UnitError
from mrc_transport import __version__

# (module, one-line help) for every subcommand; each module has register(subparsers).
SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("lab", "build and break a multi-plane Clos fabric of network namespaces"),
    ("perf", "iperf3-style MRC transfers"),
    ("demo", "workshop demos: failover and collisions"),
    ("repro", "the paper's experiments at lab scale, side by side with its figures"),
    ("collective", "nccl-tests' collectives between lab hosts over MRC, MPTCP or TCP"),
    ("plan", "multi-plane Clos sizing (pure arithmetic, no root)"),
    ("paths", "SRv6 paths files for `mrc perf --paths-file`, from a lab or a topology"),
    ("wireshark", "the Wireshark dissector for MRC: its path, or install it"),
)

DESCRIPTION = (
    "MRC (Multipath Reliable Connection) over static SRv6: build a multi-plane Clos lab of "
    "network namespaces, run iperf3-style transfers, and watch failures get bypassed."
)


class UsageError(Exception):
    """A bad flag, argument or input file: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: scripts and people both read it at a glance;
        # it ends with where the usage is, and at the top level with the commands there are.
        hint = f"`{self.prog} --help` for usage"
        if self.prog == "mrc":
            hint = f"commands: {', '.join(name for name, _ in SUBCOMMANDS)}; " + hint
        self.exit(2, f"{self.prog}: error: {message} ({hint})\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mrc", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"mrc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in SUBCOMMANDS:
        module = importlib.import_module(f"mrc_transport.cli.{name}")
        module.register(sub, help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a bad flag: argparse exits; we return
        return exc.code if isinstance(exc.code, int) else 0
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return func(args)
    except (UsageError, UnitError) as exc:  # a bad size or rate in a flag is a usage error
        print(f"mrc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy: subcommands raise the
    # UsageError class of mrc_transport.cli.main, which a second copy would not catch.
    from mrc_transport.cli.main import main as _main

    raise SystemExit(_main())
