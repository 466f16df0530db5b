"""C fast path for the MRC codec: a typed wrapper over ``mrc_transport._fastpath`` (csrc/).

Same API and semantics as the pure-Python reference ``mrc_transport.wire.codec``: the same
bytes out of ``encode``, the same ``Packet`` (or the same ``BadPacket.reason``) out of
``decode_untrusted``, the same exceptions for arguments that do not fit the wire format.
tests/unit/test_fastpath.py checks this with hypothesis. Importing this module raises
ImportError when the extension is not built, which makes ``mrc_transport.wire`` fall back
to the reference (msgpack ``__init__.py`` style).

The C code does the per-byte work (copies, the checksum, every bounds and consistency
check); what is left in Python is building the result objects, so three things keep that
part short:

* a per-path template (IPv6 [+ SRH] + UDP header, built by C once per ``PathHeader``);
* received ``PathHeader`` and ``Common`` objects are interned by their wire bytes: frozen
  dataclasses, so sharing them is safe, and a connection sees few distinct ones;
* headers and packets are built as a plain class with the same slots, then given their
  frame class by ``__class__`` assignment (``mrc_transport.frozen.slot_alike_class``): the
  same objects a frozen dataclass's ``__init__`` builds, minus its per-field
  ``object.__setattr__`` calls.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from mrc_transport._fastpath import ffi, lib
from mrc_transport.frozen import slot_alike_class
from mrc_transport.wire import codec
from mrc_transport.wire.errors import BadPacket
from mrc_transport.wire.frames import (
    FLAGS_BY_VALUE,
    MAX_PENALTY,
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

__all__ = [
    "DECAP_LEN",
    "BadPacket",
    "decap_untrusted",
    "decode_datagram_untrusted",
    "decode_untrusted",
    "encode",
    "encode_data_batch",
    "internet_checksum",
    "udp6_checksum",
]

Buffer = bytes | bytearray | memoryview

_FOLD = 0xFFFF
_MAX_SEGMENTS = 127  # srv6.srh.MAX_SEGMENTS: hdr_ext_len is one byte
_CACHE_LIMIT = 4096  # interned paths/commons/templates before a cache starts over
_IPV6_LEN = 40
_MAX_PACKET = _IPV6_LEN + 0xFFFF  # no jumbograms (RFC 2675)

# C error code -> BadPacket reason (mrc_transport/wire/errors.py REASONS) and a message.
_ERRORS: dict[int, tuple[str, str]] = {
    lib.MRC_E_IPV6_TRUNCATED: ("truncated", "shorter than its IPv6 header or payload length"),
    lib.MRC_E_IPV6_VERSION: ("not_ipv6", "IP version is not 6"),
    lib.MRC_E_IPV6_LENGTH: ("bad_length", "bytes after the IPv6 payload length"),
    lib.MRC_E_NEXT_HEADER: ("not_udp", "next header is neither UDP, an SRH nor IPv6"),
    lib.MRC_E_INNER_NEXT_HEADER: ("not_udp", "inner next header is not UDP"),
    lib.MRC_E_SRH_TRUNCATED: ("bad_srh", "SRH truncated"),
    lib.MRC_E_SRH_TYPE: ("bad_srh", "routing type is not an SRH (4)"),
    lib.MRC_E_SRH_LENGTH: ("bad_srh", "bad SRH length"),
    lib.MRC_E_SRH_LAST_ENTRY: ("bad_srh", "hdr_ext_len too short for last_entry"),
    lib.MRC_E_SRH_SEGMENTS_LEFT: ("bad_srh", "segments_left > last_entry"),
    lib.MRC_E_SRH_TLV: ("bad_srh", "bad SRH TLV area"),
    lib.MRC_E_SRH_NEXT_HEADER: ("not_udp", "SRH next header is not UDP"),
    lib.MRC_E_UDP_TRUNCATED: ("truncated", "UDP header truncated"),
    lib.MRC_E_UDP_LENGTH: ("bad_length", "UDP length disagrees with the packet"),
    lib.MRC_E_UDP_CHECKSUM_ZERO: ("bad_checksum", "zero UDP checksum (RFC 8200 8.1)"),
    lib.MRC_E_UDP_CHECKSUM: ("bad_checksum", "UDP checksum does not verify"),
    lib.MRC_E_UDP_PORT: ("bad_port", "unexpected UDP destination port"),
    lib.MRC_E_MRC_TRUNCATED: ("truncated", "MRC common header truncated"),
    lib.MRC_E_MRC_VERSION: ("bad_version", "MRC version is not 1"),
    lib.MRC_E_OPCODE: ("unknown_opcode", "unknown MRC opcode"),
    lib.MRC_E_FLAGS: ("bad_field", "unknown flag bits"),
    lib.MRC_E_BODY_TRUNCATED: ("truncated", "MRC body truncated"),
    lib.MRC_E_TRAILING: ("bad_length", "control packet followed by payload"),
    lib.MRC_E_MSG_BOUNDS: ("bad_message", "payload ends past msg_len"),
    lib.MRC_E_FIRST_OFFSET: ("bad_message", "first segment at a non-zero msg_offset"),
    lib.MRC_E_LAST_END: ("bad_message", "last segment does not end at msg_len"),
    lib.MRC_E_NACK_REASON: ("bad_field", "unknown NACK reason"),
    lib.MRC_E_ACK_BITMAP: ("bad_field", "ACK with a non-zero bitmap"),
    lib.MRC_E_PENALTY: ("bad_field", "window penalty above 127 (7 bits)"),
}

_OPCODE_CLASS: dict[int, type[Any]] = {
    **dict.fromkeys(
        (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY),
        DataHeader,
    ),
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
# Body layouts after the 12-byte common header (docs/protocol.md), dataclass field order.
_BODIES: dict[type[Any], struct.Struct] = {
    DataHeader: struct.Struct("!IIIIQ"),
    SackHeader: struct.Struct("!IIQIQHBxIQIQ"),
    NackHeader: struct.Struct("!IB3xIQ"),
    ProbeHeader: struct.Struct("!IIQ"),
    SetupHeader: struct.Struct("!IIHHQ"),
    CloseHeader: struct.Struct("!I"),
}
_OPCODES = {int(op): op for op in Opcode}
_ECNS = tuple(Ecn(value) for value in range(4))
_NACK_REASONS = {int(reason): reason for reason in NackReason}
_COMMON_TAIL = struct.Struct("!BBxII")  # opcode, flags, reserved, dst_conn, src_conn
_IPV6_FIRST = struct.Struct("!I")
_ROUTING_HEADER = 43
_IPV6_IN_IPV6 = 41
_UDP_PORTS = struct.Struct("!HH")


def _body_decoder(cls: type[Any], body: struct.Struct) -> Callable[..., Packet]:
    """``decode(path, common, buf, off) -> Packet`` for a header of class cls whose body
    (layout ``body``, fields in dataclass order) starts at buf[off]; the payload follows."""
    names = [field.name for field in dataclasses.fields(cls)][1:]
    convert = {"reason": _NACK_REASONS} if cls is NackHeader else {}
    header_alike, packet_alike = slot_alike_class(cls), slot_alike_class(Packet)
    if header_alike is None or packet_alike is None:  # frames changed shape: the plain way

        def plain(path: PathHeader, common: Common, buf: bytes, off: int) -> Packet:
            values = dict(zip(names, body.unpack_from(buf, off), strict=True))
            for name, table in convert.items():
                values[name] = table[values[name]]
            return Packet(path, cls(common, **values), buf[off + body.size :])

        return plain
    env: dict[str, Any] = {
        "_unpack": body.unpack_from, "_cls": cls, "_Packet": Packet,
        "_HeaderAlike": header_alike, "_PacketAlike": packet_alike,
        **{f"_{name}s": table for name, table in convert.items()},
    }  # fmt: skip
    lines = [
        "def decode(path, common, buf, off):",
        "    h = _HeaderAlike()",
        "    h.common = common",
        f"    {', '.join(f'h.{name}' for name in names)}, = _unpack(buf, off)",
        *(f"    h.{name} = _{name}s[h.{name}]" for name in convert),
        "    h.__class__ = _cls",
        "    p = _PacketAlike()",
        "    p.path = path",
        "    p.header = h",
        # C rejected trailing bytes after a control header (MRC_E_TRAILING)
        f"    p.payload = buf[off + {body.size}:]" if cls is DataHeader else "    p.payload = b''",
        "    p.__class__ = _Packet",
        "    return p",
    ]
    exec("\n".join(lines), env)  # the namedtuple technique: code generated once at import
    decode: Callable[..., Packet] = env["decode"]
    return decode


# Opcode byte -> decoder of the rest of the packet; indexed only after C accepted the byte.
_DECODERS = tuple(
    _body_decoder(_OPCODE_CLASS[op], _BODIES[_OPCODE_CLASS[op]]) for op in sorted(_OPCODES)
)


# ---------------------------------------------------------------------------------------
# Checksums (the same functions as srv6/checksum.py)


def _fold(total: int) -> int:
    return total % _FOLD or _FOLD if total else 0


def internet_checksum(data: Buffer, initial: int = 0) -> int:
    """RFC 1071 checksum of ``data`` plus the partial sum ``initial`` (srv6.checksum)."""
    if initial < 0:
        raise ValueError("a partial sum is non-negative")
    return int(lib.mrc_internet_checksum(ffi.from_buffer(data), len(data), _fold(initial)))


def udp6_checksum(src: bytes, dst: bytes, udp: Buffer) -> int:
    """The UDP checksum field for ``udp`` from src to final destination dst (srv6.checksum)."""
    if len(src) != 16 or len(dst) != 16:
        raise ValueError("IPv6 addresses are 16 bytes")
    if len(udp) < 8:
        raise ValueError(f"a UDP datagram is at least 8 bytes, got {len(udp)}")
    return int(lib.mrc_udp6_checksum(src, dst, ffi.from_buffer(udp), len(udp)))


# ---------------------------------------------------------------------------------------
# Encoding


def _address(name: str, value: object) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) != 16:
        raise ValueError(f"PathHeader.{name} must be 16 bytes, got {value!r}")
    return bytes(value)


def _check_range(name: str, value: int, bits: int) -> None:
    if not 0 <= value < 1 << bits:
        raise ValueError(f"PathHeader.{name} = {value} does not fit in {bits} bits")


def _build_template(path: PathHeader) -> Any:
    """The C template for path; ValueError where the reference codec raises it."""
    src = _address("src", path.src)
    dst = _address("dst", path.dst)
    for name, bits in (("ev", 32), ("dscp", 6), ("ecn", 2), ("dport", 16), ("hop_limit", 8)):
        _check_range(name, getattr(path, name), bits)
    if len(path.segments) > _MAX_SEGMENTS:
        raise ValueError(f"{len(path.segments)} segments, an SRH holds {_MAX_SEGMENTS}")
    segments = b"".join(_address("segments[]", s) for s in path.segments)
    final = segments[-16:] if segments else dst
    if path.final_dst is not None:
        final = _address("final_dst", path.final_dst)
    if path.encap and path.segments:
        raise ValueError("PathHeader.encap goes with a uSID path, not with segments")
    c_path = ffi.new("struct mrc_path *")
    c_path.src, c_path.dst, c_path.final_dst = src, dst, final
    keep = ffi.new("char[]", segments)  # referenced by c_path only during the call
    c_path.segments, c_path.n_segments = keep, len(path.segments)
    c_path.ev, c_path.dscp, c_path.ecn = path.ev, path.dscp, path.ecn
    c_path.dport, c_path.hop_limit = path.dport, path.hop_limit
    c_path.encap = bool(path.encap)
    template = ffi.new("struct mrc_template *")
    if lib.mrc_template_build(template, c_path) < 0:
        raise ValueError(f"PathHeader does not fit the wire format: {path!r}")
    return template


_templates: dict[int, tuple[PathHeader, Any]] = {}


def _template(path: PathHeader) -> Any:
    """The cached template of path, keyed by identity (paths are long-lived objects)."""
    hit = _templates.get(id(path))
    if hit is not None and hit[0] is path:
        return hit[1]
    template = _build_template(path)
    if len(_templates) >= _CACHE_LIMIT:
        _templates.clear()
    # The entry holds path itself, so its id cannot be reused while it is cached.
    _templates[id(path)] = (path, template)
    return template


def _fill_header(c_hdr: Any, header: Header) -> None:
    """Copy header's fields into a ``struct mrc_header`` (the C names are the same)."""
    common = header.common
    c_hdr.opcode, c_hdr.flags = common.opcode, common.flags
    c_hdr.dst_conn, c_hdr.src_conn = common.dst_conn, common.src_conn
    for name in dataclasses.fields(header)[1:]:
        setattr(c_hdr, name.name, getattr(header, name.name))


