"""demo.tcpflow's pattern and verifier, records on disk, and a loopback transfer."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.mptcp import IPPROTO_MPTCP
from mrc_transport.harness.records import read_records, write_records
from mrc_transport.harness.tcpflow import (
    PERIOD,
    SO_TXREHASH,
    Pattern,
    RecvResult,
    Stream,
    Verifier,
    listen,
    main,
    receive,
    send,
)
from mrc_transport.harness.timeline import Delivery
from tests.conftest import CliError

PAT = Pattern("test")


def test_pattern_is_deterministic_and_continuous_across_the_period() -> None:
    assert bytes(Pattern("test").slice(0, 64)) == bytes(PAT.slice(0, 64))
    assert bytes(Pattern("other").slice(0, 64)) != bytes(PAT.slice(0, 64))
    a = bytes(PAT.slice(PERIOD - 10, 10)) + bytes(PAT.slice(PERIOD, 10))
    assert a == bytes(PAT.slice(PERIOD - 10, 20))
    assert bytes(PAT.slice(3 * PERIOD + 5, 7)) == bytes(PAT.slice(5, 7))


def _stream(offset: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        k = min(PERIOD, n - len(out))
        out += bytes(PAT.slice(offset + len(out), k))
    return out


def test_verifier_accepts_the_stream_in_any_chunking() -> None:
    data = _stream(0, 3 * PERIOD + 123)
    for size, upto in (
        (1, 3000),
        (4096, len(data)),
        (65_537, len(data)),
        (PERIOD + 1, len(data)),
        (len(data), len(data)),
    ):
        v = Verifier(PAT)
        view = memoryview(data)
        for i in range(0, upto, size):
            v.feed(view[i : min(i + size, upto)])
        assert v.ok, size
        assert v.offset == upto


def test_verifier_finds_a_flipped_byte_at_its_offset() -> None:
    data = bytearray(_stream(0, 500_000))
    data[333_333] ^= 0x40
    v = Verifier(PAT)
    for i in range(0, len(data), 65_536):
        v.feed(memoryview(data)[i : i + 65_536])
    assert not v.ok
    assert v.first_bad == 333_333


def test_verifier_finds_a_lost_segment() -> None:
    data = _stream(0, 200_000)
    lost = data[:100_000] + data[101_448:]  # one 1448-byte segment missing
    v = Verifier(PAT)
    v.feed(memoryview(lost))
    assert v.first_bad is not None
    assert 100_000 <= v.first_bad < 100_010  # random bytes differ almost at once


def test_records_round_trip_and_bad_lines(tmp_path: Path) -> None:
    recs = [Delivery(1.5, 10, "tcp"), Delivery(1.75, 0, "mrc")]
    path = tmp_path / "r.jsonl"
    assert write_records(path, recs) == 2
    assert read_records(path) == recs
    path.write_text('{"t_mono": 1, "nbytes": 2, "flow": "a"}\n\n{"t_mono": 1}\n')
    with pytest.raises(HarnessError, match=r"r.jsonl:3: not a delivery record"):
        read_records(path)
    path.write_text('{"t_mono": 1, "nbytes": -2, "flow": "a"}\n')
    with pytest.raises(HarnessError, match="nbytes"):
        read_records(path)
    with pytest.raises(HarnessError, match="No such file"):
        read_records(tmp_path / "none")


def test_loopback_transfer_is_recorded_and_verified() -> None:
    sock = listen(0, "::1")
    port = sock.getsockname()[1]
    out: list[RecvResult] = []
    progress: list[int] = []
    t = threading.Thread(
        target=lambda: out.append(
            receive(
                sock,
                "tcp",
                PAT,
                accept_timeout=10,
                on_progress=lambda _t, n: progress.append(n),
                progress_s=1e-9,
            )
        )
    )
    t.start()
    try:
        res = send("::1", port, PAT, nbytes=3_000_001, chunk=50_000)
    finally:
        t.join(timeout=30)
        sock.close()
    (rx,) = out
    assert res.nbytes == 3_000_001
    assert rx.nbytes == res.nbytes
    assert rx.verified
    assert sum(d.nbytes for d in rx.records) == rx.nbytes
    times = [d.t_mono for d in rx.records]
    assert times == sorted(times)
    assert res.t_start <= times[0] <= times[-1] <= res.t_end
    assert progress == sorted(progress)
    assert progress[-1] <= rx.nbytes


def test_a_different_seed_fails_verification() -> None:
    sock = listen(0, "::1")
    port = sock.getsockname()[1]
    out: list[RecvResult] = []
    t = threading.Thread(target=lambda: out.append(receive(sock, "tcp", Pattern("x"))))
    t.start()
    try:
        send("::1", port, PAT, nbytes=10_000)
    finally:
        t.join(timeout=30)
        sock.close()
    assert not out[0].verified
    assert out[0].summary()["first_bad_offset"] == out[0].first_bad_offset
    assert out[0].first_bad_offset is not None


def test_send_needs_exactly_one_limit() -> None:
    with pytest.raises(HarnessError, match="exactly one"):
        send("::1", 1, PAT)
    with pytest.raises(HarnessError, match="exactly one"):
        send("::1", 1, PAT, seconds=1, nbytes=1)


def test_cli_send_without_receiver_is_one_line_error(cli_error: CliError) -> None:
    sock = listen(0, "::1")  # bound but closed below: nothing listens on this port
    port = sock.getsockname()[1]
    sock.close()
    line = cli_error(["send", "::1", "--port", str(port), "-n", "10"], main=main)
    assert line.startswith("tcpflow send: error:")


def test_cli_recv_writes_records_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = listen(0, "::1")
    port = probe.getsockname()[1]
    probe.close()
    records = tmp_path / "tcp.jsonl"
    rc: list[int] = []
    t = threading.Thread(
        target=lambda: rc.append(
            main(
                [
                    "recv",
                    "--bind",
                    "::1",
                    "--port",
                    str(port),
                    "--flow",
                    "f1",
                    "--records",
                    str(records),
                    "--accept-timeout",
                    "10",
                ]
            )
        )
    )
    t.start()
    try:
        for _ in range(200):  # wait for the listening line, the receiver's readiness signal
            if '"listening"' in capsys.readouterr().out:
                break
            t.join(timeout=0.05)
        assert main(["send", "::1", "--port", str(port), "-n", "1000000"]) == 0
    finally:
        t.join(timeout=30)
    assert rc == [0]
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    end = next(x for x in lines if x.get("event") == "end" and "flow" in x)
    assert end["bytes"] == 1_000_000
    assert end["verified"] is True
    recs = read_records(records)
    assert {d.flow for d in recs} == {"f1"}
    assert sum(d.nbytes for d in recs) == 1_000_000


def _mptcp_here() -> None:
    if not Path("/proc/sys/net/mptcp/enabled").exists():
        pytest.skip("this kernel has no MPTCP")
    if Path("/proc/sys/net/mptcp/enabled").read_text().strip() != "1":
        pytest.skip("MPTCP is off in this namespace")


def test_mptcp_loopback_transfer_is_verified_and_names_its_subflow() -> None:
    _mptcp_here()
    stream = Stream(mptcp=True)
    sock = listen(0, "::1", stream=stream)
    assert sock.proto == IPPROTO_MPTCP
    port = sock.getsockname()[1]
    out: list[RecvResult] = []
    t = threading.Thread(
        target=lambda: out.append(receive(sock, "mptcp", PAT, accept_timeout=10, stream=stream))
    )
    t.start()
    try:
        res = send("::1", port, PAT, nbytes=2_000_003, stream=stream)
    finally:
        t.join(timeout=30)
        sock.close()
    (rx,) = out
    assert rx.verified
    assert rx.nbytes == res.nbytes == 2_000_003
    assert {d.flow for d in rx.records} == {"mptcp"}
    # no endpoints on loopback: the one subflow the connection opened with
    assert res.subflows == (("::1", "::1"),)


@pytest.mark.parametrize(("rehash", "value"), [(False, 0), (True, 1)])
def test_tcp_is_pinned_or_rehashes_on_its_own_word(rehash: bool, value: int) -> None:
    with Stream(rehash=rehash).open() as sock:
        assert sock.getsockopt(socket.SOL_SOCKET, SO_TXREHASH) == value


def test_rehash_and_mptcp_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["recv", "--rehash", "--mptcp"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_receiver_stopped_mid_transfer_keeps_what_arrived(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    records = tmp_path / "tcp.jsonl"
    rx = subprocess.Popen(
        [sys.executable, "-m", "mrc_transport.harness.tcpflow", "recv", "--bind", "::1",
         "--port", "0", "--records", str(records), "--progress", "1e-9", "--seed", "test"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert rx.stdout is not None
        port = json.loads(rx.stdout.readline())["port"]
        with socket.create_connection(("::1", port)) as sender:
            sender.sendall(bytes(PAT.slice(0, 100_000)))
            for line in rx.stdout:  # its first progress line: bytes arrived, still open
                if json.loads(line)["event"] == "progress":
                    break
            os.kill(rx.pid, signal.SIGTERM)
            out, _ = rx.communicate(timeout=30)
    finally:
        if rx.poll() is None:
            rx.kill()
    end = json.loads(out.strip().splitlines()[-1])
    assert end["stopped"] is True, out
    assert end["verified"] is True  # every byte that came matched
    assert 0 < end["bytes"] <= 100_000
    assert rx.returncode == 0
    assert sum(d.nbytes for d in read_records(records)) == end["bytes"]
