"""Trimming end to end on real packets: three MRC senders into one host of a tiny lab whose
ports trim, so the last hop's queue cuts data packets to stubs; the receivers NACK them,
the senders resend them at once (in the retransmission class, which is trimmed too), and
every byte still arrives. The same incast in the no-trim class (`mrc perf --no-trim`) is
dropped where it would have been trimmed and recovered by loss detection. (A lab without
trimming plans exactly as before: tests/unit/test_lab_trim.py; every other lab test runs
one.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs.state import load_state
from labs.topology import Topology, from_dict
from labs.trim import port_counters
from tests.lab.conftest import RunningLab

pytestmark = pytest.mark.lab

LINKS = "{rate: 20mbit, limit: 128kb%s}"
TRIM = ", trim: {threshold: 24kb}"
SENDERS = ("h1", "h2", "h3")
RECEIVER = "h0"
SECONDS = "4"  # each; their starts (a Python start-up each) lie within a second or two
PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]


def topology(trim: bool) -> str:
    links = LINKS % (TRIM if trim else "")
    return f"preset: tiny\nlinks:\n  host_t0: {links}\n  t0_t1: {links}\n"


@pytest.fixture(scope="module")
def lab(running_lab: RunningLab) -> Iterator[tuple[str, Topology]]:
    with running_lab(from_dict(yaml.safe_load(topology(True)))) as name:
        yield name, load_state(name).topology


def incast(lab: str, out: Path, *flags: str) -> list[dict[str, Any]]:
    """Every sender's one-shot `mrc perf -t SECONDS` to RECEIVER at once, so that they
    overlap for seconds whatever their start-ups take; their -J ends."""
    procs, logs = [], []
    for i, src in enumerate(SENDERS):
        log = out / f"{src}.json"
        argv = [*PY, "--lab", lab, "--from", src, "--to", RECEIVER, "-p", str(4792 + i)]
        procs.append(
            subprocess.Popen(
                [*argv, *flags, "-t", SECONDS, "-l", "64K", "-J", "--logfile", str(log)]
            )
        )
        logs.append(log)
    for p in procs:
        assert p.wait(timeout=60) == 0
    return [json.loads(log.read_text())["end"] for log in logs]


def total(ends: list[dict[str, Any]], side: str, name: str) -> int:
    return sum(int(s[f"{side}_counters"].get(name, 0)) for e in ends for s in e["streams"])


def test_an_incast_into_a_trimming_port_is_recovered_by_nacks(
    lab: tuple[str, Topology], tmp_path: Path
) -> None:
    name, topo = lab
    ends = incast(name, tmp_path)
    assert all(e["verified"] for e in ends)
    assert all(e["sum_received"]["bytes"] == e["sum_sent"]["bytes"] > 0 for e in ends)
    trimmed = sum(c["trimmed"] for c in port_counters(name, topo))
    assert trimmed > 0, "the receiver's last hop trimmed"
    # The stubs the switches made reached a receiver, which NACKed them (a stub of a PSN
    # that arrived meanwhile is ignored, not NACKed). Not every one is counted: a stub
    # made on the way can meet the next port's hard limit, and one that comes after its
    # connection's report, or after it closed, is in no end document (3 of 33 once).
    stubs = total(ends, "receiver", "trimmed_received")
    heard = stubs + total(ends, "receiver", "trimmed_ignored")
    assert 0 < stubs <= heard <= trimmed
    assert heard >= 0.75 * trimmed, (heard, trimmed)
    nacks = total(ends, "sender", "nacks_received")
    assert 0 < nacks <= stubs
    # every NACK taken is resent, unless an earlier transmission of that packet (one RACK
    # thought lost) is acknowledged before the resend goes: a spurious retransmission
    rtx_nack, spurious = total(ends, "sender", "rtx_nack"), total(ends, "sender", "spurious_rtx")
    assert nacks - spurious <= rtx_nack <= nacks, (rtx_nack, nacks, spurious)
    # a resend goes into the same full queue, in its own trimmable class, and is cut too
    assert 0 < sum(c["trimmed_rtx"] for c in port_counters(name, topo)) < trimmed


def counters(lab: str, topo: Topology) -> dict[str, int]:
    """The port program's counters summed over the lab's ports."""
    ports = port_counters(lab, topo)
    return {k: sum(p[k] for p in ports) for k in ("trimmed", "dropped", "dropped_no_trim")}


def test_a_no_trim_incast_is_dropped_and_recovered_by_loss_detection(
    lab: tuple[str, Topology], tmp_path: Path
) -> None:
    name, topo = lab
    before = counters(name, topo)
    ends = incast(name, tmp_path, "--no-trim")
    after = counters(name, topo)
    assert all(e["verified"] for e in ends)
    assert all(e["sum_received"]["bytes"] == e["sum_sent"]["bytes"] > 0 for e in ends)
    d = {k: after[k] - before[k] for k in after}
    assert d["trimmed"] == 0, "no packet of the no-trim class is cut"
    assert d["dropped"] >= d["dropped_no_trim"] > 0
    assert total(ends, "receiver", "trimmed_received") == 0
    assert total(ends, "sender", "nacks_received") == 0
    assert total(ends, "sender", "retransmits") > 0
