"""The C fast path against the pure-Python reference: identical bytes, identical parses,
identical BadPacket reasons, for every opcode over uSID and SRH paths, and a decoder that
survives arbitrary and mutated input. Skipped when the extension is not built (test_backend
turns that into a failure when CI expects the fast path)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrc_transport.frozen import slot_alike_class
from mrc_transport.wire import codec
from mrc_transport.wire.errors import BadPacket
from mrc_transport.wire.frames import (
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
from srv6 import checksum

fast = pytest.importorskip("mrc_transport.wire.fast")
_fastpath = pytest.importorskip("mrc_transport._fastpath")

SETTINGS = settings(
    max_examples=int(os.environ.get("MRC_FASTPATH_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
addresses = st.binary(min_size=16, max_size=16)
known_flags = st.integers(0, 0x0F).map(Flags)


@st.composite
def paths(draw: st.DrawFn) -> PathHeader:
    """A uSID path (no SRH, maybe a final_dst, maybe encapsulated) or an SRH path of 1 to 8
    segments."""
    segments = tuple(draw(st.lists(addresses, max_size=8)))
    return PathHeader(
        encap=not segments and draw(st.booleans()),
        src=draw(addresses),
        dst=draw(addresses),
        final_dst=draw(st.none() | addresses),
        segments=segments,
        ev=draw(u32),
        dscp=draw(st.integers(0, 63)),
        ecn=draw(st.sampled_from(Ecn)),
        dport=draw(u16),
        hop_limit=draw(u8),
    )


def commons(opcodes: list[Opcode]) -> st.SearchStrategy[Common]:
    return st.builds(Common, st.sampled_from(opcodes), known_flags, u32, u32)


DATA_OPS = [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY]
HEADERS: dict[type[Any], st.SearchStrategy[Any]] = {
    DataHeader: st.builds(DataHeader, commons(DATA_OPS), u32, u32, u32, u32, u64),
    SackHeader: st.builds(
        SackHeader,
        commons([Opcode.ACK, Opcode.SACK]),
        u32,
        u32,
        u64,
        u32,
        u64,
        u16,
        st.integers(0, 127),
        u32,
        u64,
        u32,
        u64,
    ),
    NackHeader: st.builds(
        NackHeader, commons([Opcode.NACK]), u32, st.sampled_from(NackReason), u32, u64
    ),
    ProbeHeader: st.builds(ProbeHeader, commons([Opcode.PROBE, Opcode.PROBE_REPLY]), u32, u32, u64),
    SetupHeader: st.builds(
        SetupHeader, commons([Opcode.SETUP, Opcode.SETUP_ACK]), u32, u32, u16, u16, u64
    ),
    CloseHeader: st.builds(CloseHeader, commons([Opcode.CLOSE, Opcode.CLOSE_ACK]), u32),
}
headers = st.one_of(*HEADERS.values())


@st.composite
def placed_data(draw: st.DrawFn) -> tuple[DataHeader, bytes]:
    """A data header whose placement fields agree with its payload (a decodable one)."""
    payload = draw(st.binary(max_size=600))
    op = draw(st.sampled_from(DATA_OPS))
    starts = op in (Opcode.WRITE_FIRST, Opcode.WRITE_ONLY)
    ends = op in (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)
    offset = 0 if starts else draw(st.integers(0, 1 << 20))
    msg_len = offset + len(payload) + (0 if ends else draw(st.integers(0, 1 << 20)))
    common = Common(op, draw(known_flags), draw(u32), draw(u32))
    return DataHeader(common, draw(u32), draw(u32), offset, msg_len, draw(u64)), payload


@st.composite
def frames(draw: st.DrawFn) -> tuple[PathHeader, Header, bytes]:
    """Any encodable frame: data with a payload (placement valid or not) or control."""
    header = draw(headers)
    payload = draw(st.binary(max_size=300)) if isinstance(header, DataHeader) else b""
    if isinstance(header, DataHeader) and draw(st.booleans()):
        header, payload = draw(placed_data())
    return draw(paths()), header, payload


def arrived(path: PathHeader, packet: bytes) -> bytes:
    """The packet as its receiver sees it: without an SRH the destination has been shifted
    to the final one (the kernel's next-csid End); with an SRH it is checksummed over
    segments[0] already, whatever the active segment."""
    if path.segments or path.final_dst is None:
        return packet
    return packet[:24] + path.final_dst + packet[40:]


Outcome = Packet | tuple[str, str]


def outcome(decode: Callable[..., Packet], buf: bytes, **kwargs: Any) -> Outcome:
    """The parse, or ("BadPacket", reason); any other exception fails the test."""
    try:
        return decode(buf, **kwargs)
    except BadPacket as exc:
        return ("BadPacket", exc.reason)


def field_types(value: object) -> object:
    """The type of value and, for a frame, of every field, recursively: equality alone
    cannot tell Opcode.SACK from 5 or Flags.TS from 2."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return type(value), tuple(field_types(getattr(value, f.name)) for f in fields)
    return type(value)


def assert_same_parse(buf: bytes, **kwargs: Any) -> Outcome:
    expected = outcome(codec.decode_untrusted, buf, **kwargs)
    got = outcome(fast.decode_untrusted, buf, **kwargs)
    assert got == expected
    assert field_types(got) == field_types(expected)
    return got


# ------------------------------------------------------------------ identical bytes


@SETTINGS
@given(frames())
def test_identical_bytes_for_every_opcode(frame: tuple[PathHeader, Header, bytes]) -> None:
    path, header, payload = frame
    assert fast.encode(path, header, payload) == codec.encode(path, header, payload)


@SETTINGS
@given(frames())
def test_memoryview_payload(frame: tuple[PathHeader, Header, bytes]) -> None:
    path, header, payload = frame
    view = memoryview(bytearray(payload))
    assert fast.encode(path, header, view) == codec.encode(path, header, payload)


@SETTINGS
@given(st.lists(st.tuples(paths(), placed_data()), max_size=12))
def test_identical_data_batches(batch: list[tuple[PathHeader, tuple[DataHeader, bytes]]]) -> None:
    ps = [path for path, _ in batch]
    hs = [header for _, (header, _) in batch]
    pls = [payload for _, (_, payload) in batch]
    buf, offsets = fast.encode_data_batch(ps, hs, pls)
    assert (buf, offsets) == codec.encode_data_batch(ps, hs, pls)
    assert isinstance(buf, bytearray)
    assert len(offsets) == len(batch) + 1


def test_c_struct_encode_matches_the_reference() -> None:
    """mrc_encode (path and header structs, what C callers use) against codec.encode."""
    ffi, lib = _fastpath.ffi, _fastpath.lib
    segs = (b"\x01" * 16, b"\x02" * 16)
    path = PathHeader(src=b"\x0a" * 16, dst=segs[0], segments=segs, ev=0x8001_2345)
    header = NackHeader(Common(Opcode.NACK, Flags.ECN_ECHO, 7, 9), 42, NackReason.NO_BUFFER, 5, 6)
    c_path = ffi.new("struct mrc_path *")
    c_path.src, c_path.dst, c_path.final_dst = path.src, path.dst, segs[-1]
    keep = ffi.new("char[]", b"".join(segs))
    c_path.segments, c_path.n_segments = keep, 2
    c_path.ev, c_path.dscp, c_path.ecn = path.ev, path.dscp, path.ecn
    c_path.dport, c_path.hop_limit = path.dport, path.hop_limit
    c_hdr = ffi.new("struct mrc_header *")
    c_hdr.opcode, c_hdr.flags, c_hdr.dst_conn, c_hdr.src_conn = header.common.opcode, 4, 7, 9
    c_hdr.psn, c_hdr.reason, c_hdr.ev, c_hdr.ts = 42, 3, 5, 6
    out = ffi.new("char[]", 512)
    length = lib.mrc_encode(out, 512, c_path, c_hdr, ffi.NULL, 0)
    assert ffi.unpack(out, length) == codec.encode(path, header)
    assert lib.mrc_encode(out, 20, c_path, c_hdr, ffi.NULL, 0) == lib.MRC_E_NOSPACE


# ------------------------------------------------------------------ identical parses


@SETTINGS
@given(frames(), st.booleans())
def test_identical_parses(frame: tuple[PathHeader, Header, bytes], filter_port: bool) -> None:
    path, header, payload = frame
    packet = arrived(path, codec.encode(path, header, payload))
    kwargs = {"dport": path.dport} if filter_port else {}
    result = assert_same_parse(packet, **kwargs)
    checksummed_right = not path.segments or path.final_dst in (None, path.segments[-1])
    overflow = isinstance(header, DataHeader) and header.msg_offset + len(payload) > header.msg_len
    if checksummed_right and overflow:
        assert result == ("BadPacket", "bad_message")


@pytest.mark.parametrize("cls", [Packet, DataHeader, SackHeader, NackHeader, ProbeHeader,
                                 SetupHeader, CloseHeader])  # fmt: skip
def test_decoder_builds_frames_through_slot_alike_classes(cls: type[Any]) -> None:
    """Every frame the decoder builds takes the fast path (a class of the same slots whose
    instances become cls); a change to frames.py that breaks it would silently cost the
    speed."""
    assert slot_alike_class(cls) is not None


def test_decoded_frames_behave_like_constructed_ones() -> None:
    """A frame built through its slot-alike class is a real frozen instance: equal, same hash,
    immutable, and dataclasses.replace works (the protocol core uses all four)."""
    path = PathHeader(src=b"\x01" * 16, dst=b"\x02" * 16, ev=0x12345)
    sack = SackHeader(Common(Opcode.SACK, Flags.TS, 1, 2), 10, 8, 0b101, 7, 99, 1, 0, 4096)
    got = fast.decode_untrusted(fast.encode(path, sack))
    assert type(got) is Packet
    assert type(got.header) is SackHeader
    assert got.header == sack
    assert hash(got.header) == hash(sack)
    assert got == Packet(got.path, sack, b"")
    assert hash(got) == hash(Packet(got.path, sack, b""))
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.header.cum_psn = 11  # type: ignore[misc]
    assert dataclasses.replace(got.header, cum_psn=11) == dataclasses.replace(sack, cum_psn=11)
    assert repr(got.header) == repr(sack)


@SETTINGS
@given(st.tuples(paths(), placed_data()))
def test_valid_data_round_trips(frame: tuple[PathHeader, tuple[DataHeader, bytes]]) -> None:
    path, (header, payload) = frame
    if path.segments:
        path = dataclasses.replace(path, final_dst=None)
    got = fast.decode_untrusted(arrived(path, fast.encode(path, header, payload)))
    assert got.header == header
    assert got.payload == payload
    assert got.path.segments == path.segments
    assert got.path.ev == path.ev & 0xFFFF0000 | path.ev & 0xFFFF


@SETTINGS
@given(paths(), headers, u16)
def test_port_filter(path: PathHeader, header: Header, dport: int) -> None:
    packet = arrived(path, codec.encode(path, header))
    assert_same_parse(packet, dport=dport)


# ------------------------------------------------------------------ hostile input


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes(buf: bytes) -> None:
    assert_same_parse(buf)


@SETTINGS
@given(st.binary(max_size=120))
def test_arbitrary_bytes_behind_a_valid_ipv6_header(tail: bytes) -> None:
    # Reach past the first checks: version 6 and a payload length that matches.
    for next_header in (17, 43, 41, 0):
        head = bytes([0x60, 0, 0, 0]) + len(tail).to_bytes(2, "big") + bytes([next_header, 64])
        assert_same_parse(head + bytes(32) + tail)


def _fix_checksum(packet: bytearray, path: PathHeader) -> None:
    """Recompute the UDP checksum so a mutation reaches the checks behind it."""
    l4 = 40 + (8 + 16 * len(path.segments) if path.segments else 40 if path.encap else 0)
    if len(packet) < l4 + 8 or packet[6] != (43 if path.segments else 41 if path.encap else 17):
        return
    src = bytes(packet[48:64]) if path.encap else bytes(packet[8:24])
    final = bytes(packet[48:64]) if path.segments else bytes(packet[l4 - 16 : l4])
    packet[l4 + 6 : l4 + 8] = b"\0\0"
    packet[l4 + 6 : l4 + 8] = checksum.udp6_checksum(src, final, packet[l4:]).to_bytes(2, "big")


@SETTINGS
@given(
    frames(),
    st.lists(st.tuples(st.integers(0, 10_000), u8), min_size=1, max_size=4),
    st.sampled_from(["flip", "truncate", "extend", "fix"]),
)
def test_mutated_packets(
    frame: tuple[PathHeader, Header, bytes], edits: list[tuple[int, int]], how: str
) -> None:
    path, header, payload = frame
    packet = bytearray(arrived(path, codec.encode(path, header, payload)))
    mutate(packet, edits, how)
    if how == "fix":
        _fix_checksum(packet, path)
    assert_same_parse(bytes(packet))


def mutate(buf: bytearray, edits: list[tuple[int, int]], how: str) -> None:
    """Cut ``buf`` at the first edit's position, extend it by the edits' values, or
    (flip, fix) overwrite bytes at the edits' positions."""
    if how == "truncate":
        del buf[edits[0][0] % len(buf) :]
    elif how == "extend":
        buf += bytes(value for _, value in edits)
    else:
        for position, value in edits:
            buf[position % len(buf)] = value


# ------------------------------------------------------------------ kernel-delivered datagrams

tclasses = st.integers(0, 0xFF)
flow_labels = st.integers(0, 0xFFFFF)


def assert_same_datagram_parse(payload: bytes, meta: dict[str, Any]) -> Outcome:
    """Both backends on one UDP payload, as bytes and as a memoryview into a larger
    writable buffer (what the endpoint's receive slots hand over)."""
    expected = outcome(codec.decode_datagram_untrusted, payload, **meta)
    got = outcome(fast.decode_datagram_untrusted, payload, **meta)
    slot = bytearray(payload) + b"\xee" * 7
    from_slot = outcome(fast.decode_datagram_untrusted, memoryview(slot)[: len(payload)], **meta)
    slot[:] = b"\0" * len(slot)  # the slot is reused: the parse must not share its bytes
    for result in (got, from_slot):
        assert result == expected
        assert field_types(result) == field_types(expected)
    return got


@st.composite
def metas(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "src": draw(addresses), "dst": draw(addresses), "sport": draw(u16), "dport": draw(u16),
        "tclass": draw(tclasses), "flow_label": draw(flow_labels),
    }  # fmt: skip


def udp_payload(header: Header, payload: bytes) -> bytes:
    """The MRC header and payload as the kernel's UDP socket delivers them."""
    path = PathHeader(src=bytes(16), dst=bytes(16))
    return codec.encode(path, header, payload)[48:]


@SETTINGS
@given(frames(), metas())
def test_identical_datagram_parses(
    frame: tuple[PathHeader, Header, bytes], meta: dict[str, Any]
) -> None:
    _, header, payload = frame
    result = assert_same_datagram_parse(udp_payload(header, payload), meta)
    overflow = isinstance(header, DataHeader) and header.msg_offset + len(payload) > header.msg_len
    if overflow:
        assert result == ("BadPacket", "bad_message")
    if isinstance(result, Packet):
        assert result.header == header
        assert result.payload == payload


@SETTINGS
@given(st.binary(max_size=120), metas())
def test_arbitrary_datagrams(buf: bytes, meta: dict[str, Any]) -> None:
    assert_same_datagram_parse(buf, meta)
    # past the version byte, to reach the opcode and body checks
    assert_same_datagram_parse(b"\x01" + buf, meta)


@SETTINGS
@given(
    frames(),
    metas(),
    st.lists(st.tuples(st.integers(0, 10_000), u8), min_size=1, max_size=4),
    st.sampled_from(["flip", "truncate", "extend"]),
)
def test_mutated_datagrams(
    frame: tuple[PathHeader, Header, bytes],
    meta: dict[str, Any],
    edits: list[tuple[int, int]],
    how: str,
) -> None:
    _, header, payload = frame
    datagram = bytearray(udp_payload(header, payload))
    mutate(datagram, edits, how)
    assert_same_datagram_parse(bytes(datagram), meta)


def test_datagram_reasons_are_shared() -> None:
    """Every MRC-header reason a datagram can have, named the same by both backends."""
    data = DataHeader(Common(Opcode.WRITE_ONLY, Flags.TS, 1, 2), 0, 0, 0, 3, 0)
    good = udp_payload(data, b"abc")
    ack = udp_payload(SackHeader(Common(Opcode.ACK, Flags.NONE, 1, 2), 0, 0, 0, 0, 0, 0, 0, 0), b"")
    nack = udp_payload(
        NackHeader(Common(Opcode.NACK, Flags.NONE, 1, 2), 0, NackReason(1), 0, 0), b""
    )
    meta = {"src": b"\x0a" * 16, "dst": b"\x0b" * 16, "sport": 1, "dport": 2,
            "tclass": 0, "flow_label": 0}  # fmt: skip

    def patched(base: bytes, at: int, value: int) -> bytes:
        return base[:at] + bytes([value]) + base[at + 1 :]

    cases = {
        good[:5]: "truncated",
        patched(good, 0, 2): "bad_version",
        patched(good, 1, 0xEE): "unknown_opcode",
        patched(good, 2, 0x80): "bad_field",
        good[:20]: "truncated",
        ack + b"x": "bad_length",
        patched(ack, 12 + 15, 1): "bad_field",  # an ACK with a bitmap bit
        patched(nack, 12 + 4, 0xEE): "bad_field",  # NACK reason
        good + b"x": "bad_message",
    }
    for datagram, reason in cases.items():
        assert assert_same_datagram_parse(datagram, meta) == ("BadPacket", reason)
    assert isinstance(assert_same_datagram_parse(good, meta), Packet)


def test_every_reason_is_reachable_and_shared() -> None:
    """One hand-made packet per BadPacket reason; both backends name it the same."""
    path = PathHeader(src=b"\x0a" * 16, dst=b"\x0b" * 16)
    data = DataHeader(Common(Opcode.WRITE_ONLY, Flags.TS, 1, 2), 0, 0, 0, 3, 0)
    good = bytearray(codec.encode(path, data, b"abc"))
    ack = SackHeader(Common(Opcode.ACK, Flags.NONE, 1, 2), 0, 0, 0, 0, 0, 0, 0, 0)

    def patched(at: int, value: int, base: bytearray = good) -> bytes:
        packet = bytearray(base)
        packet[at] = value
        _fix_checksum(packet, path)
        return bytes(packet)

    cases = {
        "truncated": bytes(good[:30]),
        "not_ipv6": patched(0, 0x40),
        "bad_length": bytes(good) + b"\0",
        "not_udp": patched(6, 6),
        "bad_checksum": bytes(good[:60]) + bytes([good[60] ^ 1]) + bytes(good[61:]),
        "bad_version": patched(48, 2),
        "unknown_opcode": patched(49, 0x0D),
        "bad_message": patched(75, 9),  # msg_len 3 -> 9: WRITE_ONLY must end at msg_len
        "bad_field": patched(50, 0x20),
    }
    ack_packet = bytearray(codec.encode(path, ack))
    cases["bad_port"] = bytes(good)
    srh_path = PathHeader(src=b"\x0a" * 16, dst=b"\x0c" * 16, segments=(b"\x0c" * 16,))
    cases["bad_srh"] = patched(42, 5, bytearray(codec.encode(srh_path, data, b"abc")))
    for reason, packet in cases.items():
        kwargs = {"dport": 1} if reason == "bad_port" else {}
        assert assert_same_parse(packet, **kwargs) == ("BadPacket", reason), reason
    ack_packet[60 + 8] = 1  # a bit in an ACK's bitmap
    _fix_checksum(ack_packet, path)
    assert assert_same_parse(bytes(ack_packet)) == ("BadPacket", "bad_field")


# ------------------------------------------------------------------ decapsulation (encap)


def assert_same_decap(inner: bytes, **kwargs: Any) -> object:
    """Both decapsulators give the same (source, destination, source port) or reason."""

    def one(decap: Callable[..., tuple[bytes, bytes, int]]) -> object:
        try:
            return decap(inner, **kwargs)
        except BadPacket as exc:
            return ("BadPacket", exc.reason)

    expected = one(codec.decap_untrusted)
    assert one(fast.decap_untrusted) == expected
    return expected


@SETTINGS
@given(frames(), st.booleans())
def test_identical_decaps(frame: tuple[PathHeader, Header, bytes], filter_port: bool) -> None:
    """What a raw IPPROTO_IPV6 socket delivers of an encapsulated packet (the outer header
    stripped): the NICs' addresses and the EV's source port, or the same reason."""
    path, header, payload = frame
    path = dataclasses.replace(path, segments=(), encap=True)
    inner = codec.encode(path, header, payload)[40:]
    got = assert_same_decap(inner, **({"dport": path.dport} if filter_port else {}))
    assert got == (path.src, path.final_dst or path.dst, path.ev >> 16)


@SETTINGS
@given(
    frames(),
    st.lists(st.tuples(st.integers(0, 10_000), u8), min_size=1, max_size=4),
    st.sampled_from(["flip", "truncate", "extend"]),
)
def test_mutated_decaps(
    frame: tuple[PathHeader, Header, bytes], edits: list[tuple[int, int]], how: str
) -> None:
    path, header, payload = frame
    path = dataclasses.replace(path, segments=(), encap=True)
    inner = bytearray(codec.encode(path, header, payload)[40:])
    mutate(inner, edits, how)
    assert_same_decap(bytes(inner))


@SETTINGS
@given(st.binary(max_size=120))
def test_arbitrary_decaps(buf: bytes) -> None:
    assert_same_decap(buf)


def test_decap_reasons_are_shared() -> None:
    """A cut or wrong inner header is named the same by both; a good one gives the NICs'."""
    path = PathHeader(src=b"\x0a" * 16, dst=b"\x0b" * 16, final_dst=b"\x0c" * 16, encap=True)
    data = DataHeader(Common(Opcode.WRITE_ONLY, Flags.TS, 1, 2), 0, 0, 0, 3, 0)
    packet = codec.encode(path, data, b"abc")
    inner = packet[40:]
    not_udp = bytearray(inner)
    not_udp[6] = 6
    cases = {
        inner[:20]: "truncated",  # the inner header cut
        inner[:44]: "truncated",  # its payload length says more than arrived
        inner + b"\0": "bad_length",
        bytes(not_udp): "not_udp",
        inner[:46] + bytes([inner[46] ^ 1]) + inner[47:]: "bad_checksum",
    }
    for buf, reason in cases.items():
        assert assert_same_decap(buf) == ("BadPacket", reason), reason
    assert assert_same_decap(inner, dport=1) == ("BadPacket", "bad_port")
    assert assert_same_decap(inner) == (b"\x0a" * 16, b"\x0c" * 16, 0)
    outer_cut = bytearray(packet[:60])
    outer_cut[4:6] = (20).to_bytes(2, "big")  # the outer length agrees: the inner is cut
    assert assert_same_parse(bytes(outer_cut)) == ("BadPacket", "truncated")


# ------------------------------------------------------------------ same errors on encode


@pytest.mark.parametrize(
    "change",
    [
        {"src": b"\0" * 15},
        {"dst": "::1"},
        {"ev": 1 << 32},
        {"dscp": 64},
        {"dport": -1},
        {"segments": (b"\0" * 16,) * 128},
        {"final_dst": b"\0" * 17},
        {"encap": True, "segments": (b"\0" * 16,)},
    ],
)
def test_bad_paths_raise_valueerror_in_both(change: dict[str, Any]) -> None:
    base = {"src": b"\0" * 16, "dst": b"\0" * 16}
    path = PathHeader(**{**base, **change})
    header = CloseHeader(Common(Opcode.CLOSE, Flags.NONE, 1, 2), 3)
    for backend in (codec, fast):
        with pytest.raises(ValueError, match=r"PathHeader|segments"):
            backend.encode(path, header)


def _data(*fields: int, op: Opcode = Opcode.WRITE_ONLY, conn: int = 1) -> DataHeader:
    return DataHeader(Common(op, Flags.NONE, conn, 2), *fields)


@pytest.mark.parametrize(
    ("header", "payload", "error"),
    [
        (_data(1 << 32, 0, 0, 0, 0), b"", ValueError),
        (_data(0, 0, 0, 0, 0, conn=-1), b"", ValueError),
        (_data(0, 0, 0, 0, 0, op=Opcode.SACK), b"", ValueError),
        (CloseHeader(Common(Opcode.CLOSE, Flags.NONE, 1, 2), 3), b"x", ValueError),
        (SetupHeader(Common(Opcode.SETUP, Flags.NONE, 1, 2), 0, 0, 1 << 16, 0, 0), b"", ValueError),
        (_data(0, 0, 0, 0, 0), bytes(65520), ValueError),
        ("not a header", b"", TypeError),
    ],
)
def test_bad_headers_raise_the_same_error(
    header: Any, payload: bytes, error: type[Exception]
) -> None:
    path = PathHeader(src=b"\0" * 16, dst=b"\0" * 16)
    for backend in (codec, fast):
        with pytest.raises(error):
            backend.encode(path, header, payload)


def test_batch_rejects_control_headers_like_the_reference() -> None:
    path = PathHeader(src=b"\0" * 16, dst=b"\0" * 16)
    close = CloseHeader(Common(Opcode.CLOSE, Flags.NONE, 1, 2), 3)
    for backend in (codec, fast):
        with pytest.raises(TypeError):
            backend.encode_data_batch([path], [close], [b""])
        with pytest.raises(ValueError, match="lengths differ"):
            backend.encode_data_batch([path], [], [b""])


# ------------------------------------------------------------------ checksums


@SETTINGS
@given(st.binary(max_size=3000), st.integers(0, 1 << 40))
def test_internet_checksum_matches(data: bytes, initial: int) -> None:
    assert fast.internet_checksum(data, initial) == checksum.internet_checksum(data, initial)
    assert fast.internet_checksum(data) == checksum.internet_checksum(data)


@SETTINGS
@given(addresses, addresses, st.binary(min_size=8, max_size=3000))
def test_udp6_checksum_matches(src: bytes, dst: bytes, udp: bytes) -> None:
    # Odd lengths are the case that needs the RFC 1071 zero pad byte.
    assert fast.udp6_checksum(src, dst, udp) == checksum.udp6_checksum(src, dst, udp)


@pytest.mark.parametrize("length", [0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 4095, 4097])
def test_checksum_edge_lengths(length: int) -> None:
    for fill in (0x00, 0xFF, 0xA5):
        data = bytes([fill]) * length
        assert fast.internet_checksum(data) == checksum.internet_checksum(data)


# ------------------------------------------------------------------ C under sanitizers


def test_c_decoder_under_address_sanitizer(tmp_path: Path) -> None:
    """csrc/fuzz_decode.c: 300k mutated and random packets through mrc_decode, built with
    ASan + UBSan, so any read outside buf[0:len] or undefined behaviour aborts."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    csrc = Path(__file__).resolve().parents[2] / "csrc"
    exe = tmp_path / "fuzz_decode"
    sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    subprocess.run(
        [cc, "-O1", "-g", *sanitize, f"-I{csrc}", "-o", str(exe),
         str(csrc / "fuzz_decode.c"), str(csrc / "mrc_fast.c")],
        check=True,
    )  # fmt: skip
    run = subprocess.run([str(exe), "300000"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "fuzz done" in run.stdout
