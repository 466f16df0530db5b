"""harness.linkload: link loads from counter snapshots, and the TCP flow's link picked."""

from __future__ import annotations

import pytest

from labs.topology import preset
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.linkload import fabric_link_deltas, parse_ip_link_json, pick_tcp_link

TINY = preset("tiny")


def _counters(deltas: dict[tuple[str, str], int]) -> tuple[dict[tuple[str, str], int], ...]:
    before = {k: 1000 for k in deltas}
    after = {k: 1000 + v for k, v in deltas.items()}
    return before, after


def test_pick_tcp_link_from_counter_snapshots() -> None:
    # The TCP flow h0 -> h2 went plane 1, T1 1: up t0-p1-0 -> t1-p1-1, down t1-p1-1 -> t0-p1-1.
    before, after = _counters(
        {
            ("t0-p1-0", "t1-p1-1"): 5_000_000,  # data up, on the T0 side
            ("t1-p1-1", "t0-p1-0"): 90_000,  # acks back
            ("t0-p0-0", "t1-p0-0"): 2_000,  # background noise
            ("t0-p1-0", "h0"): 80_000,  # host ports are not fabric links
        }
    )
    deltas = fabric_link_deltas(TINY, before, after)
    assert deltas["t0-p1-0:t1-p1-1"] == 5_090_000
    assert deltas["t0-p0-0:t1-p0-0"] == 2_000
    assert len(deltas) == 8  # 2 planes x 2 racks x 2 T1
    assert pick_tcp_link(TINY, before, after, min_bytes=100_000) == "t0-p1-0:t1-p1-1"
    with pytest.raises(HarnessError, match="no T0-T1 link carried"):
        pick_tcp_link(TINY, before, after, min_bytes=10_000_000)


def test_counter_wraps_and_resets_count_as_zero() -> None:
    before = {("t0-p0-0", "t1-p0-0"): 10_000}
    after = {("t0-p0-0", "t1-p0-0"): 5}
    assert fabric_link_deltas(TINY, before, after)["t0-p0-0:t1-p0-0"] == 0


def test_parse_ip_link_json() -> None:
    text = (
        '[{"ifname":"lo","stats64":{"tx":{"bytes":12},"rx":{"bytes":3}}},'
        '{"ifname":"t1-p0-0","stats64":{"tx":{"bytes":987654321},"rx":{"bytes":1}}}]'
    )
    assert parse_ip_link_json(text) == {"lo": 12, "t1-p0-0": 987654321}
