"""demo.tcpflow with parallel streams (the repro's "TCP with 8 streams" baseline): every
stream verified on its own, one result for all, a start event once all are connected."""

from __future__ import annotations

import threading

import pytest

from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.tcpflow import (
    Pattern,
    RecvResult,
    listen,
    receive_streams,
    send_streams,
)

PAT = Pattern("streams")


def _transfer(
    streams: int, rx_pattern: Pattern, nbytes: int
) -> tuple[RecvResult, int, list[float]]:
    sock = listen(0, "::1")
    port = sock.getsockname()[1]
    out: list[RecvResult] = []
    t = threading.Thread(
        target=lambda: out.append(
            receive_streams(sock, "tcp8", rx_pattern, streams, accept_timeout=10)
        )
    )
    t.start()
    started: list[float] = []
    try:
        res = send_streams("::1", port, PAT, streams, nbytes=nbytes, on_start=started.append)
    finally:
        t.join(timeout=30)
        sock.close()
    return out[0], res.nbytes, started


def test_every_stream_arrives_verified_and_the_records_merge_in_time_order() -> None:
    rx, sent, started = _transfer(4, PAT, 1_000_003)
    assert sent == 1_000_003
    assert rx.nbytes == sent
    assert rx.verified
    assert len(started) == 1  # once, when the last stream connected
    times = [d.t_mono for d in rx.records]
    assert times == sorted(times)
    assert {d.flow for d in rx.records} == {"tcp8"}
    assert sum(d.nbytes for d in rx.records) == rx.nbytes


def test_a_wrong_pattern_fails_every_stream() -> None:
    rx, _, _ = _transfer(3, Pattern("other"), 30_000)
    assert not rx.verified
    assert rx.first_bad_offset == 0


def test_a_fixed_source_port_takes_one_stream() -> None:
    with pytest.raises(HarnessError, match="one stream"):
        send_streams("::1", 1, PAT, 2, nbytes=10, cport=40000)
