"""MRC (Multipath Reliable Connection) over static SRv6 source routing."""

from __future__ import annotations

import os
import pathlib
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader
from types import ModuleType

__version__ = "0.1.0"


def switched_on(name: str) -> bool:
    """Whether the environment switch ``name`` is set to something other than "" or "0"
    (read at each call: the codec's backend test flips it)."""
    return os.environ.get(name, "") not in ("", "0")


PURE_PYTHON = switched_on("MRC_PUREPYTHON")
"""``MRC_PUREPYTHON=1``: the pure-Python reference everywhere (codecs, batched IO, and the
protocol core from its .py files even where mypyc's compiled modules sit beside them)."""
CORE_FROM_SOURCE = PURE_PYTHON or switched_on("MRC_CORE_SOURCE")
"""``MRC_CORE_SOURCE=1``: only the protocol core from source, the C fast path as built
(bench/core.py measures the compiled core against it)."""


_EXTENSIONS = ("_fastpath", "_core__mypyc")
"""The package's own extension modules (cffi's C fast path, mypyc's shared library)."""


class _CoreFromSource:
    """Import finder that loads this package's modules from their .py files. Python prefers
    an extension module to a .py file of the same name, and mypyc compiles some modules in
    place, beside their sources (csrc/build_core.py)."""

    PREFIX = f"{__name__}."

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or not fullname.startswith(cls.PREFIX):
            return None
        if fullname.rpartition(".")[2] in _EXTENSIONS:
            return None
        for entry in path:
            spec = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(fullname)
            if spec is not None:
                return spec
        return None


def _compiled_core_is_stale(here: pathlib.Path = pathlib.Path(__file__).parent) -> bool:
    """Whether the source of a module compiled in package folder ``here`` changed after
    the build: running the old build would silently ignore the edit."""
    built = [p.stat().st_mtime for p in here.glob("_core__mypyc*")]
    if not built:
        return False
    for so in here.rglob("*.cpython-*.so"):
        py = so.with_name(so.name.partition(".")[0] + ".py")
        if py.exists() and py.stat().st_mtime > min(built):
            return True
    return False


if CORE_FROM_SOURCE or _compiled_core_is_stale():
    if not CORE_FROM_SOURCE:
        warnings.warn(
            "the compiled protocol core is older than its source: running the source "
            "(`make core` rebuilds it)",
            RuntimeWarning,
            stacklevel=2,
        )
    if _CoreFromSource not in sys.meta_path:
        sys.meta_path.insert(0, _CoreFromSource)
