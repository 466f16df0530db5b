"""The sending half of a connection: segmentation, PSNs, SACK processing, loss recovery.

Messages are cut into packets of at most MSS bytes when they are sent, each a memoryview
slice of the application's buffer (a large message is never copied per packet). Every
packet gets the next PSN; a retransmission keeps its PSN, takes a different EV and carries
the RTX flag. Losses are found two ways (RFC 8985 RACK and a FACK-style packet threshold):

- time: a packet sent before one that was delivered is lost once it has been out for the
  delivered packet's RTT plus a reordering window (min RTT / 4, widened by the RTT spread);
- packets: a packet is lost when a PSN ``max(1.5 max window, 5)`` packets higher was
  SACKed (htsim uses ``max(min(1.5 cwnd, max window), 5)``).

Loss detection runs once per batch of SACKs, at the next send decision or timer, not
after each SACK: a userspace endpoint reads SACKs in bursts, and a SACK later in a burst
may acknowledge what an earlier one alone would call lost.

A lost packet's EV goes ASSUMED_BAD and the packet is queued for retransmission, oldest
PSN first. An RTO (RFC 6298, exponential backoff) resends the oldest packet out for
longer than the RTO on another EV and blames no EV (ours; TCP resends one segment too,
RFC 6298 5.4): with spraying, a dead EV's packet is followed by packets on other EVs
whose SACKs let RACK find it and retire its EV within about one RTT, so an RTO means that
nothing sent after the oldest packet was acknowledged: the peer or its host stalled (a
userspace receiver is descheduled for milliseconds at a time) or every path failed,
neither of which is any one EV's fault. Once the resent packet is acknowledged, RACK
judges the rest, and blames their EVs if they really are lost; if every path failed, the
connection ends after ``max_rto_count`` RTOs. Flow control: bytes from the cumulative PSN
on never exceed the receiver's advertised window.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mrc_transport.frozen import fast_constructor
from mrc_transport.wire import frames
from mrc_transport.wire.frames import (
    DataHeader,
    NackReason,
    Opcode,
)

from . import events
from .cc.planes import PlaneWindows
from .commons import ACK_REQ, ECN_ECHO, RTX, TS, Commons
from .config import Config
from .counters import ConnCounters
from .ev import Ev, EvInput, EvSet
from .scheduler import Scheduler
from .serial import MASK32, expand
from .transmit import Transmit, new_transmit

View = memoryview
"""mypyc looks a dataclass field's type up among the module's names, which lack builtins."""
# Final: mypyc keeps these in C globals rather than looking each up in the module's dict
# on every packet
_DSCP_DATA: Final = frames.DSCP_DATA
_WRITE_ONLY: Final = Opcode.WRITE_ONLY
_WRITE_FIRST: Final = Opcode.WRITE_FIRST
_WRITE_MIDDLE: Final = Opcode.WRITE_MIDDLE
_WRITE_LAST: Final = Opcode.WRITE_LAST
_new_data_header: Final = fast_constructor(DataHeader)
"""One data header per packet, built without the frozen ``__init__``."""
_new_transmit: Final = new_transmit


@dataclass(slots=True, eq=False)
class OutMessage:
    """A message being sent."""

    msn: int
    """Message sequence number."""
    data: View
    """The application's bytes."""
    length: int
    """``data.nbytes``, kept: a memoryview's attribute costs a generic lookup, and the
    sender asks for every packet sent and acknowledged."""
    next_offset: int = 0
    """First byte not yet segmented."""
    acked: int = 0
    """Bytes acknowledged."""


class SentPacket:
    """A data packet not yet acknowledged.

    A plain class rather than a dataclass: compiled by mypyc, a dataclass is still built by
    its generated ``__init__``, run as Python (~3% of the sender's time at one per packet).
    """

    __slots__ = (
        "ev", "length", "lost", "msg", "offset", "opcode", "plane_seq", "psn", "rtx",
        "sent_time", "seq",
    )  # fmt: skip

    def __init__(
        self, psn: int, msg: OutMessage, offset: int, length: int, opcode: Opcode, ev: Ev
    ) -> None:
        self.psn = psn
        """Its PSN."""
        self.msg = msg
        """Its message."""
        self.offset = offset
        """Offset of its payload in the message."""
        self.length = length
        """Payload bytes."""
        self.opcode = opcode
        """WRITE_FIRST / MIDDLE / LAST / ONLY."""
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


