"""mypyc build of the protocol core: the same Python source, compiled to C extensions.

The protocol core (mrc_transport/protocol) is typed Python under ``mypy --strict``; mypyc
compiles exactly that source, so the interpreted modules are the core's pure-Python twin,
line for line, and ``MRC_PUREPYTHON=1`` runs them (mrc_transport/backend.py). Measured
on the unshaped lab (docs/measurements.md): the compiled core sends 1.55x the packets per
CPU second of the interpreted one, and ``mrc perf`` went from ~1.06 to ~1.43 Gbit/s.

    python csrc/build_core.py     # what ``make core`` runs

The build goes to build/core-lib and is installed where compiled packages go, in the
environment's site-packages (``TARGET``, mrc_transport/backend.py ``COMPILED_DIR``), as a
tree of the package's shape with a manifest of the sources compiled; the package puts it
first on its ``__path__`` when the native backend runs. Nothing is placed beside the .py
files, so the reference stays the reference.

Modules left out: events.py and transmit.py hold frozen dataclasses that other layers
build through ``frozen.fast_constructor`` (``__class__`` assignment, which native classes
refuse); compiling wire/frames.py, wire/fast.py or io/batchio.py as well measured no
faster (their cost is the cffi calls and the objects they build), and frames.py made the
C codec's decoders slower (they build frames through the same slot-alike classes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import sys
import sysconfig

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
TARGET = pathlib.Path(sysconfig.get_path("platlib"), "mrc-transport-core")
"""mrc_transport/backend.py ``COMPILED_DIR`` (not imported: importing the package selects
a backend, which may refuse to load without this build)."""
MANIFEST = "sources.json"
"""In ``TARGET``: each compiled source and its SHA-256 (mrc_transport/backend.py reads it)."""
BUILD_LIB = ROOT / "build" / "core-lib"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="compile the protocol core with mypyc")
    parser.add_argument("--target", type=pathlib.Path, default=TARGET, help="install here")
    args = parser.parse_args(argv)
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(ROOT)
    setup(
        name="mrc-transport-core",
        ext_modules=mypycify(list(COMPILED), group_name=GROUP, opt_level="3"),
        script_args=[
            "-q",
            "build_ext",
            "--build-lib",
            str(BUILD_LIB),
            "--build-temp",
            "build/core",
        ],
    )
    install(BUILD_LIB, args.target)
    _remove_in_place_builds()
    print(f"installed the compiled core in {args.target}")
    return 0


def install(built: pathlib.Path, target: pathlib.Path) -> None:
    """Put the extensions built under ``built`` in ``target``, in their package folders,
    with the manifest of the sources they were compiled from. The old tree is replaced
    by renames, never rewritten: a running process may have its files mapped."""
    staging = target.with_name(target.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    for so in built.rglob("*.so"):
        dest = staging / so.relative_to(built)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(so, dest)
    digests = {src: hashlib.sha256((ROOT / src).read_bytes()).hexdigest() for src in COMPILED}
    (staging / MANIFEST).write_text(json.dumps(digests, indent=1) + "\n")
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def _remove_in_place_builds() -> None:
    """Builds before this layout placed the extensions beside the sources, where Python
    would prefer them to the .py files whatever the switch says."""
    for path in COMPILED:
        for stale in (ROOT / path).parent.glob(pathlib.Path(path).stem + ".*.so"):
            stale.unlink()
    for stale in (ROOT / "mrc_transport").glob("_core__mypyc*.so"):
        stale.unlink()


if __name__ == "__main__":
    sys.exit(main())
