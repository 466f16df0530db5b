"""MPTCP between lab hosts (root, the tiny lab: 2 planes): one connection has a subflow per
plane and every plane's port carries its data (the sender's per-port byte counters), it
survives a hard cut of one plane with every byte verified, and a namespace with MPTCP off
is refused in one line. The stall a cut leaves is printed as a figure, not bounded."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from labs import addressing
from labs.topology import namespace, preset
from mrc_transport.harness.linkload import read_tx_counters
from mrc_transport.harness.records import read_records
from mrc_transport.harness.timeline import FaultWindow, analyse
from tests.lab.flowprocs import ends, next_event, stop, tcpflow

pytestmark = pytest.mark.lab

SRC, DST = "h2", "h0"  # different racks: each subflow crosses its plane's T0-T1 links
PORT = "5203"
TINY = preset("tiny")


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def _tcpflow(lab: str, host: str, *args: str) -> subprocess.Popen[str]:
    return tcpflow(namespace(lab, host), *args, "--mptcp")


def _transfer(
    lab: str, records: Path, seconds: float, during: Callable[[], None] | None = None
) -> dict[str, Any]:
    """One MPTCP transfer from SRC's plane-0 address to DST (docs/lab.md, "MPTCP");
    ``during()`` runs once it flows.
    Returns the sender's end event and the receiver's under "rx"."""
    rx = _tcpflow(lab, DST, "recv", "--port", PORT, "--flow", "mptcp", "--records", str(records),
                  "--progress", "0.05")  # fmt: skip
    tx = None
    try:
        next_event(rx, "listening")
        dst = str(addressing.baseline_address(TINY, DST))
        src = str(addressing.host_address(TINY, 0, SRC))
        tx = _tcpflow(lab, SRC, "send", dst, "--bind", src, "--port", PORT, "-t", str(seconds))
        next_event(rx, "progress")
        if during is not None:
            during()
        sent, received = ends(rx, tx, seconds + 60)
    finally:
        stop(rx, tx)
    return {**sent, "rx": received}


def test_one_connection_has_a_subflow_per_plane_and_every_port_carries_data(
    lab: str, tmp_path: Path
) -> None:
    before = read_tx_counters(lab, [SRC])
    end = _transfer(lab, tmp_path / "mptcp.jsonl", 2.0)
    after = read_tx_counters(lab, [SRC])
    rx = end["rx"]
    assert rx["verified"] is True
    assert rx["bytes"] == end["bytes_sent"]
    # one subflow from each plane's address of SRC, all to DST's address in every plane
    planes = {str(addressing.host_address(TINY, p, SRC)) for p in range(TINY.planes)}
    assert sorted(local for local, _ in end["subflows"]) == sorted(planes)
    assert {remote for _, remote in end["subflows"]} == {
        str(addressing.baseline_address(TINY, DST))
    }
    sent = {p: after[(SRC, f"p{p}")] - before[(SRC, f"p{p}")] for p in range(TINY.planes)}
    total = sum(sent.values())
    assert total >= end["bytes_sent"]
    print(f"MPTCP bytes per port of {SRC}: {sent}")
    # the in-kernel scheduler fills every subflow of a bulk transfer: ~half each on 2 planes
    assert all(n >= 0.2 * total for n in sent.values()), sent


def test_a_hard_cut_of_one_plane_loses_no_byte(lab: str, tmp_path: Path) -> None:
    from labs.faults import Lab

    link = f"{SRC}:{TINY.t0(1, TINY.rack_of(SRC))}"
    marks: list[float] = []

    def cut_then_restore() -> None:
        time.sleep(0.8)  # the transfer runs on both planes first
        marks.append(Lab(lab).cut(link, "hard").t_mono)
        time.sleep(1.0)  # the fault's length itself
        marks.append(Lab(lab).restore(link).t_mono)

    records = tmp_path / "mptcp.jsonl"
    end = _transfer(lab, records, 3.5, cut_then_restore)
    rx = end["rx"]
    assert rx["verified"] is True
    assert rx["bytes"] == end["bytes_sent"]
    recs = read_records(records)
    fault = FaultWindow("cut", link, "hard", marks[0], marks[1])
    (res,) = analyse(recs, [fault], t_begin=recs[0].t_mono, t_stop=recs[-1].t_mono)
    stall = res.flows["mptcp"].stall
    assert stall is not None
    print(f"MPTCP's longest gap around a 1 s hard cut of {link}: {stall.duration * 1e3:.0f} ms")


def test_mptcp_off_in_a_namespace_is_one_line(lab: str) -> None:
    from labs import netns
    from mrc_transport.harness.errors import HarnessError
    from mrc_transport.harness.mptcp import check_ready

    with netns.entered(namespace(lab, DST)):
        netns.write_sysctl("net.mptcp.enabled", "0")
    try:
        with pytest.raises(HarnessError) as info:
            check_ready(lab, [SRC, DST])
        assert str(info.value).startswith(f"MPTCP is off in {DST}'s namespace")
        rx = _tcpflow(lab, DST, "recv", "--port", PORT, "--accept-timeout", "1")
        _out, err = rx.communicate(timeout=30)
        assert rx.returncode == 2
        assert err.startswith("tcpflow recv: error:")
        assert err.count("\n") == 1
    finally:
        with netns.entered(namespace(lab, DST)):
            netns.write_sysctl("net.mptcp.enabled", "1")
