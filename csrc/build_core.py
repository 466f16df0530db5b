"""mypyc build of the protocol core: the same Python source, compiled to C extensions.

The protocol core (mrc_transport/protocol) is typed Python under ``mypy --strict``; mypyc
compiles exactly that source, so the interpreted modules are the core's pure-Python twin,
line for line, and ``MRC_PUREPYTHON=1`` runs them (mrc_transport/__init__.py). Measured
on the unshaped lab (docs/measurements.md): the compiled core sends 1.55x the packets per
CPU second of the interpreted one, and ``mrc perf`` went from ~1.06 to ~1.43 Gbit/s.

    python csrc/build_core.py --inplace     # what ``make core`` runs

Modules left out: events.py and transmit.py hold frozen dataclasses that other layers
build through ``frozen.builder`` (``__class__`` assignment, which native classes refuse);
compiling wire/frames.py, wire/fast.py or io/batchio.py as well measured no faster (their
cost is the cffi calls and the objects they build), and frames.py made the C codec's
decoders slower (they build frames through the same twins).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = "mrc_transport/protocol"
COMPILED = (
    f"{CORE}/config.py",
    f"{CORE}/serial.py",
    f"{CORE}/counters.py",
    f"{CORE}/commons.py",
    f"{CORE}/ev.py",
    f"{CORE}/scheduler.py",
    f"{CORE}/cc/base.py",
    f"{CORE}/cc/fixed.py",
    f"{CORE}/cc/nscc.py",
    f"{CORE}/cc/planes.py",
    f"{CORE}/rtt.py",
    f"{CORE}/rack.py",
    f"{CORE}/segments.py",
    f"{CORE}/sender.py",
    f"{CORE}/receiver.py",
    f"{CORE}/connection.py",
    f"{CORE}/endpoint.py",
)
"""The modules compiled, as paths from the repository root."""

GROUP = "mrc_transport._core"
"""The shared library that holds the compiled modules' code (mypyc's group)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="compile the protocol core with mypyc")
    parser.add_argument(
        "--inplace", action="store_true", help="place the extensions next to their sources"
    )
    args = parser.parse_args(argv)
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(ROOT)
    build = ["build_ext", "--inplace"] if args.inplace else ["build_ext"]
    setup(
        name="mrc-transport-core",
        ext_modules=mypycify(list(COMPILED), group_name=GROUP, opt_level="3"),
        script_args=["-q", *build, "--build-temp", "build/core"],
    )
    if args.inplace:
        # setuptools skips an extension whose C did not change; its date must still say
        # "built from the current source" (mrc_transport/__init__.py checks it)
        for path in COMPILED:
            for built in (ROOT / path).parent.glob(pathlib.Path(path).stem + ".*.so"):
                built.touch()
        for built in (ROOT / "mrc_transport").glob("_core__mypyc*.so"):
            built.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
