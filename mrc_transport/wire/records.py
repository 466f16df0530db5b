"""Received datagrams as records: one plain tuple per datagram, its layout set by its kind.

The receive path hands the protocol core a burst's data packets and SACKs as records of
their fields (``Endpoint.receive_records``), not as frame objects: one tuple per packet,
made in one C call per burst (csrc/mrc_fast.c ``mrc_decode_rx_burst``) or by the Python
decoder (wire/burst.py). Plain tuples, not NamedTuples: making a NamedTuple of each
record cost ~0.9 us more per packet (docs/measurements.md).

Every record starts with its kind, the connection it is for and the source address; the
rest is the body of its kind. Every reader names the slot it reads (``rec[DataField.PSN]``),
so a field is added here (its name, its slot) and in the C struct, then read where needed:

* data packet (``RX_DATA``, ``DataField``): flags, psn, msn, msg_offset, msg_len, ts,
  where its payload is in the burst's buffer (offset, length), the EV it arrived on and
  its CE mark, and one zero slot;
* SACK or ACK (``RX_SACK``, ``SackField``): flags, cumulative PSN, SACK base, bitmap, the
  EV it reflects, ts, window, received bytes, service time, the ports down and the
  window penalty (``Sender.sack``'s arguments);
* anything else (``RX_OTHER``: other control packets, trimmed stubs, malformed or cut
  datagrams): only its kind, the rest zero (``OTHER_REC``); the endpoint decodes it one
  at a time, which names what is wrong with a bad one (or NACKs a stub).

``RX_REC`` is struct mrc_rx_rec (csrc/mrc_fast.h): the head, then each kind's body as
eleven uint64_t (a C union), so one struct format reads both kinds
(tests/unit/test_batchio_records.py holds the two layouts equal field by field).
"""

from __future__ import annotations

import struct
from typing import Final

from mrc_transport.wire.frames import DataHeader, Header, SackHeader

RX_OTHER: Final = 0
RX_DATA: Final = 1
RX_SACK: Final = 2


class DataField:
    """Where each field of a data packet's record is (kind ``RX_DATA``): ``rec[DataField.PSN]``.
    Plain ``Final`` ints, not an enum, so mypyc compiles a read to a direct slot of the
    tuple and the interpreter reads a class attribute."""

    KIND: Final = 0
    DST_CONN: Final = 1
    SRC: Final = 2
    FLAGS: Final = 3
    PSN: Final = 4
    MSN: Final = 5
    MSG_OFFSET: Final = 6
    MSG_LEN: Final = 7
    TS: Final = 8
    PAYLOAD_OFF: Final = 9
    """The payload is the burst buffer's [PAYLOAD_OFF : PAYLOAD_OFF + PAYLOAD_LEN]."""
    PAYLOAD_LEN: Final = 10
    EV: Final = 11
    """The EV it arrived on: UDP source port << 16 | the flow label's low 16 bits."""
    CE: Final = 12
    """1 when its ECN field says Congestion Experienced (RFC 3168 section 5), else 0."""
    UNUSED: Final = 13


class SackField:
    """Where each field of a SACK's or ACK's record is (kind ``RX_SACK``), as ``DataField``."""

    KIND: Final = 0
    DST_CONN: Final = 1
    SRC: Final = 2
    FLAGS: Final = 3
    CUM_PSN: Final = 4
    SACK_BASE: Final = 5
    BITMAP: Final = 6
    EV: Final = 7
    """The EV the SACK reflects (the one the data packet it answers arrived on)."""
    TS: Final = 8
    RWND: Final = 9
    RCVD_BYTES: Final = 10
    SERVICE_TIME: Final = 11
    PORTS_DOWN: Final = 12
    PENALTY: Final = 13


def layout(fields: type) -> dict[str, int]:
    """``DataField``'s or ``SackField``'s slots: each name in lower case, as the C struct
    names its member, and its index."""
    return {name.lower(): i for name, i in vars(fields).items() if name.isupper()}


RxRec = tuple[int, int, bytes, int, int, int, int, int, int, int, int, int, int, int]
"""One received datagram: (kind, dst_conn, 16-byte source, then the eleven slots of its
kind's body); ``DataField`` and ``SackField`` name each slot."""
RX_REC: Final = struct.Struct("=bxxxI16s11Q")
"""struct mrc_rx_rec (csrc/mrc_fast.h)."""
OTHER_REC: Final[RxRec] = (RX_OTHER, 0, bytes(16), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
"""A record of kind ``RX_OTHER``: its datagram is decoded one at a time."""

RxMeta = tuple[int, int, int, int, int, bytes, bytes]
"""(length, truncated, traffic class, source port, flow label, 16-byte source, 16-byte
destination) of one datagram, as the socket reported it: what the burst decoder reads
with the datagram."""
RX_META: Final = struct.Struct("=IBBHI16s16s")
"""struct mrc_rx_meta (csrc/mrc_fast.h)."""
RX_CUT: Final = 1
"""RxMeta's truncated: the datagram was larger than its slot (MRC_RX_CUT)."""
RX_BAD_INNER: Final = 2
"""RxMeta's truncated: an encapsulated datagram whose inner packet the decapsulator
refused (MRC_RX_BAD_INNER); ``wire.decap_untrusted`` names why."""


def record_of(h: Header, ev: int, ce: int, src: bytes, at: int, size: int) -> RxRec:
    """The record of a packet with header ``h`` that arrived from ``src`` on EV ``ev``
    (CE mark ``ce``), its payload ``size`` bytes at ``at`` of the burst's buffer: a data
    packet's or a SACK's fields, else ``OTHER_REC``."""
    if type(h) is SackHeader:
        c = h.common
        return (
            RX_SACK, c.dst_conn, src, int(c.flags), h.cum_psn, h.sack_base, h.bitmap, h.ev,
            h.ts, h.rwnd, h.rcvd_bytes, h.service_time, h.ports_down, h.rwnd_penalty,
        )  # fmt: skip
    if type(h) is not DataHeader:
        return OTHER_REC
    c = h.common
    return (
        RX_DATA, c.dst_conn, src, int(c.flags), h.psn, h.msn, h.msg_offset, h.msg_len, h.ts,
        at, size, ev, ce, 0,
    )  # fmt: skip
