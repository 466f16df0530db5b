"""`mrc perf` across a real tiny lab: verified transfers, faults mid-way, ECN, a flood.

One tiny lab per module (bring-up is the slow part); every test uses its own traffic and
restores what it broke, and the fixture always runs the lab down.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.lab

SRC, DST = "h3", "h0"  # different racks: 2 paths per plane through the T1s
PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def one_shot(lab: str, tmp_path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """Run `mrc perf --lab LAB --from h3 --to h0 -J FLAGS`; (exit code, the -J document)."""
    log = tmp_path / f"perf-{random.getrandbits(32):08x}.json"
    rc = subprocess.call(
        [*PY, "--lab", lab, "--from", SRC, "--to", DST, "-J", "--logfile", str(log), *flags],
        timeout=60,
    )
    return rc, json.loads(log.read_text())


def ns_cmd(lab: str, host: str) -> list[str]:
    return ["ip", "netns", "exec", f"mrc-{lab}-{host}"]


@pytest.mark.parametrize("encoding", ["usid", "srh"])
@pytest.mark.parametrize(("size", "length"), [("1", "128K"), ("300K", "64K"), ("6M", "128K")])
def test_transfer_sizes_verified(
    lab: str, tmp_path: Path, encoding: str, size: str, length: str
) -> None:
    from labs.units import parse_size

    rc, doc = one_shot(lab, tmp_path, "-n", size, "-l", length, "--encoding", encoding)
    end = doc["end"]
    assert rc == 0
    assert end["verified"] is True
    assert end["sum_sent"]["bytes"] == end["sum_received"]["bytes"] == parse_size(size, "-n")
    assert doc["start"]["test_start"]["encoding"] == encoding
    assert end["sum_received"]["bits_per_second"] > 0


def test_encap_transfer_verified(lab: str, tmp_path: Path) -> None:
    """The encap encoding (IPv6-in-IPv6 on the uSID path): a verified transfer, every SACK
    decapsulated by the client without a bad packet, the inner header out of the MSS."""
    rc, usid = one_shot(lab, tmp_path, "-n", "1", "--encoding", "usid")
    rc_encap, doc = one_shot(lab, tmp_path, "-n", "300K", "--encoding", "encap")
    end = doc["end"]
    assert (rc, rc_encap) == (0, 0)
    assert end["verified"] is True
    assert end["sum_received"]["bytes"] == 300 * 1024
    assert doc["start"]["test_start"]["encoding"] == "encap"
    assert end["endpoint"]["bad_packets"] == {}
    assert end["endpoint"]["datagrams_received"] > 0
    assert doc["start"]["test_start"]["mss"] == usid["start"]["test_start"]["mss"] - 40


def test_parallel_four(lab: str, tmp_path: Path) -> None:
    rc, doc = one_shot(lab, tmp_path, "-n", "8M", "-P", "4")
    end = doc["end"]
    assert rc == 0
    assert end["verified"] is True
    assert len(end["streams"]) == 4
    assert all(s["verified"] and s["receiver"]["bytes"] == 2 << 20 for s in end["streams"])
    assert end["sum_received"]["bytes"] == 8 << 20
    # both ends' CPU, under iperf3's keys: the receiver's came in its R message
    cpu = end["cpu_utilization_percent"]
    assert 0 < cpu["host_total"] <= 200
    assert 0 < cpu["remote_total"] <= 200
    assert cpu["remote_total"] == pytest.approx(cpu["remote_user"] + cpu["remote_system"])


def test_reverse(lab: str, tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    rc, doc = one_shot(lab, tmp_path, "-n", "4M", "-R", "--records", str(records))
    assert rc == 0
    assert doc["end"]["verified"] is True
    assert doc["start"]["test_start"]["reverse"] == 1
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    assert sum(r["nbytes"] for r in lines) == 4 << 20  # -R: the client received and recorded
    assert all(r["flow"] == "mrc" for r in lines)
    assert [r["t_mono"] for r in lines] == sorted(r["t_mono"] for r in lines)
    assert doc["end"]["cpu_utilization_percent"]["remote_total"] > 0  # the sending server's


def test_text_output_has_iperf3_cpu_line(lab: str, tmp_path: Path) -> None:
    log = tmp_path / "perf.txt"
    rc = subprocess.call(
        [*PY, "--lab", lab, "--from", SRC, "--to", DST, "-n", "2M", "--logfile", str(log)],
        timeout=60,
    )
    assert rc == 0
    line = next(x for x in log.read_text().splitlines() if x.startswith("CPU Utilization"))
    assert "local/sender" in line
    assert "remote/receiver" in line


def start_stream(lab: str, *flags: str) -> subprocess.Popen[str]:
    """The one-shot run with --json-stream on stdout, for tests that act mid-transfer."""
    return subprocess.Popen(
        [*PY, "--lab", lab, "--from", SRC, "--to", DST, "--json-stream", "-i", "0.2", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_intervals(proc: subprocess.Popen[str], count: int) -> list[dict[str, Any]]:
    """Read events until ``count`` intervals with data went by (the transfer is running)."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "interval" and event["data"]["sum"]["bytes"] > 0:
            seen.append(event)
            if len(seen) >= count:
                return seen
    raise AssertionError("the transfer ended before it got going")


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    assert proc.stdout is not None
    end: dict[str, Any] = {}
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "end":
            end = event["data"]
    return proc.wait(timeout=60), end