class _Scratch(threading.local):
    """One output buffer per thread: C fills it, ``ffi.unpack`` copies the packet out."""

    def __init__(self) -> None:
        self.buf = ffi.new("char[]", _MAX_PACKET)


_scratch = _Scratch()

# The per-packet C entry points and ffi.unpack, bound once: an attribute lookup on the cffi
# lib or ffi object costs about as much as a dict lookup, on every packet.
_c_encode_data = lib.mrc_encode_data
_c_encode_sack = lib.mrc_encode_sack
_c_decode_l4 = lib.mrc_decode_l4
_c_decode_mrc = lib.mrc_decode_mrc
_ffi_unpack = ffi.unpack


def _check_header(kind: type[Any], header: Header, payload: Buffer) -> None:
    """The reference's argument checks, in its order (codec.encode)."""
    if _OPCODE_CLASS.get(header.common.opcode) is not kind:
        raise ValueError(f"opcode {header.common.opcode!r} does not go with {kind.__name__}")
    if payload and kind is not DataHeader:
        raise ValueError(f"{kind.__name__} carries no payload")


def _encode_control(path: PathHeader, header: Header, payload: Buffer) -> bytes:
    """encode for the rarer headers: through a ``struct mrc_header``."""
    kind = type(header)
    if kind not in _BODIES or kind is DataHeader or kind is SackHeader:
        raise TypeError(f"not an MRC header: {kind.__name__}")
    _check_header(kind, header, payload)
    template = _template(path)
    c_hdr = ffi.new("struct mrc_header *")
    try:
        _fill_header(c_hdr, header)
    except (OverflowError, TypeError) as exc:  # cffi's range checks; struct.error in codec
        raise ValueError(f"{kind.__name__}: a field is out of range ({exc})") from None
    buf = _scratch.buf
    length = lib.mrc_encode_tmpl(buf, _MAX_PACKET, template, c_hdr, ffi.NULL, 0)
    if length < 0:  # not reached: the checks above are C's for a control header
        raise ValueError(f"{kind.__name__} does not fit the wire format (C error {length})")
    packet: bytes = ffi.unpack(buf, length)
    return packet


