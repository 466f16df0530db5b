"""The receiver's placement of a burst's data packets, in one call per burst: the
pure-Python twin of csrc/mrc_rx.c ``mrc_rx_place``, and the state both share.

A NIC places each data packet of a burst and tells the host what changed; here the core
keeps the decisions (new buffers, NACKs, SACKs echoing CE, events) and the placement
takes every packet it can whole: the duplicate test, the segment grid, the copy into its
message, the cumulative PSN and the out-of-order set, delivery in MSN order, the counts,
the SACK's trigger and whether a SACK is due (the rules of the receiver's per-packet
path before it, protocol/receiver.py). A new message takes the top recycled buffer
(``spares``, the receiver's own stack) when it has the message's length, as the receiver
would; else the placement stops before the record and says why (``why``), so the core
handles that record and calls again. With equal messages whose buffers the application
recycles, a burst is one call: stopping at each new message cost as much as the
per-packet work it saved (docs/measurements.md, 2026-12-06).

``RxState`` is struct mrc_rx_state field by field, the out-of-order set a ring of flags by
PSN and the messages a table by MSN (both powers of two at least the windows they cover,
so no two PSNs or MSNs in a window share an entry); the C state is the same struct made by
cffi (io/rxfast.py), so the core reads and writes either through the same names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mrc_transport.wire.records import RX_DATA, RxRec

from .serial import expand

MSG_FREE, MSG_OPEN, MSG_DONE, MSG_DELIVERED = 0, 1, 2, 3
"""A message slot: free, segments missing, complete behind an earlier message, delivered
(the core takes it out)."""
END, OTHER_RECORD, NEW_MESSAGE, OUT_OF_WINDOW, CE, FULL = 0, 1, 2, 3, 4, 5
"""Why ``place`` stopped: csrc/mrc_fast.h MRC_RX_*."""
MAX_DELIVERED = 64
SPARES = 8  # csrc/mrc_fast.h MRC_RX_SPARES
TS_FLAG, ACK_REQ_FLAG = 0x02, 0x08  # wire/frames.py Flags


class RxMsg:
    """struct mrc_rx_msg: a message being reassembled."""

    __slots__ = ("buf", "len", "missing", "msn", "placed", "state")

    def __init__(self) -> None:
        self.msn = 0
        self.buf: memoryview | None = None
        self.placed = bytearray()
        self.len = 0
        self.missing = 0
        self.state = MSG_FREE


class RxCounts:
    """struct mrc_rx_counts."""

    __slots__ = (
        "bad_segment", "bytes", "ce", "data", "dup_packets", "dup_segment",
        "inconsistent_header", "messages", "msn_out_of_window", "packets",
    )  # fmt: skip

    def __init__(self) -> None:
        self.packets = self.data = self.bytes = self.ce = self.dup_packets = 0
        self.inconsistent_header = self.bad_segment = self.msn_out_of_window = 0
        self.dup_segment = self.messages = 0


class RxState:
    """struct mrc_rx_state in Python."""

    def __init__(
        self, seg_size: int, mss: int, max_message: int, reorder_window: int,
        msn_window: int, sack_every_bytes: int, ack_delay: float, initial_psn: int,
    ) -> None:  # fmt: skip
        self.seg_size, self.mss, self.max_message = seg_size, mss, max_message
        self.reorder_window, self.msn_window = reorder_window, msn_window
        self.sack_every_bytes, self.ack_delay = sack_every_bytes, ack_delay
        self.ooo_mask = ring_size(reorder_window) - 1
        self.msg_mask = ring_size(msn_window) - 1
        self.ooo = bytearray(self.ooo_mask + 1)
        self.msgs = [RxMsg() for _ in range(self.msg_mask + 1)]
        self.cum, self.highest, self.next_msn = initial_psn, initial_psn - 1, 0
        self.ooo_count = self.since_sack = self.held = 0
        self.ack_deadline = math.inf
        self.trig_ev = self.trig_ts = self.trig_has_ts = 0
        self.sacks = self.why = self.n_delivered = 0
        self.delivered = [0] * MAX_DELIVERED
        self.counts = RxCounts()
        self.n_opened = 0
        self.opened = [0] * MAX_DELIVERED
        self.spares: list[bytearray] = []
        """Recycled buffers, a stack: a new message of the top one's length takes it."""
        self._opened_bufs: list[bytearray] = []

    def open_message(self, slot: int, msn: int, buf: bytearray, segs: int) -> None:
        """Put message ``msn`` (its buffer, ``segs`` segments) in table slot ``slot``."""
        m = self.msgs[slot]
        m.msn, m.buf, m.placed, m.len = msn, memoryview(buf), bytearray(segs), len(buf)
        m.missing, m.state = segs, MSG_OPEN

    def take(self) -> tuple[int, ...]:
        """What the latest ``place`` calls did, and zero it: why, SACKs due, messages
        delivered, messages opened with spares, then the counts (struct mrc_rx_state's
        order)."""
        c = self.counts
        out = (
            self.why, self.sacks, self.n_delivered, self.n_opened, c.packets, c.data,
            c.bytes, c.ce, c.dup_packets, c.inconsistent_header, c.bad_segment,
            c.msn_out_of_window, c.dup_segment, c.messages,
        )  # fmt: skip
        self.why = self.sacks = self.n_delivered = self.n_opened = 0
        self.counts = RxCounts()
        return out

    def push_spare(self, buf: bytearray) -> None:
        """A recycled buffer on top of the spares (at most ``SPARES``)."""
        if len(self.spares) < SPARES:
            self.spares.append(buf)

    def pop_spare(self, n: int) -> bytearray | None:
        """The top spare if it is ``n`` bytes long (taken), else None."""
        if self.spares and len(self.spares[-1]) == n:
            return self.spares.pop()
        return None

    def opened_buffers(self, n: int) -> list[tuple[int, bytearray]]:
        """The slots and buffers of the ``n`` messages the latest calls opened with
        spares, in order."""
        bufs, self._opened_bufs = self._opened_bufs, []
        return [(self.opened[k], bufs[k]) for k in range(n)]

    def close_message(self, slot: int) -> None:
        """Free slot ``slot`` (its message delivered), letting go of its buffer."""
        m = self.msgs[slot]
        m.state = MSG_FREE
        if m.buf is not None:
            m.buf.release()
            m.buf = None


