"""harness/flowlinks.py without a lab: the counters' table, their JSON, a flow's path from
two snapshots (data and ACKs, single path and one per plane) and whether a fault is on it."""

from __future__ import annotations

import json

import pytest

from labs.topology import preset
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.flowlinks import (
    Flow,
    FlowPath,
    busiest_uplink,
    flow_path,
    meters,
    on_path,
    parse_counters,
    table_text,
)

TOPO = preset("default")  # 4 planes, racks of h0-h3 and h4-h7, 4 T1 per plane
TCP = Flow(5201, "h4", "h0")


def test_counted_where_ecmp_chooses_host_ports_and_t0_uplinks() -> None:
    m = meters(TOPO, "h4")
    assert m["h4"] == ["p0", "p1", "p2", "p3"]
    assert m["t0-p2-1"] == ["t1-p2-0", "t1-p2-1", "t1-p2-2", "t1-p2-3"]
    assert set(m) == {"h4", *(TOPO.t0(p, 1) for p in range(4))}


def test_table_counts_each_port_both_ways_after_letting_mrc_through() -> None:
    text = table_text(["p0"], [5201, 5203])
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines.index("meta l4proto != tcp accept") < lines.index(
        'oifname "p0" th dport 5201 counter comment "p0 5201 data"'
    )
    assert 'oifname "p0" th sport 5203 counter comment "p0 5203 ack"' in lines
    assert text.startswith("table inet mrc_flows {")


def test_nft_json_is_read_by_comment() -> None:
    rule = {
        "family": "inet",
        "table": "mrc_flows",
        "chain": "out",
        "comment": "p2 5201 data",
        "expr": [{"match": {}}, {"counter": {"packets": 3, "bytes": 27000}}],
    }
    text = json.dumps(
        {"nftables": [{"metainfo": {}}, {"rule": {"expr": [{"accept": None}]}}, {"rule": rule}]}
    )
    assert parse_counters("h4", text) == {("h4", "p2", 5201, "data"): 27000}


def _snapshot(**bytes_at: int) -> dict[tuple[str, str, int, str], int]:
    """node__dev__way=bytes for port 5201 (dashes of names written as _)."""
    out = {}
    for key, n in bytes_at.items():
        node, dev, way = (part.replace("_", "-") for part in key.split("__"))
        out[(node, dev, 5201, way)] = n
    return out


def test_a_pinned_flows_path_is_its_data_plane_and_its_acks_plane() -> None:
    after = _snapshot(
        h4__p2__data=9_000_000,
        h4__p0__data=900,  # a stray SYN: not a path
        t0_p2_1__t1_p2_0__data=9_000_000,
        h0__p3__ack=200_000,
        t0_p3_0__t1_p3_3__ack=200_000,
    )
    path = flow_path(TOPO, {}, after, TCP)
    assert path.links == {
        "h4:t0-p2-1", "t0-p2-1:t1-p2-0", "t0-p2-0:t1-p2-0", "h0:t0-p2-0",  # data
        "h0:t0-p3-0", "t0-p3-0:t1-p3-3", "t0-p3-1:t1-p3-3", "h4:t0-p3-1",  # ACKs
    }  # fmt: skip
    assert path.switches == {"t0-p2-1", "t0-p2-0", "t1-p2-0", "t0-p3-0", "t0-p3-1", "t1-p3-3"}
    assert path.data_bytes == 9_000_900
    assert busiest_uplink(TOPO, {}, after, TCP) == "t0-p2-1:t1-p2-0"
    # only what changed between the snapshots counts
    assert flow_path(TOPO, after, after, TCP).links == frozenset()


@pytest.mark.parametrize(
    ("target", "hit"),
    [
        ("t0-p2-1:t1-p2-0", True),
        ("t1-p2-0:t0-p2-1", True),  # either order
        ("t0-p2-1:t1-p2-1", False),  # another T1 of the same plane
        ("t0-p2-0:t1-p2-0", True),  # the T1's downlink to the receiver's rack
        ("t1-p3-3", True),  # on the ACKs' path
        ("t1-p1-0", False),
        ("h4:p2", True),
        ("h4:p1", False),
        ("h0:p3", True),
        ("t0-p1-1:t1-p1-0+t0-p2-1:t1-p2-0", True),
        ("@t0-t1", True),
    ],
)
def test_a_fault_is_on_the_path_when_its_target_is(target: str, hit: bool) -> None:
    path = FlowPath(
        frozenset({"h4:t0-p2-1", "t0-p2-1:t1-p2-0", "t0-p2-0:t1-p2-0", "h0:t0-p2-0",
                   "h0:t0-p3-0", "t0-p3-0:t1-p3-3", "t0-p3-1:t1-p3-3", "h4:t0-p3-1"}),
        frozenset({"t0-p2-1", "t0-p2-0", "t1-p2-0", "t0-p3-0", "t0-p3-1", "t1-p3-3"}),
        1,
    )  # fmt: skip
    assert on_path(TOPO, target, path) is hit


def test_an_mptcp_connection_is_on_every_plane() -> None:
    after = {}
    for p in range(4):
        after[("h4", f"p{p}", 5201, "data")] = 2_000_000
        after[(TOPO.t0(p, 1), TOPO.t1(p, p), 5201, "data")] = 2_000_000
    path = flow_path(TOPO, {}, after, TCP)
    assert {f"h4:{TOPO.t0(p, 1)}" for p in range(4)} <= path.links
    assert all(on_path(TOPO, f"h4:p{p}", path) for p in range(4))
    assert on_path(TOPO, "t1-p3-3", path)
    assert not on_path(TOPO, "t1-p3-0", path)


def test_no_link_carried_the_flow() -> None:
    with pytest.raises(HarnessError, match="no T0-T1 link carried the TCP flow h4 -> h0"):
        busiest_uplink(TOPO, {}, {}, TCP)