class DataRun:
    """Consecutive new data packets of one message, sent in the same burst: what the core
    hands the IO layer for its bulk traffic instead of a ``Transmit`` each, so that no
    layer builds a header, a payload view and a ``Transmit`` per packet, and the C codec
    encodes the whole run in one call (batchio ``add_run``; ours: building and unpacking
    them was ~1/6 of a sender's CPU at ~2 Gbit/s).

    Packet i has PSN ``psn + i``, the segment at ``offset + i * seg`` of ``data`` (the
    message's last one may be shorter), EV ``evs[i]``, timestamp ``ts`` and flags
    ``flags``; the last one also ``last_flags`` (ACK_REQ at a burst's end). ``transmit(i)``
    is packet i as a ``Transmit``, exactly what the sender would have queued.
    """

    def __init__(
        self,
        commons: Commons,
        psn: int,
        msn: int,
        offset: int,
        seg: int,
        data: View,
        ts: int,
        ev: Ev,
    ) -> None:
        self.commons = commons
        """The connection's common headers (and ids)."""
        self.flags = TS
        self.last_flags = 0
        self.psn = psn & MASK32
        """32-bit PSN of the first packet."""
        self.msn = msn & MASK32
        self.offset = offset
        """Offset of the first packet's payload in the message."""
        self.seg = seg
        """Segment size: every packet's payload but the message's last is this long."""
        self.data = data
        """The whole message."""
        self.ts = ts
        self.evs = [ev]
        """Each packet's EV, in order."""

    def __len__(self) -> int:
        return len(self.evs)

    def follows(self, psn: int, data: View, offset: int, ts: int) -> bool:
        """Whether the packet (PSN, message, offset, timestamp) is this run's next."""
        k = len(self.evs)
        return (
            data is self.data
            and ts == self.ts
            and offset == self.offset + k * self.seg
            and psn & MASK32 == (self.psn + k) & MASK32
        )

    def header(self, i: int) -> DataHeader:
        off = self.offset + i * self.seg
        total = self.data.nbytes
        n = min(self.seg, total - off)
        flags = self.flags | self.last_flags if i == len(self.evs) - 1 else self.flags
        return _new_data_header(
            self.commons.get(_opcode(off, n, total), flags),
            (self.psn + i) & MASK32, self.msn, off, total, self.ts,
        )  # fmt: skip

    def payload(self, i: int) -> View:
        off = self.offset + i * self.seg
        return self.data[off : min(off + self.seg, self.data.nbytes)]

    def transmit(self, i: int) -> Transmit:
        """Packet i as the ``Transmit`` the sender would have queued for it."""
        ev = self.evs[i]
        return _new_transmit(ev.path, ev.value, self.header(i), self.payload(i), _DSCP_DATA)

    def transmits(self) -> list[Transmit]:
        return [self.transmit(i) for i in range(len(self.evs))]


Outgoing = Transmit | DataRun
"""An item of a burst the core hands to the IO layer: a packet, or a run of data packets."""


def expand_runs(items: list[Outgoing]) -> list[Transmit]:
    """Every packet of a burst, runs expanded, in order."""
    out: list[Transmit] = []
    for item in items:
        if isinstance(item, DataRun):
            out.extend(item.transmits())
        else:
            out.append(item)
    return out


@dataclass(slots=True, eq=False)
class PlaneRack:
    """RACK state of one plane (ours): a plane leaves the host through one NIC port, a
    FIFO whose queue holds most of the plane's delay, so a packet sent later on the same
    plane overtakes an earlier one only by the difference of the paths behind the port."""

    order: deque[tuple[int, SentPacket]]
    """Transmissions on this plane in send order (stale entries are skipped lazily)."""
    sent: int = 0
    """Transmissions on this plane so far."""
    seq: int = -1
    """Transmission order of the latest-sent packet on this plane that was delivered."""
    plane_seq: int = -1
    """Its transmission order among this plane's."""
    rtt: float = 0.0
    """Its RTT."""
    reorder: float = 0.0
    """Decaying maximum of how late an earlier-sent packet on this plane arrived after a
    later one (its RTT minus ``rtt`` at the time): the plane's measured reordering."""
    srtt: float | None = None
    """Smoothed RTT of this plane's packets (RFC 6298 gain), to resend on the fastest."""
    peak: float = 0.0
    """Slowly decaying maximum RTT of this plane's packets: the deepest its port's queue
    stood lately."""


