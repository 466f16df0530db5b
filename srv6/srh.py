"""The Segment Routing Header (RFC 8754), an IPv6 routing header of type 4.

Wire layout (RFC 8754 section 2)::

    | next_header (8) | hdr_ext_len (8) | routing_type = 4 (8) | segments_left (8) |
    | last_entry (8)  | flags (8)       | tag (16)                                 |
    | segments[0] (128) ... segments[last_entry] (128)                             |
    | TLVs (optional, padded so the whole header is a multiple of 8 bytes)         |

``segments`` is in WIRE order: segments[0] is the LAST segment of the path (the final
destination) and segments[last_entry] the first; the IPv6 destination is the active one,
``segments[segments_left]`` (RFC 8754 section 2, RFC 8986 section 4.1).

Field names here follow the RFC; scapy's ``IPv6ExtHdrSegmentRouting`` calls them:

=================  =======================================================
RFC 8754 / here    scapy ``IPv6ExtHdrSegmentRouting``
=================  =======================================================
next_header        nh
hdr_ext_len        len (8-byte units, not counting the first 8 bytes)
routing_type       type
segments_left      segleft
last_entry         lastentry
flags              unused1 (bit 0), protected (1), oam (2, RFC 9259 O-flag),
                   alert (3), hmac (4), unused2 (bits 5-7); bit 0 is the MSB
tag                tag
segments           addresses (same wire order)
tlvs               tlv_objects (Pad1, PadN, HMAC, ... TLV packets)
=================  =======================================================
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv6Address

from srv6.errors import MalformedHeader

ROUTING_HEADER = 43  # IPv6 next-header value of a routing header
ROUTING_TYPE_SRH = 4
FIXED_LEN = 8
SEGMENT_LEN = 16
MAX_SEGMENTS = 127  # hdr_ext_len is one byte: 2 * 127 = 254 units of 8 bytes

PAD1 = 0  # RFC 8754 section 2.1.1.1: a single zero byte
PADN = 4  # RFC 8754 section 2.1.1.2

_FIXED = struct.Struct("!BBBBBBH")


def _segment_bytes(segment: IPv6Address | bytes) -> bytes:
    if isinstance(segment, IPv6Address):
        return segment.packed
    if len(segment) != SEGMENT_LEN:
        raise ValueError(f"a segment is a 16-byte IPv6 address, got {len(segment)} bytes")
    return bytes(segment)


def _tlv_error(tlvs: bytes) -> str | None:
    """Why ``tlvs`` is not a sequence of whole TLVs, or None (RFC 8754 section 2.1)."""
    index = 0
    while index < len(tlvs):
        if tlvs[index] == PAD1:
            index += 1
            continue
        if index + 2 > len(tlvs):
            return f"TLV at offset {index} is cut after its type byte"
        end = index + 2 + tlvs[index + 1]
        if end > len(tlvs):
            return f"TLV of type {tlvs[index]} at offset {index} runs past the header"
        index = end
    return None


def pad_tlvs(tlvs: bytes) -> bytes:
    """``tlvs`` followed by Pad1/PadN so its length is a multiple of 8 (RFC 8754 2.1.1)."""
    missing = -len(tlvs) % 8
    if missing == 0:
        return tlvs
    if missing == 1:
        return tlvs + bytes([PAD1])
    return tlvs + bytes([PADN, missing - 2]) + bytes(missing - 2)


@dataclass(frozen=True, slots=True)
class Srh:
    """One SRH; ``segments`` in wire order (reversed path)."""

    next_header: int
    """Protocol after the SRH, e.g. 17 for UDP."""
    segments_left: int
    """Index in ``segments`` of the active segment; decremented by every End."""
    last_entry: int
    """Index of the last element of ``segments`` (the path's first hop): len - 1."""
    segments: tuple[bytes, ...]
    """16-byte SIDs in wire order: segments[0] is the final destination."""
    flags: int = 0
    """8 bits; RFC 9259 defines bit 2 (0x20) as the O-flag. Unknown flags are ignored."""
    tag: int = 0
    """16 bits marking a class or group of packets (RFC 8754 section 2)."""
    tlvs: bytes = b""
    """Raw TLV area including its padding; its length is a multiple of 8."""
    routing_type: int = ROUTING_TYPE_SRH
    """Always 4 (RFC 8754 section 2)."""

    def __post_init__(self) -> None:
        if self.routing_type != ROUTING_TYPE_SRH:
            raise ValueError(f"routing type {self.routing_type}, an SRH has 4")
        if not 1 <= len(self.segments) <= MAX_SEGMENTS:
            raise ValueError(f"an SRH holds 1 to {MAX_SEGMENTS} segments, not {len(self.segments)}")
        if any(len(segment) != SEGMENT_LEN for segment in self.segments):
            raise ValueError("every segment is a 16-byte IPv6 address")
        if self.last_entry != len(self.segments) - 1:
            raise ValueError(
                f"last_entry {self.last_entry} != len(segments) - 1 = {len(self.segments) - 1}"
            )
        if not 0 <= self.segments_left <= self.last_entry:
            raise ValueError(f"segments_left {self.segments_left} not in 0..{self.last_entry}")
        if not 0 <= self.flags <= 0xFF or not 0 <= self.tag <= 0xFFFF:
            raise ValueError("flags is 8 bits and tag 16 bits")
        if not 0 <= self.next_header <= 0xFF:
            raise ValueError(f"next_header {self.next_header} is not a byte")
        if len(self.tlvs) % 8:
            raise ValueError(f"TLV area of {len(self.tlvs)} bytes is not padded to 8 (pad_tlvs)")
        problem = _tlv_error(self.tlvs)
        if problem:
            raise ValueError(problem)
        if self.hdr_ext_len > 0xFF:
            raise ValueError(f"SRH too long: hdr_ext_len {self.hdr_ext_len} > 255")

    @property
    def hdr_ext_len(self) -> int:
        """Length in 8-byte units, not counting the first 8 bytes (RFC 8200 section 4.4)."""
        return (SEGMENT_LEN * len(self.segments) + len(self.tlvs)) // 8

    @property
    def wire_len(self) -> int:
        """Bytes this header takes on the wire."""
        return FIXED_LEN + 8 * self.hdr_ext_len

    @property
    def path(self) -> tuple[bytes, ...]:
        """The segments in path order, first hop first."""
        return self.segments[::-1]

    @property
    def active_segment(self) -> bytes:
        """The segment the IPv6 destination holds now: segments[segments_left]."""
        return self.segments[self.segments_left]

    @classmethod
    def for_path(
        cls,
        path_segments: Sequence[IPv6Address | bytes],
        next_header: int,
        *,
        flags: int = 0,
        tag: int = 0,
        tlvs: bytes = b"",
    ) -> Srh:
        """The SRH a source puts on a packet for ``path_segments`` (first hop first).

        segments_left = last_entry = n - 1: the IPv6 destination is the first hop.
        ``tlvs`` is padded with Pad1/PadN as needed.
        """
        wire = tuple(_segment_bytes(segment) for segment in reversed(path_segments))
        last = len(wire) - 1
        return cls(next_header, last, last, wire, flags, tag, pad_tlvs(tlvs))

    def encode(self) -> bytes:
        """The header's bytes."""
        fixed = _FIXED.pack(
            self.next_header,
            self.hdr_ext_len,
            self.routing_type,
            self.segments_left,
            self.last_entry,
            self.flags,
            self.tag,
        )
        return fixed + b"".join(self.segments) + self.tlvs

    @classmethod
    def decode_untrusted(cls, buf: bytes | bytearray | memoryview) -> Srh:
        """The SRH at the start of ``buf`` (which may continue with the next header).

        Raises MalformedHeader, and nothing else, for any input that is not a valid SRH.
        """
        if len(buf) < FIXED_LEN:
            raise MalformedHeader(f"SRH truncated: {len(buf)} bytes, the fixed part is 8")
        next_header, ext_len, rtype, left, last, flags, tag = _FIXED.unpack_from(buf)
        if rtype != ROUTING_TYPE_SRH:
            raise MalformedHeader(f"routing type {rtype} is not an SRH (4)")
        total = FIXED_LEN + 8 * ext_len
        if len(buf) < total:
            raise MalformedHeader(f"SRH truncated: hdr_ext_len says {total} bytes, got {len(buf)}")
        tlv_start = FIXED_LEN + SEGMENT_LEN * (last + 1)
        if tlv_start > total:
            raise MalformedHeader(
                f"hdr_ext_len {ext_len} too short for last_entry {last} ({last + 1} segments)"
            )
        if left > last:
            raise MalformedHeader(f"segments_left {left} > last_entry {last}")
        data = bytes(buf[:total])
        tlvs = data[tlv_start:]
        problem = _tlv_error(tlvs)
        if problem:
            raise MalformedHeader(f"bad SRH TLV area: {problem}")
        segments = tuple(
            data[offset : offset + SEGMENT_LEN] for offset in range(FIXED_LEN, tlv_start, 16)
        )
        try:
            return cls(next_header, left, last, segments, flags, tag, tlvs)
        except ValueError as exc:  # unreachable after the checks above; keeps the contract
            raise MalformedHeader(str(exc)) from None


decode_untrusted = Srh.decode_untrusted
