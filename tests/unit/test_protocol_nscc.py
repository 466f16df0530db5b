"""UEC's NSCC (section 3.6.13) case by case, with htsim's constants (uec.cpp): each test
walks one branch of the pseudocode with numbers worked out from its formulas.

The reference network is htsim's: 100 Gb/s, 12 us, so scale a = BDP / 150 kB and b =
target / 12 us. Here 10 Gb/s and a base RTT of 100 us: BDP 125 kB (a = 5/6), MaxWnd
187.5 kB, target 100 us without trimming, 75 us with it.
"""

from __future__ import annotations

import dataclasses

import pytest

from mrc_transport.protocol import Config
from mrc_transport.protocol.cc import Nscc
from mrc_transport.protocol.cc.nscc import REF_BDP, REF_RTT
from mrc_transport.wire import frames
from tests.unit.conftest import MakeEstablished
from tests.unit.helpers import SMALL_CFG, as_packet, payload

CFG = Config(nic_rate_bps=10e9, mss=1000)
BASE = 100e-6
A = 10e9 / 8 * BASE / REF_BDP  # 5/6
ETA = int(0.15 * 1000 * A)


def nscc(cfg: Config = CFG, window: int = 100_000, now: float = 1.0) -> Nscc:
    """At its base RTT, the window set, the first quick-adapt period started and the
    eta just added (so a test sees only its own branch)."""
    cc = Nscc(cfg)
    cc.on_rtt_sample(BASE)
    cc.on_ack(0, BASE, False, now - 1e-3)  # starts the quick-adapt period, base = 100 us
    cc._qa_end = now + 1.0  # no quick adapt during the test unless it says so
    cc._last_adjust = now
    cc.window = window
    return cc


def test_constants_scale_from_htsims_reference() -> None:
    cc = nscc()
    assert cc.max_window() == int(1.5 * 10e9 / 8 * BASE)
    assert cc.target == pytest.approx(BASE)
    assert cc._alpha(cc.target) == pytest.approx(4 * 1000 * A * (BASE / REF_RTT) / BASE)
    trimming = nscc(dataclasses.replace(CFG, trimming=True))
    assert trimming.target == pytest.approx(0.75 * BASE)


def test_proportional_increase_below_target() -> None:
    """No ECN, delay 10 us < target: inc += alpha x acked x (target - delay), applied as
    inc / window once 8 MTUs are acknowledged."""
    cc = nscc()
    cc.on_ack(9000, BASE + 10e-6, False, 1.0 + 1e-6)
    alpha = 4 * 1000 * A * (BASE / REF_RTT) / BASE
    assert cc.window == 100_000 + int(alpha * 9000 * 90e-6 / 100_000)


def test_fair_increase_at_or_above_target() -> None:
    """No ECN, delay 150 us >= target: inc += 5 MTU x a x acked."""
    cc = nscc()
    cc.on_ack(9000, BASE + 150e-6, False, 1.0 + 1e-6)
    assert cc.window == 100_000 + int(5 * 1000 * A * 9000 / 100_000)


def test_increases_wait_for_8_mtus_or_a_base_rtt() -> None:
    cc = nscc()
    cc.on_ack(4000, BASE + 150e-6, False, 1.0 + 1e-6)
    assert cc.window == 100_000  # summed, not applied yet
    cc.on_ack(4001, BASE + 150e-6, False, 1.0 + 2e-6)
    assert cc.window == 100_000 + int(5 * 1000 * A * 8001 / 100_000)


def test_eta_once_per_base_rtt() -> None:
    cc = nscc()
    cc.on_ack(100, BASE + 150e-6, True, 1.0 + 2 * BASE)  # ECN below avg target: no MD
    assert cc.window == 100_000 + ETA


def test_multiplicative_decrease_by_the_averaged_delay_once_per_base_rtt() -> None:
    """ECN, delay >= target, averaged delay above target: window x max(1 - gamma (avg -
    target) / avg, 0.5), at most once per base RTT."""
    cc = nscc()
    cc.avg_delay = 200e-6
    cc.on_ack(100, BASE + 150e-6, True, 1.0 + 1e-6)
    avg = 0.0125 * 150e-6 + 0.9875 * 200e-6
    want = int(100_000 * max(1 - 0.8 * (avg - BASE) / avg, 0.5))
    assert cc.window == want
    cc.on_ack(100, BASE + 150e-6, True, 1.0 + 2e-6)
    assert cc.window == want  # not twice in one base RTT


def test_ecn_below_target_changes_nothing() -> None:
    cc = nscc()
    cc.on_ack(100, BASE + 10e-6, True, 1.0 + 1e-6)
    assert cc.window == 100_000


