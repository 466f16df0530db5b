"""Pure-Python reference codec for MRC over IPv6/SRv6 (docs/protocol.md).

This module defines the wire format in executable form: the C fast path
(mrc_transport/wire/fast.py over csrc/) must produce the same bytes and the same parses,
and tests check it byte for byte. It is also the data path when the C extension is
missing, so per-packet work is kept small: precompiled ``struct.Struct`` objects, a cached
per-path template, dispatch tables built once at import.

Public API (the C backend exports exactly the same functions):

- ``encode(path, header, payload=b"") -> bytes``: one complete IPv6 packet.
- ``decode_untrusted(buf, *, dport=None) -> Packet``: raises only ``BadPacket``.
- ``encode_data_batch(paths, headers, payloads) -> (bytearray, offsets)``.
- ``decode_datagram_untrusted`` (a UDP payload the kernel delivered) and
  ``decap_untrusted`` (the inner packet of an encapsulated one, as a raw socket gets it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple

from mrc_transport.wire.errors import BadPacket
from mrc_transport.wire.frames import (
    FLAGS_BY_VALUE,
    IPV6_HEADER_LEN,
    IPV6_IN_IPV6,
    KNOWN_FLAGS,
    MAX_PENALTY,
    MRC_VERSION,
    TRIM_REASONS,
    UDP_HEADER_LEN,
    CloseHeader,
    Common,
    DataHeader,
    Ecn,
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
from srv6.errors import MalformedHeader
from srv6.srh import MAX_SEGMENTS, ROUTING_HEADER, Srh

__all__ = [
    "DECAP_LEN",
    "BadPacket",
    "decap_untrusted",
    "decode_datagram_untrusted",
    "decode_untrusted",
    "encode",
    "encode_data_batch",
]

UDP_PROTO = 17
_FOLD = 0xFFFF

# version(4) | traffic class(8) | flow label(20), payload length, next header, hop limit,
# source, destination (RFC 8200 section 3).
_IPV6 = struct.Struct("!IHBB16s16s")
_INNER_TAIL = struct.Struct("!BB16s16s")  # an inner header after its first word and length
_WORD_LEN = struct.Struct("!IH")
_UDP = struct.Struct("!HHHH")
_COMMON = struct.Struct("!BBBxII")  # version, opcode, flags, reserved, dst_conn, src_conn

# Opcode bodies after the common header, fields in the dataclasses' order.
_BODY_FORMATS: dict[type[Any], str] = {
    DataHeader: "IIIIQ",  # psn, msn, msg_offset, msg_len, ts
    # cum_psn, sack_base, bitmap, ev, ts, ooo, penalty, 1 reserved, rwnd, rcvd_bytes,
    # service_time, ports_down
    SackHeader: "IIQIQHBxIQIQ",
    NackHeader: "IB3xIQ",  # psn, reason, 3 reserved, ev, ts
    ProbeHeader: "IIQ",  # probe_id, ev, ts
    SetupHeader: "IIHHQ",  # initial_psn, rwnd, mtu, ev_count, ts
    CloseHeader: "I",  # final_psn
}
_BODY_FIELDS: dict[type[Any], tuple[str, ...]] = {
    DataHeader: ("psn", "msn", "msg_offset", "msg_len", "ts"),
    SackHeader: (
        "cum_psn",
        "sack_base",
        "bitmap",
        "ev",
        "ts",
        "ooo_count",
        "rwnd_penalty",
        "rwnd",
        "rcvd_bytes",
        "service_time",
        "ports_down",
    ),
    NackHeader: ("psn", "reason", "ev", "ts"),
    ProbeHeader: ("probe_id", "ev", "ts"),
    SetupHeader: ("initial_psn", "rwnd", "mtu", "ev_count", "ts"),
    CloseHeader: ("final_psn",),
}
_OPCODE_CLASS: dict[int, type[Any]] = {
    Opcode.WRITE_FIRST: DataHeader,
    Opcode.WRITE_MIDDLE: DataHeader,
    Opcode.WRITE_LAST: DataHeader,
    Opcode.WRITE_ONLY: DataHeader,
    Opcode.ACK: SackHeader,
    Opcode.SACK: SackHeader,
    Opcode.NACK: NackHeader,
    Opcode.PROBE: ProbeHeader,
    Opcode.PROBE_REPLY: ProbeHeader,
    Opcode.SETUP: SetupHeader,
    Opcode.SETUP_ACK: SetupHeader,
    Opcode.CLOSE: CloseHeader,
    Opcode.CLOSE_ACK: CloseHeader,
}


class _Encoder(NamedTuple):
    l4: struct.Struct  # UDP header + common header + body
    body: Callable[[Any], tuple[Any, ...]]


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A C-speed getter returning a tuple even for one field (attrgetter does not)."""
    if len(names) == 1:
        single = attrgetter(names[0])
        return lambda header: (single(header),)
    return attrgetter(*names)