def test_server_json_document(lab: str, tmp_path: Path) -> None:
    """`mrc perf -s -1 -J` writes iperf3's server document: the test's start, the
    server's interval lines and its end, with the sums and the verdict from its side."""
    log = tmp_path / "server.json"
    server = subprocess.Popen(
        [
            *ns_cmd(lab, DST),
            *PY,
            "-s",
            "-1",
            "--lab",
            lab,
            "-J",
            "-i",
            "0.2",
            "--logfile",
            str(log),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith("Server listening")
        rc = subprocess.call(
            [*ns_cmd(lab, SRC), *PY, "-c", DST, "--lab", lab, "-t", "1", "-P", "2", "-J"],
            stdout=subprocess.DEVNULL,
            timeout=60,
        )
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert rc == 0
    doc = json.loads(log.read_text())
    assert doc["start"]["test_start"]["num_streams"] == 2
    assert len(doc["intervals"]) >= 3
    assert all(i["sum"]["sender"] is False for i in doc["intervals"])
    end = doc["end"]
    assert end["verified"] is True
    assert len(end["streams"]) == 2
    received = end["sum_received"]["bytes"]
    assert received == sum(s["receiver"]["bytes"] for s in end["streams"]) > 0
    assert sum(i["sum"]["bytes"] for i in doc["intervals"]) <= received
    assert end["cpu_utilization_percent"]["remote_total"] > 0  # the client's, from its E


@pytest.mark.parametrize(
    ("link", "mode"), [("t0-p0-1:t1-p0-0", "gray"), ("t0-p1-1:t1-p1-1", "hard")]
)
def test_cut_mid_transfer_still_verified(lab: str, link: str, mode: str, tmp_path: Path) -> None:
    import time

    from labs.faults import Lab

    fabric = Lab(lab)
    log = tmp_path / "events.jsonl"
    proc = start_stream(lab, "-n", "40M", "--events", str(log))
    try:
        wait_intervals(proc, 2)
        t_cut = time.monotonic()
        fabric.cut(link, mode)  # type: ignore[arg-type]
        rc, end = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        fabric.restore(link)
    assert rc == 0
    assert end["verified"] is True
    assert end["sum_received"]["bytes"] == 40 << 20
    # the dead path's EVs took losses and were retired; the transfer went around them
    assert sum(p["lost"] for p in end["planes"]) > 0
    assert any(e["retired"] for e in end["evs"])
    # --events: the sender's log tells the same story, on the fault log's clock
    events = [json.loads(x) for x in log.read_text().splitlines()]
    retired = [e for e in events if e["event"] == "path_retired" and e["t_mono"] >= t_cut]
    assert retired, "no EV retired after the cut in the client's event log"
    resent = [e for e in events if e["event"] == "retransmit" and e["t_mono"] >= t_cut]
    assert resent, "no retransmission after the cut in the client's event log"
    assert sum(e["new_ev"] != e["old_ev"] for e in resent) * 2 >= len(resent)
    assert not any(e["event"] in ("message_received", "message_acked") for e in events)
    assert (tmp_path / "events.server.jsonl").exists()


NFT_MARK = """table inet mrcperftest {
  chain mark_ce {
    type filter hook postrouting priority 10; policy accept;
    oifname { "t1-p0-0", "t1-p0-1" } ip6 ecn { ect0, ect1 } \
      numgen random mod 100 < 90 ip6 ecn set ce
  }
}
"""


def test_ecn_on_one_plane_shifts_traffic(lab: str, tmp_path: Path) -> None:
    """With a window per plane (the option; by default the planes stay equally loaded,
    paper section 4): 90% of plane 0's packets marked (no queue behind the marks), the
    transfer moves to plane 1 (paper: "ECN moved one of them away with no throughput
    loss"). It runs at 80 Mbit/s, under plane 1's port rate, so there is room to move to;
    at line rate every plane is full and the marked one keeps what its one-MSS window
    carries."""
    sw = "t0-p0-1"  # the sender's T0 in plane 0: marks everything it sends up
    subprocess.run([*ns_cmd(lab, sw), "nft", "-f", "-"], input=NFT_MARK, text=True, check=True)
    try:
        rc, doc = one_shot(lab, tmp_path, "-n", "20M", "-b", "80M", "--cc-scope", "plane")
    finally:
        subprocess.run(
            [*ns_cmd(lab, sw), "nft", "delete", "table", "inet", "mrcperftest"], check=True
        )
    end = doc["end"]
    assert rc == 0
    assert end["verified"] is True
    planes = {p["plane"]: p for p in end["planes"]}
    # per packet sent, not in total: plane 1 carries most of the transfer, and the lab's
    # default marking (1% of ECT packets per link) marks ~2% of it: 37-50 echoes of ~2050
    # packets in 5 runs, against 280-340 of ~350 on plane 0; totals compared at 5x failed
    # about 1 run in 8 (253 against 51)
    share = {p: planes[p]["ecn"] / max(1, planes[p]["sent"]) for p in (0, 1)}
    assert share[0] > 0.5
    assert share[0] > 5 * share[1], share
    assert planes[0]["sent"] < 0.8 * planes[1]["sent"], planes


def _junk(rng: random.Random) -> bytes:
    """Random bytes, or a plausible MRC header with something wrong or unknown in it."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 200))
    version = 1 if kind != 1 else rng.choice([0, 2, 255])
    opcode = rng.randrange(0, 16) if kind != 2 else rng.randrange(0x0D, 256)
    head = bytes([version, opcode, rng.randrange(16), 0]) + rng.randbytes(8)
    return head + rng.randbytes(rng.randrange(0, 64))


FLOOD_BURST, FLOOD_BURSTS, FLOOD_PAUSE = 50, 400, 0.005


def _flood(sock: socket.socket, target: str, stop: threading.Event, sent: list[int]) -> None:
    """Junk at the server's port, bounded in count and paced in bursts, so it spans the
    transfer without starving the two endpoints of the machine's two cores."""
    rng = random.Random(7)
    for _ in range(FLOOD_BURSTS):
        for _ in range(FLOOD_BURST):
            try:
                sock.sendto(_junk(rng), (target, 4791))
                sent[0] += 1
            except OSError:
                pass
        if stop.wait(FLOOD_PAUSE):
            return


def test_flood_of_malformed_packets(lab: str, tmp_path: Path) -> None:
    """Junk from h1 at the server's port during a transfer: counted, dropped, verified."""
    from labs import addressing
    from labs.netns import entered
    from labs.state import load_state

    topo = load_state(lab).topology
    target = str(addressing.host_address(topo, 0, DST))
    log = tmp_path / "server.jsonl"
    server = subprocess.Popen(
        [*ns_cmd(lab, DST), *PY, "-s", "-1", "--lab", lab, "--json-stream", "--logfile", str(log)],
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    sent = [0]
    with entered(f"mrc-{lab}-h1"):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)

    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith("Server listening")
        flooder = threading.Thread(target=_flood, args=(sock, target, stop, sent), daemon=True)
        flooder.start()
        client = subprocess.run(
            [*ns_cmd(lab, SRC), *PY, "-c", DST, "--lab", lab, "-n", "10M", "-J"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        stop.set()
        flooder.join()
        assert server.wait(timeout=30) == 0
    finally:
        stop.set()
        sock.close()
        if server.poll() is None:
            server.kill()
    doc = json.loads(client.stdout)
    assert client.returncode == 0
    assert doc["end"]["verified"] is True
    events = [json.loads(x) for x in log.read_text().splitlines()]
    stream_end = next(e["data"] for e in events if e["event"] == "stream_end")
    assert stream_end["verified"] is True
    bad = stream_end["endpoint"]["bad_packets"]
    counted = sum(bad.values()) + stream_end["endpoint"]["unknown_connection"]
    assert sent[0] > 100
    assert counted > 100, (sent[0], stream_end["endpoint"])
    assert {"bad_version", "unknown_opcode"} <= set(bad)
    assert os.path.exists(log)
