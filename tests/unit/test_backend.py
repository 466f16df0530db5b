"""Which backend is live. CI runs the suite twice: with MRC_EXPECT_FASTPATH=1 this proves the
C fast path and the compiled protocol core really loaded (a missing or broken extension
would otherwise fall back to the reference silently and every C test would be skipped);
with MRC_PUREPYTHON=1 it proves the switch forces the reference."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

import mrc_transport.protocol as core
import mrc_transport.wire as wire
from mrc_transport.io import batchio
from mrc_transport.protocol import sender
from mrc_transport.wire import codec

EXTENSION_BUILT = importlib.util.find_spec("mrc_transport._fastpath") is not None
CORE_BUILT = importlib.util.find_spec("mrc_transport._core__mypyc") is not None


def test_c_backend_loaded_when_expected() -> None:
    if os.environ.get("MRC_EXPECT_FASTPATH") != "1":
        pytest.skip("MRC_EXPECT_FASTPATH is not set")
    from mrc_transport.wire import fast

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
    assert wire.BACKEND == "python"
    assert wire.encode is codec.encode
    assert batchio.BACKEND == "python"
    assert batchio.recv_batch is batchio.py_recv_batch
    assert not core.COMPILED
    assert str(sender.__file__).endswith(".py")


def test_backend_is_consistent_with_the_environment() -> None:
    forced = os.environ.get("MRC_PUREPYTHON") == "1"
    expected = "c" if EXTENSION_BUILT and not forced else "python"
    assert expected == wire.BACKEND
    assert expected == batchio.BACKEND


def _fresh_interpreter(code: str, **switches: str) -> list[str]:
    """What ``code`` prints, split in words, run by a new interpreter with the backend
    ``switches`` set as environment variables (and none inherited)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MRC_PUREPYTHON", "MRC_CORE_SOURCE")}
    env.update(switches)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@pytest.mark.parametrize("purepython", ["1", None])
def test_switch_in_a_fresh_interpreter(purepython: str | None) -> None:
    code = (
        "import mrc_transport.wire as w, mrc_transport.io.batchio as b, mrc_transport.protocol"
        " as p; print(w.BACKEND, b.BACKEND, p.COMPILED)"
    )
    out = _fresh_interpreter(code, **({} if purepython is None else {"MRC_PUREPYTHON": "1"}))
    expected = "python" if purepython == "1" or not EXTENSION_BUILT else "c"
    compiled = purepython != "1" and CORE_BUILT
    assert out == [expected, expected, str(compiled)]


def test_core_from_source_keeps_the_c_fast_path() -> None:
    """MRC_CORE_SOURCE=1 (bench/core.py's baseline): the core from its .py files, the C
    codec and batched IO as built."""
    code = (
        "import mrc_transport.wire as w, mrc_transport.protocol.sender as s;"
        " print(w.BACKEND, s.__file__.endswith('.py'))"
    )
    out = _fresh_interpreter(code, MRC_CORE_SOURCE="1")
    assert out == ["c" if EXTENSION_BUILT else "python", "True"]
