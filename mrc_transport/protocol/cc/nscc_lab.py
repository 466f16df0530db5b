"""The project's NSCC before issue 39, kept as the variant "nscc-lab" for side-by-side runs.

It departs from UEC's NSCC (cc/nscc.py) where a userspace lab led it: a quick adapt on
every untrimmed loss, a proportional increase of 0.25 BDP per RTT at zero delay, no fast
increase or eta, a delay EWMA of 0.125, and the RTT's delay taken whole (the receiver's
hold time included).

Its quadrants are UEC's; with a window per plane, marks that persist on most of a plane's
SACKs decrease that plane's window by alpha / 2 (DCTCP, as Nscc.on_plane_marked). Quick
adapt on a loss or a delay above 4 targets, at most once per two RTTs: the window drops
to the bytes delivered in the last RTT.
"""

from __future__ import annotations

import math

from ..config import Config
from .nscc import Nscc

LAB_DELAY_EWMA = 0.125
"""Weight of a new sample in the averaged queueing delay (ours; htsim 0.0125)."""


class LabNscc(Nscc):
    """NSCC as the project ran it before issue 39 (its window, target and bounds are
    UEC's: the class reuses them)."""

    name = "nscc-lab"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self._qa_until = -math.inf
        self._achieved_t0 = 0.0
        self._last_achieved = 0

    def on_ack(self, acked: int, rtt: float | None, ecn: bool, now: float) -> None:
        self._account(acked, now)
        delay = self._lab_delay(rtt)
        if delay > self.cfg.nscc_qa_targets * self.target and self._lab_quick_adapt(now):
            return
        if not ecn:
            self._increase(acked, delay)
        elif delay >= self.target:
            self._lab_decrease(delay, now)
        self._clamp()

    def on_loss(self, lost: int, now: float) -> None:
        self._lab_quick_adapt(now)

    def on_nack(self, nacked: int, now: float) -> None:
        # htsim: a NACK may quick-adapt, as a loss does, and then cwnd -= NACKed bytes
        self._lab_quick_adapt(now)
        self.window -= nacked
        self._clamp()

    def _lab_delay(self, rtt: float | None) -> float:
        if rtt is None:
            return self.avg_delay
        self._base(rtt)
        delay = rtt - self.base_rtt
        w = LAB_DELAY_EWMA
        self.avg_delay = (1 - w) * self.avg_delay + w * delay
        return delay

    def _increase(self, acked: int, delay: float) -> None:
        target = self.target
        if delay < target:
            per_rtt = self.cfg.nscc_pi_bdp * self.bdp * (target - delay) / target
        else:
            per_rtt = self.cfg.nscc_fi_mtus * self.cfg.mss
        self.window += int(per_rtt * acked / max(self.window, 1)) or 1

    def _lab_decrease(self, delay: float, now: float) -> None:
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

    def _lab_quick_adapt(self, now: float) -> bool:
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