_ENCODERS: dict[type[Any], _Encoder] = {
    cls: _Encoder(struct.Struct("!HHHHBBBxII" + fmt), _getter(_BODY_FIELDS[cls]))
    for cls, fmt in _BODY_FORMATS.items()
}
_BODIES: dict[type[Any], struct.Struct] = {
    cls: struct.Struct("!" + fmt) for cls, fmt in _BODY_FORMATS.items()
}

# Decoded enum values by wire value, so decoding does no enum lookups.
_OPCODES = {int(op): op for op in Opcode}
_ECNS = tuple(Ecn(value) for value in range(4))
_NACK_REASONS = {int(reason): reason for reason in NackReason}


# ---------------------------------------------------------------------------------------
# Encoding


class _Template(NamedTuple):
    """What encode needs from a path, computed once per PathHeader."""

    first_word: int  # version | traffic class | flow label
    next_header: int  # 43 with an SRH, 41 encapsulated, else 17
    hop_limit: int
    src: bytes
    dst: bytes
    srh: bytes  # encoded SRH or b""
    inner: bytes  # encapsulated: the inner IPv6 header's fields after its payload length
    pseudo_sum: int  # src + final destination + next header 17, unfolded
    sport: int
    dport: int


def _check_address(name: str, value: object) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) != 16:
        raise ValueError(f"PathHeader.{name} must be 16 bytes, got {value!r}")
    return bytes(value)


def _check_range(name: str, value: int, bits: int) -> None:
    if not 0 <= value < 1 << bits:
        raise ValueError(f"PathHeader.{name} = {value} does not fit in {bits} bits")


@lru_cache(maxsize=4096)
def _template(path: PathHeader) -> _Template:
    src = _check_address("src", path.src)
    dst = _check_address("dst", path.dst)
    _check_range("ev", path.ev, 32)
    _check_range("dscp", path.dscp, 6)
    _check_range("ecn", path.ecn, 2)
    _check_range("dport", path.dport, 16)
    _check_range("hop_limit", path.hop_limit, 8)
    srh = b""
    next_header = UDP_PROTO
    final = dst
    if path.segments:
        if len(path.segments) > MAX_SEGMENTS:
            raise ValueError(f"{len(path.segments)} segments, an SRH holds {MAX_SEGMENTS}")
        segments = [_check_address("segments[]", s) for s in path.segments]
        srh = Srh.for_path(segments, UDP_PROTO).encode()
        next_header = ROUTING_HEADER
        final = segments[-1]
    if path.final_dst is not None:
        final = _check_address("final_dst", path.final_dst)
    if path.encap and path.segments:
        raise ValueError("PathHeader.encap goes with a uSID path, not with segments")
    # Traffic class = DSCP << 2 | ECN (RFC 2474, RFC 3168); flow label = EV's low 20 bits,
    # UDP source port = EV's high 16 bits (docs/protocol.md, "Entropy value").
    first_word = 6 << 28 | (path.dscp << 2 | path.ecn) << 20 | (path.ev & 0xFFFFF)
    # RFC 8200 section 8.1: the pseudo-header uses the FINAL destination.
    pseudo_sum = int.from_bytes(src, "big") + int.from_bytes(final, "big") + UDP_PROTO
    inner = b""
    if path.encap:  # the inner header: the same class and label, the NICs' own addresses
        inner = _INNER_TAIL.pack(UDP_PROTO, path.hop_limit, src, final)
        next_header = IPV6_IN_IPV6
    return _Template(
        first_word,
        next_header,
        path.hop_limit,
        src,
        dst,
        srh,
        inner,
        pseudo_sum,
        path.ev >> 16,
        path.dport,
    )


def _words(data: bytes | bytearray | memoryview) -> int:
    """Sum-equivalent of the 16-bit words of data (modulo 0xffff; srv6/checksum.py)."""
    value = int.from_bytes(data, "big")
    return value << 8 if len(data) & 1 else value


