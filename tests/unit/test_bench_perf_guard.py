"""bench/perf.py's floor sends bypass MRC's endpoint: its --blast and --drain helpers
refuse to run anywhere but inside a lab host's namespace, where the floor puts them, and so
does bench/kernelpaths.py's --packets (it reads the host's routes and neighbours)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import CliError

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
    argv: list[str], cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    perf = _load(monkeypatch, "perf")
    sent: list[object] = []
    perf._blast = perf._drain = lambda *a, **k: sent.append(a)
    cli_error(argv, "inside the lab's host namespace", main=perf.main)
    assert sent == []


def test_kernelpaths_packets_refuse_outside_a_lab(
    cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    kp = _load(monkeypatch, "kernelpaths")
    wrote: list[object] = []
    kp.write_packets = lambda *a: wrote.append(a)
    argv = ["--packets", "nolab", "h0", "h1", "/nonexistent"]
    cli_error(argv, "inside the lab's host namespace", main=kp.main)
    assert wrote == []


@pytest.mark.parametrize("argv", [["--seconds", "0"], ["--repeat", "0"]])
def test_kernelpaths_bad_flags(
    argv: list[str], cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    kp = _load(monkeypatch, "kernelpaths")
    ran: list[object] = []
    kp.run = lambda *a: ran.append(a)
    cli_error(argv, main=kp.main)
    assert ran == []


def test_kernelpaths_a_refused_path_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kp = _load(monkeypatch, "kernelpaths")
    got = kp.perf.Sides(1e9, 1.0, 0.5, 0.5, 0.1)

    def floor_run(lab: str, src: str, dst: str, seconds: float, cmd: list[str]) -> object:
        if cmd[0] == "xdp":
            raise subprocess.CalledProcessError(1, cmd, "", "bind AF_XDP: Invalid argument\n")
        return got

    monkeypatch.setattr(kp.perf, "floor_run", floor_run)
    runs: dict[str, list[object]] = {m: [] for m in kp.MODES}
    missing: dict[str, str] = {}
    kp._round("lab", "h0", "h1", 1.0, lambda mode: [mode], runs, missing)
    assert missing == {"xdp": "bind AF_XDP: Invalid argument"}
    assert set(runs) == set(kp.MODES) - {"xdp"}
    assert all(r == [got] for r in runs.values())


def test_kernelpaths_a_failed_baseline_ends_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    kp = _load(monkeypatch, "kernelpaths")

    def floor_run(*a: object) -> object:
        raise subprocess.CalledProcessError(1, ["raw"], "", "socket: Operation not permitted\n")

    monkeypatch.setattr(kp.perf, "floor_run", floor_run)
    with pytest.raises(SystemExit, match="raw socket failed: socket: Operation not permitted"):
        kp._round("lab", "h0", "h1", 1.0, lambda mode: [mode], {m: [] for m in kp.MODES}, {})