def ring_size(window: int) -> int:
    """The smallest power of two at least ``window``."""
    return 1 << max(window - 1, 0).bit_length()


def _note(st: RxState, flags: int, ts: int, ev: int) -> None:
    st.trig_ev, st.trig_ts, st.trig_has_ts = ev, ts, 1 if flags & TS_FLAG else 0


BAD_HEADER, BAD_SEGMENT = -1, -2
"""``grid_index``'s refusals: lengths that contradict each other or a limit, a payload off
the message's segment grid."""


def grid_index(
    seg_size: int, mss: int, max_message: int, off: int, msg_len: int, n: int
) -> int:  # fmt: skip
    """The segment a payload of ``n`` bytes at ``off`` fills in a message of ``msg_len``
    bytes cut every ``seg_size`` bytes (protocol/receiver.py: every segment but the last
    is full, the last ends the message), else BAD_HEADER or BAD_SEGMENT."""
    end = off + n
    if n > mss or end > msg_len or msg_len > max_message:
        return BAD_HEADER
    if msg_len == 0:
        return 0
    full = n == seg_size
    last = 0 < n < seg_size and end == msg_len
    if off % seg_size or not (full or last):
        return BAD_SEGMENT
    return off // seg_size


def segment_index(st: RxState, off: int, msg_len: int, n: int) -> int:
    """``grid_index`` for ``st``'s connection, a refusal counted: the index, or -1."""
    index = grid_index(st.seg_size, st.mss, st.max_message, off, msg_len, n)
    if index == BAD_HEADER:
        st.counts.inconsistent_header += 1
    elif index == BAD_SEGMENT:
        st.counts.bad_segment += 1
    return max(index, -1)


