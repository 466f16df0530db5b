"""Loss detection plane by plane, RACK (RFC 8985) and a packet threshold, and its timers.

Theory of operation
-------------------
A packet in flight is lost once a packet sent after it was delivered (RACK reasons in
send order, not PSN order: RFC 8985 section 3) and

- on its own plane, the latest delivered packet's RTT plus the plane's reordering window
  has passed since it was sent (RFC 8985 6.2 step 5), or ``max(1.5 max window, 5)``
  packets sent later on the plane were delivered (a packet threshold, FACK-style; htsim's
  is ``max(min(1.5 cwnd, max window), 5)``);
- on another plane only, 1.25 x its plane's recent peak RTT has passed (the RTO before the
  plane has a sample), so a whole dead plane is found too.

Why per plane (ours): each plane leaves the host through a NIC port of its own (paper: port
p goes to plane p), a FIFO whose queue holds most of the plane's delay, so a packet sent
later on the same plane overtakes an earlier one only by the difference of the paths
behind the port. Over all planes at once, a standing queue on one port (another flow's)
reorders by the whole queue: a window that covers it delays every loss by that much, and
the packets that overtake one in it turn the packet threshold into a storm of false
losses (docs/measurements.md, "The sender's design figures").

A plane's reordering window is ``rack_reo_fraction`` x min RTT (RFC 8985 6.2 step 4 has
min RTT / 4, for one path) or 1.25 x the plane's measured reordering, a decaying maximum
of how late an earlier-sent packet arrived after a later one on the plane, doubled when an
original transmission is acknowledged after its resend (step 4's widening on a DSACK). An
acknowledgement of a resent packet faster than min RTT is for the original transmission
and does not advance RACK (step 2).

Within a plane both deadlines grow with the send time, so the walk of the plane's send
order stops at the first packet not yet due, whose deadline arms the reorder timer
(``deadline``). The retransmission timer (RFC 6298 section 5) runs from the send of the
oldest packet in flight, or from its own last expiry, whichever is later.

A packet sent again, or acknowledged (its ``seq`` goes to 0), leaves an entry behind in
its plane's order: the walks drop such stale entries as they meet them.
"""

from __future__ import annotations

import math
from collections import deque

from .config import Config
from .ev import Ev
from .rtt import PlaneRtt, RttEstimator
from .segments import OutMessage


class SentPacket:
    """A data packet not yet acknowledged.

    A plain class rather than a dataclass: compiled by mypyc, a dataclass is still built by
    its generated ``__init__``, run as Python, once per packet (docs/measurements.md,
    "Fifth session").
    """

    __slots__ = (
        "cause", "ev", "length", "lost", "msg", "offset", "plane_seq", "psn", "rtx",
        "sent_time", "seq",
    )  # fmt: skip

    def __init__(self, psn: int, msg: OutMessage, offset: int, length: int, ev: Ev) -> None:
        self.psn = psn
        """Its PSN."""
        self.msg = msg
        """Its message."""
        self.offset = offset
        """Offset of its payload in the message."""
        self.length = length
        """Payload bytes."""
        self.ev = ev
        """EV of the latest transmission."""
        self.sent_time = 0.0
        """Time of the latest transmission."""
        self.seq = 0
        """Transmission order of the latest transmission (RACK); 0 before the first and
        once acknowledged."""
        self.plane_seq = 0
        """Transmission order of the latest transmission among its plane's."""
        self.rtx = 0
        """Retransmissions so far."""
        self.lost = False
        """Declared lost and waiting for retransmission."""
        self.cause = ""
        """Why it was last queued for retransmission: "loss" (RACK), "rto", "port" (our
        port refused or lost it), "trimmed" or "nack" (the receiver asked)."""


class Flight:
    """The packets in flight by PSN: a ring indexed by the PSN's low bits, as a NIC keeps
    its send queue. The sender keeps fewer than ``reorder_window`` PSNs from its
    cumulative PSN on, so no two packets in flight share a slot; a lookup indexes a list
    instead of hashing a PSN into a dict, which cost the sender a boxed int and a dict
    probe per packet sent and per packet acknowledged."""

    def __init__(self, window: int) -> None:
        size = 1 << max(window - 1, 1).bit_length()
        self._ring: list[SentPacket | None] = [None] * size
        self._mask = size - 1
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def get(self, psn: int) -> SentPacket | None:
        """The packet of PSN ``psn`` in flight, or None."""
        pkt = self._ring[psn & self._mask]
        if pkt is not None and pkt.psn == psn:
            return pkt
        return None

    def pop(self, psn: int) -> SentPacket | None:
        """Take the packet of PSN ``psn`` out of the flight (None: not in it)."""
        i = psn & self._mask
        pkt = self._ring[i]
        if pkt is None or pkt.psn != psn:
            return None
        self._ring[i] = None
        self._count -= 1
        return pkt

    def put(self, pkt: SentPacket) -> None:
        """Add ``pkt``, whose PSN is within the window of the packets in flight."""
        i = pkt.psn & self._mask
        held = self._ring[i]
        if held is not None:
            raise ValueError(f"PSN {pkt.psn}: its slot holds PSN {held.psn}")
        self._ring[i] = pkt
        self._count += 1

    def values(self) -> list[SentPacket]:
        """The packets in flight, in no particular order (for tests and reports)."""
        return [pkt for pkt in self._ring if pkt is not None]


