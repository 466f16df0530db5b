"""The receiver's placement of a burst's data packets, in one call per burst: the
pure-Python twin of csrc/mrc_rx.c ``mrc_rx_place``.

A NIC places each data packet of a burst and tells the host what changed; here the core
keeps the decisions (new buffers, NACKs, SACKs echoing CE, events) and the placement
takes every packet it can whole: the duplicate test, the segment grid, the copy into its
message, the cumulative PSN and the out-of-order set, delivery in MSN order, the counts,
the SACK's trigger and whether a SACK is due (protocol/receiver.py's rules). A new
message takes the top recycled buffer (``spares``, the receiver's own stack) when it has
the message's length, as the receiver would; else the placement stops before the record
and says why (``why``), so the core opens that message and calls again. With equal
messages whose buffers the application recycles, a burst is one call.

The state is protocol/rxstate.py's, member for member the C struct: ``RxState`` holds
it in Python (the out-of-order set a ring of flags by PSN and the messages a table by
MSN, both powers of two at least the windows they cover, so no two PSNs or MSNs in a
window share an entry). Both twins have the same methods (``RxState`` here, rxfast.py's
``CRxState``), which are all the receiver calls.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Final

from mrc_transport.wire.records import RX_DATA, DataField, RxRec

from .rxstate import MAX_DELIVERED, MSG, SPARES, STATE, TAKEN, RxTaken, Struct, slots
from .serial import expand

MSG_FREE, MSG_OPEN, MSG_DONE, MSG_DELIVERED = 0, 1, 2, 3
"""A message slot: free, segments missing, complete behind an earlier message, delivered
(the core takes it out)."""
END, OTHER_RECORD, NEW_MESSAGE, OUT_OF_WINDOW, CE, FULL = 0, 1, 2, 3, 4, 5
"""Why ``place`` stopped: csrc/mrc_fast.h MRC_RX_*."""
TAKE_NEXT: Final = -1
"""``_place_one``: the record is taken (placed, counted or dropped); go on."""
TS_FLAG, ACK_REQ_FLAG = 0x02, 0x08  # wire/frames.py Flags

_TAKEN_NAMES: Final = tuple(f.name for f in TAKEN)
_read_taken: Final = operator.attrgetter(*_TAKEN_NAMES)


class RxMsg(Struct):
    """struct mrc_rx_msg (rxstate.py ``MSG``): ``buf`` a memoryview of the message's
    buffer, ``placed`` a bytearray of flags."""

    __slots__ = slots(MSG)
    FIELDS = MSG


class RxState(Struct):
    """struct mrc_rx_state (rxstate.py ``STATE``) in Python: ``ooo`` a bytearray, ``msgs``
    a list of ``RxMsg``, ``spares`` a list of bytearrays (None above ``n_spares``)."""

    __slots__ = slots(STATE, "opened_bufs")
    FIELDS = STATE

    def __init__(
        self, seg_size: int, mss: int, max_message: int, reorder_window: int,
        msn_window: int, sack_every_bytes: int, ack_delay: float, initial_psn: int,
    ) -> None:  # fmt: skip
        super().__init__()
        self.seg_size, self.mss, self.max_message = seg_size, mss, max_message
        self.reorder_window, self.msn_window = reorder_window, msn_window
        self.sack_every_bytes, self.ack_delay = sack_every_bytes, ack_delay
        self.ooo_mask = ring_size(reorder_window) - 1
        self.msg_mask = ring_size(msn_window) - 1
        self.ooo = bytearray(self.ooo_mask + 1)
        self.msgs = [RxMsg() for _ in range(self.msg_mask + 1)]
        self.cum, self.highest = initial_psn, initial_psn - 1
        self.ack_deadline = math.inf
        self.opened_bufs: list[bytearray] = []
        """The buffers of the messages opened with spares, in ``opened``'s order."""

    @property
    def fields(self) -> RxState:
        """The struct's members (the receiver reads them here, as in the C struct)."""
        return self

    def prepare(
        self, recs: Sequence[RxRec], view: memoryview, start: int, stop: int
    ) -> tuple[memoryview, Sequence[RxRec]]:
        """Records ``start:stop`` of a burst and its buffer as ``place`` takes them: as
        they are."""
        return view, recs

    def place(
        self, buf: memoryview, recs: Sequence[RxRec], start: int, stop: int, conn: int,
        now: float,
    ) -> int:  # fmt: skip
        """``place`` of this state."""
        return place(self, buf, recs, start, stop, conn, now)

    def take(self) -> RxTaken:
        """What the latest ``place`` calls did (rxstate.py ``TAKEN``), and zero it."""
        out = RxTaken(_read_taken(self))
        for name in _TAKEN_NAMES:
            setattr(self, name, 0)
        return out

    def open_message(self, slot: int, msn: int, buf: bytearray, segs: int) -> None:
        """Put message ``msn`` (its buffer, ``segs`` segments) in table slot ``slot``."""
        m = self.msgs[slot]
        m.msn, m.buf, m.placed, m.len = msn, memoryview(buf), bytearray(segs), len(buf)
        m.missing, m.state = segs, MSG_OPEN

    def push_spare(self, buf: bytearray) -> None:
        """A recycled buffer on top of the spares (at most ``SPARES``)."""
        if self.n_spares < SPARES:
            self.spares[self.n_spares] = buf
            self.n_spares += 1

    def pop_spare(self, n: int) -> bytearray | None:
        """The top spare if it is ``n`` bytes long (taken), else None."""
        if not self.n_spares or len(self.spares[self.n_spares - 1]) != n:
            return None
        self.n_spares -= 1
        buf: bytearray = self.spares[self.n_spares]
        self.spares[self.n_spares] = None
        return buf

    def opened_buffers(self, n: int) -> list[tuple[int, bytearray]]:
        """The slots and buffers of the ``n`` messages the latest calls opened with
        spares, in order."""
        bufs, self.opened_bufs = self.opened_bufs, []
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
        st.inconsistent_header += 1
    elif index == BAD_SEGMENT:
        st.bad_segment += 1
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
        st.messages += 1
        st.next_msn += 1