def _mark(st: RxState, psn: int) -> bool:
    """Record ``psn``; True if it opened a gap."""
    gap = psn > st.highest + 1
    st.highest = max(st.highest, psn)
    if psn != st.cum:
        st.ooo[psn & st.ooo_mask] = 1
        st.ooo_count += 1
        return gap
    st.cum += 1
    ooo, mask = st.ooo, st.ooo_mask
    while ooo[st.cum & mask]:
        ooo[st.cum & mask] = 0
        st.cum += 1
    st.ooo_count = 0
    return gap


def _deliver(st: RxState) -> None:
    """Each message from ``next_msn`` on that is complete, delivered in MSN order."""
    while st.n_delivered < MAX_DELIVERED:
        slot = st.next_msn & st.msg_mask
        m = st.msgs[slot]
        if m.state != MSG_DONE or m.msn != st.next_msn:
            return
        m.state = MSG_DELIVERED
        st.delivered[st.n_delivered] = slot
        st.n_delivered += 1
        st.held += m.len
        st.counts.messages += 1
        st.next_msn += 1


def place(
    st: RxState, buf: memoryview, recs: Sequence[RxRec], start: int, stop: int, conn: int,
    now: float,
) -> int:  # fmt: skip
    """``mrc_rx_place``: records ``start:stop`` of a burst (payloads in ``buf``) for
    connection ``conn``; the index of the first record not taken, ``st.why`` saying why."""
    st.why = END
    _deliver(st)
    i = start
    while i < stop:
        rec = recs[i]
        if rec[0] != RX_DATA or rec[1] != conn:
            st.why = OTHER_RECORD
            return i
        if st.n_delivered >= MAX_DELIVERED:
            st.why = FULL
            return i
        _, _, _, flags, psn32, msn32, off, msg_len, ts, at, n, ev, ce = rec
        psn = expand(psn32, st.cum)
        if psn >= st.cum + st.reorder_window:
            st.why = OUT_OF_WINDOW
            return i
        msn = expand(msn32, st.next_msn)
        m = st.msgs[msn & st.msg_mask]
        known = m.state != MSG_FREE and m.msn == msn
        in_window = st.next_msn <= msn < st.next_msn + st.msn_window
        dup = psn < st.cum or st.ooo[psn & st.ooo_mask] != 0
        spare = (
            bool(st.spares) and len(st.spares[-1]) == msg_len
            and st.n_opened < MAX_DELIVERED and m.state == MSG_FREE
        )  # fmt: skip
        if not dup and in_window and not known and not spare:
            st.why = NEW_MESSAGE
            return i
        st.counts.packets += 1
        i += 1
        if dup:
            st.counts.dup_packets += 1
            _note(st, flags, ts, ev)
            if ce:
                st.why = CE
                return i
            st.sacks += 1
            st.ack_deadline = math.inf
            continue
        index = segment_index(st, off, msg_len, n)
        if index < 0:
            continue
        if not in_window or m.state == MSG_DONE:
            st.counts.msn_out_of_window += 1
            continue
        if not known:  # a new message: the top spare is its buffer
            spare_buf = st.spares.pop()
            st._opened_bufs.append(spare_buf)
            st.opened[st.n_opened] = msn & st.msg_mask
            st.n_opened += 1
            segs = -(-msg_len // st.seg_size) if msg_len else 1
            st.open_message(msn & st.msg_mask, msn, spare_buf, segs)
        if m.len != msg_len:
            st.counts.inconsistent_header += 1
            continue
        if m.placed[index]:
            st.counts.dup_segment += 1
            continue
        assert m.buf is not None
        m.buf[off : off + n] = buf[at : at + n]
        m.placed[index] = 1
        m.missing -= 1
        st.counts.data += 1
        st.counts.bytes += n
        if ce:
            st.counts.ce += 1
        gap = _mark(st, psn)
        if not m.missing:
            m.state = MSG_DONE
            _deliver(st)
        st.since_sack += n
        _note(st, flags, ts, ev)
        if ce:
            st.why = CE
            return i
        if gap or flags & ACK_REQ_FLAG or st.since_sack >= st.sack_every_bytes:
            st.sacks += 1
            st.ack_deadline = math.inf
        elif st.ack_deadline == math.inf:
            st.ack_deadline = now + st.ack_delay
    return i
