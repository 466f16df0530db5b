"""Scapy dissectors for the MRC header (docs/protocol.md), for tests, pcaps and debugging.

Importing this module binds MRC to UDP destination port 4791, so ``rdpcap()`` of a capture
shows every field; ``bind_port(port)`` adds another port. Field names are those of
mrc_transport/wire/frames.py. The data path never imports this module (scapy is ~1000x
too slow for it: kernel-facts.md).

    >>> from mrc_transport.wire import scapy_layer
    >>> scapy_layer.MRC(raw_bytes).show()
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    ByteEnumField,
    ByteField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    X3BytesField,
    XIntField,
    XLongField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers

from mrc_transport.wire.frames import MRC_UDP_PORT, MRC_VERSION, NackReason, Opcode

_OPCODE_NAMES = {int(op): op.name for op in Opcode}
_REASON_NAMES = {int(reason): reason.name for reason in NackReason}
# FlagsField lists bit names from the least significant bit (frames.Flags).
_FLAG_NAMES = ["RTX", "TS", "ECN_ECHO", "ACK_REQ", "RESTORE_WINDOW"]


class MRCData(Packet):
    """WRITE_FIRST / MIDDLE / LAST / ONLY body; the payload follows as Raw."""

    name = "MRC data"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        IntField("psn", 0),
        IntField("msn", 0),
        IntField("msg_offset", 0),
        IntField("msg_len", 0),
        LongField("ts", 0),
    ]


class _ControlBody(Packet):
    """Control bodies carry no payload; trailing bytes stay visible as Raw."""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class MRCSack(_ControlBody):
    """ACK / SACK body."""

    name = "MRC SACK"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        IntField("cum_psn", 0),
        IntField("sack_base", 0),
        XLongField("bitmap", 0),
        XIntField("ev", 0),
        LongField("ts", 0),
        ShortField("ooo_count", 0),
        ByteField("rwnd_penalty", 0),
        ByteField("reserved", 0),
        IntField("rwnd", 0),
        LongField("rcvd_bytes", 0),
        IntField("service_time", 0),
        XLongField("ports_down", 0),
    ]


class MRCNack(_ControlBody):
    """NACK body."""

    name = "MRC NACK"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        IntField("psn", 0),
        ByteEnumField("reason", int(NackReason.TRIMMED), _REASON_NAMES),
        X3BytesField("reserved", 0),
        XIntField("ev", 0),
        LongField("ts", 0),
    ]


class MRCProbe(_ControlBody):
    """PROBE / PROBE_REPLY body."""

    name = "MRC probe"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        IntField("probe_id", 0),
        XIntField("ev", 0),
        LongField("ts", 0),
    ]


class MRCSetup(_ControlBody):
    """SETUP / SETUP_ACK body."""

    name = "MRC setup"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        IntField("initial_psn", 0),
        IntField("rwnd", 0),
        ShortField("mtu", 0),
        ShortField("ev_count", 0),
        LongField("ts", 0),
    ]


class MRCClose(_ControlBody):
    """CLOSE / CLOSE_ACK body."""

    name = "MRC close"
    fields_desc = [IntField("final_psn", 0)]  # noqa: RUF012


BODY_CLASSES: dict[int, type[Packet]] = {
    Opcode.WRITE_FIRST: MRCData,
    Opcode.WRITE_MIDDLE: MRCData,
    Opcode.WRITE_LAST: MRCData,
    Opcode.WRITE_ONLY: MRCData,
    Opcode.ACK: MRCSack,
    Opcode.SACK: MRCSack,
    Opcode.NACK: MRCNack,
    Opcode.PROBE: MRCProbe,
    Opcode.PROBE_REPLY: MRCProbe,
    Opcode.SETUP: MRCSetup,
    Opcode.SETUP_ACK: MRCSetup,
    Opcode.CLOSE: MRCClose,
    Opcode.CLOSE_ACK: MRCClose,
}


class MRC(Packet):
    """The 12-byte MRC common header; the opcode selects the body class."""

    name = "MRC"
    fields_desc = [  # noqa: RUF012 - scapy declares layers this way
        ByteField("version", MRC_VERSION),
        ByteEnumField("opcode", int(Opcode.WRITE_ONLY), _OPCODE_NAMES),
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteField("reserved", 0),
        XIntField("dst_conn", 0),
        XIntField("src_conn", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        # Conditional dispatch on the opcode; an unknown opcode leaves the bytes as Raw.
        return BODY_CLASSES.get(self.opcode, Raw)

    def mysummary(self) -> Any:
        return self.sprintf("MRC %MRC.opcode% %MRC.flags% dst_conn=%MRC.dst_conn%")


def bind_port(port: int) -> None:
    """Also dissect UDP destination ``port`` as MRC (the port is configurable)."""
    bind_layers(UDP, MRC, dport=port)


bind_port(MRC_UDP_PORT)
