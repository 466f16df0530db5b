"""`mrc perf --moderation paced` on the shaped `default` preset: an end that only receives
reads its socket several packets at a time at the ports' paced rate, where the default
wakes for every few (io/tuning.py ``RX_PACED_*``), and every byte still arrives."""

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
    return float(ep["datagrams_received"]) / ep["receive_bursts"]


def test_paced_moderation_reads_more_datagrams_per_wake_up(
    default_lab: str, tmp_path: Path
) -> None:
    bulk = _datagrams_per_read(default_lab, tmp_path, "bulk")
    paced = _datagrams_per_read(default_lab, tmp_path, "paced")
    assert paced >= 1.8 * bulk, (bulk, paced)
