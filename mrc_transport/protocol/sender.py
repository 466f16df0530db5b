"""The sending half of a connection: PSNs, windows, SACKs and loss recovery, orchestrated.

Theory of operation
-------------------
Messages are cut into packets as they are sent (segments.py). Every packet gets the next
PSN and goes out while some plane's congestion window has room (cc/planes.py) and the bytes
from the cumulative PSN on stay within the receiver's advertised window; the scheduler
picks its EV (scheduler.py). A retransmission keeps its PSN, carries the RTX flag, travels
in its own trimmable class (DSCP_RTX, as OCP's API once gave retransmitted requests a
traffic class of their own; a ``no_trim`` connection's in DSCP_NO_TRIM) and goes before
new data, oldest PSN first, on another EV of the plane with the lowest smoothed RTT
(ours: it fills the receiver's hole soonest).

A SACK acknowledges packets (cumulative PSN and bitmap), gives an RTT sample of the packet
that triggered it (rtt.py) and tells the EV set whether that packet's path was marked
(ev.py). Loss detection (rack.py) runs once per batch of SACKs, at the next send decision
or timer, not after each SACK: a userspace endpoint reads SACKs in bursts, and a SACK later
in a burst may acknowledge what an earlier one alone would call lost (docs/measurements.md,
"The sender's design figures"). A lost packet's EV goes ASSUMED_BAD and the packet is
queued for retransmission.

An RTO (RFC 6298) resends the oldest packet in flight on another EV, at once, and marks
that packet's EV ASSUMED_BAD, as the UEC and OCP EV state machines do on a timeout: one
probe readmits it if it was only the peer's stall (docs/protocol.md, "RTO"). The
connection ends after more than ``max_rto_count`` RTOs in a row.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Collection
from typing import Final

from mrc_transport.frozen import fast_constructor
from mrc_transport.wire import frames
from mrc_transport.wire.frames import NackReason

from . import events
from .cc.planes import PlaneWindows
from .commons import ACK_REQ, ECN_ECHO, RESTORE_WINDOW, RTX, TS, Commons
from .config import GO_BACK_N, Config
from .counters import ConnCounters
from .ev import Ev, EvInput, EvSet
from .rack import Flight, Rack, SentPacket
from .rtt import RttEstimator
from .scheduler import Scheduler
from .segments import DataRun, Outgoing, OutMessage, asking_ack
from .serial import MASK32, expand

_new_message_acked: Final = fast_constructor(events.MessageAcked)  # one per message
RANK_TRIMMED: Final = 0
"""A trimmed packet's place in the resend queue: ahead of every lost one (``_requeue``)."""
RANK_LOST: Final = 1