def encode(path: PathHeader, header: Header, payload: bytes | memoryview = b"") -> bytes:
    """A complete IPv6 packet: IPv6 [+ SRH] + UDP + MRC header + payload.

    Raises ValueError (or TypeError) for fields that do not fit the wire format; the
    data-placement rules are the receiver's to check.
    """
    kind = type(header)
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        raise TypeError(f"not an MRC header: {kind.__name__}")
    common = header.common
    if _OPCODE_CLASS.get(common.opcode) is not kind:
        raise ValueError(f"opcode {common.opcode!r} does not go with {kind.__name__}")
    if payload and kind is not DataHeader:
        raise ValueError(f"{kind.__name__} carries no payload")
    if kind is SackHeader and header.rwnd_penalty > MAX_PENALTY:  # type: ignore[union-attr]
        raise ValueError(f"SackHeader: rwnd_penalty {header.rwnd_penalty} > {MAX_PENALTY}")  # type: ignore[union-attr]
    t = _template(path)
    udp_len = encoder.l4.size + len(payload)
    body = encoder.body(header)
    fields = (common.opcode, common.flags, common.dst_conn, common.src_conn)
    try:
        l4 = encoder.l4.pack(t.sport, t.dport, udp_len, 0, MRC_VERSION, *fields, *body)
    except struct.error as exc:
        raise ValueError(f"{kind.__name__}: a field is out of range ({exc})") from None
    total = t.pseudo_sum + udp_len + int.from_bytes(l4, "big") + _words(payload)
    residue = total % _FOLD
    # RFC 768 / RFC 8200 8.1: a computed 0 is sent as 0xffff (a zero checksum is invalid).
    checksum = _FOLD - residue if residue else _FOLD
    ip_len = len(t.srh) + udp_len
    inner = t.inner
    if inner:
        inner = _WORD_LEN.pack(t.first_word, udp_len) + inner
        ip_len += IPV6_HEADER_LEN
    if ip_len > 0xFFFF:
        raise ValueError(f"packet too long: IPv6 payload length {ip_len} > 65535")
    ipv6 = _IPV6.pack(t.first_word, ip_len, t.next_header, t.hop_limit, t.src, t.dst)
    udp = (l4[:6], checksum.to_bytes(2, "big"), l4[8:], payload)
    return b"".join((ipv6, t.srh, inner, *udp))


def encode_data_batch(
    paths: Sequence[PathHeader],
    headers: Sequence[DataHeader],
    payloads: Sequence[bytes | memoryview],
) -> tuple[bytearray, list[int]]:
    """N data packets back to back: packet i is ``buf[offsets[i]:offsets[i + 1]]``."""
    if not len(paths) == len(headers) == len(payloads):
        raise ValueError(
            f"batch lengths differ: {len(paths)} paths, {len(headers)} headers, "
            f"{len(payloads)} payloads"
        )
    buf = bytearray()
    offsets = [0]
    for path, header, payload in zip(paths, headers, payloads, strict=True):
        if type(header) is not DataHeader:
            raise TypeError(f"encode_data_batch takes DataHeaders, not {type(header).__name__}")
        buf += encode(path, header, payload)
        offsets.append(len(buf))
    return buf, offsets


# ---------------------------------------------------------------------------------------
# Decoding (untrusted input: every failure is a BadPacket with a stable reason)


def _data_rules(header: DataHeader, payload_len: int, stub: bool) -> None:
    """Placement rules of docs/protocol.md, "Data". A trimmed ``stub`` lost its payload
    on the way ("Trimmed data packets"), so a last segment's stub ends short of msg_len:
    only the rules its header alone decides apply (without this, the stub of every
    message's last packet was dropped as malformed and never NACKed)."""
    end = header.msg_offset + payload_len
    if end > header.msg_len:
        raise BadPacket(
            "bad_message",
            f"payload ends at {end}, past msg_len {header.msg_len}",
        )
    opcode = header.common.opcode
    if opcode in (Opcode.WRITE_FIRST, Opcode.WRITE_ONLY) and header.msg_offset:
        raise BadPacket("bad_message", f"{opcode.name} at msg_offset {header.msg_offset}")
    if opcode in (Opcode.WRITE_LAST, Opcode.WRITE_ONLY) and end != header.msg_len and not stub:
        raise BadPacket("bad_message", f"{opcode.name} ends at {end}, msg_len {header.msg_len}")


