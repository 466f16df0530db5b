"""NSCC as UEC 1.0 specifies it (section 3.6.13) and uet-htsim implements it (uec.cpp).

ECN is the leading signal and queueing delay the lagging one. The delay is the RTT of the
packet a SACK reflects, minus the time it waited at the receiver (the SACK's service
time, UEC / OCP), minus the base RTT; it feeds an EWMA of weight 0.0125 (htsim
``update_delay``: an unmarked sample above target counts as a quarter base RTT). Each
SACK falls in one quadrant (htsim ``updateCwndOnAck_NSCC``):

| ECN | delay vs target | action |
|-----|-----------------|--------|
| no  | below           | fast increase after a window at near-zero delay, else proportional |
| no  | at/above        | fair increase |
| yes | at/above        | multiplicative decrease by the averaged delay, at most once per base RTT |
| yes | below           | no change: just switch path (the EV set skips the marked EV) |

Increases are summed and applied as ``inc / window`` every 8 MTUs acknowledged or base
RTT (``fulfill_adjustment``), with a small additive ``eta`` once per base RTT. Quick
adapt: at most once per base RTT + target, after a NACK or loss (or a delay above 4
targets, unless the network trims), if less than 1/8 of MaxWnd was delivered in that
period, the window drops to what was delivered and the feedback of the bytes then in
flight is ignored. An inferred loss takes one packet off the window (htsim
``mark_packet_for_retransmission``); a NACK takes the NACKed bytes, unless it quick-adapts.
The receiver's 7-bit window penalty takes penalty/128 of the acknowledged bytes off.

The constants scale from htsim's reference network (100 Gb/s, 12 us; uec.cpp
``initNsccParams``): a = BDP / reference BDP, b = target / 12 us; proportional gain
4 MTU a b / target, fair increase 5 MTU a, eta 0.15 MTU a, fast increase 0.25 a per
acknowledged byte.
"""

from __future__ import annotations

import math
from typing import Final

from ..config import Config
from .base import CongestionControl

REF_RTT: Final = 12e-6
"""htsim's reference network RTT, seconds (uec.cpp ``_reference_network_rtt``)."""
REF_BDP: Final = 100e9 / 8 * REF_RTT
"""htsim's reference BDP: 100 Gb/s over 12 us, bytes."""
QA_GATE: Final = 3
"""Quick adapt only below MaxWnd >> 3 delivered in the period (htsim ``_qa_gate``)."""
ADJUST_MTUS: Final = 8
"""Increases are applied every 8 MTUs acknowledged (htsim ``_adjust_bytes_threshold``)."""
FAST_DELAY: Final = 1 / 12
"""Fast increase below this fraction of the target (htsim: 1 us at its 12 us; ours:
scaled, since no userspace delay sample is under a microsecond)."""


