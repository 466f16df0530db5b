"""`mrc wireshark`: where the MRC dissector (mrc.lua) is, and install it for Wireshark.

Parsing and printing only; the file and its folder are mrc_transport/wireshark/.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from mrc_transport.cli.main import UsageError


def register(subparsers: Any, help_text: str) -> None:
    p = subparsers.add_parser("wireshark", help=help_text, description=help_text)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--path", action="store_true", help="print the dissector's path")
    what.add_argument(
        "--install",
        action="store_true",
        help="copy it to Wireshark's personal Lua plugin folder (~/.local/lib/wireshark/plugins)",
    )
    p.add_argument("--dir", metavar="DIR", help="with --install: this folder instead")
    p.set_defaults(func=_wireshark)


def _wireshark(args: argparse.Namespace) -> int:
    from mrc_transport import wireshark

    if args.dir and not args.install:
        raise UsageError("--dir goes with --install")
    if args.install:
        return _install(Path(args.dir) if args.dir else None)
    if not args.path:
        raise UsageError("give --path or --install")
    print(wireshark.lua_path())
    return 0


def _install(folder: Path | None) -> int:
    from mrc_transport import wireshark

    try:
        installed = wireshark.install(folder)
    except OSError as exc:
        raise UsageError(
            f"cannot install into {folder or wireshark.personal_plugin_dir()}: "
            f"{exc.strerror or exc}"
        ) from None
    print(f"installed {installed}; Wireshark loads it at start (Help > About > Plugins)")
    if folder is None and os.geteuid() == 0 and os.environ.get("SUDO_USER"):
        print(
            "note: that is root's folder; run without sudo to install for your user",
            file=sys.stderr,
        )
    return 0
