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

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from mrc_transport import backend
from mrc_transport.frozen import fast_constructor
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Opcode
from mrc_transport.wire.records import DataField, RxRec

from . import events, rxplace
from .commons import ECN_ECHO, RESTORE_WINDOW, TS, Commons
from .config import Config
from .counters import ConnCounters
from .rxstate import RxTaken
from .serial import MASK32, expand

SACK_BITMAP_BITS: Final = frames.SACK_BITMAP_BITS
_new_sack_header: Final = fast_constructor(
    frames.SackHeader
)  # one per SACK: without the frozen __init__
_new_message_received: Final = fast_constructor(events.MessageReceived)  # one per message


class Receiver:
    """Receiving state of one connection.

    Data packets come in one way, ``receive``: records of a burst (wire/records.py), a
    single packet being a burst of one. The per-packet state (cumulative PSN,
    out-of-order set, the messages being placed, the trigger, the counts) lives in the
    placement's state (protocol/rxstate.py), kept by one of two twins with the same
    methods: rxfast.py's ``CRxState`` (the C placement) when the C fast path is built,
    else rxplace.py's ``RxState``; ``receive`` hands it a run of a burst's data packets,
    one call for the run. The receiver keeps what needs Python: the buffers, delivery
    events, NACKs, SACKs and the window."""

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
        if backend.FASTPATH:
            from . import rxfast

            self._st: Any = rxfast.CRxState(*args)
        else:
            self._st = rxplace.RxState(*args)
        self.s: Any = self._st.fields
        """The placement state's members (the C struct itself, or the ``RxState``)."""
        self._msg_mask = int(self.s.msg_mask)
        self._bufs: list[bytearray | None] = [None] * (self._msg_mask + 1)
        """Each table slot's message buffer (``_open``)."""
        self.why = rxplace.END
        """Why the latest ``receive`` stopped (rxplace.py)."""
        self._packets = 0
        self._sacks = 0
        self.advertised = cfg.rcvbuf
        self._penalized = False
        """The latest SACK carried a window penalty: the first without says so (RW)."""

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
    def receive(
        self, recs: Sequence[RxRec], view: memoryview, start: int, stop: int, now: float
    ) -> int:
        """Place records ``start:stop`` of a burst (payloads in ``view``; a burst decoded
        in C as its ``CRecords``) up to the first it cannot take whole; that index,
        ``why`` saying why (rxplace.py: another record, a PSN beyond the window, CE).
        New messages get their buffers here; delivered messages become events. Each
        record taken is counted for ``take_packets``, each SACK it made due for
        ``take_sacks``."""
        st = self._st
        buf, placed = st.prepare(recs, view, start, stop)
        i = start
        while True:
            i = int(st.place(buf, placed, i, stop, self.conn, now))
            taken: RxTaken = st.take()
            self._sacks += taken.sacks
            if taken.n_opened:
                for slot, msg_buf in st.opened_buffers(taken.n_opened):
                    self._bufs[slot] = msg_buf
            if taken.n_delivered:
                self._deliver(taken.n_delivered, now)
            self._count(taken)
            why = taken.why
            if why == rxplace.FULL:
                continue
            if why != rxplace.NEW_MESSAGE:
                self.why = why
                return i
            if not self._open(recs[i]):
                self._packets += 1  # dropped, counted: the run goes on after it
                i += 1

    def _open(self, rec: RxRec) -> bool:
        """A buffer in the table for the message of data record ``rec``, unless the
        packet does not fit the segment grid (dropped and counted, as the placement
        counts it)."""
        msg_len = rec[DataField.MSG_LEN]
        if not self._fits(rec[DataField.MSG_OFFSET], msg_len, rec[DataField.PAYLOAD_LEN]):
            return False
        msn = expand(rec[DataField.MSN], int(self.s.next_msn))
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

    def _count(self, taken: RxTaken) -> None:
        """The placement's counts into the counters."""
        self._packets += taken.packets
        if not taken.packets:
            return
        c = self.counters
        c.data_received += taken.data
        c.bytes_received += taken.bytes
        c.ce_received += taken.ce
        c.dup_packets += taken.dup_packets
        c.messages_received += taken.messages
        if taken.inconsistent_header or taken.bad_segment:
            c.inconsistent_header += taken.inconsistent_header
            c.bad_segment += taken.bad_segment
        if taken.msn_out_of_window or taken.dup_segment:
            c.msn_out_of_window += taken.msn_out_of_window
            c.dup_segment += taken.dup_segment

    def take_packets(self) -> int:
        """Data packets the placement took since the last call (the connection counts
        them as arrived)."""
        n, self._packets = self._packets, 0
        return n

    def take_sacks(self) -> int:
        """Data packets since the last call that made a SACK due (not those with CE)."""
        n, self._sacks = self._sacks, 0
        return n

    def on_trimmed(self, psn32: int) -> bool:
        """A stub of a data packet a switch trimmed (its payload cut, its DSCP set to a
        trimmed class): whether to NACK it, as it is unless its PSN is here already or
        outside the window,
        so the sender resends it within about one RTT instead of finding the loss from
        SACK gaps or a timeout (docs/protocol.md, "Trimmed data packets")."""
        s = self.s
        cum = int(s.cum)
        psn = expand(psn32, cum)
        if psn < cum or psn >= cum + self.cfg.reorder_window or s.ooo[psn & int(s.ooo_mask)]:
            self.counters.trimmed_ignored += 1
            return False
        self.counters.trimmed_received += 1
        return True

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

    @property
    def penalty(self) -> int:
        """The SACK's window penalty, 0-127 (UEC's 7 bits): zero while the application
        holds at most half of ``rcvbuf``, then growing to 127 as it fills the rest, so
        the sender slows before the window closes (ours: where the penalty starts)."""
        half = self.cfg.rcvbuf // 2
        over = int(self.s.held) - half
        if over <= 0 or half <= 0:
            return 0
        return min(frames.MAX_PENALTY, over * (frames.MAX_PENALTY + 1) // half)

    def sack(
        self, ce: bool = False, now: float | None = None, ports_down: int = 0
    ) -> frames.SackHeader:
        """A SACK of the current state reflecting the last trigger, built at ``now`` (its
        service time: how long the trigger waited here; 0 when not known); ``ports_down``:
        this host's NIC ports that are down, a bit per plane."""
        s = self.s
        cum, highest = int(s.cum), int(s.highest)
        base = max(cum, highest - (SACK_BITMAP_BITS - 1))
        bitmap = 0
        if highest >= cum:  # highest arrived above cum: the out-of-order set is not empty
            ooo, mask = s.ooo, int(s.ooo_mask)
            for i in range(highest - base + 1):
                if ooo[(base + i) & mask]:
                    bitmap |= 1 << i
        penalty = self.penalty
        restore = RESTORE_WINDOW if self._penalized and not penalty else 0
        self._penalized = penalty > 0
        bits = (TS if int(s.trig_has_ts) else 0) | (ECN_ECHO if ce else 0) | restore
        service = 0 if now is None else int((now - float(s.trig_at)) * 1e9)
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
            penalty,
            self.advertised,
            self.counters.bytes_received,
            min(max(service, 0), MASK32),
            ports_down,
        )
