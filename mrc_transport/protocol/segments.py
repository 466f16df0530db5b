"""Message segmentation: a message's packets, and how new data leaves the core in runs.

Theory of operation
-------------------
A message (``OutMessage``) is cut into packets of at most MSS bytes as they are sent, each
a memoryview slice of the application's buffer, so a large message is never copied per
packet. Every packet carries its offset in the message and the message's length, so the
receiver places its payload out of order directly (paper: "every packet carries its
message offset"); its opcode says where in the message it sits, as RDMA writes do:
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, or WRITE_ONLY for a message of one packet.

New data leaves the core as ``DataRun``s, not one ``Transmit`` per packet: consecutive
packets of one message sent in the same burst, described by their first PSN and offset,
the segment size and each packet's EV. No layer builds a header, a payload view and a
``Transmit`` per packet, and the C codec encodes a whole run in one call (io/batchio.py
``add_run``; what this saves: docs/measurements.md, "The sender's design figures"). A
retransmission keeps its PSN and offset and goes as a ``Transmit`` of its own, with the
RTX flag (``OutMessage.transmit``), in the retransmission class (wire/frames.py
``data_dscp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mrc_transport.frozen import fast_constructor
from mrc_transport.wire.frames import DataHeader, Opcode

from .commons import ACK_REQ, TS, Commons
from .ev import Ev
from .serial import MASK32
from .transmit import Transmit, new_transmit

View = memoryview
"""mypyc looks a dataclass field's type up among the module's names, which lack builtins."""
# Final: mypyc keeps these in C globals rather than looking each up in the module's dict
# on every packet
_WRITE_ONLY: Final = Opcode.WRITE_ONLY
_WRITE_FIRST: Final = Opcode.WRITE_FIRST
_WRITE_MIDDLE: Final = Opcode.WRITE_MIDDLE
_WRITE_LAST: Final = Opcode.WRITE_LAST
_new_data_header: Final = fast_constructor(DataHeader)
"""One data header per packet, built without the frozen ``__init__``."""
_new_transmit: Final = new_transmit


def opcode_for(offset: int, n: int, total: int) -> Opcode:
    """The opcode of the ``n`` bytes at ``offset`` of a message of ``total`` bytes."""
    first, last = offset == 0, offset + n >= total
    if first:
        return _WRITE_ONLY if last else _WRITE_FIRST
    return _WRITE_LAST if last else _WRITE_MIDDLE


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

    def transmit(
        self, commons: Commons, psn: int, offset: int, n: int, ev: Ev, ts: int, flags: int,
        dscp: int,
    ) -> Transmit:  # fmt: skip
        """The packet of PSN ``psn`` holding the ``n`` bytes at ``offset``, on ``ev``, in
        class ``dscp``."""
        header = _new_data_header(
            commons.get(opcode_for(offset, n, self.length), flags),
            psn & MASK32, self.msn & MASK32, offset, self.length, ts,
        )  # fmt: skip
        payload = self.data[offset : offset + n]
        return _new_transmit(ev.path, ev.value, header, payload, dscp)


def asking_ack(commons: Commons, tx: Transmit) -> Transmit:
    """Data packet ``tx`` with ACK_REQ set."""
    h = tx.header
    assert isinstance(h, DataHeader)
    common = commons.get(h.common.opcode, int(h.common.flags) | ACK_REQ)
    header = _new_data_header(common, h.psn, h.msn, h.msg_offset, h.msg_len, h.ts)
    return _new_transmit(tx.path, tx.ev, header, tx.payload, tx.dscp)


class DataRun:
    """Consecutive new data packets of one message, sent in the same burst: what the core
    hands the IO layer for its bulk traffic instead of a ``Transmit`` each.

    Packet i has PSN ``psn + i``, the segment at ``offset + i * seg`` of ``data`` (the
    message's last one may be shorter), EV ``evs[i]``, timestamp ``ts``, flags ``flags``
    and class ``dscp``; the last one also ``last_flags`` (ACK_REQ at a burst's end).
    ``transmit(i)`` is packet i as a ``Transmit``, exactly what the sender would have
    queued.
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
        dscp: int,
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
        self.dscp = dscp
        """The run's traffic class: new data, or the no-trim class (``Config.no_trim``)."""

    def __len__(self) -> int:
        return len(self.evs)

    def header(self, i: int) -> DataHeader:
        off = self.offset + i * self.seg
        total = self.data.nbytes
        n = min(self.seg, total - off)
        flags = self.flags | self.last_flags if i == len(self.evs) - 1 else self.flags
        return _new_data_header(
            self.commons.get(opcode_for(off, n, total), flags),
            (self.psn + i) & MASK32, self.msn, off, total, self.ts,
        )  # fmt: skip

    def payload(self, i: int) -> View:
        off = self.offset + i * self.seg
        return self.data[off : min(off + self.seg, self.data.nbytes)]

    def transmit(self, i: int) -> Transmit:
        """Packet i as the ``Transmit`` the sender would have queued for it."""
        ev = self.evs[i]
        return _new_transmit(ev.path, ev.value, self.header(i), self.payload(i), self.dscp)

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