class Sender:
    """Sending state of one connection."""

    def __init__(
        self, cfg: Config, initial_psn: int, evs: EvSet, scheduler: Scheduler,
        cc: PlaneWindows, counters: ConnCounters, emit: Callable[[events.Event], None],
        conn: int, commons: Commons,
    ) -> None:  # fmt: skip
        self.cfg, self.evs, self.scheduler, self.cc = cfg, evs, scheduler, cc
        self.counters, self._emit, self.conn, self.commons = counters, emit, conn, commons
        self.mss = cfg.mss
        self._dscp = frames.data_dscp(rtx=False, no_trim=cfg.no_trim)
        self._rtx_dscp = frames.data_dscp(rtx=True, no_trim=cfg.no_trim)
        self.pending: deque[OutMessage] = deque()
        self.next_msn = 0
        self.snd_una = self.snd_nxt = initial_psn
        self._una_lens: deque[int] = deque()
        # bound once: compiled, a deque's method is looked up by name at every call
        self._push_len, self._pop_len = self._una_lens.append, self._una_lens.popleft
        self.fc_bytes = 0
        self.peer_rwnd = cfg.rcvbuf
        self.inflight = Flight(cfg.reorder_window)
        self._rtx: list[tuple[int, int]] = []
        """Packets to resend, as (rank, psn): trimmed ones first (``RANK_TRIMMED``), then
        by PSN.
        Behind a lost packet that waits for window room, a trimmed one waited too (ours:
        17 ms of a 22 ms NACK loop)."""
        self._full: Collection[int] = ()
        """The planes whose window had no room at the latest window test (``_room``)."""
        self.rtt = RttEstimator(cfg)
        self.rack = Rack(cfg, self.rtt)
        self.rto_count = 0
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
        return not self.pending and not len(self.inflight)

    # -- RTT ----------------------------------------------------------------------------
    @property
    def backoff(self) -> int:
        """Doublings of the RTO: one per RTO in a row after the first ``rto_linear``, which
        keep the same timeout (OCP mrc.h's linear, then exponential, retries)."""
        return max(0, self.rto_count - self.cfg.rto_linear)

    @property
    def path_rto(self) -> float:
        """The RTO of the RTT estimates, backed off for the RTOs in a row (rtt.py)."""
        return self.rtt.rto(self.backoff)

    @property
    def rto(self) -> float:
        """The retransmission timeout: ``path_rto``, at least ``first_rto`` (backed off)
        until a data packet's RTT was sampled (Config.first_rto says why)."""
        rto = self.path_rto
        if self.rtt.data_sampled:
            return rto
        return min(max(rto, math.ldexp(self.cfg.first_rto, self.backoff)), self.cfg.max_rto)

    @property
    def srtt(self) -> float | None:
        """The smoothed RTT (RFC 6298; None before the first sample)."""
        return self.rtt.srtt

    @property
    def min_rtt(self) -> float:
        """The least RTT seen."""
        return self.rtt.min_rtt

    def rtt_sample(self, rtt: float, data: bool = True) -> None:
        """Feed one RTT measurement, of a data packet or not (the handshake's); the EV
        set's probe timers count in it."""
        srtt = self.rtt.on_sample(rtt, data)
        self.evs.on_rtt_sample(self.rtt.min_rtt, srtt)

    @property
    def in_flight_bytes(self) -> int:
        """Bytes sent and neither acknowledged nor declared lost."""
        return self.cc.total

    # -- sending ------------------------------------------------------------------------
    def fill(self, now: float, out: list[Outgoing], limit: int, trimmed_only: bool = False) -> int:
        """Append at most ``limit`` data packets (retransmissions first, new data in
        ``DataRun``s) while the windows allow; the last one asks for a SACK at once
        (ACK_REQ), so the burst's end is acknowledged without waiting for more data or the
        ack delay. ``trimmed_only``: the trimmed packets' resends alone, which are queued
        first. Returns how many."""
        if self.rack.deadline <= now:  # SACKs came in since the last decision
            self._detect_losses(now)
        first = len(out)
        n = 0
        while n < limit:
            pkt = self._next_rtx()
            if pkt is None:  # none queued, and none can be while the burst is planned
                if not trimmed_only:
                    n += self._send_new(now, out, limit - n)
                break
            if trimmed_only and pkt.cause != "trimmed":
                break
            if not self._resend(pkt, now, out):
                break
            n += 1
        if len(out) > first:
            last = out[-1]
            if isinstance(last, DataRun):
                last.last_flags = ACK_REQ
            else:
                out[-1] = asking_ack(self.commons, last)
        return n

    def _room(self, n: int) -> bool:
        """Whether some plane with usable EVs has window for ``n`` bytes; the others
        are left out of the next pick."""
        full = self._full = self.cc.full(self.evs.planes, n)
        return not full or self._room_left(full)

    def _room_left(self, full: Collection[int]) -> bool:
        """Whether a pick has a plane to go to, the planes ``full`` having no room."""
        evs = self.evs
        if evs.usable:
            return bool(evs.usable_planes(full))
        # no usable EV at all: the fallback EV goes wherever the window allows
        return len(full) < len(evs.planes)

    def _send_new(self, now: float, out: list[Outgoing], limit: int) -> int:
        """Send at most ``limit`` new segments, oldest message first, while the windows
        allow; returns how many. Planned per burst: the windows' headroom is read once
        (cc/planes.py ``Headroom``), each message's packets extend one ``DataRun``, and
        the counters and windows take the burst's sums at its end, so what stays per
        packet is its EV and its records."""
        pending, evs, scheduler, mss = self.pending, self.evs, self.scheduler, self.mss
        k = min(limit, self.cfg.reorder_window - (self.snd_nxt - self.snd_una))
        room = self.cc.headroom(evs.planes)
        ts = int(now * 1e9)
        run: DataRun | None = None
        n = nbytes = 0
        msg = pending[0] if pending else None  # compiled, a deque's [0] is a generic call
        while msg is not None and n < k:
            offset = msg.next_offset
            size = min(mss, msg.length - offset)
            if self.fc_bytes + size > self.peer_rwnd:
                break
            full = self._full = room.full(size)
            if full and not self._room_left(full):
                break
            ev = scheduler.pick(evs, None, full)
            pkt = SentPacket(self.snd_nxt, msg, offset, size, ev)
            msg.next_offset += size
            if run is None:
                run = DataRun(
                    self.commons, pkt.psn, msg.msn, offset, mss, msg.data, ts, ev, self._dscp
                )
                out.append(run)
            else:
                run.evs.append(ev)
            self.inflight.put(pkt)
            self._push_len(size)
            self.fc_bytes += size
            self.snd_nxt += 1
            self.rack.on_sent(pkt, now)
            room.take(ev.plane, size)
            evs.on_sent(ev)
            n += 1
            nbytes += size
            if msg.next_offset >= msg.length:
                pending.popleft()
                run = None
                msg = pending[0] if pending else None
        room.book()
        self.counters.data_sent += n
        self.counters.bytes_sent += nbytes
        return n

    def trimmed_waiting(self) -> bool:
        """A trimmed packet may be queued for its resend (a NACK named it): what the IO
        layer sends at once, ahead of its pacing (io/endpoint.py ``pump``). They head the
        queue, so its head says; it may be one acknowledged since, which ``fill`` drops."""
        return bool(self._rtx) and self._rtx[0][0] == RANK_TRIMMED

    def _next_rtx(self) -> SentPacket | None:
        while self._rtx:
            pkt = self.inflight.get(self._rtx[0][1])
            if pkt is not None and pkt.lost:
                return pkt
            heapq.heappop(self._rtx)
        self._rto_resend = False  # nothing to resend: the RTO's packet was acked meanwhile
        return None

    def _resend(self, pkt: SentPacket, now: float, out: list[Outgoing]) -> bool:
        """Resend lost ``pkt`` on another EV of the fastest plane (not a busy local port
        if another is free) once that plane has room; an RTO's resend goes at once, as RFC
        6298 5.4 has it: when the window shrank below what was in flight and all of it was
        lost, waiting for room took one RTO per packet (docs/measurements.md, "Seventh
        session"). A trimmed packet's resend takes another EV of its own plane and goes
        at once, as htsim's UEC source resends a NACKed packet: its bytes left the queue
        with the trim, and the NACK's window cut holds back new data, not the packet the
        receiver misses. Into a queue that stays at the trim threshold (an incast's last
        hop, which ECN does not mark) a packet is trimmed again and again, a stub per RTT;
        waiting for room instead put the p99 from trim to resend at 10x the base RTT
        (docs/measurements.md, bench/trim.py)."""
        planes = self.evs.usable_planes()
        trimmed = pkt.cause == "trimmed"
        if trimmed and pkt.ev.plane in planes:
            plane: int | None = pkt.ev.plane
        else:
            plane = self._rtx_plane(pkt, planes)
        if not (self._rto_resend or trimmed) and not (
            self._room(pkt.length) if plane is None else self.cc.room(plane, pkt.length)
        ):
            return False
        self._rto_resend = False
        heapq.heappop(self._rtx)
        self._send_rtx(pkt, plane, now, out)
        return True

    def _rtx_plane(self, pkt: SentPacket, planes: list[int]) -> int | None:
        """The plane for a resend of ``pkt``: the fastest of those that delivered a packet
        sent after it (rtt.py ``fastest``), worth waiting for if it has no room. When none
        did, the fastest of all may be dead, its window full of packets not yet found
        lost: then the fastest with room, so that a resend waiting on it does not hold
        back every plane (ours: a transfer stood still until the RTO)."""
        since = pkt.sent_time
        plane = self.rtt.fastest(planes, since)
        if plane is None or self._rto_resend or self.cc.room(plane, pkt.length):
            return plane
        if self.rtt.planes[plane].delivered_after(since):
            return plane
        roomy = [p for p in planes if self.cc.room(p, pkt.length)]
        return self.rtt.fastest(roomy, since) if roomy else plane

    def _send_rtx(
        self, pkt: SentPacket, plane: int | None, now: float, out: list[Outgoing]
    ) -> None:
        old = pkt.ev
        if plane is None:
            pkt.ev = self.scheduler.pick(self.evs, old, self._full)
        else:
            pkt.ev = self.scheduler.pick_in(self.evs, plane, old, self._full)
        pkt.lost = False
        pkt.rtx += 1
        self.counters.retransmits += 1
        if pkt.cause in ("trimmed", "nack"):
            self.counters.rtx_nack += 1
        after = now - pkt.sent_time
        self._emit(
            events.Retransmit(
                now, self.conn, pkt.psn, old.value, pkt.ev.value, pkt.cause, after
            )
        )  # fmt: skip
        self._sent(pkt, now)
        msg, ts = pkt.msg, int(now * 1e9)
        out.append(
            msg.transmit(
                self.commons, pkt.psn, pkt.offset, pkt.length, pkt.ev, ts, TS | RTX, self._rtx_dscp
            )
        )

    def _sent(self, pkt: SentPacket, now: float) -> None:
        """Book a transmission of ``pkt`` on its EV: RACK, the window, counters."""
        self.rack.on_sent(pkt, now)
        self.cc.sent(pkt.ev.plane, pkt.length)
        self.evs.on_sent(pkt.ev)
        self.counters.data_sent += 1
        self.counters.bytes_sent += pkt.length

    # -- SACK ---------------------------------------------------------------------------
    def sack(
        self, bits: int, cum_psn: int, sack_base: int, bitmap: int, ev: int, ts: int,
        rwnd: int, now: float, service: int = 0, penalty: int = 0,
    ) -> None:  # fmt: skip
        """Process a SACK, given as its fields (``bits``: its flags as an int; ``ev``: the
        EV it reflects; ``service``: ns its trigger waited at the receiver; ``penalty``:
        the receiver's window penalty); a SACK for PSNs never sent is counted and ignored
        whole."""
        cum = expand(cum_psn, self.snd_una)
        base = expand(sack_base, self.snd_una)
        top = base + bitmap.bit_length() - 1 if bitmap else base
        if cum > self.snd_nxt or (bitmap and top >= self.snd_nxt):
            self.counters.sack_beyond_sent += 1
            return
        self.counters.sacks_received += 1
        self._ack_cumulative(cum, now)
        self._ack_bitmap(base, bitmap, now)
        acked = self.cc.take_acked()  # bytes newly acknowledged, per plane
        if cum >= self.snd_una:
            self.peer_rwnd = rwnd
        else:
            self.counters.sack_stale += 1
        self._trigger(bits, ev, ts, acked, now, service)
        if penalty or bits & RESTORE_WINDOW:
            self.cc.on_penalty(acked, penalty, bool(bits & RESTORE_WINDOW))
        self.rack.run_by(now)  # at the next decision: the burst's later SACKs first

    def _ack_cumulative(self, cum: int, now: float) -> None:
        while self.snd_una < cum:
            pkt = self.inflight.pop(self.snd_una)
            if pkt is not None:
                self._acked(pkt, now)
            self.fc_bytes -= self._pop_len()
            self.snd_una += 1

    def _ack_bitmap(self, base: int, bitmap: int, now: float) -> None:
        while bitmap:
            low = bitmap & -bitmap
            bitmap ^= low
            psn = base + low.bit_length() - 1
            pkt = self.inflight.pop(psn) if psn >= self.snd_una else None
            if pkt is not None:
                self._acked(pkt, now)

    def _acked(self, pkt: SentPacket, now: float) -> None:
        """Book one delivered packet; its bytes count as acked on its plane."""
        if pkt.lost:
            self.counters.spurious_rtx += 1
        self.cc.delivered(pkt.ev.plane, pkt.length, not pkt.lost)
        self.rack.on_acked(pkt, now - pkt.sent_time)
        msg = pkt.msg
        msg.acked += pkt.length
        if msg.acked >= msg.length and msg.next_offset >= msg.length:
            self.counters.messages_acked += 1
            self._emit(_new_message_acked(now, self.conn, msg.msn, msg.length))

    def _trigger(
        self, bits: int, ev: int, ts: int, acked: dict[int, int], now: float, service: int
    ) -> None:
        """What a SACK says of the packet that triggered it, sent on EV ``ev``: its RTT
        and ECN echo, for that EV, its plane and the windows. The windows' delay signal
        leaves out the ``service`` ns it waited at the receiver (UEC); the RTO's RTT
        keeps them, since a resend waits for them too."""
        rtt = self._reflected_rtt(ts, now) if bits & TS else None
        ecn = bool(bits & ECN_ECHO)
        trigger = self.evs.by_value.get(ev)
        if trigger is None:
            self.counters.sack_unknown_ev += 1
        else:
            self._reflected(trigger, rtt, ecn, now)
        if acked or ecn:
            net = None if rtt is None else max(rtt - service * 1e-9, 0.0)
            self.cc.on_sack(acked, trigger.plane if trigger else None, net, ecn, now)
        if acked:
            self.rto_count = 0

    def _reflected_rtt(self, ts: int, now: float) -> float | None:
        """The trigger's RTT from its reflected timestamp, fed to the estimates (None: not
        a timestamp of ours)."""
        rtt = now - ts / 1e9
        if not 0 <= rtt < 60:
            return None
        self.rtt_sample(rtt)
        return rtt

    def _reflected(self, ev: Ev, rtt: float | None, ecn: bool, now: float) -> None:
        """The SACK's trigger went on ``ev``: its plane's RTT, its path's ECN echo."""
        if rtt is not None:
            self.rtt.plane(ev.plane).on_trigger(rtt, now)
        if ecn:
            self.counters.ecn_echoes += 1
            self.evs.on_ecn_echo(ev, now)
        else:
            self.evs.on_clean_ack(ev)
            self.scheduler.on_clean_ack(ev)

    # -- losses -------------------------------------------------------------------------
    def _detect_losses(self, now: float) -> None:
        lost = self.rack.detect_losses(now, self.cc.max_window(), self.mss, self.backoff)
        for pkt in lost:
            self._lost(pkt, now, EvInput.LOSS)

    def _requeue(self, pkt: SentPacket, cause: str) -> None:
        """Take ``pkt`` out of the flight and queue it for retransmission."""
        pkt.lost = True
        pkt.cause = cause
        self.cc.gone(pkt.ev.plane, pkt.length)
        heapq.heappush(self._rtx, (RANK_TRIMMED if cause == "trimmed" else RANK_LOST, pkt.psn))

    def _lost(self, pkt: SentPacket, now: float, why: EvInput) -> None:
        """Queue ``pkt`` for retransmission; ``why`` (a loss, a timeout) goes to its EV."""
        self._requeue(pkt, "rto" if why is EvInput.TIMEOUT else "loss")
        self.counters.lost += 1
        self.cc.on_loss(pkt.ev.plane, pkt.length, now)
        if self.cfg.recovery != GO_BACK_N:  # RoCE's flow keeps its one path
            self.evs.on_lost(pkt.ev, why, now)

    def _go_back(self, first: SentPacket, now: float) -> None:
        """A go-back-N sequence error at ``first`` (Config.recovery): the receiver dropped
        everything after it, so every packet in flight from it on goes again, in PSN order
        (RoCE's requester, InfiniBand spec 9.7.5.2.8); one loss to the window."""
        self.cc.on_loss(first.ev.plane, first.length, now)
        self.counters.lost += 1
        for psn in range(first.psn, self.snd_nxt):
            pkt = self.inflight.get(psn)
            if pkt is not None and not pkt.lost:
                self._requeue(pkt, "nack")
                self.counters.rtx_go_back += 1

    def send_failed(self, psn: int, ev: int) -> None:
        """The local stack refused this transmission of ``psn`` on ``ev`` (its port is
        down): resend it at once. Not congestion, so the window stays (ours)."""
        pkt = self.inflight.get(expand(psn, self.snd_una))
        if pkt is None or pkt.lost or pkt.ev.value != ev:
            return
        self._requeue(pkt, "port")

    def port_down(self, plane: int) -> None:
        """The local port of ``plane`` went down: the packets in its queue died with it, so
        every packet in flight on the plane is resent at once rather than found lost one
        plane-RTT later (ours; that queue may be a deep one, shared with other traffic).
        Some had left the port already: the receiver drops those duplicates. No EV is
        blamed and the window stays, as for ``send_failed``."""
        for pkt in self.rack.flush(plane):
            self._requeue(pkt, "port")

    def on_nack(self, h: frames.NackHeader, now: float) -> None:
        """A trimmed packet: apply NSCC's NACK rule and resend it before new data on
        another EV of the same plane (the trim says a queue on that path is full, not
        that the plane is broken: mrc-protocol-notes.md, "Reliability"); a trim on the
        way also SKIPs its EV, a trim at the last hop does not, since every path ends in
        that port (as ECN marks every hop but the last). Other NACKs: resend."""
        pkt = self.inflight.get(expand(h.psn, self.snd_una))
        # a NACK of an earlier transmission than the one in flight (RACK resent the packet
        # before its stub's NACK came) is answered by that resend: another one raced its
        # SACK (ours)
        if pkt is None or pkt.lost or h.ts < int(pkt.sent_time * 1e9):
            self.counters.nack_invalid += 1
            return
        self.counters.nacks_received += 1
        self.rack.on_nack(now)
        if h.reason is NackReason.SEQUENCE_ERROR:
            self._go_back(pkt, now)
            return
        trimmed = h.reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP)
        self._requeue(pkt, "trimmed" if trimmed else "nack")
        if not trimmed:
            return
        if h.reason is NackReason.TRIMMED:
            self.evs.apply(self.evs.by_value.get(h.ev, pkt.ev), EvInput.TRIMMED, now)
        self.cc.on_nack(pkt.ev.plane, pkt.length, now)

    # -- timers -------------------------------------------------------------------------
    def timer(self) -> float:
        """Earliest of the reorder and retransmission deadlines."""
        return self.rack.timer(self.rto)

    def on_timer(self, now: float) -> bool:
        """Run expired timers; True if the RTO fired."""
        if self.rack.deadline <= now:
            self._detect_losses(now)
        rto = self.rto
        if not self.rack.rto_expired(rto, now):
            return False
        self.rto_count += 1
        self.counters.rtos += 1
        self._emit(events.RtoFired(now, self.conn, rto, self.rto_count))
        oldest = self.rack.on_rto(now)
        if oldest is not None:
            self._lost(oldest, now, EvInput.TIMEOUT)
            self._rto_resend = True
        return True
