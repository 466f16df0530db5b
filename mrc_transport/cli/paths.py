"""`mrc paths export`: each host's SRv6 paths to every other host, as `mrc perf --paths-file`
reads them (labs/pathsfile.py), from a running lab, a preset or a topology file, so MRC
runs between hosts that no lab of this box built: exported nodes, or real machines.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mrc_transport.cli.export import add_source, fabric, write_all
from mrc_transport.cli.main import UsageError


def register(subparsers: Any, help_text: str) -> None:
    """`mrc paths export`."""
    paths = subparsers.add_parser("paths", help=help_text, description=help_text)
    sub = paths.add_subparsers(dest="paths_command", metavar="ACTION", parser_class=type(paths))
    paths.set_defaults(func=_no_action)
    text = "each host's SRv6 paths to every other host, as `mrc perf --paths-file` reads them"
    p = sub.add_parser("export", help=text, description=text)
    add_source(p, lab=True)
    p.add_argument("--host", help="only this host's file (-o is then a file, or - for stdout)")
    p.add_argument("-o", dest="out", required=True, metavar="PATH", help="a folder: HOST.yaml each")
    p.set_defaults(func=paths_export)


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("missing ACTION (export)")


def paths_export(args: argparse.Namespace) -> int:
    from labs.errors import LabError
    from labs.pathsfile import host_file

    try:
        topo = fabric(args, args.lab)
        hosts = [args.host] if args.host else list(topo.hosts)
        texts = {h: host_file(topo, h) for h in hosts}
    except LabError as exc:
        raise UsageError(str(exc)) from None
    if args.host and args.out == "-":
        sys.stdout.write(texts[args.host])
        return 0
    if args.host:
        write_all({Path(args.out): texts[args.host]})
        return 0
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"-o {folder}: not a folder (with --host, -o names a file)")
    folder.mkdir(parents=True, exist_ok=True)
    write_all({folder / f"{h}.yaml": text for h, text in texts.items()})
    print(f"wrote {len(texts)} paths files to {folder}: {hosts[0]}.yaml .. {hosts[-1]}.yaml")
    return 0
