"""Issue 34 on the shaped `default` preset, where the host's four 100 Mbit/s ports set the
rate: N connections in one endpoint get what one gets (-P 4 once got a quarter, the
connections' bursts overflowing the ports' queues), and with `--moderation paced` an end
that only receives reads several packets per wake-up where the default wakes for every few
(io/tuning.py ``RX_PACED_*``), every byte still arriving."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.conftest import RunningLab

pytestmark = pytest.mark.lab

PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]


@pytest.fixture(scope="module")
def default_lab(running_lab: RunningLab) -> Iterator[str]:
    from labs.topology import preset

    with running_lab(preset("default")) as name:
        yield name


def _goodput(lab: str, tmp_path: Path, parallel: int) -> tuple[float, list[float]]:
    """(the run's received bits per second, each connection's), verified."""
    log = tmp_path / f"p{parallel}.json"
    argv = [*PY, "--lab", lab, "--from", "h4", "--to", "h0", "-t", "3", "-P", str(parallel)]
    rc = subprocess.call([*argv, "-J", "--logfile", str(log)], timeout=60)
    end = json.loads(log.read_text())["end"]
    assert rc == 0
    assert end["verified"] is True
    per = [s["receiver"]["bits_per_second"] for s in end["streams"]]
    return end["sum_received"]["bits_per_second"], per


def test_four_connections_get_what_one_gets(default_lab: str, tmp_path: Path) -> None:
    one, _ = _goodput(default_lab, tmp_path, 1)
    four, each = _goodput(default_lab, tmp_path, 4)
    assert one > 0.8 * 400e6  # the four ports, nearly full
    assert four >= 0.9 * one
    mean = sum(each) / len(each)
    assert all(abs(x - mean) <= 0.2 * mean for x in each), each


def _datagrams_per_read(lab: str, tmp_path: Path, moderation: str) -> float:
    """Datagrams per receive call at the receiving end (the client, with -R), verified."""
    log = tmp_path / f"{moderation}.json"
    argv = [*PY, "--lab", lab, "--from", "h4", "--to", "h0", "-t", "3", "-R"]
    argv += ["--moderation", moderation, "-J", "--logfile", str(log)]
    rc = subprocess.call(argv, timeout=60)
    end = json.loads(log.read_text())["end"]
    assert rc == 0
    assert end["verified"] is True
    assert end["sum_received"]["bits_per_second"] > 0.8 * 400e6  # the four ports, nearly full
    ep = end["endpoint"]
    return float(ep["datagrams_received"]) / float(ep["receive_bursts"])


def test_paced_moderation_reads_more_datagrams_per_wake_up(
    default_lab: str, tmp_path: Path
) -> None:
    bulk = _datagrams_per_read(default_lab, tmp_path, "bulk")
    paced = _datagrams_per_read(default_lab, tmp_path, "paced")
    assert paced >= 1.8 * bulk, (bulk, paced)
