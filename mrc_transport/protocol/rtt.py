"""Round-trip times and the retransmission timeout (RFC 6298), per connection and per plane.

Theory of operation
-------------------
Every SACK reflects the send timestamp of the data packet that triggered it, so each SACK
carrying TS is one RTT sample of the transmission it names, unambiguous even when that
packet was a retransmission. The connection's estimator is RFC 6298 section 2: the first
sample sets SRTT = R and RTTVAR = R / 2, each later one updates RTTVAR with gain 1/4 and
SRTT with gain 1/8. The RTO is SRTT + 4 RTTVAR within [``min_rto``, ``max_rto``], doubled
for each RTO in a row (section 5.5); before the first sample it is 3 x ``initial_rtt``
(ours; section 2.1 starts at 1 s). Until a data packet's RTT was sampled, the sender's
retransmission timer waits at least ``first_rto``: the handshake's sample is of small
packets (ours; sender.py ``rto``).

Spraying over planes whose NIC ports queue differently widens the RTT distribution: a
packet behind the deepest queue sees the peak, not the mean (the paper splits each NIC
into one port per plane, and each port has its queue). So the RTO is also at
least 1.25 x the recent peak RTT, a slowly decaying maximum, of the connection and of each
plane (ours): with a window per plane, a plane behind a deep queue carries few of the
packets, so its RTT hardly shows in the connection's peak, and the RTO fired on its packets
while they were on time (docs/measurements.md, "The sender's design figures").

Each plane also keeps a smoothed RTT of its own packets (RFC 6298's gain): a resend goes to
the plane that fills the receiver's hole soonest (``fastest``), and RACK waits for a plane
by its own RTTs (rack.py). The minimum RTT is the floor of RACK's reordering window and the
base RTT of the EV set's probe timers.
"""

from __future__ import annotations

import math

from .config import Config


def _decayed_peak(peak: float, rtt: float) -> float:
    """A maximum of the RTTs that forgets over a few hundred samples: the RTT of the fullest
    queue sprayed on lately."""
    return max(rtt, peak - (peak - rtt) / 512)


class PlaneRtt:
    """RTTs of the packets sent on one plane."""

    def __init__(self) -> None:
        self._srtt = 0.0
        self._sampled = False
        self.peak = 0.0
        """Slowly decaying maximum RTT: the deepest the plane's port queue stood lately."""
        self.delivered_sent = -math.inf
        """Send time of the latest-sent packet on this plane known delivered: the plane
        carried traffic at least until then."""

    @property
    def srtt(self) -> float | None:
        """Smoothed RTT of the plane's packets (RFC 6298 gain; None before a sample). Kept
        as a float and a flag: compiled, an optional float is an object, allocated at
        every update (once per packet acknowledged)."""
        return self._srtt if self._sampled else None

    def on_ack(self, rtt: float, sent: float) -> None:
        """An original transmission on this plane, sent at ``sent``, was acknowledged
        ``rtt`` after it left."""
        self._srtt = 0.875 * self._srtt + 0.125 * rtt if self._sampled else rtt
        self._sampled = True
        self.peak = _decayed_peak(self.peak, rtt)
        self.delivered_sent = max(self.delivered_sent, sent)

    def on_trigger(self, rtt: float, now: float) -> None:
        """A SACK reflected the timestamp of a packet sent on this plane, ``rtt`` ago: a
        sample no retransmission makes ambiguous, so a plane whose packets were all
        (wrongly) resent still learns how deep its queue is, and that it delivers."""
        self.peak = _decayed_peak(self.peak, rtt)
        self.delivered_sent = max(self.delivered_sent, now - rtt)

    def delivered_after(self, since: float) -> bool:
        """Whether a packet sent on this plane after ``since`` was delivered."""
        return self.delivered_sent > since


class RttEstimator:
    """The RTT estimates of one connection's sender."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.srtt: float | None = None
        """Smoothed RTT (None before the first sample)."""
        self.rttvar = 0.0
        """RTT variation."""
        self.min_rtt = math.inf
        """Least RTT seen."""
        self.peak = 0.0
        """Slowly decaying maximum RTT of all planes."""
        self.planes: dict[int, PlaneRtt] = {}
        """Each plane's RTTs, by plane, in the order the planes were first used."""
        self.data_sampled = False
        """Whether a data packet's RTT was sampled."""

    def on_sample(self, rtt: float, data: bool = True) -> float:
        """Feed one RTT measurement (RFC 6298 section 2), of a data packet or not (the
        handshake's); returns the smoothed RTT."""
        self.data_sampled = self.data_sampled or data
        self.min_rtt = min(self.min_rtt, rtt)
        self.peak = _decayed_peak(self.peak, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
            return rtt
        self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
        srtt = self.srtt = 0.875 * self.srtt + 0.125 * rtt
        return srtt

    def plane(self, plane: int) -> PlaneRtt:
        """The RTTs of ``plane`` (made at its first use)."""
        pr = self.planes.get(plane)
        if pr is None:
            pr = self.planes[plane] = PlaneRtt()
        return pr

    def rto(self, backoff: int) -> float:
        """The RTO after ``backoff`` RTOs in a row: RFC 6298's, within [min_rto, max_rto],
        and at least 1.25 x the recent peak RTT of the connection and of each plane."""
        if self.srtt is None:
            base = self.cfg.initial_rtt * 3
        else:
            peak = self.peak
            for pr in self.planes.values():  # a loop: compiled, a generator costs far more
                peak = max(peak, pr.peak)
            base = max(self.srtt + 4 * self.rttvar, 1.25 * peak)
        rto = math.ldexp(max(self.cfg.min_rto, base), min(backoff, 30))
        return min(rto, self.cfg.max_rto)

    def fastest(self, ok: list[int], since: float = -math.inf) -> int | None:
        """The plane of ``ok`` with the lowest smoothed RTT among those that delivered a
        packet sent after ``since``, else among all of ``ok`` (None: none has a sample).
        A resend of a packet sent at ``since`` must not go to a plane that has carried
        nothing since: its smoothed RTT is that of before it died (ours: two of a host's
        four ports going down together stalled a transfer for seconds, every resend going
        to a dead plane and the RTO backing off)."""
        alive = [p for p in ok if p in self.planes and self.planes[p].delivered_after(since)]
        pool = alive or ok
        best, best_rtt = None, math.inf
        for plane, pr in self.planes.items():
            if pr.srtt is not None and pr.srtt < best_rtt and plane in pool:
                best, best_rtt = plane, pr.srtt
        return best
