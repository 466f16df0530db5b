"""`mrc lab capture` on a real tiny lab, read back by the real tshark with the shipped
dissector: a transfer's packets decode, packet for packet, as our decoder and the scapy layer
decode them; Ctrl-C, -c and --duration end a capture with a complete pcapng; a cut
mid-transfer shows retransmissions on other EVs (the workshop's exercise).

Needs root, namespaces and tshark: skipped without, failed under MRC_REQUIRE_LAB=1."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.utils import rdpcap

from labs.topology import preset
from mrc_transport.wire import MRC_UDP_PORT, Opcode, decode_datagram_untrusted
from tests.lab.conftest import RunningLab, require_root_netns
from tests.tshark import (
    ALL_FIELDS,
    assert_frame_matches,
    expected_fields,
    fields,
    require_tshark,
    scapy_fields,
    tshark,
)

pytestmark = pytest.mark.lab

SRC, DST = "h3", "h0"  # different racks: 2 paths per plane through the T1s
MRC = [sys.executable, "-m", "mrc_transport.cli.main"]
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"  # a Section Header Block starts every pcapng
READY_TIMEOUT = 20.0


@pytest.fixture(scope="module")
def lab(running_lab: RunningLab) -> Iterator[str]:
    require_root_netns()
    require_tshark()
    with running_lab(preset("tiny")) as name:
        yield name


def start_capture(lab: str, *args: str, stdout: int | None = None) -> subprocess.Popen[bytes]:
    # Unbuffered: communicate(timeout=...) reads the pipe's fd, past any Python buffer.
    argv = [*MRC, "lab", "capture", "--name", lab, *args]
    return subprocess.Popen(argv, stdout=stdout, bufsize=0)


def wait_recording(proc: subprocess.Popen[bytes], pcap: Path) -> None:
    """dumpcap writes the file's header once every port is open: then packets are kept."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not (pcap.exists() and pcap.stat().st_size > 0):
        assert proc.poll() is None, "the capture ended before it started recording"
        assert time.monotonic() < deadline, "the capture never started recording"
        time.sleep(0.05)


def wait_quiet(pcap: Path, quiet: float = 0.5, timeout: float = 10.0) -> None:
    """Until the file has not grown for ``quiet`` seconds: dumpcap has read what the kernel
    queued for it (what it has not read when Ctrl-C comes, it drops as "flushed")."""
    size, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        now_size = pcap.stat().st_size
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)
    raise AssertionError(f"{pcap} kept growing for {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> int:
    """Ctrl-C, as a terminal sends it; the exit code."""
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=30)


def perf(lab: str, *flags: str) -> subprocess.Popen[str]:
    argv = [*MRC, "perf", "--lab", lab, "--from", SRC, "--to", DST, *flags]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def ours(frame: IPv6) -> dict[str, list[int]]:
    """The project's decoder on a captured frame, fed what a socket would have told it."""
    udp = frame[UDP]
    packet = decode_datagram_untrusted(
        bytes(udp.payload),
        src=IPv6Address(frame.src).packed,
        dst=IPv6Address(frame.dst).packed,
        sport=udp.sport,
        dport=udp.dport,
        tclass=frame.tc,
        flow_label=frame.fl,
    )
    return expected_fields(packet)


