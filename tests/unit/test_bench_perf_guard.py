"""bench/perf.py's floor sends bypass MRC's endpoint: its --blast and --drain helpers
refuse to run anywhere but inside a lab host's namespace, where the floor puts them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "perf.py"


def _perf(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_perf", BENCH)
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
    perf = _perf(monkeypatch)
    sent: list[object] = []
    perf._blast = perf._drain = lambda *a, **k: sent.append(a)
    assert perf.main(argv) == 2
    assert sent == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "inside the lab's host namespace" in err
