"""Burst decoding: the datagrams of one receive burst, each in its slot, into records.

A decoder works on a receive buffer of ``max_pkts`` slots of ``slot_size`` bytes, datagram
i in slot i, described by ``RxMeta`` i as the socket reported it; it makes each datagram's
record (wire/records.py), checked as the untrusted decoder checks a datagram. Two
implementations of ``BurstDecoder``: ``CBurstDecoder``, one C call per burst
(csrc/mrc_fast.c ``mrc_decode_rx_burst``), and its pure-Python twin ``PyBurstDecoder``,
which decodes each datagram with ``wire.decode_datagram_untrusted``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast, overload

from mrc_transport import backend, wire
from mrc_transport.wire.frames import TRIM_REASONS, DataHeader, Ecn
from mrc_transport.wire.records import OTHER_REC, RX_META, RX_REC, RxMeta, RxRec, record_of

if backend.FASTPATH:
    from mrc_transport._fastpath import ffi as _ffi
    from mrc_transport._fastpath import lib as _lib


class BurstDecoder(Protocol):
    """What a receive path needs of a burst decoder."""

    def records(self, metas: Sequence[RxMeta]) -> Sequence[RxRec]:
        """One record per datagram in the slots, datagram i described by metas[i]."""
        ...

    def meta(self, i: int) -> RxMeta:
        """The ``RxMeta`` of datagram i of the last burst decoded."""
        ...


def _check_buffer(buf: bytearray, max_pkts: int, slot_size: int) -> None:
    if max_pkts <= 0 or slot_size <= 0 or max_pkts * slot_size > len(buf):
        raise ValueError(f"{max_pkts} slots of {slot_size} bytes do not fit the buffer")


class PyBurstDecoder:
    """``BurstDecoder`` in Python: a datagram at a time, through the backend's
    ``decode_datagram_untrusted``."""

    def __init__(self, buf: bytearray, max_pkts: int, slot_size: int) -> None:
        _check_buffer(buf, max_pkts, slot_size)
        self.view, self.slot_size = memoryview(buf), slot_size
        self._metas: Sequence[RxMeta] = []

    def records(self, metas: Sequence[RxMeta]) -> Sequence[RxRec]:
        self._metas = metas
        slot = self.slot_size
        return [self._record(i * slot, m) for i, m in enumerate(metas)]

    def meta(self, i: int) -> RxMeta:
        return self._metas[i]

    def _record(self, off: int, meta: RxMeta) -> RxRec:
        n, truncated, tclass, sport, flow, src, dst = meta
        if truncated or n > self.slot_size:
            return OTHER_REC
        try:
            packet = wire.decode_datagram_untrusted(
                self.view[off : off + n], src=src, dst=dst, sport=sport, dport=0,
                tclass=tclass, flow_label=flow,
            )  # fmt: skip
        except wire.BadPacket:
            return OTHER_REC
        if packet.path.dscp in TRIM_REASONS and type(packet.header) is DataHeader:
            return OTHER_REC  # a trimmed stub: NACKed, not placed
        size = len(packet.payload)
        ce = int(packet.path.ecn == Ecn.CE)
        return record_of(packet.header, packet.path.ev, ce, src, off + n - size, size)


class CRecords(Sequence[RxRec]):
    """The records of a burst decoded in C, each unpacked from the C array only when asked
    for. The core reads few of a burst's data records (where a run starts, a new message
    without a spare buffer); the C placement reads the rest where they lie, in ``c_recs``,
    their payloads in ``c_buf``. Unpacked all at once, a record was a tuple of 13 objects
    made and freed per packet (~0.3 us of the receiver's ~8 us a packet here). Valid until
    the decoder's next burst."""

    __slots__ = ("_count", "_view", "c_buf", "c_recs")

    def __init__(self, view: memoryview, count: int, c_buf: Any, c_recs: Any) -> None:
        self._view, self._count = view, count
        self.c_buf, self.c_recs = c_buf, c_recs

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> RxRec: ...

    @overload
    def __getitem__(self, i: slice) -> list[RxRec]: ...

    def __getitem__(self, i: int | slice) -> RxRec | list[RxRec]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("record index out of range")
        return cast(RxRec, RX_REC.unpack_from(self._view, i * RX_REC.size))


class CBurstDecoder:
    """``BurstDecoder`` in C: one ``mrc_decode_rx_burst`` per burst, the records unpacked
    from its C array in one call. Its ``c_metas`` is the C array of the burst's
    ``RxMeta``, which ``mrc_recv_meta`` fills in place (io/batchio.py ``CBurstReceiver``)
    before ``decode``."""

    def __init__(self, buf: bytearray, max_pkts: int, slot_size: int) -> None:
        if not backend.FASTPATH:
            raise RuntimeError("the C fast path is not loaded (MRC_PUREPYTHON=1 or not built)")
        _check_buffer(buf, max_pkts, slot_size)
        if _ffi.sizeof("struct mrc_rx_meta") != RX_META.size:
            raise RuntimeError("struct mrc_rx_meta and RX_META disagree")
        if _ffi.sizeof("struct mrc_rx_rec") != RX_REC.size:
            raise RuntimeError("struct mrc_rx_rec and RX_REC disagree")
        self.max_pkts, self.slot_size = max_pkts, slot_size
        self.c_buf: Any = _ffi.from_buffer(buf, require_writable=True)
        self.c_metas: Any = _ffi.new("struct mrc_rx_meta[]", max_pkts)
        self._meta_view = memoryview(_ffi.buffer(self.c_metas))
        self.c_recs: Any = _ffi.new("struct mrc_rx_rec[]", max_pkts)
        self._rec_view = memoryview(_ffi.buffer(self.c_recs))
        self._count = 0

    def records(self, metas: Sequence[RxMeta]) -> Sequence[RxRec]:
        if len(metas) > self.max_pkts:
            raise ValueError(f"{len(metas)} records for {self.max_pkts} slots")
        for i, meta in enumerate(metas):
            RX_META.pack_into(self._meta_view, i * RX_META.size, *meta)
        return self.decode(len(metas))

    def decode(self, count: int) -> Sequence[RxRec]:
        """The records of the first ``count`` datagrams, as ``c_metas`` describes them."""
        self._count = _lib.mrc_decode_rx_burst(
            self.c_buf, self.slot_size, self.c_metas, count, self.c_recs
        )
        return CRecords(self._rec_view, count, self.c_buf, self.c_recs)

    def metas(self, count: int) -> list[RxMeta]:
        """The first ``count`` entries of ``c_metas``."""
        return list(RX_META.iter_unpack(self._meta_view[: count * RX_META.size]))

    def meta(self, i: int) -> RxMeta:
        if not 0 <= i < self._count:
            raise IndexError(f"datagram {i} of a burst of {self._count}")
        return RX_META.unpack_from(self._meta_view, i * RX_META.size)
