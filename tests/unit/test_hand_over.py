"""A received burst's records into the core: data packets and SACKs through the core's
compiled loop (``Endpoint.receive_records``), anything else to the caller in its turn,
SACKs flushed every RX_FLUSH records (io/receive.py ``hand_over``)."""

from __future__ import annotations

import random

import pytest

from mrc_transport.io import receive, tuning
from mrc_transport.protocol import Config, Endpoint
from mrc_transport.wire.records import RX_DATA, RX_OTHER, RX_SACK, RxRec


def _rec(kind: int) -> RxRec:
    # a record for connection 5, which this endpoint does not have: counted, dropped
    # (data: psn 10, msg_len 100, payload at 0 of 100 bytes, EV 1)
    return (kind, 5, bytes(16), 0, 10, 0, 0, 100, 0, 0, 100, 1, 0, 0)


def test_receive_records_stops_at_the_first_other_record() -> None:
    core = Endpoint(Config(), random.Random(1))
    recs = [_rec(RX_DATA), _rec(RX_SACK), _rec(RX_OTHER)]
    recs.append(_rec(RX_DATA))
    view = memoryview(bytearray(4096))
    assert core.receive_records(recs, view, 0.0, 0, 4) == 2
    assert core.counters.unknown_connection == 2  # both went to the (missing) connection
    assert core.receive_records(recs, view, 0.0, 3, 4) == 4
    assert core.counters.unknown_connection == 3


@pytest.mark.parametrize("n", [tuning.RX_FLUSH // 2, tuning.RX_FLUSH + 6, 2 * tuning.RX_FLUSH - 1])
def test_a_burst_under_two_rx_flush_records_is_flushed_once_at_its_end(n: int) -> None:
    core = Endpoint(Config(), random.Random(1))
    log: list[int] = []
    view = memoryview(bytearray(4096))
    receive.hand_over(
        core, [_rec(RX_DATA)] * n, view, 0.0, lambda i: None,
        lambda: log.append(core.counters.unknown_connection),
    )  # fmt: skip
    assert log == [n]


def test_hand_over_keeps_order_and_flushes_in_even_chunks() -> None:
    core = Endpoint(Config(), random.Random(1))
    n, others = 2 * tuning.RX_FLUSH + 6, {5, tuning.RX_FLUSH + 8}
    kinds = [RX_OTHER if i in others else RX_DATA for i in range(n)]
    log: list[tuple[str, int]] = []

    def other(i: int) -> None:
        # in its turn: every data record before it was handed over, none after it
        assert core.counters.unknown_connection == i - sum(o < i for o in others)
        log.append(("other", i))

    def flush() -> None:
        log.append(("flush", core.counters.unknown_connection))

    view = memoryview(bytearray(4096))
    receive.hand_over(core, [_rec(k) for k in kinds], view, 0.0, other, flush)
    rx, half = tuning.RX_FLUSH, n // 2  # two chunks: n is under 3 x RX_FLUSH
    # a flush after each chunk, the last one's at the end
    assert log == [
        ("other", 5),
        ("flush", half - 1),
        ("other", rx + 8),
        ("flush", n - 2),
    ]
    assert core.counters.unknown_connection == n - 2
