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
from collections.abc import Callable, Sequence
from typing import Any, Final

from mrc_transport import backend
from mrc_transport.frozen import fast_constructor
from mrc_transport.wire import frames
from mrc_transport.wire.burst import CRecords
from mrc_transport.wire.frames import Opcode
from mrc_transport.wire.records import RX_DATA, RxRec

from . import events, rxplace
from .commons import ECN_ECHO, TS, Commons
from .config import Config
from .counters import ConnCounters
from .serial import MASK32, expand

SACK_BITMAP_BITS: Final = frames.SACK_BITMAP_BITS
Payload = bytes | bytearray | memoryview
"""A data packet's payload: copied into its message's buffer, never kept."""
_new_sack_header: Final = fast_constructor(
    frames.SackHeader
)  # one per SACK: without the frozen __init__
_new_message_received: Final = fast_constructor(events.MessageReceived)  # one per message


class Verdict(enum.Enum):
    """What the connection should do after a data packet."""

    DROP = "drop"
    DELAY = "delay"
    SACK = "sack"
    NACK = "nack"


class Receiver:
    """Receiving state of one connection.

    The per-packet state (cumulative PSN, out-of-order set, the messages being placed, the
    trigger, the counts) lives in the placement's state (rxplace.py ``RxState``, or the C
    struct of rxfast.py when the C fast path is built), which ``place_run`` hands a run of
    a burst's data packets to, one call for the run; the receiver keeps what needs
    Python: the buffers, delivery events, NACKs, SACKs and the window."""

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
        args = (
            self.seg_size, cfg.mss, cfg.max_message, cfg.reorder_window, cfg.msn_window,
            cfg.sack_every_bytes, cfg.ack_delay, initial_psn,
        )  # fmt: skip
        self._c = backend.FASTPATH
        if self._c:
            from . import rxfast

            self._st: Any = rxfast.CRxState(*args)
            self.s: Any = self._st.c
            """The placement's fields (the C struct itself, or the ``RxState``)."""
            self._place: Any = rxfast.place
            self._one = rxfast.OneRecord()
        else:
            self._st = self.s = rxplace.RxState(*args)
            self._place = rxplace.place
        self._msg_mask = int(self.s.msg_mask)
        self._bufs: list[bytearray | None] = [None] * (self._msg_mask + 1)
        """Each table slot's message buffer (``_open``)."""
        self.why = rxplace.END
        """Why the latest ``place_run`` stopped (rxplace.py)."""
        self._packets = 0
        self._sacks = 0
        self.advertised = cfg.rcvbuf

    # -- the placement's state, as the receiver's -----------------------------------------
    @property
    def cum(self) -> int:
        """The cumulative PSN: every PSN below it arrived."""
        return int(self.s.cum)

    @property
    def next_msn(self) -> int:
        """The next message to deliver."""
        return int(self.s.next_msn)

    @property
    def held(self) -> int:
        """Bytes of delivered messages the application has not read yet."""
        return int(self.s.held)

    @property
    def ack_deadline(self) -> float:
        """When a delayed SACK is due (inf: none)."""
        return float(self.s.ack_deadline)

    @property
    def ooo(self) -> set[int]:
        """The PSNs above ``cum`` that arrived (a copy, for tests and reports)."""
        s, cum = self.s, int(self.s.cum)
        mask = int(s.ooo_mask)
        return {p for p in range(cum, cum + int(s.reorder_window)) if s.ooo[p & mask]}

    @property
    def rwnd(self) -> int:
        """Window to advertise, bytes."""
        return max(0, self.cfg.rcvbuf - int(self.s.held))

    # -- data packets ---------------------------------------------------------------------
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
        whether to SACK now: ``place_run`` of a run of one."""
        rec: RxRec = (
            RX_DATA, self.conn, b"", flags, psn32, msn32, msg_offset, msg_len, ts, 0,
            len(payload), ev, 1 if ce else 0,
        )  # fmt: skip
        placed, one = self.counters.data_received, [rec]
        if self._c:
            buf, recs = self._one.put(rec, payload)
            self.place_run(buf, recs, one, 0, 1, now)
        else:
            self.place_run(payload, one, one, 0, 1, now)
        self.take_packets()  # the connection counted it as it arrived
        sacks = self.take_sacks()  # the caller queues this one SACK
        if self.why == rxplace.OUT_OF_WINDOW:
            self.counters.psn_out_of_window += 1
            return Verdict.NACK
        if self.why == rxplace.CE or sacks:
            return Verdict.SACK
        return Verdict.DELAY if self.counters.data_received > placed else Verdict.DROP

    def place_run(
        self, buf: Any, recs: Any, py_recs: Sequence[RxRec], start: int, stop: int, now: float
    ) -> int:
        """Place records ``start:stop`` of a burst (``recs`` and ``buf`` as the placement
        takes them; ``py_recs`` the same records as tuples) up to the first it cannot take
        whole; that index, ``why`` saying why (rxplace.py). New messages get their
        buffers here; delivered messages become events."""
        i = start
        while True:
            i = int(self._place(self._st, buf, recs, i, stop, self.conn, now))
            why, sacks, delivered, opened, *counts = self._st.take()
            self._sacks += sacks
            if opened:
                for slot, msg_buf in self._st.opened_buffers(opened):
                    self._bufs[slot] = msg_buf
            if delivered:
                self._deliver(delivered, now)
            self._count(counts)
            if why == rxplace.FULL:
                continue
            if why != rxplace.NEW_MESSAGE:
                self.why = why
                return i
            if not self._open(py_recs[i]):
                self._packets += 1  # dropped, counted: the run goes on after it
                i += 1

    def place_records(
        self,
        recs: Sequence[RxRec],
        view: memoryview,
        start: int,
        stop: int,
        now: float,
    ) -> int:
        """``place_run`` of records ``start:stop`` of a burst: the C placement takes the
        C records and buffer of a burst decoded in C (``CRecords``) as they are, and a
        burst decoded in Python packed into C records first; the Python placement takes
        the records as tuples."""
        if not self._c:
            return self.place_run(view, recs, recs, start, stop, now)
        if isinstance(recs, CRecords):
            return self.place_run(recs.c_buf, recs.c_recs, recs, start, stop, now)
        buf, c_recs = self._one.pack(recs, view, start, stop)
        return self.place_run(buf, c_recs, recs, start, stop, now)

    def _open(self, rec: RxRec) -> bool:
        """A buffer in the table for the message of data record ``rec``, unless the
        packet does not fit the segment grid (dropped and counted, as ``on_data`` did
        before allocating)."""
        _, _, _, _, _, msn32, off, msg_len, _, _, n, _, _ = rec
        if not self._fits(off, msg_len, n):
            return False
        msn = expand(msn32, int(self.s.next_msn))
        slot = msn & self._msg_mask
        buf = self._buffer(msg_len)
        self._bufs[slot] = buf
        self._st.open_message(slot, msn, buf, max(1, -(-msg_len // self.seg_size)))
        return True

    def _fits(self, off: int, msg_len: int, n: int) -> bool:
        """Whether a payload of ``n`` bytes at ``off`` fits the segment grid of a message
        of ``msg_len`` bytes (rxplace.py ``grid_index``), counted if not."""
        cfg = self.cfg
        index = rxplace.grid_index(self.seg_size, cfg.mss, cfg.max_message, off, msg_len, n)
        if index == rxplace.BAD_HEADER:
            self.counters.inconsistent_header += 1
        elif index == rxplace.BAD_SEGMENT:
            self.counters.bad_segment += 1
        return index >= 0

    def _deliver(self, n: int, now: float) -> None:
        """The ``n`` messages the placement delivered, in order, become events."""
        s = self.s
        for k in range(n):
            slot = int(s.delivered[k])
            msn = int(s.msgs[slot].msn)
            buf = self._bufs[slot]
            assert buf is not None
            self._bufs[slot] = None
            self._st.close_message(slot)
            self._emit(_new_message_received(now, self.conn, msn, buf))

    def _count(self, counts: list[int]) -> None:
        """The placement's counts (struct mrc_rx_counts' order) into the counters."""
        packets, data, nbytes, ce, dup, inconsistent, bad, msn_out, dup_seg, messages = counts
        self._packets += packets
        if not packets:
            return
        c = self.counters
        c.data_received += data
        c.bytes_received += nbytes
        c.ce_received += ce
        c.dup_packets += dup
        c.messages_received += messages
        if inconsistent or bad or msn_out or dup_seg:
            c.inconsistent_header += inconsistent
            c.bad_segment += bad
            c.msn_out_of_window += msn_out
            c.dup_segment += dup_seg

    def take_packets(self) -> int:
        """Data packets the placement took since the last call (the connection counts
        them as arrived)."""
        n, self._packets = self._packets, 0
        return n

    def take_sacks(self) -> int:
        """Data packets since the last call that made a SACK due (not those with CE)."""
        n, self._sacks = self._sacks, 0
        return n

    def on_trimmed(self, psn32: int) -> Verdict:
        """A stub of a data packet a switch trimmed (its payload cut, its DSCP set to a
        trimmed class): NACK it unless its PSN is here already or outside the window,
        so the sender resends it within about one RTT instead of finding the loss from
        SACK gaps or a timeout (docs/protocol.md, "Trimmed data packets")."""
        s = self.s
        cum = int(s.cum)
        psn = expand(psn32, cum)
        if psn < cum or psn >= cum + self.cfg.reorder_window or s.ooo[psn & int(s.ooo_mask)]:
            self.counters.trimmed_ignored += 1
            return Verdict.DROP
        self.counters.trimmed_received += 1
        return Verdict.NACK

    def _buffer(self, n: int) -> bytearray:
        """A buffer for a message of n bytes: a recycled one of that size, else a new one.
        A recycled buffer keeps its old bytes, which is safe: a message is complete only
        when its segments, which tile it, have all been placed."""
        buf = self._st.pop_spare(n)
        return bytearray(n) if buf is None else buf

    def recycle(self, buf: bytearray) -> None:
        """The application is done with a delivered message's buffer: reuse it for a later
        message of its size (ours: zero-filling a new 128 KB buffer took ~9% of a
        receiver's CPU). Keeps a few, the most recent first."""
        if type(buf) is not bytearray:  # the core writes into it later: fail here, now
            raise TypeError(f"recycle takes a bytearray, not {type(buf).__name__}")
        self._st.push_spare(buf)  # the placement's stack: it opens messages with them

    def consumed(self, n: int) -> bool:
        """The application read a message of ``n`` bytes; True if a window update is due."""
        self.s.held -= n
        return self.rwnd - self.advertised >= max(self.cfg.rcvbuf // 4, self.cfg.mss)

    def owe_sack(self) -> None:
        """A SACK is owed, to be built when it is sent: the delayed-ACK timer has
        nothing left to do until then (a deadline left in the past would fire again)."""
        self.s.ack_deadline = math.inf

    def sack(self, ce: bool = False) -> frames.SackHeader:
        """A SACK of the current state reflecting the last trigger."""
        s = self.s
        cum, highest = int(s.cum), int(s.highest)
        base = max(cum, highest - (SACK_BITMAP_BITS - 1))
        bitmap = 0
        if highest >= cum:  # highest arrived above cum: the out-of-order set is not empty
            ooo, mask = s.ooo, int(s.ooo_mask)
            for i in range(highest - base + 1):
                if ooo[(base + i) & mask]:
                    bitmap |= 1 << i
        bits = (TS if int(s.trig_has_ts) else 0) | (ECN_ECHO if ce else 0)
        s.since_sack = 0
        s.ack_deadline = math.inf
        self.advertised = self.rwnd
        return _new_sack_header(
            self.commons.get(Opcode.SACK, bits),
            cum & MASK32,
            base & MASK32,
            bitmap,
            int(s.trig_ev),
            int(s.trig_ts),
            min(int(s.ooo_count), 0xFFFF),
            0,
            self.advertised,
        )