def encode(path: PathHeader, header: Header, payload: Buffer = b"") -> bytes:
    """A complete IPv6 packet: IPv6 [+ SRH] + UDP + MRC header + payload (codec.encode).

    Raises ValueError (or TypeError) where the reference does: fields that do not fit.
    """
    # Data and SACK packets are the per-packet traffic: one C call with scalar arguments,
    # inline here (a Python call costs as much as the C encode). C rejects an opcode of
    # the wrong class (MRC_E_ARG), so the reference's checks run only to name the error.
    kind = type(header)
    if kind is not DataHeader and kind is not SackHeader:
        return _encode_control(path, header, payload)
    if payload and kind is SackHeader:
        _check_header(kind, header, payload)
    hit = _templates.get(id(path))  # inline cache hit, as in decode_untrusted
    template = hit[1] if hit is not None and hit[0] is path else _template(path)
    buf = _scratch.buf
    c = header.common
    try:
        if kind is DataHeader:
            h: Any = header
            length = _c_encode_data(
                buf, _MAX_PACKET, template, c.opcode, c.flags, c.dst_conn, c.src_conn,
                h.psn, h.msn, h.msg_offset, h.msg_len, h.ts,
                payload if type(payload) is bytes else ffi.from_buffer(payload), len(payload),
            )  # fmt: skip
        else:
            s: Any = header
            length = _c_encode_sack(
                buf, _MAX_PACKET, template, c.opcode, c.flags, c.dst_conn, c.src_conn,
                s.cum_psn, s.sack_base, s.bitmap, s.ev, s.ts, s.ooo_count, s.rwnd_penalty,
                s.rwnd, s.rcvd_bytes, s.service_time, s.ports_down,
            )  # fmt: skip
    except (OverflowError, TypeError) as exc:  # cffi's range checks; struct.error in codec
        raise ValueError(f"{kind.__name__}: a field is out of range ({exc})") from None
    if length < 0:  # MRC_E_ARG: a wrong opcode, a penalty over 7 bits, or too long
        _check_header(kind, header, payload)
        if kind is SackHeader and s.rwnd_penalty > MAX_PENALTY:
            raise ValueError(f"SackHeader: rwnd_penalty {s.rwnd_penalty} > {MAX_PENALTY}")
        raise ValueError(f"{kind.__name__}: packet too long (IPv6 payload length > 65535)")
    packet: bytes = _ffi_unpack(buf, length)
    return packet


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
    n = len(headers)
    templates = [_template(path) for path in paths]  # held here while C reads them
    c_hdrs = ffi.new("struct mrc_header[]", max(n, 1))
    for i, header in enumerate(headers):
        if type(header) is not DataHeader:
            raise TypeError(f"encode_data_batch takes DataHeaders, not {type(header).__name__}")
        if _OPCODE_CLASS.get(header.common.opcode) is not DataHeader:
            raise ValueError(f"opcode {header.common.opcode!r} does not go with DataHeader")
        try:
            _fill_header(c_hdrs[i], header)
        except (OverflowError, TypeError) as exc:
            raise ValueError(f"DataHeader: a field is out of range ({exc})") from None
    poffs = [0, *itertools.accumulate(len(p) for p in payloads)]
    total = sum(t.len + 36 for t in templates) + poffs[-1]
    if any(
        t.len + 36 + len(p) - _IPV6_LEN > 0xFFFF for t, p in zip(templates, payloads, strict=True)
    ):
        raise ValueError("packet too long: IPv6 payload length > 65535")
    out = bytearray(total)
    offsets = ffi.new("uint32_t[]", n + 1)
    rc = lib.mrc_encode_data_batch(
        ffi.from_buffer(out),
        total,
        ffi.new("struct mrc_template *[]", templates or [ffi.NULL]),
        c_hdrs,
        b"".join(payloads),
        ffi.new("uint32_t[]", poffs),
        n,
        offsets,
    )
    if rc < 0:
        raise ValueError(f"batch does not fit the wire format (C error {rc})")
    return out, list(offsets)