def _current(seq: int, pkt: SentPacket) -> bool:
    """Whether order entry (seq, pkt) is ``pkt``'s latest transmission, still in flight."""
    return pkt.seq == seq and not pkt.lost


MAX_PLANE_INDEX = 256
"""Planes numbered below this are found by index (``Rack.plane``), any other by the dict."""


class PlaneRack:
    """RACK state of one plane."""

    def __init__(self, rtt: PlaneRtt) -> None:
        self.order: deque[tuple[int, SentPacket]] = deque()
        """Transmissions on this plane in send order (stale entries are dropped lazily)."""
        self.push = self.order.append
        """``order.append``, bound once: compiled, a deque's method is looked up by name at
        every call (once per packet sent)."""
        self.sent = 0
        """Transmissions on this plane so far."""
        self.seq = -1
        """Transmission order of the latest-sent packet on this plane that was delivered."""
        self.plane_seq = -1
        """Its transmission order among this plane's."""
        self.rack_rtt = 0.0
        """Its RTT."""
        self.reorder = 0.0
        """Decaying maximum of how late an earlier-sent packet on this plane arrived after a
        later one (its RTT minus ``rack_rtt`` at the time): the plane's measured reordering."""
        self.rtt = rtt
        """The plane's RTTs (rtt.py)."""


