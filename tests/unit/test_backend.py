"""Which backend is live (mrc_transport/backend.py). CI runs the suite twice: with
MRC_PUREPYTHON=0 this proves the C fast path and the compiled protocol core really loaded
(a missing or broken extension would otherwise fall back to the reference and every C
test would be skipped); with MRC_PUREPYTHON=1 it proves the switch forces the reference."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from types import ModuleType

import pytest

import mrc_transport.protocol as core
import mrc_transport.wire as wire
from mrc_transport import backend
from mrc_transport.io import batchio
from mrc_transport.protocol import sender
from mrc_transport.wire import codec

EXTENSION_BUILT = importlib.util.find_spec("mrc_transport._fastpath") is not None
CORE_BUILT = backend.core_missing() is None
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _build_core() -> ModuleType:
    """csrc/build_core.py (not a package module: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("build_core", ROOT / "csrc" / "build_core.py")
    assert spec is not None
    assert spec.loader is not None
    build_core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_core)
    return build_core


def test_c_backend_loaded_when_required() -> None:
    if os.environ.get("MRC_PUREPYTHON") != "0":
        pytest.skip("MRC_PUREPYTHON is not 0")
    from mrc_transport.wire import fast

    assert (backend.MODE, backend.FASTPATH, backend.COMPILED_CORE) == ("native", True, True)
    assert wire.BACKEND == "c"
    assert wire.encode is fast.encode
    assert wire.decode_untrusted is fast.decode_untrusted
    assert wire.encode_data_batch is fast.encode_data_batch
    assert batchio.BACKEND == "c"
    assert batchio.send_batch is batchio.c_send_batch
    assert core.COMPILED
    assert not str(sender.__file__).endswith(".py")


def test_reference_forced_by_the_switch() -> None:
    if os.environ.get("MRC_PUREPYTHON") != "1":
        pytest.skip("MRC_PUREPYTHON is not set")
    assert (backend.MODE, backend.FASTPATH, backend.COMPILED_CORE) == ("python", False, False)
    assert wire.BACKEND == "python"
    assert wire.encode is codec.encode
    assert batchio.BACKEND == "python"
    assert batchio.recv_batch is batchio.py_recv_batch
    assert not core.COMPILED
    assert str(sender.__file__).endswith(".py")


def test_every_compiled_module_runs_as_the_switch_says() -> None:
    """Native: each module csrc/build_core.py compiles is its extension from the
    installed build; the reference: each is its .py file, though the build is there."""
    names = [path.removesuffix(".py").replace("/", ".") for path in _build_core().COMPILED]
    assert len(names) >= 14
    for name in names:
        path = str(importlib.import_module(name).__file__)
        if backend.COMPILED_CORE:
            assert path.startswith(str(backend.COMPILED_DIR)), name
            assert path.endswith(".so"), name
        else:
            assert path.endswith(".py"), name
            assert pathlib.Path(path).is_relative_to(ROOT / "mrc_transport"), name


def test_backend_is_consistent_with_the_environment() -> None:
    forced = os.environ.get("MRC_PUREPYTHON") == "1"
    expected = "c" if EXTENSION_BUILT and not forced else "python"
    assert expected == wire.BACKEND
    assert expected == batchio.BACKEND


def _fresh_interpreter(code: str, switch: str | None) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new interpreter with MRC_PUREPYTHON set to ``switch`` (unset:
    None), nothing else of it inherited."""
    env = {k: v for k, v in os.environ.items() if k != "MRC_PUREPYTHON"}
    if switch is not None:
        env["MRC_PUREPYTHON"] = switch
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("purepython", ["1", None])
def test_switch_in_a_fresh_interpreter(purepython: str | None) -> None:
    code = (
        "import mrc_transport.wire as w, mrc_transport.io.batchio as b, mrc_transport.protocol"
        " as p; print(w.BACKEND, b.BACKEND, p.COMPILED)"
    )
    out = _fresh_interpreter(code, purepython)
    expected = "python" if purepython == "1" or not EXTENSION_BUILT else "c"
    compiled = purepython != "1" and CORE_BUILT
    assert out.stdout.split() == [expected, expected, str(compiled)]


def test_a_bad_switch_value_is_refused_in_one_line() -> None:
    out = _fresh_interpreter("import mrc_transport", "yes")
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        "ImportError: MRC_PUREPYTHON must be unset, 0 or 1, not 'yes'"
    )


def test_native_required_refuses_a_missing_build() -> None:
    with pytest.raises(ImportError, match=r"^MRC_PUREPYTHON=0 requires the native build, but x$"):
        backend.choose("native", "x", None)
    with pytest.raises(ImportError, match=r"but x; y$"):
        backend.choose("native", "x", "y")
    assert backend.choose("native", None, None) == (True, True, None)


def test_auto_falls_back_part_by_part_with_one_warning() -> None:
    assert backend.choose("auto", None, None) == (True, True, None)
    fastpath, compiled, warning = backend.choose("auto", None, "no core")
    assert (fastpath, compiled) == (True, False)
    assert warning is not None
    assert warning.startswith("mrc_transport: no core: running")
    fastpath, compiled, warning = backend.choose("auto", "no C", "no core")
    assert (fastpath, compiled) == (False, False)
    assert warning is not None
    assert "no C; no core" in warning
    assert backend.choose("python", None, None) == (False, False, None)


def test_a_missing_build_is_named(tmp_path: pathlib.Path) -> None:
    why = backend.core_missing(tmp_path)
    assert why is not None
    assert "`make`" in why
    (tmp_path / backend.MANIFEST).write_text("{}")
    assert backend.core_missing(tmp_path) is not None  # a manifest alone is no build
    group = tmp_path / ("_core__mypyc" + EXTENSION_SUFFIXES[0])  # the package's own folder
    group.write_bytes(b"")
    assert backend.core_missing(tmp_path) is None


def test_the_build_puts_the_core_where_the_backend_looks() -> None:
    build_core = _build_core()
    package = ROOT.joinpath(*build_core.COMPILED_PACKAGE.split("."))
    assert package == backend.COMPILED_DIR
    assert build_core.MANIFEST == backend.MANIFEST
    assert build_core.GROUP + "__mypyc" == backend.GROUP
    if CORE_BUILT:
        assert sorted(backend.compiled_sources()) == sorted(build_core.COMPILED)


def test_the_build_compiles_every_module_of_the_core_but_those_it_says() -> None:
    """A new module of the protocol core is compiled unless the build says why not, and
    setup.py builds the core only for the commands that build (pip asks for metadata
    first, which must not run mypyc)."""
    build_core = _build_core()
    modules = {
        str(p.relative_to(ROOT)) for p in (ROOT / "mrc_transport" / "protocol").rglob("*.py")
    }
    assert set(build_core.COMPILED).isdisjoint(build_core.LEFT_OUT)
    assert set(build_core.COMPILED) | set(build_core.LEFT_OUT) == modules
    assert build_core.extensions(["setup.py", "dist_info"]) == []
    assert {"bdist_wheel", "editable_wheel", "build_ext"} <= build_core.BUILDS
    assert "build_core.BuildExt" in (ROOT / "setup.py").read_text()
