"""mypyc build of the protocol core: the same Python source, compiled to C extensions, in
the package's own build.

The protocol core (mrc_transport/protocol) is typed Python under ``mypy --strict``; mypyc
compiles exactly that source, so the interpreted modules are the core's pure-Python twin,
line for line, and ``MRC_PUREPYTHON=1`` runs them (mrc_transport/backend.py). Measured
on the unshaped lab (docs/measurements.md): the compiled core sends 1.55x the packets per
CPU second of the interpreted one, and ``mrc perf`` went from ~1.06 to ~1.43 Gbit/s.

setup.py builds its extensions with ``BuildExt``, so ``pip install .`` and ``pip wheel .``
give the C fast path and the compiled core together, as mypy and black ship
mypyc-compiled wheels, and ``make`` runs the same command in place
(``python setup.py build_ext --inplace``). mypyc runs only when setup.py is run to build
(``extensions``), not when pip runs it for the package's metadata.

The extensions go to mrc_transport/_compiled (``COMPILED_DIR``, mrc_transport/backend.py
reads it), a tree of the package's shape, with a manifest of the sources compiled; the
package puts it first on its ``__path__`` when the native backend runs. Nothing is placed
beside the .py files, so the reference stays the reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any

from setuptools import Extension
from setuptools.command.build_ext import build_ext

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
    f"{CORE}/cc/nscc_lab.py",
    f"{CORE}/cc/planes.py",
    f"{CORE}/rtt.py",
    f"{CORE}/rack.py",
    f"{CORE}/segments.py",
    f"{CORE}/sender.py",
    f"{CORE}/receiver.py",
    f"{CORE}/reverse.py",
    f"{CORE}/connection.py",
    f"{CORE}/endpoint.py",
)
"""The modules compiled, as paths from the repository root."""
LEFT_OUT = {
    f"{CORE}/__init__.py": "puts the compiled build on the package's path first",
    f"{CORE}/cc/__init__.py": "the same for its package",
    f"{CORE}/events.py": "frozen dataclasses built by frozen.fast_constructor, whose "
    "__class__ assignment native classes refuse",
    f"{CORE}/transmit.py": "the same",
    f"{CORE}/rxplace.py": "the receive placement's Python twin, which runs only "
    "interpreted (the native backend places in C)",
    f"{CORE}/rxfast.py": "the C side of that twin: cffi calls",
    f"{CORE}/rxstate.py": "the placement state's declaration, classes made from it",
    f"{CORE}/transitions.py": "an exception class (a native class cannot subclass one) "
    "and a flag the test suite sets, on a path taken only by a bug",
}
"""The core's modules not compiled, and why. Compiling wire/frames.py, wire/fast.py or
io/batchio.py as well measured no faster (their cost is the cffi calls and the objects
they build), and frames.py made the C codec's decoders slower (they build frames through
the same slot-alike classes)."""

GROUP = "mrc_transport._core"
"""The shared library that holds the compiled modules' code (mypyc's group)."""
COMPILED_PACKAGE = "mrc_transport._compiled"
"""Where each extension goes: ``mrc_transport.protocol.sender`` is built as
``mrc_transport._compiled.protocol.sender`` (mrc_transport/backend.py ``COMPILED_DIR``),
the module it still is when imported."""
MANIFEST = "sources.json"
"""In ``COMPILED_PACKAGE``: each compiled source and its SHA-256 (backend.py reads it)."""


BUILDS = frozenset({"build", "build_ext", "bdist_wheel", "editable_wheel", "install"})
"""setup.py's commands that build extensions (pip runs bdist_wheel or editable_wheel)."""


def extensions(argv: Sequence[str]) -> list[Extension]:
    """mypyc's extensions of ``COMPILED``, named to be built under ``COMPILED_PACKAGE``,
    when setup.py's command line ``argv`` builds (none else: mypyc takes a minute)."""
    if not BUILDS.intersection(argv[1:]):
        return []
    from mypyc.build import mypycify

    BuildExt.sources = manifest()  # the sources as mypyc reads them
    exts: list[Extension] = mypycify(list(COMPILED), group_name=GROUP, opt_level="3")
    for ext in exts:
        ext.name = COMPILED_PACKAGE + ext.name.removeprefix("mrc_transport")
    return exts


def manifest() -> str:
    """Each compiled source and the SHA-256 of its text now."""
    digests = {src: hashlib.sha256((ROOT / src).read_bytes()).hexdigest() for src in COMPILED}
    return json.dumps(digests, indent=1) + "\n"


class BuildExt(build_ext):
    """setuptools' build_ext, and the compiled core's manifest beside its extensions."""

    sources = ""
    """``manifest()`` as ``extensions`` compiled them (empty: no core in this build)."""

    def run(self) -> None:
        super().run()
        places = [pathlib.Path(self.build_lib)] + ([ROOT] if self.inplace else [])
        for place in places if self.sources else []:
            folder = place.joinpath(*COMPILED_PACKAGE.split("."))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / MANIFEST).write_text(self.sources)
        if self.inplace:
            self._remove_stale()

    def copy_file(self, infile: Any, outfile: Any, *args: Any, **kwargs: Any) -> Any:
        """Replace, never rewrite in place: a running process may have the old file
        mapped (the in-place copies of ``--inplace`` and editable installs). The folders
        of ``COMPILED_PACKAGE`` are no packages of the source tree: made here."""
        if os.path.isfile(outfile):
            os.unlink(outfile)
        os.makedirs(os.path.dirname(outfile) or ".", exist_ok=True)
        return super().copy_file(infile, outfile, *args, **kwargs)

    def _remove_stale(self) -> None:
        """Extensions in the source tree that this build did not make: Python could
        import them instead (an older build of the C fast path, a module no longer
        compiled, the core built beside its sources by earlier versions of this file)."""
        made = {pathlib.Path(p).resolve() for p in self.get_output_mapping().values()}
        package = ROOT / "mrc_transport"
        for pattern in (
            "_fastpath*.so",
            "_core__mypyc*.so",
            "protocol/**/*.so",
            "_compiled/**/*.so",
        ):
            for stale in package.glob(pattern):
                if stale.resolve() not in made:
                    stale.unlink()
