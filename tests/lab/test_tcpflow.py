"""The TCP baseline between two namespaces: verified records, and a gray cut's stall measured
by demo.timeline at about the cut's length (TCP has one path and waits out the cut plus
its retransmission backoff: RFC 6298 5.5, doubling from the 200 ms minimum RTO)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mrc_transport.harness.records import read_records
from mrc_transport.harness.timeline import FaultWindow, Params, analyse, goodput
from tests.lab.conftest import require_root_netns
from tests.lab.flowprocs import ends, next_event, stop, tcpflow

pytestmark = pytest.mark.lab

ADDR_A, ADDR_B = "fd00:7cf::1", "fd00:7cf::2"
RATE = "200mbit"  # shaped so the Python receiver, not the CPU, is never the bottleneck
RESTORE_LAG_S = 0.3  # how much earlier than its log time a restore may let traffic flow
# again (test_demo.py RESTORE_LAG_MS)


@dataclass(frozen=True)
class Pair:
    a: str
    b: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def pair() -> Iterator[Pair]:
    require_root_netns()
    tag = "mrcdemo" + uuid.uuid4().hex[:8]
    p = Pair(f"{tag}-a", f"{tag}-b")
    try:
        _ip("netns", "add", p.a)
        _ip("netns", "add", p.b)
        # Peer created directly in its namespace: a crash cannot leave an orphan in root.
        _ip("-n", p.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", p.b)
        for ns, dev, addr in ((p.a, "va", ADDR_A), (p.b, "vb", ADDR_B)):
            _ip("-n", ns, "addr", "add", f"{addr}/64", "dev", dev, "nodad")
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            subprocess.run(
                [
                    "tc",
                    "-n",
                    ns,
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    RATE,
                    "burst",
                    "64kb",
                    "limit",
                    "512kb",
                ],
                check=True,
            )
        yield p
    finally:
        for ns in (p.a, p.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def _gray(ns: str, dev: str, on: bool) -> None:
    text = (
        f'table netdev graycut {{\n  chain in {{\n    type filter hook ingress device "{dev}" '
        "priority -500; policy drop;\n  }\n}\n"
        if on
        else "delete table netdev graycut\n"
    )
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=text, text=True, check=True)


def _run_flow(
    pair: Pair, tmp: Path, seconds: float, cut: tuple[float, float] | None
) -> tuple[dict[str, object], dict[str, object], list[float]]:
    records = tmp / "tcp.jsonl"
    rx = tcpflow(pair.b, "recv", "--port", "5201", "--records", str(records), "--progress", "0.05")
    tx: subprocess.Popen[str] | None = None
    marks: list[float] = []
    try:
        next_event(rx, "listening")
        tx = tcpflow(pair.a, "send", ADDR_B, "--port", "5201", "-t", str(seconds))
        first = next_event(rx, "progress")  # data is flowing
        if cut is not None:
            start_after, length = cut
            time.sleep(max(0.0, float(str(first["t_mono"])) + start_after - time.monotonic()))
            # marks: before the first drop rule, after the second, before and after their
            # removal (each nft run can take tens of ms on a loaded machine)
            marks.append(time.monotonic())
            _gray(pair.b, "vb", True)
            _gray(pair.a, "va", True)
            marks.append(time.monotonic())
            time.sleep(length)  # the fault's duration itself
            marks.append(time.monotonic())
            _gray(pair.a, "va", False)
            _gray(pair.b, "vb", False)
            marks.append(time.monotonic())
        sent, end = ends(rx, tx, seconds + 30)
    finally:
        stop(rx, tx)
    return sent, end, marks


def test_flow_between_namespaces_is_recorded_and_verified(pair: Pair, tmp_path: Path) -> None:
    sent, end, _ = _run_flow(pair, tmp_path, 1.5, None)
    assert end["verified"] is True
    assert end["bytes"] == sent["bytes_sent"]
    recs = read_records(tmp_path / "tcp.jsonl")
    assert sum(d.nbytes for d in recs) == end["bytes"]
    assert len(recs) == end["records"]
    times = [d.t_mono for d in recs]
    assert times == sorted(times)
    assert sent["t_start"] <= times[0] <= times[-1] <= sent["t_end"]
    # Shaped at 200 Mbit/s: the middle second runs near the rate, never above it (+ burst).
    g = goodput(recs, times[0] + 0.2, times[0] + 1.2, bin_s=0.1)
    mean = sum(g.bps) / len(g.bps)
    assert 120e6 < mean < 215e6, mean


def test_gray_cut_stalls_tcp_for_the_cut(pair: Pair, tmp_path: Path) -> None:
    # Between TCP's first two retransmissions after the cut (RTO ~0.2 s, doubling: 0.2 and
    # 0.6 s after it): a 0.6 s cut raced the second one, and when the restore came just
    # after it, TCP waited until 1.4 s, past the window its recovery is measured in.
    cut_s = 0.45
    sent, end, (t_cut0, t_cut, t_restore0, t_restore) = _run_flow(pair, tmp_path, 3.0, (0.8, cut_s))
    assert end["verified"] is True
    assert end["bytes"] == sent["bytes_sent"]
    recs = read_records(tmp_path / "tcp.jsonl")
    fault = FaultWindow("cut", "va:vb", "gray", t_cut, t_restore)
    (res,) = analyse(recs, [fault], t_begin=recs[0].t_mono, t_stop=recs[-1].t_mono)
    stall = res.flows["tcp"].stall
    assert stall is not None
    length = t_restore - t_cut
    # TCP cannot deliver during the cut, and resumes at its next retransmission after it:
    # with the RTO doubling from 0.2 s (retries 0.2, 0.6, 1.4 s after the cut), at most
    # about twice the cut plus one minimum RTO.
    assert t_restore0 - t_cut <= stall.duration <= 2 * length + 0.4, (stall, length)
    assert t_cut0 - 0.05 <= stall.start <= t_cut
    assert stall.end >= t_restore0
    assert res.flows["tcp"].recovery_s is not None
    # recovery is measured in goodput bins, so it can land up to one bin before the restore
    assert res.flows["tcp"].recovery_s >= t_restore0 - t_cut - Params().bin_s


def test_tcp_path_is_found_by_counters_and_its_gray_cut_stalls_tcp(
    tiny_lab: str, tmp_path: Path
) -> None:
    """On the tiny lab: the T0-T1 link picked from tx counters is really on the TCP flow's
    ECMP path (cutting it stalls the flow for the cut), joined through the lab's event log."""
    from labs import addressing
    from labs.faults import Lab, read_events
    from labs.topology import namespace
    from mrc_transport.harness.linkload import measure_tcp_link
    from mrc_transport.harness.timeline import pair_events

    lab = Lab(tiny_lab)
    dst = str(addressing.baseline_address(lab.topo, "h2"))
    records = tmp_path / "tcp.jsonl"
    rx = tcpflow(namespace(tiny_lab, "h2"), "recv", "--records", str(records), "--progress", "0.05")
    tx: subprocess.Popen[str] | None = None
    try:
        next_event(rx, "listening")
        tx = tcpflow(namespace(tiny_lab, "h0"), "send", dst, "-t", "3.5")
        next_event(rx, "progress")
        link = measure_tcp_link(tiny_lab, lab.topo, 0.4, min_bytes=1_000_000)
        assert lab.topo.link(link).kind == "t0-t1"
        lab.cut(link, "gray")
        time.sleep(0.6)  # the fault's duration itself
        lab.restore(link)
        tx_out, tx_err = tx.communicate(timeout=40)
        rx_out, rx_err = rx.communicate(timeout=30)
    finally:
        for p in (rx, tx):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert tx.returncode == 0, tx_err
    assert rx.returncode == 0, rx_err
    end = json.loads(rx_out.strip().splitlines()[-1])
    assert end["verified"] is True
    assert end["bytes"] == json.loads(tx_out.strip().splitlines()[-1])["bytes_sent"]
    recs = read_records(records)
    faults = pair_events(read_events(tiny_lab), t_stop=recs[-1].t_mono)
    (fault,) = faults
    assert (fault.kind, fault.target, fault.action) == ("cut", link, "gray")
    (res,) = analyse(recs, faults, t_begin=recs[0].t_mono, t_stop=recs[-1].t_mono)
    stall = res.flows["tcp"].stall
    assert stall is not None
    length = fault.t_end - fault.t_start
    # Pinned to its path (pin_path), TCP waits out the whole cut and its RTO backoff.
    # Measured: 0.70 s cut -> 1.52 s stall (retries at 0.2, 0.6, 1.4 s + RTT variance).
    # The log's restore time is when `restore` returned, after it re-applied both ends'
    # config; traffic flows once the drop chains are gone, earlier (restore took 98-127 ms
    # on a quiet machine; under CI's steal a 0.68 s stall followed a 0.75 s logged cut).
    assert length - RESTORE_LAG_S <= stall.duration <= 2 * length + 0.4, (stall, length)
