"""A gray cut of one path under full load, behind NIC ports with realistic queueing.

As in the shaped lab: every packet first crosses its host's NIC port on its plane (one
FIFO per plane), and a competing single-path flow (the demo's TCP flow) keeps one
plane's port queue standing many base RTTs deep, so RTTs differ across planes by that
queue while packets on one plane stay in order. One path of that deep plane then drops
everything, silently, both ways. MRC must find the lost packets by the RTT of the plane they
were on (not by a window over all planes) and resend them where they arrive soonest:
measured, the receiver's in-order delivery stalls for 0.6-1.0 of the deep plane's RTTs
(a hole on the deep plane is found one deep RTT after its send at the earliest, and
healthy delivery already waits ~0.8 deep RTT on that plane's packets: the deep plane's
RTT is what bounds the stall). Without a fault the same load must not be
mistaken for loss (the receiver counts duplicates: spurious retransmissions): a window
over all planes with a 55-packet threshold resent ~300 packets here.
"""

from __future__ import annotations

import itertools

import pytest

from mrc_transport.protocol import Config, Connection, events

from .fabric import Fabric, Host, Link
from .scenarios import blob

PORT_RATE = 1e9
PLANES, PATHS = 4, 4
STANDING = 1e-3
"""The competing flow's standing queue on plane 0: ~15 base RTTs, as in the lab (~20 ms
over ~1.4 ms)."""
MSG = 16 * 1024
T_CUT, T_END = 10e-3, 30e-3


def _fabric(seed: int, scope: str = "plane") -> tuple[Fabric, Host, Host, Connection]:
    def port() -> Link:  # NIC port: the bottleneck, a 500 KB buffer, 1% random CE (lab)
        return Link(rate_bps=PORT_RATE, delay=2e-6, queue_bytes=500_000, ecn_bytes=10**9, mark=0.01)

    def path() -> Link:  # T0-T1-T0: full bisection, short queues
        return Link(
            rate_bps=PORT_RATE, delay=20e-6, queue_bytes=100_000, ecn_bytes=10**9, mark=0.01
        )

    fabric = Fabric(seed, PLANES, PATHS, link=path, uplink=port)
    cfg = Config(nic_rate_bps=PORT_RATE * PLANES, cc_scope=scope)
    a, b = fabric.add_host("a", cfg), fabric.add_host("b", cfg)
    fabric.hold_queue(a, 0, STANDING, T_END)  # as in the demo, the TCP flow is first
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(1e-3)
    for i in range(2500):
        conn.send_message(blob(MSG, i), fabric.now)
    return fabric, a, b, conn


def _deliveries(host: Host) -> list[float]:
    return [e.time for e in host.events if isinstance(e, events.MessageReceived)]


def _longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    return max(b - a for a, b in itertools.pairwise(inside))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gray_cut_on_the_deep_plane_stalls_less_than_its_rtt(seed: int) -> None:
    fabric, _, b, conn = _fabric(seed)
    fabric.run(T_CUT)
    for d in ("fwd", "rev"):
        fabric.links[(0, 1, d)].dead = True
    fabric.run(T_END)
    times = _deliveries(b)
    base_rtt = conn.sender.min_rtt
    deep_rtt = conn.sender.rtt.planes[0].srtt
    assert deep_rtt is not None
    assert deep_rtt > 10 * base_rtt  # the queue stood
    stall = _longest_gap(times, T_CUT, T_END)
    assert fabric.links[(0, 1, "fwd")].dead_data > 0
    assert stall < 2 * deep_rtt


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deep_plane_without_a_fault_is_not_loss(seed: int) -> None:
    fabric, _, b, conn = _fabric(seed)
    fabric.run(T_END)
    server = next(iter(b.endpoint.connections.values()))
    assert server.counters.dup_packets <= 8
    assert conn.counters.lost <= 20


def test_a_standing_queue_on_one_plane_costs_only_that_plane() -> None:
    """A window per plane (default) against UET's one window for the connection: the deep
    plane's delay shrank the one window, and every plane with it (docs/protocol.md,
    "Congestion control"; measured 587-614 messages against 186-279)."""
    delivered = {}
    for scope in ("plane", "connection"):
        fabric, _, b, conn = _fabric(1, scope)
        fabric.run(T_END)
        delivered[scope] = len(_deliveries(b))
        assert conn.cc.per_plane is (scope == "plane")
    assert delivered["plane"] > 2 * delivered["connection"]
