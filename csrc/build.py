"""cffi build script for the C fast path (out-of-line API mode).

``setup.py`` names ``csrc/build.py:ffibuilder`` in ``cffi_modules``, so importing this file
only describes the extension; ``python csrc/build.py --inplace`` (what ``make fastpath``
runs) compiles it into ``mrc_transport/_fastpath*.so`` in the source tree.
The cdef is read from ``mrc_fast.h`` so the C and Python views of the API cannot drift
(the pattern of xattr's ``lib_build.py`` and pynacl's ``bindings/build.py``). The header's
receive-state structs are the text of mrc_transport/protocol/rxstate.py, where they are
declared: ``python csrc/build.py --header`` writes it between the header's markers, and
tests/unit/test_rx_place.py fails while the two differ.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import runpy
import shutil

from cffi import FFI

CSRC = pathlib.Path(__file__).resolve().parent
ROOT = CSRC.parent
HEADER = CSRC / "mrc_fast.h"
BEGIN = (
    "/* BEGIN generated from mrc_transport/protocol/rxstate.py by "
    "`python csrc/build.py --header` */\n"
)
END = "/* END generated */\n"


def make_builder(*, absolute: bool) -> FFI:
    """The extension's description. setuptools (pip) insists on source paths relative to
    setup.py's folder; ``ffi.compile`` runs from its tmpdir and needs absolute ones."""

    def path(p: pathlib.Path) -> str:
        return str(p) if absolute else os.path.relpath(p, ROOT)

    ffi = FFI()
    ffi.cdef(HEADER.read_text())
    ffi.set_source(
        "mrc_transport._fastpath",
        '#include <stdint.h>\n#include <stddef.h>\n#include "mrc_fast.h"\n',
        sources=[path(CSRC / "mrc_fast.c"), path(CSRC / "mrc_io.c"), path(CSRC / "mrc_rx.c")],
        include_dirs=[path(CSRC)],
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=c11"],
    )
    return ffi


ffibuilder = make_builder(absolute=False)


def generated(header: str) -> str:
    """The text between the header's markers."""
    start = header.index(BEGIN) + len(BEGIN)
    return header[start : header.index(END, start)]


def write_header() -> bool:
    """Put rxstate.py's declarations between the header's markers; whether it changed.
    The module is run from its file, not imported: importing the package selects a
    backend, which may refuse to load before this build."""
    text = runpy.run_path(str(ROOT / "mrc_transport" / "protocol" / "rxstate.py"))
    declarations: str = text["c_declarations"]()
    header = HEADER.read_text()
    old = generated(header)
    if old == declarations:
        return False
    HEADER.write_text(header.replace(BEGIN + old + END, BEGIN + declarations + END))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="build the mrc_transport._fastpath extension")
    parser.add_argument(
        "--inplace", action="store_true", help="place the extension in mrc_transport/"
    )
    parser.add_argument(
        "--header", action="store_true", help="write rxstate.py's structs into mrc_fast.h"
    )
    args = parser.parse_args(argv)
    if args.header:
        print(f"{HEADER.name}: {'rewritten' if write_header() else 'up to date'}")
        return 0
    tmpdir = ROOT / "build" / "cffi"
    tmpdir.mkdir(parents=True, exist_ok=True)
    so = make_builder(absolute=True).compile(tmpdir=str(tmpdir), verbose=False)
    if args.inplace:
        target = ROOT / "mrc_transport" / pathlib.Path(so).name
        # One extension in the tree: drop any other build of it (pip's editable install
        # leaves an abi3 one), or the import system would pick between them by tag.
        for stale in (ROOT / "mrc_transport").glob("_fastpath*.so"):
            if stale.name != target.name:
                stale.unlink()
        # Replace, never rewrite in place: a running process may have the old .so mapped.
        staging = target.with_suffix(".tmp")
        shutil.copyfile(so, staging)
        os.replace(staging, target)
        print(f"built {target.relative_to(ROOT)}")
    else:
        print(f"built {so}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
