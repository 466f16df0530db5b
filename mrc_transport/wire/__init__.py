"""MRC wire layer: frames, and a codec backend chosen once at import (msgpack-style).

The C fast path (``fast``, a cffi wrapper defining the reference's functions) when
mrc_transport/backend.py selects it, else the pure-Python reference (``codec``).
``BACKEND`` says which one is live: "c" or "python".
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from mrc_transport import backend
from mrc_transport.wire import codec
from mrc_transport.wire.codec import DECAP_LEN
from mrc_transport.wire.errors import BadPacket
from mrc_transport.wire.frames import (
    CLOSE_HEADER_LEN,
    COMMON_HEADER_LEN,
    DATA_HEADER_LEN,
    DATA_OPCODES,
    DSCP_CONTROL,
    DSCP_DATA,
    DSCP_NO_TRIM,
    DSCP_RTX,
    IPV6_HEADER_LEN,
    IPV6_IN_IPV6,
    MRC_UDP_PORT,
    MRC_VERSION,
    NACK_HEADER_LEN,
    PROBE_HEADER_LEN,
    SACK_BITMAP_BITS,
    SACK_HEADER_LEN,
    SETUP_HEADER_LEN,
    UDP_HEADER_LEN,
    CloseHeader,
    Common,
    DataHeader,
    Ecn,
    Flags,
    Header,
    NackHeader,
    NackReason,
    Opcode,
    Packet,
    PathHeader,
    ProbeHeader,
    SackHeader,
    SetupHeader,
)

_impl: ModuleType = codec
if backend.FASTPATH:
    _impl = importlib.import_module("mrc_transport.wire.fast")

BACKEND = "c" if backend.FASTPATH else "python"
"""Which codec is live: "c" or "python"."""

if TYPE_CHECKING:
    # Both backends have the reference's signatures; let the type checker see them.
    from mrc_transport.wire.codec import (
        decap_untrusted,
        decode_datagram_untrusted,
        decode_untrusted,
        encode,
        encode_data_batch,
    )
else:
    encode = _impl.encode
    decode_untrusted = _impl.decode_untrusted
    encode_data_batch = _impl.encode_data_batch
    decode_datagram_untrusted = _impl.decode_datagram_untrusted
    decap_untrusted = _impl.decap_untrusted

__all__ = [
    "BACKEND",
    "CLOSE_HEADER_LEN",
    "COMMON_HEADER_LEN",
    "DATA_HEADER_LEN",
    "DATA_OPCODES",
    "DECAP_LEN",
    "DSCP_CONTROL",
    "DSCP_DATA",
    "DSCP_NO_TRIM",
    "DSCP_RTX",
    "IPV6_HEADER_LEN",
    "IPV6_IN_IPV6",
    "MRC_UDP_PORT",
    "MRC_VERSION",
    "NACK_HEADER_LEN",
    "PROBE_HEADER_LEN",
    "SACK_BITMAP_BITS",
    "SACK_HEADER_LEN",
    "SETUP_HEADER_LEN",
    "UDP_HEADER_LEN",
    "BadPacket",
    "CloseHeader",
    "Common",
    "DataHeader",
    "Ecn",
    "Flags",
    "Header",
    "NackHeader",
    "NackReason",
    "Opcode",
    "Packet",
    "PathHeader",
    "ProbeHeader",
    "SackHeader",
    "SetupHeader",
    "decap_untrusted",
    "decode_datagram_untrusted",
    "decode_untrusted",
    "encode",
    "encode_data_batch",
]