def _decode_header(
    buf: bytes | bytearray | memoryview, off: int, end: int, dscp: int
) -> tuple[Header, int]:
    """The MRC header at buf[off:end] of a packet of DSCP ``dscp``, and the offset of the
    payload."""
    if end - off < _COMMON.size:
        raise BadPacket("truncated", f"MRC common header needs 12 bytes, {end - off} left")
    version, opcode, flags, dst_conn, src_conn = _COMMON.unpack_from(buf, off)
    if version != MRC_VERSION:
        raise BadPacket("bad_version", f"MRC version {version}, expected {MRC_VERSION}")
    op = _OPCODES.get(opcode)
    if op is None:
        raise BadPacket("unknown_opcode", f"opcode {opcode:#04x}")
    if flags & ~KNOWN_FLAGS:
        raise BadPacket("bad_field", f"unknown flag bits {flags & ~KNOWN_FLAGS:#04x}")
    kind = _OPCODE_CLASS[op]
    body = _BODIES[kind]
    off += _COMMON.size
    if end - off < body.size:
        raise BadPacket("truncated", f"{op.name} body needs {body.size} bytes, {end - off} left")
    values = body.unpack_from(buf, off)
    off += body.size
    if kind is not DataHeader and off != end:
        raise BadPacket("bad_length", f"{op.name} followed by {end - off} bytes of payload")
    if kind is NackHeader:
        reason = _NACK_REASONS.get(values[1])
        if reason is None:
            raise BadPacket("bad_field", f"NACK reason {values[1]}")
        values = (values[0], reason, *values[2:])
    elif op is Opcode.ACK and values[2]:
        raise BadPacket("bad_field", f"ACK with a non-zero bitmap {values[2]:#x}")
    elif kind is SackHeader and values[6] > MAX_PENALTY:
        raise BadPacket("bad_field", f"window penalty {values[6]} > {MAX_PENALTY} (7 bits)")
    header: Header = kind(Common(op, FLAGS_BY_VALUE[flags], dst_conn, src_conn), *values)
    if kind is DataHeader:
        _data_rules(header, end - off, dscp in TRIM_REASONS)  # type: ignore[arg-type]
    return header, off


def _decode_srh(buf: bytes | bytearray | memoryview, end: int) -> tuple[Srh, int]:
    """The SRH right after the IPv6 header, and where the UDP header starts."""
    try:
        srh = Srh.decode_untrusted(memoryview(buf)[IPV6_HEADER_LEN:end])
    except MalformedHeader as exc:
        raise BadPacket("bad_srh", str(exc)) from None
    if srh.next_header != UDP_PROTO:
        raise BadPacket("not_udp", f"SRH next header {srh.next_header}, expected UDP (17)")
    return srh, IPV6_HEADER_LEN + srh.wire_len


def _decode_ipv6(
    buf: bytes | bytearray | memoryview, off: int, end: int
) -> tuple[int, int, int, bytes, bytes]:
    """(first word, next header, hop limit, source, destination) of the IPv6 header at
    ``off`` whose payload must end the packet at ``end``."""
    if end - off < IPV6_HEADER_LEN:
        raise BadPacket("truncated", f"{end - off} bytes, an IPv6 header is 40")
    first, ip_len, next_header, hop_limit, src, dst = _IPV6.unpack_from(buf, off)
    if first >> 28 != 6:
        raise BadPacket("not_ipv6", f"IP version {first >> 28}")
    left = end - off - IPV6_HEADER_LEN
    if ip_len != left:
        reason = "truncated" if ip_len > left else "bad_length"
        raise BadPacket(reason, f"IPv6 payload length {ip_len}, {left} bytes follow")
    return first, next_header, hop_limit, src, dst


def _decode_udp(
    buf: bytes | bytearray | memoryview,
    off: int,
    end: int,
    addresses: tuple[bytes, bytes],
    dport: int | None,
) -> tuple[int, int]:
    """(source port, destination port) of the UDP header at ``off``, its checksum verified
    over ``addresses``: the source and the final destination (RFC 8200 8.1)."""
    if end - off < UDP_HEADER_LEN:
        raise BadPacket("truncated", f"UDP header needs 8 bytes, {end - off} left")
    sport, udp_dport, udp_len, checksum = _UDP.unpack_from(buf, off)
    if udp_len != end - off:
        raise BadPacket("bad_length", f"UDP length {udp_len}, {end - off} bytes in the packet")
    if dport is not None and udp_dport != dport:
        raise BadPacket("bad_port", f"UDP destination port {udp_dport}, expected {dport}")
    if checksum == 0:
        raise BadPacket("bad_checksum", "zero UDP checksum, invalid over IPv6 (RFC 8200 8.1)")
    src, final = addresses
    total = (
        int.from_bytes(src, "big")
        + int.from_bytes(final, "big")
        + UDP_PROTO
        + udp_len
        + _words(buf[off:end])
    )
    if total % _FOLD:  # a correct sum including the checksum is 0xffff (negative zero)
        raise BadPacket("bad_checksum", f"UDP checksum {checksum:#06x} does not verify")
    return sport, udp_dport