def test_delay_ewma_and_an_unmarked_sample_above_target() -> None:
    """EWMA weight 0.0125; an unmarked sample above target counts as base RTT / 4."""
    cc = nscc()
    cc.on_ack(100, BASE + 50e-6, False, 1.0 + 1e-6)
    assert cc.avg_delay == pytest.approx(0.0125 * 50e-6)
    cc.avg_delay = 0.0
    cc.on_ack(100, BASE + 500e-6, False, 1.0 + 2e-6)
    assert cc.avg_delay == pytest.approx(0.0125 * BASE / 4)
    cc.avg_delay = 0.0
    cc.on_ack(100, BASE + 500e-6, True, 1.0 + 3e-6)
    assert cc.avg_delay == pytest.approx(0.0125 * 500e-6)


def test_fast_increase_after_a_window_at_near_zero_delay() -> None:
    """Below target / 12 for more than a window's bytes: each acknowledged byte adds
    0.25 a, in place of the proportional increase."""
    cc = nscc(window=20_000)
    cc._fi_count = 19_500  # bytes acknowledged at near-zero delay so far
    cc.on_ack(400, BASE, False, 1.0 + 1e-6)
    assert not cc._increasing  # not a whole window yet: the proportional increase
    assert cc.window == 20_000  # (summed, below 8 MTUs)
    cc.on_ack(400, BASE, False, 1.0 + 2e-6)
    assert cc._increasing
    assert cc.window == 20_000 + int(400 * 0.25 * A)
    cc.on_ack(400, BASE + 50e-6, False, 1.0 + 3e-6)  # delay again: back to proportional
    assert not cc._increasing
    assert cc._fi_count == 0


def test_an_inferred_loss_takes_one_packet_off_without_quick_adapt() -> None:
    cc = nscc()
    cc._qa_end = 0.5  # a quick adapt would be due
    cc.on_loss(1000, 1.0 + 1e-6)
    assert cc.window == 99_000


def test_a_nack_quick_adapts_to_what_was_delivered_and_ignores_the_flight() -> None:
    """After a NACK, once the period is over and less than MaxWnd / 8 was delivered in
    it, the window is what was delivered; the feedback of the bytes then in flight
    (marked SACKs) is ignored, no decrease on them."""
    cc = nscc()
    cc._qa_end = 1.0
    cc.on_ack(5000, BASE + 10e-6, False, 0.9)  # delivered in the period: 5000 B
    cc.flight = 30_000
    cc.on_nack(1000, 1.0 + 1e-6)
    assert cc.window == 5000
    cc.avg_delay = 300e-6
    cc.on_ack(20_000, BASE + 300e-6, True, 1.0 + 2e-6)  # within the ignored flight
    assert cc.window == 5000


def test_a_nack_without_quick_adapt_takes_its_bytes_off() -> None:
    cc = nscc()  # the period is not over: no quick adapt
    cc.on_nack(1000, 1.0 + 1e-6)
    assert cc.window == 99_000


@pytest.mark.parametrize(("trimming", "adapts"), [(False, True), (True, False)])
def test_delay_quick_adapt_only_where_the_network_does_not_trim(
    trimming: bool, adapts: bool
) -> None:
    cc = nscc(dataclasses.replace(CFG, trimming=trimming))
    cc._qa_end = 1.0
    cc.on_ack(2000, BASE + 1e-3, False, 1.0 + 1e-6)  # 1 ms: above 4 targets
    assert (cc.window == 2000) is adapts


def test_the_receivers_penalty_and_its_restore() -> None:
    cc = nscc()
    cc.on_penalty(10_000, 64, False)
    assert cc.window == 100_000 - 10_000 * 64 // 128
    cc.on_penalty(10_000, 0, True)
    assert cc.window == 100_000


def test_the_delay_signal_leaves_out_the_receivers_service_time(
    make_established: MakeEstablished,
) -> None:
    """The receiver holds a SACK 0.5 ms (its ack delay, a burst): the SACK says so, and the
    sender's NSCC takes the RTT less that time, while its RTO's RTT keeps it."""
    fabric, client, server = make_established(
        cfg=dataclasses.replace(SMALL_CFG, cc_scope="connection")
    )
    now = fabric.now
    client.send_message(payload(1000), now)
    [tx] = client.datagrams_to_send(now)
    server.receive(as_packet(tx), now + 50e-6)
    [sack_tx] = server.control_to_send(now + 550e-6)
    sack = sack_tx.header
    assert isinstance(sack, frames.SackHeader)
    assert sack.service_time == pytest.approx(500_000, abs=10)
    client.receive(as_packet(sack_tx), now + 600e-6)
    # the handshake's sample gives way to the first data sample, here 600 - 500 us
    [cc] = {id(cc): cc for cc in client.cc.cc.values()}.values()
    assert isinstance(cc, Nscc)
    assert cc.base_rtt == pytest.approx(100e-6, abs=1e-8)
    assert client.sender.rtt.peak >= 600e-6 - 1e-8  # the RTO's estimates keep it
