"""The receiver's placement in C (csrc/mrc_rx.c): the state as a cffi struct mrc_rx_state
(protocol/rxstate.py), with the methods of rxplace.py's ``RxState``, the receiver's one
way to either twin. Not compiled by mypyc: it is the C side of the twin."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any, Final

from mrc_transport import backend
from mrc_transport.wire.burst import CRecords
from mrc_transport.wire.records import RX_REC, RxRec

from .rxplace import MSG_FREE, ring_size
from .rxstate import C_CONSTANTS, TAKEN, RxTaken

_TAKEN: Final = struct.Struct(f"={len(TAKEN)}Q")
"""rxstate.py ``TAKEN``: uint64_t members, one after the other in the struct."""
_ZEROS: Final = bytes(_TAKEN.size)
C_BUFFERS: Final = 256  # buffers whose C views push_spare keeps (ours)

if backend.FASTPATH:
    from mrc_transport._fastpath import ffi as _ffi
    from mrc_transport._fastpath import lib as _lib

    for _name, _value in C_CONSTANTS.items():
        assert getattr(_lib, _name) == _value, _name


class CRxState:
    """struct mrc_rx_state, its arrays, and the buffers its messages point into (kept
    alive here while the C side holds their addresses)."""

    def __init__(
        self, seg_size: int, mss: int, max_message: int, reorder_window: int,
        msn_window: int, sack_every_bytes: int, ack_delay: float, initial_psn: int,
    ) -> None:  # fmt: skip
        if not backend.FASTPATH:
            raise RuntimeError("the C fast path is not loaded (MRC_PUREPYTHON=1 or not built)")
        self.c = self.fields = c = _ffi.new("struct mrc_rx_state *")
        """The struct itself (the receiver reads its members here)."""
        self._ooo = _ffi.new("uint8_t[]", ring_size(reorder_window))
        self._msgs = _ffi.new("struct mrc_rx_msg[]", ring_size(msn_window))
        c.seg_size, c.mss, c.max_message = seg_size, mss, max_message
        c.reorder_window, c.msn_window = reorder_window, msn_window
        c.sack_every_bytes, c.ack_delay = sack_every_bytes, ack_delay
        c.ooo_mask, c.msg_mask = len(self._ooo) - 1, len(self._msgs) - 1
        c.ooo, c.msgs = self._ooo, self._msgs
        c.cum, c.highest, c.next_msn = initial_psn, initial_psn - 1, 0
        c.ack_deadline = math.inf
        first = TAKEN[0].name
        self._taken = memoryview(_ffi.buffer(_ffi.addressof(c[0], first), _TAKEN.size))
        self._seg = seg_size
        self._bufs: dict[int, Any] = {}  # slot -> what its message points into
        self._placed: list[Any] = [None] * len(self._msgs)  # each slot's own flags
        self._spares: list[Any] = []  # (bytearray, C buffer, flags) per spare
        self._c_bufs: dict[int, Any] = {}  # id(buffer) -> (buffer, C buffer, flags)
        self._recs = _ffi.new("struct mrc_rx_rec[]", 1)
        self._recs_view = memoryview(_ffi.buffer(self._recs))

    def __getattr__(self, name: str) -> Any:
        """The struct's members, by the names rxplace.py ``RxState`` has (for the twins'
        tests)."""
        if name == "c":  # not made yet: no recursion through it
            raise AttributeError(name)
        return getattr(self.c, name)

    def prepare(
        self, recs: Sequence[RxRec], view: memoryview, start: int, stop: int
    ) -> tuple[Any, Any]:
        """Records ``start:stop`` of a burst and its buffer as ``place`` takes them: the C
        records and buffer of a burst decoded in C (``CRecords``) as they are; records
        decoded in Python (a burst, or one packet) packed into C records at the same
        indexes."""
        if isinstance(recs, CRecords):
            return recs.c_buf, recs.c_recs
        if len(self._recs) < stop:
            self._recs = _ffi.new("struct mrc_rx_rec[]", stop)
            self._recs_view = memoryview(_ffi.buffer(self._recs))
        for i in range(start, stop):
            RX_REC.pack_into(self._recs_view, i * RX_REC.size, *recs[i])
        return _ffi.from_buffer(view), self._recs

    def place(self, buf: Any, recs: Any, start: int, stop: int, conn: int, now: float) -> int:
        """rxplace.py ``place`` in C, of what ``prepare`` made."""
        return int(_lib.mrc_rx_place(self.c, buf, recs, start, stop, conn, now))

    def take(self) -> RxTaken:
        """``RxState.take``: one read of the struct's ``TAKEN`` members and one write of
        zeros."""
        out = RxTaken(_TAKEN.unpack_from(self._taken))
        self._taken[:] = _ZEROS
        return out

    def open_message(self, slot: int, msn: int, buf: bytearray, segs: int) -> None:
        """Put message ``msn`` (its buffer, ``segs`` segments) in table slot ``slot``;
        the slot's flags array is kept for the next message that fits in it."""
        c_buf = _ffi.from_buffer(buf, require_writable=True)
        placed = self._placed[slot]
        if placed is None or len(placed) < segs:
            placed = self._placed[slot] = _ffi.new("uint8_t[]", segs)
        self._bufs[slot] = c_buf
        _lib.mrc_rx_open(self.c, slot, msn, c_buf, len(buf), placed, segs)

    def push_spare(self, buf: bytearray) -> None:
        """A recycled buffer on top of the spares (at most MRC_RX_SPARES). Its C buffer
        and flags are made once per buffer: an application recycles the same few."""
        known = self._c_bufs.get(id(buf))
        if known is None or known[0] is not buf:
            if len(self._c_bufs) >= C_BUFFERS:
                self._c_bufs.clear()  # buffers come and go: start over
            segs = max(1, -(-len(buf) // self._seg))
            c_buf = _ffi.from_buffer(buf, require_writable=True)
            known = self._c_bufs[id(buf)] = (buf, c_buf, _ffi.new("uint8_t[]", segs))
        if _lib.mrc_rx_push_spare(self.c, known[1], known[2], len(buf)):
            self._spares.append(known)

    def pop_spare(self, n: int) -> bytearray | None:
        """The top spare if it is ``n`` bytes long (taken), else None."""
        if not self._spares or len(self._spares[-1][0]) != n:
            return None
        self.c.n_spares -= 1
        buf: bytearray = self._spares.pop()[0]
        return buf

    def opened_buffers(self, n: int) -> list[tuple[int, bytearray]]:
        """The slots and buffers of the ``n`` messages the latest calls opened with
        spares, in order (the C side took them off the top of the stack)."""
        out = []
        for k in range(n):
            buf, c_buf, placed = self._spares.pop()
            slot = int(self.c.opened[k])
            # the flags are the buffer's (push_spare), not the slot's: a message the core
            # opens in this slot later must not share them with this buffer's next one
            self._bufs[slot] = (c_buf, placed)
            out.append((slot, buf))
        return out

    def close_message(self, slot: int) -> None:
        """Free slot ``slot`` (its message delivered), letting go of its buffer."""
        self.c.msgs[slot].state = MSG_FREE
        self._bufs.pop(slot, None)
