"""SRH (RFC 8754) encode/decode, its validation, and agreement with scapy."""

from __future__ import annotations

from ipaddress import IPv6Address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet6 import (
    IPv6ExtHdrSegmentRouting,
    IPv6ExtHdrSegmentRoutingTLVPadN,
)

from srv6.errors import MalformedHeader
from srv6.srh import Srh, decode_untrusted, pad_tlvs

PATH = [IPv6Address("fc00:1::1"), IPv6Address("fc00:2::1"), IPv6Address("fc00:3::9")]

segment_lists = st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=8)
tlv_areas = st.lists(st.binary(max_size=20), max_size=3).map(
    lambda values: pad_tlvs(b"".join(bytes([7, len(value)]) + value for value in values))
)


def test_for_path_reverses_into_wire_order() -> None:
    srh = Srh.for_path(PATH, next_header=17)
    assert srh.segments == tuple(segment.packed for segment in reversed(PATH))
    assert srh.path == tuple(segment.packed for segment in PATH)
    assert (srh.segments_left, srh.last_entry, srh.hdr_ext_len) == (2, 2, 6)
    assert srh.active_segment == PATH[0].packed
    wire = srh.encode()
    assert len(wire) == srh.wire_len == 8 + 48
    assert wire[:8] == bytes([17, 6, 4, 2, 2, 0, 0, 0])
    assert wire[8:24] == PATH[2].packed


@given(
    segment_lists,
    st.data(),
    st.integers(0, 255),
    st.integers(0, 0xFFFF),
    tlv_areas,
)
def test_round_trip(
    segments: list[bytes], data: st.DataObject, flags: int, tag: int, tlvs: bytes
) -> None:
    left = data.draw(st.integers(0, len(segments) - 1))
    srh = Srh(17, left, len(segments) - 1, tuple(segments), flags, tag, tlvs)
    wire = srh.encode()
    assert decode_untrusted(wire + b"trailing payload") == srh
    assert len(wire) % 8 == 0


def test_pad_tlvs_uses_pad1_and_padn() -> None:
    assert pad_tlvs(b"") == b""
    assert pad_tlvs(bytes(7)) == bytes(8)  # seven Pad1 + one Pad1
    assert pad_tlvs(b"\x07\x00") == b"\x07\x00\x04\x04\x00\x00\x00\x00"


def _valid() -> bytes:
    return Srh.for_path(PATH, next_header=17).encode()


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"", "truncated"),
        (_valid()[:7], "truncated"),
        (_valid()[:40], "truncated"),
        (_valid()[:2] + b"\x02" + _valid()[3:], "routing type 2"),
        (_valid()[:3] + b"\x03" + _valid()[4:], "segments_left 3 > last_entry 2"),
        (_valid()[:4] + b"\x03" + _valid()[5:], "too short for last_entry 3"),
        (_valid()[:1] + b"\x07" + _valid()[2:] + b"\x07\x09" + bytes(6), "runs past"),
        (_valid()[:1] + b"\x07" + _valid()[2:] + bytes(7) + b"\x07", "cut after its type"),
    ],
)
def test_decode_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MalformedHeader, match=message):
        decode_untrusted(wire)


@given(st.binary(max_size=200))
def test_decode_raises_only_malformed_header(wire: bytes) -> None:
    try:
        srh = decode_untrusted(wire)
    except MalformedHeader:
        return
    assert srh.encode() == wire[: srh.wire_len]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"segments": ()}, "1 to 127"),
        ({"last_entry": 3}, "last_entry 3"),
        ({"segments_left": 3}, "segments_left 3"),
        ({"tlvs": b"\x00"}, "not padded"),
        ({"routing_type": 2}, "routing type 2"),
    ],
)
def test_constructor_validates(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "next_header": 17,
        "segments_left": 2,
        "last_entry": 2,
        "segments": tuple(segment.packed for segment in PATH),
    }
    fields.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Srh(**fields)  # type: ignore[arg-type]


@settings(deadline=None)
@given(segment_lists, st.integers(0, 255), st.integers(0, 0xFFFF), st.binary(max_size=13))
def test_scapy_dissects_ours(segments: list[bytes], flags: int, tag: int, pad: bytes) -> None:
    tlvs = pad_tlvs(bytes([7, len(pad)]) + pad) if pad else b""
    srh = Srh(17, len(segments) - 1, len(segments) - 1, tuple(segments), flags, tag, tlvs)
    theirs = IPv6ExtHdrSegmentRouting(srh.encode())
    assert theirs.nh == srh.next_header
    assert theirs.len == srh.hdr_ext_len
    assert theirs.type == srh.routing_type
    assert theirs.segleft == srh.segments_left
    assert theirs.lastentry == srh.last_entry
    scapy_flags = (
        theirs.unused1 << 7
        | theirs.protected << 6
        | theirs.oam << 5
        | theirs.alert << 4
        | theirs.hmac << 3
        | theirs.unused2
    )
    assert scapy_flags == srh.flags
    assert theirs.tag == srh.tag
    assert [IPv6Address(a).packed for a in theirs.addresses] == list(srh.segments)
    assert b"".join(bytes(tlv) for tlv in theirs.tlv_objects) == srh.tlvs


@settings(deadline=None)
@given(segment_lists, st.integers(0, 0xFFFF), st.booleans(), st.integers(0, 5))
def test_ours_parses_scapy(segments: list[bytes], tag: int, oam: bool, padn: int) -> None:
    addresses = [str(IPv6Address(segment)) for segment in segments]
    tlv_objects = [IPv6ExtHdrSegmentRoutingTLVPadN(padding=bytes(padn))] if padn else []
    theirs = IPv6ExtHdrSegmentRouting(
        nh=17, addresses=addresses, tag=tag, oam=int(oam), tlv_objects=tlv_objects
    )
    wire = bytes(theirs)
    ours = decode_untrusted(wire)
    assert ours.segments == tuple(segments)
    assert ours.segments_left == ours.last_entry == len(segments) - 1
    assert ours.tag == tag
    assert ours.flags == (0x20 if oam else 0)
    assert ours.next_header == 17
    assert ours.encode() == wire
