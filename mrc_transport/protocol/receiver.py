"""The receiving half of a connection: placement, duplicate suppression, SACKs, delivery.

Each data packet names its message (MSN), its offset and the message length, so the
receiver allocates the message buffer once, on the first packet of the message that
arrives, and copies each payload straight to its place whatever the arrival order.
Complete messages are delivered in MSN order. PSNs below the cumulative PSN or already in
the out-of-order set are duplicates; PSNs beyond the reorder window are dropped.

Placement is exact, so no packet can make a message look complete with a hole in it: the
sender cuts every message on a fixed grid of ``seg_size`` bytes (min of both sides' SETUP
mtu), so segment i must sit at offset i * seg_size and be seg_size long, except the last,
which must end at msg_len. A message is complete when every segment index has arrived
(one flag per segment). A packet off the grid (``bad_segment``) or for a segment already
placed under another PSN (``dup_segment``: retransmissions keep their PSN, so only a
forged or buggy packet does this) is dropped without marking its PSN received, so the
genuine packet with that PSN is still accepted.

A SACK goes out after ``sack_every_bytes`` new bytes (htsim: 16 KB), at once when a packet
arrived with CE, opened a gap, was a duplicate or asked for it (ACK_REQ), and otherwise
after ``ack_delay``. Its bitmap covers the 64 PSNs up to the highest received.

Flow control: the window advertised is ``rcvbuf`` minus the bytes of complete messages the
application has not read yet; a message in progress does not count, since its buffer is
allocated whole anyway and it could otherwise never complete.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mrc_transport.frozen import fast_constructor
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Opcode

from . import events
from .commons import ACK_REQ, ECN_ECHO, TS, Commons
from .config import Config
from .counters import ConnCounters
from .serial import MASK32, expand

SACK_BITMAP_BITS: Final = frames.SACK_BITMAP_BITS
SPARE_BUFFERS: Final = 8  # recycled message buffers a receiver keeps (ours)
Payload = bytes | bytearray | memoryview
"""A data packet's payload: copied into its message's buffer, never kept."""
_new_sack_header: Final = fast_constructor(
    frames.SackHeader
)  # one per SACK: without the frozen __init__


class Verdict(enum.Enum):
    """What the connection should do after a data packet."""

    DROP = "drop"
    DELAY = "delay"
    SACK = "sack"
    NACK = "nack"


class InMessage:
    """A message being reassembled (a plain class: mypyc's dataclasses know no
    ``memoryview`` field)."""

    __slots__ = ("buf", "missing", "placed", "view")

    def __init__(self, buf: bytearray, segs: int) -> None:
        self.buf = buf
        """Preallocated to the message length."""
        self.view = memoryview(buf)
        """A view of ``buf`` that payloads are copied into: a bytearray's own slice
        assignment first copies any other buffer into a temporary bytearray (CPython's
        bytearray_ass_subscript), which cost a second 9 KB copy, a malloc and a free per
        packet. Released when the message is delivered, so the application may resize
        it."""
        self.placed = bytearray(segs)
        """One flag per segment index: 1 once that segment is in ``buf``."""
        self.missing = segs
        """Segments not placed yet; the message is complete at 0."""


@dataclass(slots=True)
class Trigger:
    """The packet a SACK reflects."""

    ev: int = 0
    """Its EV."""
    ts: int = 0
    """Its timestamp."""
    has_ts: bool = False
    """Whether ``ts`` is valid."""


class Receiver:
    """Receiving state of one connection."""

    def __init__(
        self,
        cfg: Config,
        initial_psn: int,
        counters: ConnCounters,
        emit: Callable[[events.Event], None],
        conn: int,
        commons: Commons,
        seg_size: int | None = None,
    ) -> None:
        self.cfg, self.counters, self._emit, self.conn = cfg, counters, emit, conn
        self.commons = commons
        self.seg_size = max(1, cfg.mss if seg_size is None else seg_size)
        """The peer's segment size: min(our mss, its SETUP mtu), as its sender uses."""
        self.cum = initial_psn
        self.highest = initial_psn - 1
        self.ooo: set[int] = set()
        self.ooo_count = 0
        self.next_msn = 0
        self.inbox: dict[int, InMessage] = {}
        self.done: dict[int, InMessage] = {}
        self.held = 0
        self.advertised = cfg.rcvbuf
        self._since_sack = 0
        self.ack_deadline = math.inf
        self.trigger = Trigger()
        self._spare: list[bytearray] = []
        """Delivered message buffers the application gave back (``recycle``)."""

    @property
    def rwnd(self) -> int:
        """Window to advertise, bytes."""
        return max(0, self.cfg.rcvbuf - self.held)

    def on_data(
        self,
        flags: int,
        psn32: int,
        msn32: int,
        msg_offset: int,
        msg_len: int,
        ts: int,
        payload: Payload,
        ev: int,
        ce: bool,
        now: float,
    ) -> Verdict:
        """Place one data packet, given as its header's fields (``flags`` as an int), its
        payload, which is copied to its place, the EV it arrived on and its CE mark; say
        whether to SACK now. Fields, not a ``DataHeader``: the endpoint reads them out of
        a receive burst without building one per packet, in the order of a data record
        (wire/records.py)."""
        psn = expand(psn32, self.cum)
        if psn < self.cum or psn in self.ooo:
            self.counters.dup_packets += 1
            self._note(ev, ts, flags)
            return Verdict.SACK
        if psn >= self.cum + self.cfg.reorder_window:
            self.counters.psn_out_of_window += 1
            return Verdict.NACK
        n = len(payload)
        index = self._segment_index(msg_offset, msg_len, n)
        msg = None if index is None else self._message(msn32, msg_len)
        if msg is None or index is None:
            return Verdict.DROP
        if msg.placed[index]:
            self.counters.dup_segment += 1
            return Verdict.DROP
        msg.view[msg_offset : msg_offset + n] = payload
        msg.placed[index] = 1
        msg.missing -= 1
        self.counters.data_received += 1
        self.counters.bytes_received += n
        if ce:
            self.counters.ce_received += 1
        gap = self._mark(psn)
        if not msg.missing:
            self._complete(expand(msn32, self.next_msn), msg, now)
        self._since_sack += n
        self._note(ev, ts, flags)
        if ce or gap or flags & ACK_REQ or self._since_sack >= self.cfg.sack_every_bytes:
            return Verdict.SACK
        if self.ack_deadline == math.inf:
            self.ack_deadline = now + self.cfg.ack_delay
        return Verdict.DELAY

    def on_trimmed(self, psn32: int) -> Verdict:
        """A stub of a data packet a switch trimmed (its payload cut, its DSCP set to a
        trimmed class): NACK it unless its PSN is here already or outside the window,
        so the sender resends it within about one RTT instead of finding the loss from
        SACK gaps or a timeout (docs/protocol.md, "Trimmed data packets")."""
        psn = expand(psn32, self.cum)
        if psn < self.cum or psn in self.ooo or psn >= self.cum + self.cfg.reorder_window:
            self.counters.trimmed_ignored += 1
            return Verdict.DROP
        self.counters.trimmed_received += 1
        return Verdict.NACK

    def _message(self, msn32: int, msg_len: int) -> InMessage | None:
        msn = expand(msn32, self.next_msn)
        if not self.next_msn <= msn < self.next_msn + self.cfg.msn_window or msn in self.done:
            self.counters.msn_out_of_window += 1
            return None
        msg = self.inbox.get(msn)
        if msg is None:
            segs = max(1, -(-msg_len // self.seg_size))
            msg = self.inbox[msn] = InMessage(self._buffer(msg_len), segs)
        elif len(msg.buf) != msg_len:
            self.counters.inconsistent_header += 1
            return None
        return msg

    def _buffer(self, n: int) -> bytearray:
        """A buffer for a message of n bytes: a recycled one of that size, else a new one.
        A recycled buffer keeps its old bytes, which is safe: a message is complete only
        when its segments, which tile it, have all been placed."""
        spare = self._spare
        if spare and len(spare[-1]) == n:
            return spare.pop()
        return bytearray(n)

    def recycle(self, buf: bytearray) -> None:
        """The application is done with a delivered message's buffer: reuse it for a later
        message of its size (ours: zero-filling a new 128 KB buffer took ~9% of a
        receiver's CPU). Keeps a few, the most recent first."""
        if type(buf) is not bytearray:  # the core writes into it later: fail here, now
            raise TypeError(f"recycle takes a bytearray, not {type(buf).__name__}")
        if len(self._spare) < SPARE_BUFFERS:
            self._spare.append(buf)

    def _segment_index(self, msg_offset: int, msg_len: int, n: int) -> int | None:
        """The segment this payload fills, or None (counted) if it does not fit the grid."""
        end = msg_offset + n
        if n > self.cfg.mss or end > msg_len or msg_len > self.cfg.max_message:
            self.counters.inconsistent_header += 1
            return None
        if msg_len == 0:
            return 0  # the one empty segment of an empty message
        seg = self.seg_size
        index, rem = divmod(msg_offset, seg)
        full = n == seg  # every segment but the last
        last = 0 < n < seg and end == msg_len
        if rem or not (full or last):
            self.counters.bad_segment += 1
            return None
        return index

    def _mark(self, psn: int) -> bool:
        """Record ``psn``; True if it opened a gap."""
        gap = psn > self.highest + 1
        self.highest = max(self.highest, psn)
        if psn != self.cum:
            self.ooo.add(psn)
            self.ooo_count += 1
            return gap
        self.cum += 1
        while self.cum in self.ooo:
            self.ooo.discard(self.cum)
            self.cum += 1
        self.ooo_count = 0
        return gap

    def _complete(self, msn: int, msg: InMessage, now: float) -> None:
        del self.inbox[msn]
        self.done[msn] = msg
        while self.next_msn in self.done:
            m = self.done.pop(self.next_msn)
            m.view.release()
            self.held += len(m.buf)
            self.counters.messages_received += 1
            self._emit(events.MessageReceived(now, self.conn, self.next_msn, m.buf))
            self.next_msn += 1

    def _note(self, ev: int, ts: int, bits: int) -> None:
        t = self.trigger  # updated in place: one per packet
        t.ev, t.ts, t.has_ts = ev, ts, bool(bits & TS)

    def consumed(self, n: int) -> bool:
        """The application read a message of ``n`` bytes; True if a window update is due."""
        self.held -= n
        return self.rwnd - self.advertised >= max(self.cfg.rcvbuf // 4, self.cfg.mss)

    def owe_sack(self) -> None:
        """A SACK is owed, to be built when it is sent: the delayed-ACK timer has
        nothing left to do until then (a deadline left in the past would fire again)."""
        self.ack_deadline = math.inf

    def sack(self, ce: bool = False) -> frames.SackHeader:
        """A SACK of the current state reflecting the last trigger."""
        base = max(self.cum, self.highest - (SACK_BITMAP_BITS - 1))
        bitmap = 0
        ooo = self.ooo
        if len(ooo) < SACK_BITMAP_BITS:  # usually a few PSNs: walk them, not 64 bits
            for psn in ooo:
                if 0 <= psn - base < SACK_BITMAP_BITS:
                    bitmap |= 1 << (psn - base)
        else:
            for i in range(SACK_BITMAP_BITS):
                if base + i in ooo:
                    bitmap |= 1 << i
        t = self.trigger
        bits = (TS if t.has_ts else 0) | (ECN_ECHO if ce else 0)
        self._since_sack = 0
        self.ack_deadline = math.inf
        self.advertised = self.rwnd
        return _new_sack_header(
            self.commons.get(Opcode.SACK, bits),
            self.cum & MASK32,
            base & MASK32,
            bitmap,
            t.ev,
            t.ts,
            min(self.ooo_count, 0xFFFF),
            0,
            self.advertised,
        )