def _decode_inner(buf: bytes | bytearray | memoryview, off: int, end: int) -> tuple[bytes, bytes]:
    """(source, destination) of an encapsulated packet's inner header at ``off``, which
    must carry UDP (RFC 2473 3: the outer header's payload is the whole inner packet)."""
    _, next_header, _, src, dst = _decode_ipv6(buf, off, end)
    if next_header != UDP_PROTO:
        raise BadPacket("not_udp", f"inner next header {next_header}, expected UDP")
    return src, dst


def decode_untrusted(buf: bytes | bytearray | memoryview, *, dport: int | None = None) -> Packet:
    """Parse one received IPv6 packet; raises BadPacket, and only BadPacket, if malformed.

    Checks, in this order: IPv6 header, SRH or inner IPv6 header, UDP length, destination
    port, checksum (over the final destination: segments[0] with an SRH, the inner
    addresses when encapsulated, else the destination as received), MRC header
    (docs/protocol.md, "Parsing received packets").
    """
    end = len(buf)
    first, next_header, hop_limit, src, dst = _decode_ipv6(buf, 0, end)
    segments: tuple[bytes, ...] = ()
    addresses = (src, dst)
    inner_dst: bytes | None = None
    off = IPV6_HEADER_LEN
    if next_header == ROUTING_HEADER:
        srh, off = _decode_srh(buf, end)
        segments = srh.path
        addresses = (src, srh.segments[0])  # the final destination (RFC 8200 8.1)
    elif next_header == IPV6_IN_IPV6:  # the NICs' addresses are the inner header's
        src, inner_dst = addresses = _decode_inner(buf, IPV6_HEADER_LEN, end)
        off += IPV6_HEADER_LEN
    elif next_header != UDP_PROTO:
        raise BadPacket("not_udp", f"next header {next_header}, expected UDP, an SRH or IPv6")
    sport, udp_dport = _decode_udp(buf, off, end, addresses, dport)
    dscp = (first >> 22) & 0x3F
    header, payload_off = _decode_header(buf, off + UDP_HEADER_LEN, end, dscp)
    path = PathHeader(
        src=src,
        dst=dst,
        final_dst=inner_dst,
        segments=segments,
        ev=sport << 16 | (first & 0xFFFF),
        dscp=dscp,
        ecn=_ECNS[(first >> 20) & 3],
        dport=udp_dport,
        hop_limit=hop_limit,
        encap=inner_dst is not None,
    )
    return Packet(path, header, bytes(buf[payload_off:end]))


DECAP_LEN = IPV6_HEADER_LEN + UDP_HEADER_LEN
"""Bytes before the MRC header in what a raw IPPROTO_IPV6 socket delivers."""


def decap_untrusted(
    buf: bytes | bytearray | memoryview, *, dport: int | None = None
) -> tuple[bytes, bytes, int]:
    """(source, destination, UDP source port) of an encapsulated packet's inner part as a
    raw IPPROTO_IPV6 socket delivers it (the outer header stripped): its inner IPv6 header
    and UDP checked as ``decode_untrusted`` checks them; the MRC header starts at
    DECAP_LEN. Raises BadPacket, and only BadPacket."""
    end = len(buf)
    src, dst = _decode_inner(buf, 0, end)
    sport, _ = _decode_udp(buf, IPV6_HEADER_LEN, end, (src, dst), dport)
    return src, dst, sport


def decode_datagram_untrusted(
    payload: bytes | bytearray | memoryview,
    *,
    src: bytes,
    dst: bytes,
    sport: int,
    dport: int,
    tclass: int,
    flow_label: int,
) -> Packet:
    """Parse the MRC header of a UDP payload a kernel socket delivered; raises BadPacket.

    The kernel already checked IPv6, stripped the SRH and verified the UDP checksum; the
    caller passes what it read from the control messages (IPV6_PKTINFO, IPV6_TCLASS,
    IPV6_FLOWINFO). The EV is rebuilt as in ``decode_untrusted`` (docs/protocol.md,
    "Entropy value"); the same MRC-header checks and reasons apply.
    """
    header, payload_off = _decode_header(payload, 0, len(payload), (tclass >> 2) & 0x3F)
    path = datagram_path(src, dst, sport, dport, tclass, flow_label)
    return Packet(path, header, bytes(payload[payload_off:]))


def datagram_path(
    src: bytes, dst: bytes, sport: int, dport: int, tclass: int, flow_label: int
) -> PathHeader:
    """The PathHeader of a kernel-delivered datagram from what the kernel told of it."""
    return PathHeader(
        src=src,
        dst=dst,
        ev=sport << 16 | (flow_label & 0xFFFF),
        dscp=(tclass >> 2) & 0x3F,
        ecn=_ECNS[tclass & 3],
        dport=dport,
    )