class Nscc(CongestionControl):
    """UEC's NSCC with htsim's constants (Config.nscc_*)."""

    name = "nscc"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.base_rtt = cfg.initial_rtt
        self._max_for, self._max = math.nan, 0
        self._have_rtt = False
        self.avg_delay = 0.0
        self._last_md = -math.inf
        self._inc = 0.0
        self._received = 0
        self._last_adjust = 0.0
        self._fi_count = 0
        self._increasing = False
        self._achieved = 0
        self._qa_end = 0.0
        self._trigger_qa = False
        self._to_ignore = 0
        self._ignored = 0
        self._before_penalty = 0
        self.window = min(self.max_window(), cfg.initial_window)

    @property
    def bdp(self) -> float:
        """Bandwidth-delay product in bytes (over base RTT + the hosts' delay)."""
        return self.cfg.nic_rate_bps / 8 * (self.base_rtt + self.cfg.host_delay)

    @property
    def target(self) -> float:
        """Target queueing delay, seconds: 0.75 base RTT where the network trims, 1 base
        RTT where it does not (htsim ``initNsccParams``; ``nscc_target_rtts`` overrides)."""
        rtts = self.cfg.nscc_target_rtts
        if rtts <= 0:
            rtts = 0.75 if self.cfg.trimming else 1.0
        return rtts * (self.base_rtt + self.cfg.host_delay)

    def max_window(self) -> int:
        """1.5 BDP (htsim), at least a few packets (cached: it moves with base RTT only)."""
        if self._max_for != self.base_rtt:
            self._max_for = self.base_rtt
            self._max = max(int(self.cfg.nscc_max_bdp * self.bdp), 4 * self.cfg.mss)
        return self._max

    # -- the constants, scaled from htsim's reference network ---------------------------
    def _scale_a(self) -> float:
        return self.bdp / REF_BDP

    def _alpha(self, target: float) -> float:
        """Proportional gain, bytes per byte acked per second below target."""
        return 4 * self.cfg.mss * self._scale_a() * (target / REF_RTT) / target

    # -- signals --------------------------------------------------------------------------
    def on_ack(self, acked: int, rtt: float | None, ecn: bool, now: float) -> None:
        self._achieved += acked
        self._received += acked
        self._ignored += acked
        delay = self._delay(rtt, ecn)
        if self._quick_adapt(False, ecn, delay, now):
            return
        target = self.target
        if not ecn and delay >= target:
            self._inc += self.cfg.nscc_fi_mtus * self.cfg.mss * self._scale_a() * acked
        elif not ecn:
            self._fast_increase(acked, delay, target)
            if not self._increasing:
                self._inc += self._alpha(target) * acked * (target - delay)
        elif delay >= target:
            self._decrease(now)
        self._clamp()
        if self._received > ADJUST_MTUS * self.cfg.mss or now - self._last_adjust > self.base_rtt:
            self._fulfill(now)
            self._clamp()

    def on_rtt_sample(self, rtt: float) -> None:
        """The handshake RTT: htsim starts every flow at MaxWnd, now that the BDP is known.

        Control packets are small, so this under-estimates a data packet's base RTT; the
        first SACK's sample replaces it even if larger (ours)."""
        self._base(rtt)
        self._have_rtt = False
        self.window = self.max_window()

    def on_loss(self, lost: int, now: float) -> None:
        """An inferred (untrimmed) loss: one packet off the window (htsim
        ``mark_packet_for_retransmission``). MRC reads the loss as a path failure: the
        EV set retires the EV; the window is not quick-adapted."""
        self.window -= lost
        self._clamp()

    def on_nack(self, nacked: int, now: float) -> None:
        """A trimmed packet (htsim ``updateCwndOnNack_NSCC``): a delay sample of a queue at
        the trim threshold (one base RTT), a quick adapt if due, else the NACKed bytes
        off the window."""
        self._ignored += nacked
        self._update_delay(self.base_rtt, True)
        self._trigger_qa = True
        if not self._quick_adapt(True, True, 0.0, now):
            self.window -= nacked
            self._clamp()

    def on_penalty(self, acked: int, penalty: int, restore: bool) -> None:
        """The receiver's window penalty (0-127) takes penalty/128 of ``acked`` off the
        window (htsim's ``rcv_wnd_pen``, there out of 255); RESTORE_WINDOW puts back the
        window held before the first penalty (ours: the flag's use is not published)."""
        if penalty:
            if not self._before_penalty:
                self._before_penalty = self.window
            self.window -= acked * penalty // 128
            self._clamp()
        elif restore and self._before_penalty:
            self.window = max(self.window, self._before_penalty)
            self._before_penalty = 0
            self._clamp()

    # -- the pseudocode's steps -----------------------------------------------------------
    def _base(self, rtt: float) -> None:
        if not self._have_rtt or rtt < self.base_rtt:
            self.base_rtt, self._have_rtt = rtt, True

    def _delay(self, rtt: float | None, ecn: bool) -> float:
        """The queueing delay of this SACK's sample (its RTT less the receiver's service
        time, which the caller took off); the averaged delay when there is none."""
        if rtt is None:
            return self.avg_delay
        self._base(rtt)  # so rtt >= base RTT
        delay = rtt - self.base_rtt
        self._update_delay(delay, ecn)
        return delay

    def _update_delay(self, delay: float, ecn: bool) -> None:
        """htsim ``update_delay``: an unmarked sample above target says a queue that ECN
        did not see, so it counts as a quarter base RTT only."""
        w = self.cfg.nscc_delay_ewma
        if not ecn and delay > self.target:
            delay = self.base_rtt * 0.25
        self.avg_delay = w * delay + (1 - w) * self.avg_delay

    def _fast_increase(self, acked: int, delay: float, target: float) -> None:
        """After a whole window acknowledged at near-zero delay, grow by a quarter (x a)
        of each acknowledged byte (htsim ``fast_increase``)."""
        if delay < FAST_DELAY * target:
            self._fi_count += acked
            if self._fi_count > self.window or self._increasing:
                self.window += int(acked * 0.25 * self._scale_a())
                self._increasing = True
                return
        else:
            self._fi_count = 0
        self._increasing = False

    def _decrease(self, now: float) -> None:
        """By the averaged delay, at most once per base RTT (htsim
        ``multiplicative_decrease``)."""
        self._increasing, self._fi_count = False, 0
        avg, target = self.avg_delay, self.target
        if avg > target and now - self._last_md > self.base_rtt:
            factor = 1 - self.cfg.nscc_gamma * (avg - target) / avg
            self.window = int(self.window * max(factor, self.cfg.nscc_md_floor))
            self._last_md = now

    def _fulfill(self, now: float) -> None:
        """Apply the summed increases (htsim ``fulfill_adjustment``)."""
        self.window += int(self._inc / max(self.window, 1))
        if now - self._last_adjust >= self.base_rtt:
            self.window += int(0.15 * self.cfg.mss * self._scale_a())  # eta
            self._last_adjust = now
        self._inc, self._received = 0.0, 0

    def _quick_adapt(self, loss: bool, skip: bool, delay: float, now: float) -> bool:
        """htsim ``quick_adapt``: once per base RTT + target, if a NACK, a loss or (where
        the network does not trim) a delay above ``nscc_qa_targets`` targets came while
        less than MaxWnd >> 3 was delivered, the window drops to what was delivered and
        the feedback of the bytes then in flight is ignored."""
        done = False
        if self._ignored < self._to_ignore and skip:
            done = True
        elif now > self._qa_end:
            by_delay = not self.cfg.trimming and delay > self.cfg.nscc_qa_targets * self.target
            wanted = self._trigger_qa or loss or by_delay
            if self._qa_end and wanted and self._achieved < self.max_window() >> QA_GATE:
                self.window = max(self._achieved, self.cfg.mss)
                self._to_ignore, self._ignored = self.flight, 0
                self._trigger_qa = False
                done = True
            self._achieved = 0
            self._qa_end = now + self.base_rtt + self.target
        if done:
            self._inc, self._received = 0.0, 0
        return done

    def on_plane_marked(self, alpha: float, now: float) -> None:
        """With a window per plane (the option, cc/planes.py): the plane's marks persist
        below the delay target, so decrease by alpha / 2, at most once per RTT, and stay
        within (1 - alpha) of the largest window (DCTCP's rule, RFC 8257 section 3.3;
        ours: UEC's "no change, just switch path" assumes a clean EV to switch to)."""
        cap = int((1 - alpha) * self.max_window())
        if now - self._last_md >= self.base_rtt + self.avg_delay:
            self.window = int(self.window * (1 - alpha / 2))
            self._last_md = now
        self.window = min(self.window, cap)
        self._clamp()

    def _clamp(self) -> None:
        self.window = max(self.cfg.mss, min(self.window, self.max_window()))
