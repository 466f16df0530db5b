"""bench/perf.py's floor sends bypass MRC's endpoint: its --blast and --drain helpers
refuse to run anywhere but inside a lab host's namespace, where the floor puts them, and so
does bench/kernelpaths.py's --packets (it reads the host's routes and neighbours)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # kernelpaths.py imports perf.py by name
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # its dataclasses look it up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "argv", [["--blast", "nolab", "h0", "h1", "0.1"], ["--drain", "0.1"]], ids=["blast", "drain"]
)
def test_floor_helpers_refuse_outside_a_lab(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    perf = _load(monkeypatch, "perf")
    sent: list[object] = []
    perf._blast = perf._drain = lambda *a, **k: sent.append(a)
    assert perf.main(argv) == 2
    assert sent == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "inside the lab's host namespace" in err


def test_kernelpaths_packets_refuse_outside_a_lab(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kp = _load(monkeypatch, "kernelpaths")
    wrote: list[object] = []
    kp.write_packets = lambda *a: wrote.append(a)
    assert kp.main(["--packets", "nolab", "h0", "h1", "/nonexistent"]) == 2
    assert wrote == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "inside the lab's host namespace" in err


@pytest.mark.parametrize("argv", [["--seconds", "0"], ["--repeat", "0"]])
def test_kernelpaths_bad_flags(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kp = _load(monkeypatch, "kernelpaths")
    ran: list[object] = []
    kp.run = lambda *a: ran.append(a)
    assert kp.main(argv) == 2
    assert ran == []
    assert capsys.readouterr().err.count("\n") == 1