# ---------------------------------------------------------------------------------------
# Decoding (untrusted input: every failure is a BadPacket with the reference's reason)

_paths: dict[bytes, PathHeader] = {}
_commons: dict[bytes, Common] = {}


def _new_path(buf: bytes, l4: int) -> PathHeader:
    """The PathHeader of a valid packet, interned by the bytes it is made of: up to the UDP
    ports (not the UDP length and checksum), so one entry per path and packet size."""
    key = buf[: l4 + 4]
    path = _paths.get(key)
    if path is None:
        (first,) = _IPV6_FIRST.unpack_from(buf)
        sport, dport = _UDP_PORTS.unpack_from(buf, l4)
        # With an SRH (validated by C), segments start at 48 and last_entry is byte 44.
        count = buf[44] + 1 if buf[6] == _ROUTING_HEADER else 0
        wire = [buf[o : o + 16] for o in range(48, 48 + 16 * count, 16)]
        encap = buf[6] == _IPV6_IN_IPV6  # the inner destination at 64 (validated by C)
        path = PathHeader(
            src=buf[48:64] if encap else buf[8:24],
            dst=buf[24:40],
            final_dst=buf[64:80] if encap else None,
            encap=encap,
            segments=tuple(reversed(wire)),
            ev=sport << 16 | (first & 0xFFFF),
            dscp=(first >> 22) & 0x3F,
            ecn=_ECNS[(first >> 20) & 3],
            dport=dport,
            hop_limit=buf[7],
        )
        if len(_paths) >= _CACHE_LIMIT:
            _paths.clear()
        _paths[key] = path
    return path


