"""The one backend switch: the C-backed parts native, or their pure-Python reference.

``MRC_PUREPYTHON`` is read once, when ``mrc_transport`` is first imported:

* unset (auto): the C fast path (``mrc_transport._fastpath``: the wire codec, batched
  socket IO and burst decoding) and the mypyc-compiled protocol core where they are
  built, the pure-Python reference for what is not, with one warning naming it;
* ``1``: the pure-Python reference everywhere, the protocol core from its .py files;
* ``0``: native required: ImportError, with a one-line reason, when the C extension or
  the compiled core is missing (``make test``'s first pass, so a broken build cannot pass
  as the reference).

Every part with two implementations asks ``FASTPATH`` or ``COMPILED_CORE`` here (msgpack's
``__init__.py`` pattern, one place instead of one per module).

The compiled core is not beside its sources: the package's build (setup.py,
csrc/build_core.py) puts mypyc's extensions in ``COMPILED_DIR``, a tree of the package's
own shape inside it (``_compiled/_core__mypyc*.so``, ``_compiled/protocol/sender*.so``
...), in a wheel as in a checkout built in place. Each package with compiled modules puts
its folder of that tree first on its ``__path__`` (``extend_path``, as
``pkgutil.extend_path``), so its compiled modules are found before their sources; with
the reference selected nothing is added.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pathlib
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Final, Literal

Mode = Literal["auto", "python", "native"]

SWITCH: Final = "MRC_PUREPYTHON"
COMPILED_DIR: Final = pathlib.Path(__file__).resolve().parent / "_compiled"
"""Where the package's build puts the compiled protocol core (csrc/build_core.py
``COMPILED_PACKAGE``): the package ``mrc_transport``'s folder of its tree."""
MANIFEST: Final = "sources.json"
"""In ``COMPILED_DIR``: each compiled source, as a path from the repository root, and the
SHA-256 of the text it was compiled from."""
GROUP: Final = "mrc_transport._core__mypyc"
"""mypyc's shared library of the compiled modules; each compiled module imports it."""
ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
"""The folder holding the package's sources (the repository, for an editable install)."""


def mode_of(setting: str | None) -> Mode:
    """The mode an ``MRC_PUREPYTHON`` value asks for; ImportError for any other value."""
    modes: dict[str | None, Mode] = {None: "auto", "": "auto", "1": "python", "0": "native"}
    if setting not in modes:
        raise ImportError(f"{SWITCH} must be unset, 0 or 1, not {setting!r}")
    return modes[setting]


def fastpath_missing() -> str | None:
    """Why the C extension cannot be used, or None when it imports."""
    try:
        importlib.import_module("mrc_transport._fastpath")
    except ImportError as exc:
        return f"the C fast path does not import ({exc}; `make` or `pip install .` builds it)"
    return None


def core_missing(compiled_dir: pathlib.Path = COMPILED_DIR) -> str | None:
    """Why the compiled core cannot be used, or None when it is built."""
    group = compiled_dir.joinpath(*GROUP.split(".")[1:])
    if (compiled_dir / MANIFEST).exists() and any(
        group.with_name(group.name + suffix).exists() for suffix in EXTENSION_SUFFIXES
    ):
        return None
    return (
        f"the compiled protocol core is not built in {compiled_dir} "
        "(`make` or `pip install .` builds it)"
    )


def choose(
    mode: Mode, no_fastpath: str | None, no_core: str | None
) -> tuple[bool, bool, str | None]:
    """(C fast path, compiled core, warning or None) for ``mode``, given why each native
    part cannot be used (None: it can). Raises ImportError when native is required and a
    part is missing."""
    if mode == "python":
        return False, False, None
    missing = [why for why in (no_fastpath, no_core) if why is not None]
    if missing and mode == "native":
        raise ImportError(f"{SWITCH}=0 requires the native build, but {'; '.join(missing)}")
    warning = None
    if missing:
        warning = (
            f"mrc_transport: {'; '.join(missing)}: running the pure-Python reference there "
            f"({SWITCH}=1 asks for it everywhere and silences this)"
        )
    return no_fastpath is None, no_core is None, warning


def _select() -> tuple[Mode, bool, bool]:
    mode = mode_of(os.environ.get(SWITCH))
    if mode == "python":  # probe nothing: the reference must run where nothing is built
        return mode, False, False
    fastpath, core, warning = choose(mode, fastpath_missing(), core_missing())
    if warning is not None:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return mode, fastpath, core


MODE, FASTPATH, COMPILED_CORE = _select()
"""The mode asked for; whether the C fast path runs; whether the compiled core runs."""


def extend_path(path: list[str], name: str) -> list[str]:
    """Package ``name``'s ``__path__`` with its folder of the compiled core first, when
    the compiled core runs (else ``path`` itself): ``__path__ = extend_path(__path__,
    __name__)`` at the top of the package's ``__init__``, before it imports a module."""
    folder = COMPILED_DIR.joinpath(*name.split(".")[1:])
    if not COMPILED_CORE or not folder.is_dir():
        return path
    return [str(folder), *path]


def _digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"


def compiled_sources(compiled_dir: pathlib.Path = COMPILED_DIR) -> dict[str, str]:
    """The installed build's manifest: each compiled source (a path from ``ROOT``) and
    the SHA-256 it had when compiled; empty when nothing is installed."""
    manifest = compiled_dir / MANIFEST
    if not manifest.exists():
        return {}
    sources: dict[str, str] = json.loads(manifest.read_text())
    return sources


def stale_sources(
    compiled_dir: pathlib.Path = COMPILED_DIR, root: pathlib.Path = ROOT
) -> list[str]:
    """The compiled sources whose text differs from what the installed build compiled:
    with any, the compiled core runs old code. It reads every source, so it is not run on
    import; tests/conftest.py runs it once per test session."""
    return [
        src
        for src, digest in compiled_sources(compiled_dir).items()
        if _digest(root / src) != digest
    ]
