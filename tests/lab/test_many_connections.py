"""Many connections at once, briefly (bench/manyconns.py runs them for a minute): one server
with many clients and all-to-all among a lab's hosts, every byte verified, the server's
sockets gone after its test, no process left in the lab."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.lab

BENCH = Path(__file__).resolve().parents[2] / "bench" / "manyconns.py"


@pytest.fixture(scope="module")
def manyconns() -> ModuleType:
    sys.path.insert(0, str(BENCH.parent))  # it imports benchlab.py beside it
    spec = importlib.util.spec_from_file_location("bench_manyconns", BENCH)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look it up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def test_one_server_many_clients_leaves_no_socket(manyconns: ModuleType, lab: str) -> None:
    from labs.topology import preset

    r = manyconns.one_server(lab, preset("tiny").hosts, seconds=3, n=24)
    assert r.verified
    assert r.fds_left == 0
    assert 0 < r.mb_per_conn < 8  # bounded: a window of jumbo packets, not a leak


def test_all_to_all_in_one_process(manyconns: ModuleType, lab: str) -> None:
    from labs.topology import preset

    r = manyconns.all_to_all(lab, preset("tiny").hosts, seconds=3)
    assert r.connections == 12
    assert r.verified
    assert r.pids_left == 0