def test_a_transfer_decodes_in_tshark_as_in_our_decoder_and_scapy(lab: str, tmp_path: Path) -> None:
    pcap = tmp_path / "h0.pcapng"
    proc = start_capture(lab, DST, "-w", str(pcap))
    try:
        wait_recording(proc, pcap)
        transfer = perf(lab, "-n", "256K")
        assert transfer.wait(timeout=60) == 0
        wait_quiet(pcap)
    finally:
        assert stop(proc) == 0
    shown = fields(pcap, (*ALL_FIELDS, "frame.interface_name"))
    frames = rdpcap(str(pcap))
    assert len(shown) == len(frames)
    opcodes = set()
    for number, (row, frame) in enumerate(zip(shown, frames, strict=True), start=1):
        if UDP not in frame or frame[UDP].dport != MRC_UDP_PORT:
            assert not row["mrc.opcode"], f"frame {number} is not MRC"
            continue
        ip = frame[IPv6]
        assert_frame_matches(row, ours(ip), f"frame {number}", exact=True)
        assert_frame_matches(row, scapy_fields(frame), f"frame {number} (scapy)")
        opcodes.add(int(row["mrc.opcode"], 0))
    # Both planes' ports are in the file, by name; the whole connection went through them.
    assert {row["frame.interface_name"] for row in shown} == {"p0", "p1"}
    assert {Opcode.SETUP, Opcode.SETUP_ACK, Opcode.SACK, Opcode.CLOSE} <= opcodes
    assert opcodes & {Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST}
    assert sum(row["mrc.payload_len"] != "" for row in shown) >= (256 << 10) // 9000


def test_to_a_pipe_it_stops_after_count_packets(lab: str, tmp_path: Path) -> None:
    """No -w and stdout a pipe: pcapng on stdout; -c ends it by itself."""
    from labs.check import run_check
    from labs.state import load_state

    proc = start_capture(lab, DST, "-c", "6", stdout=subprocess.PIPE)
    assert proc.stdout is not None
    head = b""
    while len(head) < len(PCAPNG_MAGIC):  # dumpcap writes the header once its ports are open
        chunk = proc.stdout.read(len(PCAPNG_MAGIC) - len(head))
        assert chunk, "the capture ended before it started recording"
        head += chunk
    assert head == PCAPNG_MAGIC
    run_check(lab, load_state(lab).topology, timeout=0.6)  # probes to and from h0
    rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    pcap = tmp_path / "pipe.pcapng"
    pcap.write_bytes(head + rest)
    rows = fields(pcap, ("frame.interface_name",))
    assert len(rows) == 6
    assert tshark("-r", str(pcap), "-T", "fields", "-e", "frame.number", lua=False).split()


def test_duration_ends_it_with_a_complete_file_of_the_named_port(lab: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = start_capture(lab, f"{DST}:p1", "--duration", "1", "-w", "-", stdout=subprocess.PIPE)
    data, _ = proc.communicate(timeout=30)
    t1 = time.monotonic()
    assert proc.returncode == 0
    assert t1 - t0 >= 1.0
    pcap = tmp_path / "p1.pcapng"
    pcap.write_bytes(data)
    info = subprocess.run(["capinfos", str(pcap)], capture_output=True, text=True, check=True)
    assert "Number of interfaces in file: 1" in info.stdout
    assert "Name = p1" in info.stdout


def test_a_cut_shows_retransmissions_on_other_evs(lab: str, tmp_path: Path) -> None:
    """The workshop's exercise: capture the sender through a gray cut of one of its
    T0-T1 links; in the capture, retransmissions went out on other EVs than the first."""
    from labs.faults import Lab

    link = "t0-p0-1:t1-p0-0"  # h3's T0 in plane 0 to one of its two T1s
    pcap = tmp_path / "h3.pcapng"
    fabric = Lab(lab)
    proc = start_capture(lab, SRC, "-w", str(pcap))
    try:
        wait_recording(proc, pcap)
        transfer = perf(lab, "-n", "16M", "--json-stream", "-i", "0.2")
        assert transfer.stdout is not None
        for line in transfer.stdout:  # an interval with data: the transfer is going
            event = json.loads(line)
            if event["event"] == "interval" and event["data"]["sum"]["bytes"] > 0:
                break
        fabric.cut(link, "gray")
        assert transfer.wait(timeout=60) == 0
    finally:
        fabric.restore(link)
        assert stop(proc) == 0
    wanted = ("frame.number", "mrc.ev", "mrc.rtx.first_frame", "mrc.rtx.first_ev")
    moved = fields(pcap, wanted, "-Y", "mrc.flags.rtx == 1 && mrc.rtx.first_ev != mrc.ev")
    assert moved, "no retransmission on another EV in the sender's capture"
    assert all(int(row["mrc.rtx.first_frame"]) < int(row["frame.number"]) for row in moved)