class Sender:
    """Sending state of one connection."""

    def __init__(
        self,
        cfg: Config,
        initial_psn: int,
        evs: EvSet,
        scheduler: Scheduler,
        cc: PlaneWindows,
        counters: ConnCounters,
        emit: Callable[[events.Event], None],
        conn: int,
        commons: Commons,
    ) -> None:
        self.cfg, self.evs, self.scheduler, self.cc = cfg, evs, scheduler, cc
        self.commons = commons
        if cc.per_plane:
            evs.plane_marked = cc.alpha  # one dict: the scheduler reads what the SACKs set
        self.counters, self._emit, self.conn = counters, emit, conn
        self.mss = cfg.mss
        self.pending: deque[OutMessage] = deque()
        self.next_msn = 0
        self.snd_una = self.snd_nxt = initial_psn
        self._una_lens: deque[int] = deque()
        self.fc_bytes = 0
        self.peer_rwnd = cfg.rcvbuf
        self.inflight: dict[int, SentPacket] = {}
        self._seq = 0
        self._rtx: list[int] = []
        self.highest_sacked = initial_psn - 1
        self._rack_seq = -1
        self._rack_rtt = 0.0
        self.planes: dict[int, PlaneRack] = {}
        self.reorder_deadline = math.inf
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.min_rtt = math.inf
        self.peak_rtt = 0.0
        self.rto_count = 0
        self._last_rto = -math.inf
        self._rto_resend = False
        """An RTO fired and its resend has not gone: the next resend ignores the window
        (cleared too when nothing is left to resend)."""

    # -- application side ---------------------------------------------------------------
    def queue(self, data: bytes | bytearray | memoryview) -> int:
        """Queue one message; returns its MSN."""
        view = memoryview(data).cast("B")
        if view.nbytes > MASK32:
            raise ValueError("a message is at most 2**32 - 1 bytes")
        msn = self.next_msn
        self.next_msn += 1
        self.pending.append(OutMessage(msn, view, view.nbytes))
        self.counters.messages_sent += 1
        return msn

    def idle(self) -> bool:
        """Nothing queued and nothing unacknowledged."""
        return not self.pending and not self.inflight

    # -- RTT ----------------------------------------------------------------------------
    @property
    def rto(self) -> float:
        """RFC 6298 RTO with backoff, within [min_rto, max_rto], and at least 1.25 x the
        recent peak RTT (ours: spraying over queues of different depth widens the RTT
        distribution, and a packet behind the deepest queue sees the peak, not the mean:
        in the shaped lab srtt + 4 rttvar was ~8 ms while packets arrived 10-26 ms late).
        The peak is also taken per plane: with a window per plane, a plane behind a deep
        queue carries few of the packets, so its RTT hardly shows in the connection's
        decaying peak, and the RTO fired on its packets while they were on time."""
        if self.srtt is None:
            base = self.cfg.initial_rtt * 3
        else:
            peak = self.peak_rtt
            for pr in self.planes.values():  # a loop: compiled, a generator costs ~10x
                peak = max(peak, pr.peak)
            base = max(self.srtt + 4 * self.rttvar, 1.25 * peak)
        rto = math.ldexp(max(self.cfg.min_rto, base), min(self.rto_count, 30))
        return min(rto, self.cfg.max_rto)

    def rtt_sample(self, rtt: float) -> None:
        """Feed one RTT measurement (RFC 6298 section 2)."""
        self.min_rtt = min(self.min_rtt, rtt)
        # a slowly decaying maximum: the RTT of the fullest path sprayed on lately
        self.peak_rtt = max(rtt, self.peak_rtt - (self.peak_rtt - rtt) / 512)
        self.evs.base_rtt = self.min_rtt
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.evs.srtt = self.srtt

    @property
    def in_flight_bytes(self) -> int:
        """Bytes sent and neither acknowledged nor declared lost."""
        return self.cc.total

    # -- sending ------------------------------------------------------------------------
    def fill(self, now: float, out: list[Outgoing], limit: int) -> int:
        """Append at most ``limit`` data packets (retransmissions first, new data in
        ``DataRun``s) while the windows allow; the last one asks for a SACK at once
        (ACK_REQ), so the burst's end is acknowledged without waiting for more data or the
        ack delay. Returns how many."""
        if self.reorder_deadline <= now:  # SACKs came in since the last decision
            self.detect_losses(now)
        first = len(out)
        n = self._fill(now, out, limit)
        if len(out) > first:
            last = out[-1]
            if isinstance(last, DataRun):
                last.last_flags = ACK_REQ
            else:
                out[-1] = self._asking_ack(last)
        return n

    def _fill(self, now: float, out: list[Outgoing], limit: int) -> int:
        n = 0
        while n < limit:
            n += 1
            pkt = self._next_rtx()
            if pkt is not None:
                # a resend waits for room on the fastest plane rather than take a slow one;
                # an RTO's goes at once (RFC 6298 5.4): when the window shrank below what
                # is in flight and all of it was lost, waiting for room took one RTO per
                # packet to free it (2-6 RTOs, 1.3-2.4 s, in the gray-cut demo under load)
                plane = self._fastest_plane()
                if not self._rto_resend and not (
                    self._room(pkt.length) if plane is None else self.cc.room(plane, pkt.length)
                ):
                    return n - 1
                self._rto_resend = False
                heapq.heappop(self._rtx)
                self._send_rtx(pkt, plane, now, out)
            elif not self._send_new(now, out):
                return n - 1
        return n

    def _room(self, n: int) -> bool:
        """Whether some plane with usable EVs has window for ``n`` bytes; the others
        are left out of the next pick (``EvSet.window_full``)."""
        evs = self.evs
        full = evs.window_full = self.cc.full(evs.planes, n)
        if not full:
            return True
        if evs.usable:
            return bool(evs.usable_planes())
        # no usable EV at all: the fallback EV goes wherever the window allows
        return len(full) < len(evs.planes)

    def _next_rtx(self) -> SentPacket | None:
        while self._rtx:
            pkt = self.inflight.get(self._rtx[0])
            if pkt is not None and pkt.lost:
                return pkt
            heapq.heappop(self._rtx)
        self._rto_resend = False  # nothing to resend: the RTO's packet was acked meanwhile
        return None

    def _send_new(self, now: float, out: list[Outgoing]) -> bool:
        if not self.pending or self.snd_nxt - self.snd_una >= self.cfg.reorder_window:
            return False
        msg = self.pending[0]
        total = msg.length
        n = min(self.mss, total - msg.next_offset)
        if self.fc_bytes + n > self.peer_rwnd or not self._room(n):
            return False
        pkt = SentPacket(
            self.snd_nxt,
            msg,
            msg.next_offset,
            n,
            _opcode(msg.next_offset, n, total),
            self.scheduler.pick(self.evs),
        )
        msg.next_offset += n
        if msg.next_offset >= total:
            self.pending.popleft()
        self.inflight[pkt.psn] = pkt
        self._una_lens.append(n)
        self.fc_bytes += n
        self.snd_nxt += 1
        self._sent(pkt, now)
        # the next packet of the burst's run, or the first of a new one
        ts, last = int(now * 1e9), out[-1] if out else None
        if isinstance(last, DataRun) and last.follows(pkt.psn, msg.data, pkt.offset, ts):
            last.evs.append(pkt.ev)
        else:
            seg = self.mss  # every packet of a message but its last is this long
            out.append(
                DataRun(self.commons, pkt.psn, msg.msn, pkt.offset, seg, msg.data, ts, pkt.ev)
            )
        return True

    def _send_rtx(
        self, pkt: SentPacket, plane: int | None, now: float, out: list[Outgoing]
    ) -> None:
        old = pkt.ev
        if plane is None:
            pkt.ev = self.scheduler.pick(self.evs, avoid=old)
        else:
            pkt.ev = self.scheduler.pick_in(self.evs, plane, avoid=old)
        pkt.lost = False
        pkt.rtx += 1
        self.counters.retransmits += 1
        self._emit(events.Retransmit(now, self.conn, pkt.psn, old.value, pkt.ev.value))
        self._sent(pkt, now)
        msg = pkt.msg
        header = _new_data_header(
            self.commons.get(pkt.opcode, TS | RTX),
            pkt.psn & MASK32,
            msg.msn & MASK32,
            pkt.offset,
            msg.length,
            int(now * 1e9),
        )
        payload = msg.data[pkt.offset : pkt.offset + pkt.length]
        out.append(_new_transmit(pkt.ev.path, pkt.ev.value, header, payload, _DSCP_DATA))

    def _sent(self, pkt: SentPacket, now: float) -> None:
        """Book a transmission of ``pkt`` on its EV: RACK's orders, the window, counters."""
        self._seq += 1
        pkt.seq, pkt.sent_time = self._seq, now
        pr = self._plane(pkt.ev.plane)
        pr.sent += 1
        pkt.plane_seq = pr.sent
        pr.order.append((self._seq, pkt))
        self.cc.sent(pkt.ev.plane, pkt.length)
        self.evs.on_sent(pkt.ev)
        self.counters.data_sent += 1
        self.counters.bytes_sent += pkt.length

    def _asking_ack(self, tx: Transmit) -> Transmit:
        """Data packet ``tx`` with ACK_REQ set."""
        h = tx.header
        assert isinstance(h, DataHeader)
        common = self.commons.get(h.common.opcode, int(h.common.flags) | ACK_REQ)
        header = _new_data_header(common, h.psn, h.msn, h.msg_offset, h.msg_len, h.ts)
        return _new_transmit(tx.path, tx.ev, header, tx.payload, tx.dscp)

    # -- SACK ---------------------------------------------------------------------------
    def sack(
        self,
        bits: int,
        cum_psn: int,
        sack_base: int,
        bitmap: int,
        ev: int,
        ts: int,
        rwnd: int,
        now: float,
    ) -> None:
        """Process a SACK, given as its fields (``bits``: its flags as an int; ``ev``: the
        EV it reflects); a SACK for PSNs never sent is counted and ignored whole."""
        cum = expand(cum_psn, self.snd_una)
        base = expand(sack_base, self.snd_una)
        top = base + bitmap.bit_length() - 1 if bitmap else base
        if cum > self.snd_nxt or (bitmap and top >= self.snd_nxt):
            self.counters.sack_beyond_sent += 1
            return
        self.counters.sacks_received += 1
        acked: dict[int, int] = {}  # bytes newly acknowledged, per plane
        self._ack_cumulative(cum, now, acked)
        self._ack_bitmap(base, bitmap, now, acked)
        if cum >= self.snd_una:
            self.peer_rwnd = rwnd
        else:
            self.counters.sack_stale += 1
        rtt = self._reflected_rtt(ts, now) if bits & TS else None
        ecn = bool(bits & ECN_ECHO)
        trigger = self.evs.by_value.get(ev)  # the EV of the packet that asked for it
        if trigger is None:
            self.counters.sack_unknown_ev += 1
        else:
            self._plane_sample(trigger, rtt)
            self._reflected_ev(trigger, ecn, now)
        if acked or ecn:
            self.cc.on_sack(acked, trigger.plane if trigger else None, rtt, ecn, now)
        if acked:
            self.rto_count = 0
        # Loss detection is due, but runs at the next timer or send decision rather than
        # here: SACKs arrive in bursts (one receive call, one ``now``), and a later SACK of
        # the same burst may acknowledge what this one would declare lost. Measured in the
        # unshaped lab: of 26 sampled false losses (355 in a 5 s transfer), 18 were
        # acknowledged by a SACK of the very burst that declared them.
        self.reorder_deadline = min(self.reorder_deadline, now)

    def _ack_cumulative(self, cum: int, now: float, acked: dict[int, int]) -> None:
        while self.snd_una < cum:
            pkt = self.inflight.pop(self.snd_una, None)
            if pkt is not None:
                self._acked(pkt, now, acked)
            self.fc_bytes -= self._una_lens.popleft()
            self.snd_una += 1

    def _ack_bitmap(self, base: int, bitmap: int, now: float, acked: dict[int, int]) -> None:
        while bitmap:
            low = bitmap & -bitmap
            bitmap ^= low
            psn = base + low.bit_length() - 1
            pkt = self.inflight.pop(psn, None) if psn >= self.snd_una else None
            if pkt is not None:
                self._acked(pkt, now, acked)
                self.highest_sacked = max(self.highest_sacked, psn)

    def _acked(self, pkt: SentPacket, now: float, acked: dict[int, int]) -> None:
        """Book one delivered packet; its bytes count as acked on its plane."""
        plane = pkt.ev.plane
        if pkt.lost:
            self.counters.spurious_rtx += 1
        else:
            self.cc.gone(plane, pkt.length)
        acked[plane] = acked.get(plane, 0) + (pkt.length or 1)
        rtt = now - pkt.sent_time
        # RFC 8985 6.2 step 2: an ack faster than min RTT for a retransmitted packet is
        # for the original transmission and says nothing about packets sent before it.
        if pkt.seq > self._rack_seq and not (pkt.rtx and rtt < self.min_rtt):
            self._rack_seq, self._rack_rtt = pkt.seq, rtt
        self._plane_acked(pkt, rtt)
        pkt.seq = 0  # its order entries are stale now (no dict lookup to tell, ``_current``)
        msg = pkt.msg
        msg.acked += pkt.length
        if msg.acked >= msg.length and msg.next_offset >= msg.length:
            self.counters.messages_acked += 1
            self._emit(events.MessageAcked(now, self.conn, msg.msn, msg.length))

    def _plane(self, plane: int) -> PlaneRack:
        pr = self.planes.get(plane)
        if pr is None:
            pr = self.planes[plane] = PlaneRack(deque())
        return pr

    def _plane_acked(self, pkt: SentPacket, rtt: float) -> None:
        """Per-plane RACK state and measured reordering for one delivered packet."""
        pr = self._plane(pkt.ev.plane)
        if pkt.rtx:
            # which transmission arrived is unknown; one faster than min RTT was the
            # original, resent too early: widen the window (RFC 8985 6.2.4, DSACK)
            if rtt < self.min_rtt < math.inf:
                pr.reorder = max(2 * pr.reorder, self.min_rtt)
            return
        pr.reorder -= pr.reorder / 4096  # decays over a few thousand packets (~1 s)
        if pkt.seq < pr.seq:
            pr.reorder = max(pr.reorder, rtt - pr.rtt)
        else:
            pr.seq, pr.plane_seq, pr.rtt = pkt.seq, pkt.plane_seq, rtt
        pr.srtt = rtt if pr.srtt is None else 0.875 * pr.srtt + 0.125 * rtt
        pr.peak = max(rtt, pr.peak - (pr.peak - rtt) / 512)

    def _plane_sample(self, ev: Ev, rtt: float | None) -> None:
        """The reflected timestamp of the packet that triggered a SACK, on the EV it
        names: an RTT sample of that plane that no retransmission makes ambiguous, so a
        plane whose packets were all (wrongly) resent still learns its real RTT."""
        if rtt is not None:
            pr = self._plane(ev.plane)
            pr.peak = max(rtt, pr.peak - (pr.peak - rtt) / 512)

    def _fastest_plane(self) -> int | None:
        """The plane with usable EVs and the lowest smoothed RTT: a resend fills the
        receiver's hole soonest there (ours; None before any plane has a sample)."""
        best, best_rtt = None, math.inf
        ok = self.evs.usable_planes(window=False)  # not a busy local port if another
        for plane, pr in self.planes.items():
            if pr.srtt is not None and pr.srtt < best_rtt and plane in ok:
                best, best_rtt = plane, pr.srtt
        return best

    def _reflected_rtt(self, ts: int, now: float) -> float | None:
        """The RTT of the SACK's trigger from its reflected timestamp (flag TS set)."""
        rtt = now - ts / 1e9
        if not 0 <= rtt < 60:
            return None
        self.rtt_sample(rtt)
        return rtt

    def _reflected_ev(self, ev: Ev, ecn: bool, now: float) -> None:
        if ecn:
            ev.ecn += 1
            self.counters.ecn_echoes += 1
            self._emit(events.EcnMarked(now, self.conn, ev.value))
            self.evs.apply(ev, EvInput.ECN, now)
        else:
            self.evs.on_clean_ack(ev)
            self.scheduler.on_clean_ack(ev)

    # -- loss detection -----------------------------------------------------------------
    def detect_losses(self, now: float) -> None:
        """RACK (RFC 8985) and the packet threshold, plane by plane (ours)."""
        self.reorder_deadline = math.inf
        thresh = self._packet_threshold()
        for pr in self.planes.values():
            self._plane_losses(pr, now, thresh)

    def _plane_losses(self, pr: PlaneRack, now: float, thresh: int) -> None:
        """A packet is lost once a packet sent after it was delivered and

        - on its own plane: the plane's RTT plus its measured reordering passed, or
          ``thresh`` packets sent later on the plane were delivered. A plane leaves the
          host through one NIC port, a FIFO that holds most of the plane's delay, so its
          reordering is the small spread of the paths behind the port;
        - on another plane only: 1.25 x its plane's recent peak RTT passed (the RTO
          before the plane's first sample), so a whole dead plane is found too.

        Over all planes at once, a standing queue on one port (in the demo, the TCP
        flow's: ~20 ms against ~1.5 ms) reorders by the whole queue: a window that
        covers it delayed every loss by that much, and the 55 packets that overtake one
        in it made the packet threshold a storm of false losses. Within a plane, both
        deadlines grow with the send time, so the walk stops at the first packet not
        due."""
        reo = self.plane_reorder_window(pr)
        # a plane never measured waits the RTO of a connection never measured (RFC 6298
        # 2.1): the other planes' RTTs say nothing of its port's queue
        expect = 1.25 * pr.peak if pr.srtt is not None else max(self.rto, 3 * self.cfg.initial_rtt)
        order = pr.order
        while order:
            seq, pkt = order[0]
            if not self._current(seq, pkt):
                order.popleft()
                continue
            if seq > self._rack_seq:
                break
            deadline = pkt.sent_time + max(expect, self._rack_rtt)
            if seq <= pr.seq:
                if not pkt.rtx and pr.plane_seq - pkt.plane_seq >= thresh:
                    deadline = now
                deadline = min(deadline, pkt.sent_time + pr.rtt + reo)
            if now < deadline:
                self.reorder_deadline = min(self.reorder_deadline, deadline)
                break
            order.popleft()
            self._lost(pkt, now, EvInput.LOSS)

    def plane_reorder_window(self, pr: PlaneRack) -> float:
        """A plane's reordering allowance: 1.25 x its measured reordering, at least
        ``rack_reo_fraction`` x min RTT (RFC 8985 6.2's floor, scaled)."""
        return max(self.cfg.rack_reo_fraction * self.min_rtt, 1.25 * pr.reorder)

    def _packet_threshold(self) -> int:
        """Packets sent later on the same plane and delivered that make one lost. htsim:
        max(min(1.5 cwnd, max window), 5) packets; spraying over software queues reorders
        deeper than a shrunken cwnd, so ours uses the upper end, 1.5 max window."""
        max_pkts = 1.5 * self.cc.max_window() / self.mss
        return max(int(min(max_pkts, self.cfg.reorder_window)), self.cfg.loss_pkt_min)

    def _current(self, seq: int, pkt: SentPacket) -> bool:
        """Whether order entry (seq, pkt) is ``pkt``'s latest transmission, still in flight
        (an acknowledged packet's ``seq`` is 0, ``_acked``)."""
        return pkt.seq == seq and not pkt.lost

    def _requeue(self, pkt: SentPacket) -> None:
        """Take ``pkt`` out of the flight and queue it for retransmission."""
        pkt.lost = True
        self.cc.gone(pkt.ev.plane, pkt.length)
        heapq.heappush(self._rtx, pkt.psn)

    def _lost(self, pkt: SentPacket, now: float, why: EvInput | None) -> None:
        """Queue ``pkt`` for retransmission; ``why`` (None: no EV to blame) goes to its EV."""
        self._requeue(pkt)
        self.counters.lost += 1
        if why is not None:  # an RTO's resend is a probe, not evidence of congestion
            self.cc.on_loss(pkt.ev.plane, pkt.length, now)
            pkt.ev.lost += 1
            self.evs.apply(pkt.ev, why, now)

    def send_failed(self, psn: int, ev: int) -> None:
        """The local stack refused this transmission of ``psn`` on ``ev`` (its port is
        down): resend it at once. Not congestion, so the window stays (ours)."""
        pkt = self.inflight.get(expand(psn, self.snd_una))
        if pkt is None or pkt.lost or pkt.ev.value != ev:
            return
        self._requeue(pkt)

    def port_down(self, plane: int) -> None:
        """The local port of ``plane`` went down: the packets in its queue died with it, so
        every packet in flight on the plane is resent at once rather than found lost one
        plane-RTT later (ours; in the demo that plane's queue, shared with TCP, held ~20 ms).
        Some had left the port already: the receiver drops those duplicates. No EV is
        blamed and the window stays, as for ``send_failed``."""
        pr = self.planes.get(plane)
        if pr is None:
            return
        for seq, pkt in pr.order:
            if self._current(seq, pkt):
                self._requeue(pkt)
        pr.order.clear()

    # -- NACK ---------------------------------------------------------------------------
    def on_nack(self, h: frames.NackHeader, now: float) -> None:
        """A trimmed packet: SKIP its EV and resend at once; others: resend."""
        pkt = self.inflight.get(expand(h.psn, self.snd_una))
        if pkt is None or pkt.lost:
            self.counters.nack_invalid += 1
            return
        self.counters.nacks_received += 1
        self._requeue(pkt)
        ev = self.evs.by_value.get(h.ev, pkt.ev)
        if h.reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self.evs.apply(ev, EvInput.TRIMMED, now)
            self.cc.on_nack(pkt.ev.plane, pkt.length, now)

    # -- timers -------------------------------------------------------------------------
    def oldest_sent(self) -> float:
        """Send time of the oldest packet still in flight (inf: none)."""
        pkt = self._oldest()
        return math.inf if pkt is None else pkt.sent_time

    def _oldest(self) -> SentPacket | None:
        """The packet in flight sent first: the earliest of the planes' first (each plane
        keeps its transmissions in send order; stale entries at the front go here)."""
        best: SentPacket | None = None
        for pr in self.planes.values():
            order = pr.order
            while order:
                seq, pkt = order[0]  # not _current(*order[0]): mypyc calls that generically
                if self._current(seq, pkt):
                    if best is None or seq < best.seq:
                        best = pkt
                    break
                order.popleft()
        return best

    def _rto_start(self) -> float:
        """The RTO runs from the oldest packet's send or the last RTO, whichever is later
        (RFC 6298 5.5: an expired timer restarts)."""
        return max(self.oldest_sent(), self._last_rto)

    def timer(self) -> float:
        """Earliest of the reorder and retransmission deadlines."""
        return min(self.reorder_deadline, self._rto_start() + self.rto)

    def on_timer(self, now: float) -> bool:
        """Run expired timers; True if the RTO fired."""
        if self.reorder_deadline <= now:
            self.detect_losses(now)
        if self._rto_start() + self.rto > now:
            return False
        self._last_rto = now
        rto = self.rto
        self.rto_count += 1
        self.counters.rtos += 1
        self._emit(events.RtoFired(now, self.conn, rto, self.rto_count))
        oldest = self._oldest()
        if oldest is not None:
            self._lost(oldest, now, None)
            self._rto_resend = True
        return True


def _opcode(offset: int, n: int, total: int) -> Opcode:
    first, last = offset == 0, offset + n >= total
    if first:
        return _WRITE_ONLY if last else _WRITE_FIRST
    return _WRITE_LAST if last else _WRITE_MIDDLE
