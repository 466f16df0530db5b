"""cffi build script for the C fast path (out-of-line API mode).

``setup.py`` names ``csrc/build.py:ffibuilder`` in ``cffi_modules``, so importing this file
only describes the extension; ``python csrc/build.py --inplace`` (what ``make fastpath``
runs) compiles it into ``mrc_transport/_fastpath*.so`` in the source tree.
The cdef is read from ``mrc_fast.h`` so the C and Python views of the API cannot drift
(the pattern of xattr's ``lib_build.py`` and pynacl's ``bindings/build.py``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil

from cffi import FFI

CSRC = pathlib.Path(__file__).resolve().parent
ROOT = CSRC.parent


def make_builder(*, absolute: bool) -> FFI:
    """The extension's description. setuptools (pip) insists on source paths relative to
    setup.py's folder; ``ffi.compile`` runs from its tmpdir and needs absolute ones."""

    def path(p: pathlib.Path) -> str:
        return str(p) if absolute else os.path.relpath(p, ROOT)

    ffi = FFI()
    ffi.cdef((CSRC / "mrc_fast.h").read_text())
    ffi.set_source(
        "mrc_transport._fastpath",
        '#include <stdint.h>\n#include <stddef.h>\n#include "mrc_fast.h"\n',
        sources=[path(CSRC / "mrc_fast.c"), path(CSRC / "mrc_io.c"), path(CSRC / "mrc_rx.c")],
        include_dirs=[path(CSRC)],
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=c11"],
    )
    return ffi


ffibuilder = make_builder(absolute=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="build the mrc_transport._fastpath extension")
    parser.add_argument(
        "--inplace", action="store_true", help="place the extension in mrc_transport/"
    )
    args = parser.parse_args(argv)
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