def _new_common(buf: bytes, off: int) -> Common:
    """The Common of the MRC header at off, interned by its bytes after the version."""
    key = buf[off + 1 : off + 12]
    common = _commons.get(key)
    if common is None:
        opcode, flags, dst_conn, src_conn = _COMMON_TAIL.unpack_from(key)
        common = Common(_OPCODES[opcode], FLAGS_BY_VALUE[flags], dst_conn, src_conn)
        if len(_commons) >= _CACHE_LIMIT:
            _commons.clear()
        _commons[key] = common
    return common


def decode_untrusted(buf: Buffer, *, dport: int | None = None) -> Packet:
    """Parse one received IPv6 packet; raises BadPacket, and only BadPacket, if malformed."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    want = -1 if dport is None else dport if 0 <= dport <= 0xFFFF else 0x10000
    l4 = _c_decode_l4(buf, len(buf), want)
    if l4 < 0:
        reason, message = _ERRORS[l4]
        raise BadPacket(reason, message)
    # C has checked every length and value; what is left is reading the fields out.
    # The interned objects are looked up inline (objects are truthy): the hit is the
    # common case and a function call costs as much as the lookup.
    off = l4 + 8
    common = _commons.get(buf[off + 1 : off + 12]) or _new_common(buf, off)
    path = _paths.get(buf[: l4 + 4]) or _new_path(buf, l4)
    decode: Callable[..., Packet] = _DECODERS[buf[off + 1]]
    return decode(path, common, buf, off + 12)


DECAP_LEN = codec.DECAP_LEN


def decap_untrusted(buf: Buffer, *, dport: int | None = None) -> tuple[bytes, bytes, int]:
    """(source, destination, UDP source port) of an encapsulated packet's inner part as a
    raw IPPROTO_IPV6 socket delivers it; raises BadPacket (codec.decap_untrusted)."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    want = -1 if dport is None else dport if 0 <= dport <= 0xFFFF else 0x10000
    off = lib.mrc_decap(buf, len(buf), want)
    if off < 0:
        reason, message = _ERRORS[off]
        raise BadPacket(reason, message)
    return buf[8:24], buf[24:40], int.from_bytes(buf[40:42], "big")