class Rack:
    """Loss detection of one connection's sender, plane by plane."""

    def __init__(self, cfg: Config, rtt: RttEstimator) -> None:
        self.cfg, self.rtt = cfg, rtt
        self.planes: dict[int, PlaneRack] = {}
        """Each plane's RACK state, in the order the planes were first used."""
        self.sent = 0
        """Transmissions so far: the latest one's transmission order."""
        self._rack_seq = -1
        self._rack_rtt = 0.0
        self.deadline = math.inf
        """When ``detect_losses`` must run next: the reorder timer, or at once after a SACK."""
        self._restart = -math.inf
        """When the retransmission timer last restarted: an RTO, or a NACK."""
        self._by_number: list[PlaneRack | None] = []
        """``planes`` indexed by plane number: a plane's state is looked up twice per
        packet (sent, acknowledged), and compiled, a dict lookup by an int key took ~150
        instructions where a list index takes a few (callgrind)."""

    def plane(self, plane: int) -> PlaneRack:
        """The RACK state of ``plane`` (made at its first use)."""
        if 0 <= plane < len(self._by_number):
            pr = self._by_number[plane]
            if pr is not None:
                return pr
        pr = self.planes.get(plane)
        if pr is None:
            pr = self.planes[plane] = PlaneRack(self.rtt.plane(plane))
        if 0 <= plane < MAX_PLANE_INDEX:
            grow = plane + 1 - len(self._by_number)
            self._by_number.extend([None] * grow)
            self._by_number[plane] = pr
        return pr

    def on_sent(self, pkt: SentPacket, now: float) -> None:
        """Book a transmission of ``pkt`` on its EV, at ``now``."""
        self.sent += 1
        seq = self.sent
        pkt.seq, pkt.sent_time = seq, now
        pr = self.plane(pkt.ev.plane)
        pr.sent += 1
        pkt.plane_seq = pr.sent
        pr.push((seq, pkt))

    def on_acked(self, pkt: SentPacket, rtt: float) -> None:
        """``pkt`` was delivered ``rtt`` after its latest transmission: RACK's state, its
        plane's measured reordering and RTTs. Its order entries are stale afterwards."""
        min_rtt = self.rtt.min_rtt
        if pkt.seq > self._rack_seq and not (pkt.rtx and rtt < min_rtt):
            self._rack_seq, self._rack_rtt = pkt.seq, rtt
        pr = self.plane(pkt.ev.plane)
        if pkt.rtx:
            # which transmission arrived is unknown; one faster than min RTT was the
            # original, resent too early: widen the window (RFC 8985 6.2 step 4, DSACK)
            if rtt < min_rtt < math.inf:
                pr.reorder = max(2 * pr.reorder, min_rtt)
        else:
            pr.reorder -= pr.reorder / 4096  # decays over a few thousand packets
            if pkt.seq < pr.seq:
                pr.reorder = max(pr.reorder, rtt - pr.rack_rtt)
            else:
                pr.seq, pr.plane_seq, pr.rack_rtt = pkt.seq, pkt.plane_seq, rtt
            pr.rtt.on_ack(rtt, pkt.sent_time)
        pkt.seq = 0  # no dict lookup needed to tell its entries are stale (``_current``)

    def run_by(self, now: float) -> None:
        """Detection is due by ``now`` (a SACK came in)."""
        self.deadline = min(self.deadline, now)

    def detect_losses(
        self, now: float, max_window: int, mss: int, backoff: int
    ) -> list[SentPacket]:
        """The packets lost by ``now``, plane by plane, each taken out of its plane's order,
        for a connection whose window opens to ``max_window`` bytes of ``mss``-byte
        packets, after ``backoff`` RTOs in a row. Rearms the reorder timer."""
        self.deadline = math.inf
        thresh = self._packet_threshold(max_window, mss)
        lost: list[SentPacket] = []
        for pr in self.planes.values():
            self._plane_losses(pr, now, thresh, backoff, lost)
        return lost

    def _plane_losses(
        self, pr: PlaneRack, now: float, thresh: int, backoff: int, lost: list[SentPacket]
    ) -> None:
        reo = self.reorder_window(pr)
        rtt = pr.rtt
        # a plane never measured waits the RTO of a connection never measured (RFC 6298
        # 2.1): the other planes' RTTs say nothing of its port's queue
        if rtt.srtt is None:
            expect = max(self.rtt.rto(backoff), 3 * self.cfg.initial_rtt)
        else:
            expect = 1.25 * rtt.peak
        order = pr.order
        while order:
            seq, pkt = order[0]
            if not _current(seq, pkt):
                order.popleft()
                continue
            if seq > self._rack_seq:
                break
            deadline = pkt.sent_time + max(expect, self._rack_rtt)
            if seq <= pr.seq:
                if not pkt.rtx and pr.plane_seq - pkt.plane_seq >= thresh:
                    deadline = now
                deadline = min(deadline, pkt.sent_time + pr.rack_rtt + reo)
            if now < deadline:
                self.deadline = min(self.deadline, deadline)
                break
            order.popleft()
            lost.append(pkt)

    def _packet_threshold(self, max_window: int, mss: int) -> int:
        """Packets sent later on the same plane and delivered that make one lost. htsim:
        max(min(1.5 cwnd, max window), 5) packets; spraying over software queues reorders
        deeper than a shrunken cwnd, so ours uses the upper end, 1.5 max window."""
        max_pkts = 1.5 * max_window / mss
        return max(int(min(max_pkts, self.cfg.reorder_window)), self.cfg.loss_pkt_min)

    def reorder_window(self, pr: PlaneRack) -> float:
        """A plane's reordering allowance: 1.25 x its measured reordering, at least
        ``rack_reo_fraction`` x min RTT (RFC 8985 6.2 step 4's floor, scaled)."""
        return max(self.cfg.rack_reo_fraction * self.rtt.min_rtt, 1.25 * pr.reorder)

    def oldest(self) -> SentPacket | None:
        """The packet in flight sent first: the earliest of the planes' first (each plane
        keeps its transmissions in send order; stale entries at the front go here)."""
        best: SentPacket | None = None
        for pr in self.planes.values():
            order = pr.order
            while order:
                seq, pkt = order[0]  # not _current(*order[0]): mypyc calls that generically
                if _current(seq, pkt):
                    if best is None or seq < best.seq:
                        best = pkt
                    break
                order.popleft()
        return best

    def timer(self, rto: float) -> float:
        """The earlier of the reorder timer and the retransmission timer, for RTO ``rto``."""
        return min(self.deadline, self._rto_start() + rto)

    def rto_expired(self, rto: float, now: float) -> bool:
        """Whether the retransmission timer of RTO ``rto`` has expired by ``now``."""
        return self._rto_start() + rto <= now

    def on_rto(self, now: float) -> SentPacket | None:
        """The retransmission timer expired at ``now``: it restarts, and the oldest packet
        in flight is the one to resend (RFC 6298 5.4 and 5.5)."""
        self._restart = now
        return self.oldest()

    def on_nack(self, now: float) -> None:
        """A NACK came: the receiver hears this connection, and a trimming fabric is
        telling it where its queues are full, so the timer restarts (as RFC 6298 5.3 does
        on an acknowledgement). The oldest packet in flight may wait behind a queue up to
        the trim threshold, longer than an RTO learned on an empty fabric; its loss would
        come back as a NACK too."""
        self._restart = max(self._restart, now)

    def _rto_start(self) -> float:
        """The RTO runs from the oldest packet's send or the last restart, whichever is
        later (RFC 6298 5.5: an expired timer restarts)."""
        oldest = self.oldest()
        return max(math.inf if oldest is None else oldest.sent_time, self._restart)

    def flush(self, plane: int) -> list[SentPacket]:
        """Every packet in flight on ``plane``, its order emptied (its port went down)."""
        pr = self.planes.get(plane)
        if pr is None:
            return []
        out = [pkt for seq, pkt in pr.order if _current(seq, pkt)]
        pr.order.clear()
        return out