def place(
    st: RxState, buf: memoryview, recs: Sequence[RxRec], start: int, stop: int, conn: int,
    now: float,
) -> int:  # fmt: skip
    """``mrc_rx_place``: records ``start:stop`` of a burst (payloads in ``buf``) for
    connection ``conn``; the index of the first record not taken, ``st.why`` saying why
    (after the record for CE: its SACK echoes it now)."""
    st.why = END
    _deliver(st)
    for i in range(start, stop):
        why = _place_one(st, buf, recs[i], conn, now)
        if why != TAKE_NEXT:
            st.why = why
            return i + 1 if why == CE else i
    return stop


def _place_one(st: RxState, buf: memoryview, rec: RxRec, conn: int, now: float) -> int:
    """One record: ``TAKE_NEXT`` when it is taken, else why to stop (before it, or after
    it for CE). A message not yet in the table needs a buffer from the core: that is
    decided before any state changes, so the core can open it and call again."""
    if rec[DataField.KIND] != RX_DATA or rec[DataField.DST_CONN] != conn:
        return OTHER_RECORD
    if st.n_delivered >= MAX_DELIVERED:
        return FULL
    psn = expand(rec[DataField.PSN], st.cum)
    if psn >= st.cum + st.reorder_window:
        return OUT_OF_WINDOW  # the core NACKs it: a control packet
    msn = expand(rec[DataField.MSN], st.next_msn)
    m = st.msgs[msn & st.msg_mask]
    known = m.state != MSG_FREE and m.msn == msn
    in_window = st.next_msn <= msn < st.next_msn + st.msn_window
    dup = psn < st.cum or st.ooo[psn & st.ooo_mask] != 0
    msg_len = rec[DataField.MSG_LEN]
    if not dup and in_window and not known and not _spare_fits(st, m, msg_len):
        return NEW_MESSAGE
    st.packets += 1
    if dup:
        return _duplicate(st, rec, now)
    off, n = rec[DataField.MSG_OFFSET], rec[DataField.PAYLOAD_LEN]
    index = segment_index(st, off, msg_len, n)
    if index < 0:
        return TAKE_NEXT
    if not in_window or m.state == MSG_DONE:
        st.msn_out_of_window += 1
        return TAKE_NEXT
    if not known:  # a new message: the top spare is its buffer
        _open_with_spare(st, msn, msg_len)
    if m.len != msg_len:
        st.inconsistent_header += 1
        return TAKE_NEXT
    if m.placed[index]:
        st.dup_segment += 1
        return TAKE_NEXT
    at = rec[DataField.PAYLOAD_OFF]
    m.buf[off : off + n] = buf[at : at + n]
    m.placed[index] = 1
    m.missing -= 1
    return _placed(st, m, rec, psn, n, now)


def _spare_fits(st: RxState, m: RxMsg, msg_len: int) -> bool:
    """Whether a new message of ``msg_len`` bytes can take the top spare into slot ``m``."""
    return (
        st.n_spares > 0 and len(st.spares[st.n_spares - 1]) == msg_len
        and st.n_opened < MAX_DELIVERED and m.state == MSG_FREE
    )  # fmt: skip


def _open_with_spare(st: RxState, msn: int, msg_len: int) -> None:
    """Open message ``msn`` in its slot with the top spare, listed for the core."""
    st.n_spares -= 1
    spare_buf = st.spares[st.n_spares]
    st.spares[st.n_spares] = None
    slot = msn & st.msg_mask
    st.opened_bufs.append(spare_buf)
    st.opened[st.n_opened] = slot
    st.n_opened += 1
    segs = -(-msg_len // st.seg_size) if msg_len else 1
    st.open_message(slot, msn, spare_buf, segs)


def _note(st: RxState, rec: RxRec, now: float) -> None:
    """``rec`` is the SACK's trigger: its EV and timestamp."""
    st.trig_ev, st.trig_ts = rec[DataField.EV], rec[DataField.TS]
    st.trig_has_ts = 1 if rec[DataField.FLAGS] & TS_FLAG else 0
    st.trig_at = now


def _duplicate(st: RxState, rec: RxRec, now: float) -> int:
    """A duplicate PSN: counted, and a SACK due now (with CE: echoing it)."""
    st.dup_packets += 1
    _note(st, rec, now)
    if rec[DataField.CE]:
        return CE
    st.sacks += 1
    st.ack_deadline = math.inf
    return TAKE_NEXT


def _placed(st: RxState, m: RxMsg, rec: RxRec, psn: int, n: int, now: float) -> int:
    """After ``n`` bytes of ``rec`` (PSN ``psn``) went into message ``m``: the counts, the
    cumulative PSN, delivery, the trigger, and whether a SACK is due now, later or (CE)
    echoing the mark."""
    st.data += 1
    st.bytes += n
    ce = rec[DataField.CE]
    if ce:
        st.ce += 1
    gap = _mark(st, psn)
    if not m.missing:
        m.state = MSG_DONE
        _deliver(st)
    st.since_sack += n
    _note(st, rec, now)
    if ce:
        return CE
    if gap or rec[DataField.FLAGS] & ACK_REQ_FLAG or st.since_sack >= st.sack_every_bytes:
        st.sacks += 1
        st.ack_deadline = math.inf
    elif st.ack_deadline == math.inf:
        st.ack_deadline = now + st.ack_delay
    return TAKE_NEXT
