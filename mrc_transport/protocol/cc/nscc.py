"""NSCC: UET's sender-based congestion control (uet-htsim, UEC 1.0 section 3.6.13).

ECN is the leading signal and queueing delay (RTT minus base RTT, from reflected
timestamps) the lagging one. Each SACK falls in one quadrant:

| ECN | delay vs target | action |
|-----|-----------------|--------|
| no  | below           | proportional increase (faster the further below target) |
| no  | at/above        | fair (additive) increase |
| yes | at/above        | multiplicative decrease, at most once per base RTT |
| yes | below           | no change: the EV set already moved off the marked EV |

With a window per plane (cc/planes.py), marks that persist on most of a plane's SACKs
mean no clean EV is left in it: that plane's window decreases by alpha / 2 (DCTCP).

Quick adapt (htsim): on a loss or a delay above 4 targets, at most once per base RTT, the
window drops to the bytes delivered in the last base RTT. The window stays within
[1 MSS, 1.5 BDP] (htsim MaxWnd).
"""

from __future__ import annotations

import math

from ..config import Config
from .base import CongestionControl


class Nscc(CongestionControl):
    """NSCC with htsim's defaults (Config.nscc_*)."""

    name = "nscc"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.base_rtt = cfg.initial_rtt
        self._max_for, self._max = math.nan, 0
        self._have_rtt = False
        self.avg_delay = 0.0
        self._last_md = -math.inf
        self._qa_until = -math.inf
        self._achieved = 0
        self._achieved_t0 = 0.0
        self._last_achieved = 0
        self.window = min(self.max_window(), cfg.initial_window)

    @property
    def bdp(self) -> float:
        """Bandwidth-delay product in bytes (over base RTT + the hosts' delay)."""
        return self.cfg.nic_rate_bps / 8 * (self.base_rtt + self.cfg.host_delay)

    @property
    def target(self) -> float:
        """Target queueing delay, seconds (in base RTT + the hosts' delay)."""
        return self.cfg.nscc_target_rtts * (self.base_rtt + self.cfg.host_delay)

    def max_window(self) -> int:
        """1.5 BDP (htsim), at least a few packets (cached: it moves with base RTT only)."""
        if self._max_for != self.base_rtt:
            self._max_for = self.base_rtt
            self._max = max(int(self.cfg.nscc_max_bdp * self.bdp), 4 * self.cfg.mss)
        return self._max

    def on_ack(self, acked: int, rtt: float | None, ecn: bool, now: float) -> None:
        self._account(acked, now)
        delay = self._delay(rtt)
        if delay > self.cfg.nscc_qa_targets * self.target and self._quick_adapt(now):
            return
        if not ecn:
            self._increase(acked, delay)
        elif delay >= self.target:
            self._decrease(delay, now)
        self._clamp()

    def on_rtt_sample(self, rtt: float) -> None:
        """The handshake RTT: htsim starts every flow at MaxWnd, now that the BDP is known.

        Control packets are small, so this under-estimates a data packet's base RTT; the
        first SACK's sample replaces it even if larger (ours)."""
        self._delay(rtt)
        self._have_rtt = False
        self.window = self.max_window()

    def on_plane_marked(self, alpha: float, now: float) -> None:
        """The plane's marks persist below the delay target: decrease by alpha / 2, at most
        once per RTT (DCTCP's rule, RFC 8257 section 3.3), and stay within (1 - alpha) of
        the largest window (ours, for a window per plane: htsim's "no change, just switch
        path" assumes a clean EV to switch to, and the increase the plane's clean SACKs
        give would otherwise undo the decrease within the RTT)."""
        cap = int((1 - alpha) * self.max_window())
        if now - self._last_md >= self._rtt():
            self.window = int(self.window * (1 - alpha / 2))
            self._last_md = now
        self.window = min(self.window, cap)
        self._clamp()

    def on_loss(self, lost: int, now: float) -> None:
        self._quick_adapt(now)

    def on_nack(self, nacked: int, now: float) -> None:
        # htsim: a NACK may quick-adapt, as a loss does, and then cwnd -= NACKed bytes
        self._quick_adapt(now)
        self.window -= nacked
        self._clamp()

    def _delay(self, rtt: float | None) -> float:
        if rtt is None:
            return self.avg_delay
        if not self._have_rtt or rtt < self.base_rtt:
            self.base_rtt, self._have_rtt = rtt, True
        delay = rtt - self.base_rtt
        w = self.cfg.nscc_delay_ewma
        self.avg_delay = (1 - w) * self.avg_delay + w * delay
        return delay

    def _increase(self, acked: int, delay: float) -> None:
        target = self.target
        if delay < target:
            per_rtt = self.cfg.nscc_pi_bdp * self.bdp * (target - delay) / target
        else:
            per_rtt = self.cfg.nscc_fi_mtus * self.cfg.mss
        self.window += int(per_rtt * acked / max(self.window, 1)) or 1

    def _decrease(self, delay: float, now: float) -> None:
        # htsim: at most once per base RTT; ours: per base RTT plus the averaged queueing
        # delay, since a decrease only shows in the feedback one (queued) RTT later.
        if now - self._last_md < self._rtt():
            return
        d = max(self.avg_delay, delay)
        if d <= 0:  # no queueing at a zero target (base RTT and host delay both 0)
            return
        factor = 1 - self.cfg.nscc_gamma * (d - self.target) / d
        self.window = int(self.window * max(factor, self.cfg.nscc_md_floor))
        self._last_md = now

    def _quick_adapt(self, now: float) -> bool:
        if now < self._qa_until:
            return False
        # htsim ignores the feedback of the bytes in flight at a quick adapt; ours: no
        # second quick adapt for two RTTs, the time that feedback takes to drain.
        self._qa_until = now + 2 * self._rtt()
        delivered = max(self._last_achieved, self._achieved)
        self.window = min(self.window, max(delivered, 2 * self.cfg.mss))
        self._clamp()
        return True

    def _rtt(self) -> float:
        """The current RTT estimate: base RTT plus averaged queueing delay."""
        return self.base_rtt + self.avg_delay

    def _account(self, acked: int, now: float) -> None:
        # bytes delivered per RTT (htsim's achieved_bytes, over base RTT + queueing delay)
        if now - self._achieved_t0 >= self._rtt():
            self._last_achieved, self._achieved, self._achieved_t0 = self._achieved, 0, now
        self._achieved += acked

    def _clamp(self) -> None:
        self.window = max(self.cfg.mss, min(self.window, self.max_window()))
