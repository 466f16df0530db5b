"""Congestion windows per plane (cc/planes.py) and how the sender sprays within them."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrc_transport.protocol import Config
from mrc_transport.protocol.cc import FixedWindow, Nscc
from mrc_transport.protocol.cc.planes import PlaneWindows
from mrc_transport.protocol.transmit import Transmit
from mrc_transport.wire import frames
from tests.unit.conftest import MakeEstablished

CFG = Config(nic_rate_bps=4e9, mss=1000, initial_window=40_000, cc_scope="plane")


def test_each_plane_runs_its_own_window_sized_for_its_port() -> None:
    w = PlaneWindows(CFG, [0, 1, 2, 3])
    assert w.per_plane
    assert len({id(cc) for cc in w.cc.values()}) == 4
    assert all(isinstance(cc, Nscc) for cc in w.cc.values())
    w.on_rtt_sample(100e-6)
    one = Nscc(CFG)
    one.on_rtt_sample(100e-6)
    # a port's BDP: a quarter of the NIC's
    assert w.windows()[0] == pytest.approx(one.max_window() / 4, rel=0.01)
    assert w.max_window() == pytest.approx(one.max_window(), rel=0.01)


def test_room_is_per_plane() -> None:
    w = PlaneWindows(Config(cc="fixed", fixed_window=8000, mss=1000, cc_scope="plane"), [0, 1])
    assert w.windows() == {0: 4000, 1: 4000}
    for _ in range(4):
        assert w.room(0, 1000)
        w.sent(0, 1000)
    assert not w.room(0, 1000)
    assert w.room(1, 1000)
    assert w.full([0, 1], 1000) == {0}
    w.gone(0, 1000)
    assert w.full([0, 1], 1000) == set()
    assert (w.total, w.in_flight) == (3000, {0: 3000, 1: 0})


@given(
    scope=st.sampled_from(["plane", "connection"]),
    planes=st.sampled_from([[0], [0, 1], [0, 2, 3]]),
    window=st.integers(0, 20_000),
    before=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3000)), max_size=8),
    burst=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3000)), max_size=20),
)
def test_a_bursts_headroom_answers_as_the_windows_do(
    scope: str,
    planes: list[int],
    window: int,
    before: list[tuple[int, int]],
    burst: list[tuple[int, int]],
) -> None:
    """``Headroom`` (read once per burst) and ``PlaneWindows`` (asked per packet) agree
    on which planes are full after every send of a burst, and hold the same bytes after
    ``book``."""
    cfg = Config(cc="fixed", fixed_window=window, mss=1000, cc_scope=scope)
    per_packet, per_burst = PlaneWindows(cfg, planes), PlaneWindows(cfg, planes)
    for i, n in before:
        for w in (per_packet, per_burst):
            w.sent(planes[i % len(planes)], n)
    room = per_burst.headroom(planes)
    for i, n in burst:
        plane = planes[i % len(planes)]
        assert room.full(n) == per_packet.full(planes, n)
        room.take(plane, n)
        per_packet.sent(plane, n)
    room.book()
    assert (per_burst.total, per_burst.in_flight) == (per_packet.total, per_packet.in_flight)


def test_a_loss_cuts_only_its_planes_window() -> None:
    w = PlaneWindows(CFG, [0, 1])
    w.on_rtt_sample(100e-6)
    before = w.windows()
    w.on_sack({0: 4000, 1: 4000}, 1, 100e-6, False, 1.0)
    w.on_loss(0, 1000, 1.001)
    after = w.windows()
    assert after[0] < before[0]
    assert after[1] >= before[1]


def test_a_sacks_rtt_and_ecn_belong_to_the_trigger_plane_and_base_rtt_is_shared() -> None:
    w = PlaneWindows(CFG, [0, 1])
    w.on_rtt_sample(200e-6)
    w.on_sack({0: 1000}, 0, 100e-6, False, 1.0)  # plane 0's first data sample: the base
    cc0, cc1 = w.cc[0], w.cc[1]
    assert isinstance(cc0, Nscc)
    assert isinstance(cc1, Nscc)
    assert cc0.base_rtt == cc1.base_rtt == 100e-6
    # a standing queue on plane 1 (marked: NSCC counts an unmarked sample above target
    # as a quarter base RTT) is delay on plane 1, not its base RTT
    for i in range(50):
        w.on_sack({1: 1000}, 1, 2e-3, True, 1.0 + i * 1e-3)
    assert cc1.base_rtt == 100e-6
    assert cc1.avg_delay > 5e-4
    assert cc0.avg_delay < 1e-5
    cc1.window = 50_000  # the marked samples above took it down already
    windows = w.windows()
    w.on_sack({0: 1000, 1: 1000}, 1, 2e-3, True, 2.0)  # ECN on plane 1's packet
    assert w.windows()[0] >= windows[0]
    assert w.windows()[1] < windows[1]


def test_connection_scope_is_one_window() -> None:
    w = PlaneWindows(Config(cc="fixed", fixed_window=8000, mss=1000, cc_scope="connection"), [0, 1])
    assert not w.per_plane
    assert isinstance(w.cc[0], FixedWindow)
    assert w.cc[0] is w.cc[1]
    assert w.window == 8000
    for _ in range(8):
        w.sent(1, 1000)
    assert w.full([0, 1], 1000) == {0, 1}


def test_a_single_plane_is_one_window_and_a_bad_scope_is_refused() -> None:
    assert not PlaneWindows(CFG, [3]).per_plane
    with pytest.raises(ValueError, match="cc_scope"):
        PlaneWindows(Config(cc_scope="path"), [0, 1])


def data_planes(out: list[Transmit]) -> Counter[int]:
    return Counter(tx.path.plane for tx in out if isinstance(tx.header, frames.DataHeader))


def test_the_sender_fills_every_planes_window_and_no_more(
    make_established: MakeEstablished,
) -> None:
    cfg = Config(
        cc="fixed", fixed_window=16_000, mss=1000, ev_count=16, ev_backup=0, cc_scope="plane"
    )
    conn = make_established(cfg=cfg).client
    conn.send_message(bytes(100_000), 0.0)
    out = conn.datagrams_to_send(0.001)
    assert data_planes(out) == {0: 8, 1: 8}
    assert conn.cc.in_flight == {0: 8000, 1: 8000}


def test_a_full_plane_leaves_the_others_sending(make_established: MakeEstablished) -> None:
    cfg = Config(
        cc="fixed", fixed_window=16_000, mss=1000, ev_count=16, ev_backup=0, cc_scope="plane"
    )
    conn = make_established(cfg=cfg).client
    conn.cc.sent(0, 8000)  # plane 0's window is already full
    conn.send_message(bytes(100_000), 0.0)
    out = conn.datagrams_to_send(0.001)
    assert data_planes(out) == {1: 8}


def test_a_plane_whose_sacks_are_mostly_marked_gets_less_of_the_spray(
    make_established: MakeEstablished,
) -> None:
    """The scheduler weighs each plane by the share of its SACKs the windows counted as
    marked (cc/planes.py): with every SACK marked, the plane has no clean EV to move to."""
    cfg = Config(
        cc="fixed", fixed_window=1 << 20, mss=1000, ev_count=16, ev_backup=0, cc_scope="plane"
    )
    conn = make_established(cfg=cfg).client
    for _ in range(60):
        conn.cc.on_sack({}, 0, None, True, 0.0)
    assert conn.cc.alpha[0] > 0.9
    conn.send_message(bytes(200_000), 0.0)
    planes = data_planes(conn.datagrams_to_send(0.001))
    assert sum(planes.values()) >= 32
    assert planes[0] < planes[1] / 5


def test_persistent_marks_on_one_plane_shrink_its_window_only() -> None:
    """Below the delay target a mark only switches EVs, unless most of the plane's SACKs
    are marked: then no EV of the plane is clean and its window decreases (DCTCP)."""
    w = PlaneWindows(CFG, [0, 1])
    w.on_rtt_sample(100e-6)
    w.on_sack({0: 1000, 1: 1000}, 0, 100e-6, False, 0.0)
    start = w.windows()
    t = 0.0
    for _ in range(8):  # a rare mark (the lab's 1%) changes nothing
        t += 1e-3
        w.on_sack({0: 1000}, 0, 100e-6, True, t)
        for _ in range(40):
            w.on_sack({0: 1000}, 0, 100e-6, False, t)
    assert w.alpha[0] < 0.5
    assert w.windows()[0] >= start[0]
    for _ in range(60):  # every SACK of plane 0 marked, plane 1 clean
        t += 1e-3
        w.on_sack({0: 1000}, 0, 100e-6, True, t)
        w.on_sack({1: 1000}, 1, 100e-6, False, t)
    assert w.alpha[0] > 0.9
    assert w.alpha[1] == 0.0
    assert w.windows()[0] < 0.5 * start[0]
    assert w.windows()[1] >= start[1]


def test_a_resend_goes_to_the_fastest_plane_that_delivered_since_the_loss() -> None:
    from mrc_transport.protocol.config import Config
    from mrc_transport.protocol.rtt import RttEstimator

    rtt = RttEstimator(Config())
    for plane, (srtt, sent) in enumerate([(1e-3, 1.0), (2e-3, 1.0), (3e-3, 5.0), (4e-3, 5.0)]):
        rtt.plane(plane).on_ack(srtt, sent)
    # planes 0 and 1 are the fastest but have delivered nothing sent after t = 2
    assert rtt.fastest([0, 1, 2, 3], since=2.0) == 2
    assert rtt.fastest([0, 1, 2, 3]) == 0
    # when no plane delivered since, the smoothed RTT decides among all
    assert rtt.fastest([0, 1, 2, 3], since=9.0) == 0
