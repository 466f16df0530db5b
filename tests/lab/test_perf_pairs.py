"""`mrc perf --pairs` on a lab: many pairs from one process, started together, each named,
every byte verified: an incast that happens every time (issue 38), and the lab's
endpoints in one trio loop (issue 34)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def test_three_to_one_starts_together_and_verifies(lab: str, tmp_path: Path) -> None:
    records, log = tmp_path / "rec.jsonl", tmp_path / "run.json"
    argv = [*PY, "--lab", lab, "--pairs", "h1:h0,h2:h0,h3:h0", "-n", "4M", "-J"]
    rc = subprocess.call([*argv, "--records", str(records), "--logfile", str(log)], timeout=90)
    doc = json.loads(log.read_text())
    assert rc == 0
    assert doc["end"]["verified"] is True
    assert len(doc["end"]["streams"]) == 3
    assert doc["start"]["connecting_to"]["host"] == "h1:h0,h2:h0,h3:h0"
    first, last = {}, {}
    for line in records.read_text().splitlines():
        r = json.loads(line)
        first.setdefault(r["flow"], r["t_mono"])
        last[r["flow"]] = r["t_mono"]
    assert sorted(first) == ["mrc-0", "mrc-1", "mrc-2"]
    # the start barrier: every sender is under way before any one of them has finished
    assert max(first.values()) < min(last.values())


def test_text_names_each_pair_and_its_lines(lab: str) -> None:
    argv = [*PY, "--lab", lab, "--pairs", "h2:h0,h3:h1", "-t", "2", "-i", "0.5"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "[  0] h2 -> h0" in lines
    assert "[  1] h3 -> h1" in lines
    assert any(ln.startswith("[  1]") and ln.endswith("receiver") for ln in lines)
    assert any(ln.startswith("verified:") for ln in lines)