_dgram_paths: dict[tuple[bytes, bytes, int, int, int, int], PathHeader] = {}


def _datagram_path(
    src: bytes, dst: bytes, sport: int, dport: int, tclass: int, flow_label: int
) -> PathHeader:
    """The PathHeader of a kernel-delivered datagram (codec.decode_datagram_untrusted),
    interned by its arguments when they are hashable (a connection sees few paths)."""
    path = codec.datagram_path(src, dst, sport, dport, tclass, flow_label)
    if type(src) is bytes and type(dst) is bytes:
        if len(_dgram_paths) >= _CACHE_LIMIT:
            _dgram_paths.clear()
        _dgram_paths[(src, dst, sport, dport, tclass, flow_label)] = path
    return path


def decode_datagram_untrusted(
    payload: Buffer,
    *,
    src: bytes,
    dst: bytes,
    sport: int,
    dport: int,
    tclass: int,
    flow_label: int,
) -> Packet:
    """Parse the MRC header of a UDP payload a kernel socket delivered; raises BadPacket
    (codec.decode_datagram_untrusted: the kernel checked IPv6, the SRH and the checksum)."""
    # One copy out of the (reused) receive slot; every slice below is then a bytes object.
    buf = payload if type(payload) is bytes else bytes(payload)
    off = _c_decode_mrc(buf, len(buf), tclass & 0xFF)
    if off < 0:
        reason, message = _ERRORS[off]
        raise BadPacket(reason, message)
    # C checked every length and value: read the fields out, through the interned objects
    common = _commons.get(buf[1:12]) or _new_common(buf, 0)
    path = None
    if type(src) is bytes and type(dst) is bytes:
        path = _dgram_paths.get((src, dst, sport, dport, tclass, flow_label))
    if path is None:
        path = _datagram_path(src, dst, sport, dport, tclass, flow_label)
    decode: Callable[..., Packet] = _DECODERS[buf[1]]
    return decode(path, common, buf, 12)
