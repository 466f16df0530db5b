"""`mrc perf` runs its endpoint, and the demo its TCP flow, with what each loaded first
frozen out of the collector."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from mrc_transport.cli import main as cli_main
from mrc_transport.cli import perf as cli_perf
from mrc_transport.harness import tcpflow
from mrc_transport.perf import client, output, server


class _Out:
    def close(self) -> None:
        pass


def _frozen_when_run(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str, start: Callable[[], int]
) -> int:
    """How many objects were frozen when ``start()`` reached ``owner.name`` (replaced by
    a stand-in that only looks), checking it was reached once and unfreezing after."""
    frozen: list[int] = []

    def run(*args: Any) -> int:
        frozen.append(gc.get_freeze_count())
        return 0

    monkeypatch.setattr(owner, name, run)
    assert gc.get_freeze_count() == 0
    try:
        assert start() == 0
    finally:
        gc.unfreeze()
    assert len(frozen) == 1
    return frozen[0]


@pytest.mark.parametrize("is_server", [False, True])
def test_the_endpoint_runs_with_the_loaded_objects_frozen(
    monkeypatch: pytest.MonkeyPatch, is_server: bool
) -> None:
    """A full collection that scans every module's objects took 10-17 ms, longer than a
    failover: the objects loaded before the endpoint runs must be frozen by then."""
    monkeypatch.setattr(output.Output, "open", staticmethod(lambda opts: _Out()))
    argv = ["perf", "-s", "-1"] if is_server else ["perf", "-c", "h1"]
    opts = cli_perf.options(cli_main.build_parser().parse_args(argv))
    owner, name = (server, "run_server") if is_server else (client, "run_client")
    frozen = _frozen_when_run(monkeypatch, owner, name, lambda: cli_perf._run_here(opts, is_server))
    assert frozen > 1000


@pytest.mark.parametrize("role", ["recv", "send"])
def test_the_tcp_baseline_runs_frozen_too(monkeypatch: pytest.MonkeyPatch, role: str) -> None:
    argv = (
        ["recv", "--port", "5201"]
        if role == "recv"
        else ["send", "::1", "--port", "5201", "-t", "1"]
    )
    frozen = _frozen_when_run(monkeypatch, tcpflow, f"_run_{role}", lambda: tcpflow.main(argv))
    assert frozen > 1000
