"""Cross-check the codec (live backend) against scapy both ways, for uSID, encap and SRH
packets:
build with ours -> dissect with scapy and compare every field, including the checksum as
scapy computes it; build with scapy -> parse with ours. Also a pcap round trip."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.packet import Packet as ScapyPacket
from scapy.packet import Raw, split_layers
from scapy.utils import rdpcap, wrpcap

from mrc_transport.wire import (
    MRC_UDP_PORT,
    BadPacket,
    DataHeader,
    Header,
    PathHeader,
    decode_untrusted,
    encode,
)
from mrc_transport.wire.scapy_layer import BODY_CLASSES, MRC, bind_port
from srv6 import usid
from tests.unit.mrc_strategies import deliver, packets

CROSSCHECK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ["usid", "encap", "srh"]


def _body_fields(header: Header) -> dict[str, int]:
    return {
        field.name: int(getattr(header, field.name))
        for field in dataclasses.fields(header)
        if field.name != "common"
    }


def _scapy_checksum(packet: ScapyPacket) -> int:
    """The UDP checksum scapy computes for this packet (over its idea of the final dst)."""
    clone = packet.copy()
    del clone[UDP].chksum
    return int(IPv6(bytes(clone))[UDP].chksum)


def assert_scapy_sees(wire: bytes, path: PathHeader, header: Header, payload: bytes) -> None:
    theirs = IPv6(wire)
    assert theirs.version == 6
    assert theirs.tc == path.dscp << 2 | path.ecn
    assert theirs.fl == path.ev & 0xFFFFF
    assert theirs.plen == len(wire) - 40
    assert theirs.hlim == path.hop_limit
    assert IPv6Address(theirs.src).packed == path.src
    assert IPv6Address(theirs.dst).packed == wire[24:40]
    if path.segments:
        srh = theirs[IPv6ExtHdrSegmentRouting]
        assert theirs.nh == 43
        assert srh.nh == 17
        assert srh.type == 4
        assert srh.segleft == srh.lastentry == len(path.segments) - 1
        assert [IPv6Address(a).packed for a in srh.addresses] == list(path.segments[::-1])
        assert srh.tlv_objects == []
    elif path.encap:  # RFC 2473: the inner header between the NICs, the same class and label
        inner = theirs.payload
        assert theirs.nh == 41
        assert type(inner) is IPv6
        assert (inner.nh, inner.plen, inner.tc, inner.fl) == (
            17,
            len(wire) - 80,
            theirs.tc,
            theirs.fl,
        )
        assert IPv6Address(inner.src).packed == path.src
        assert IPv6Address(inner.dst).packed == path.final_dst
    else:
        assert theirs.nh == 17
    udp = theirs[UDP]
    assert udp.sport == path.ev >> 16
    assert udp.dport == path.dport
    assert udp.len == 8 + len(udp.payload)
    assert udp.chksum == _scapy_checksum(theirs)
    # Scapy dissects MRC by itself on port 4791; other ports are decoded explicitly.
    mrc = theirs[MRC] if MRC in theirs else MRC(bytes(udp.payload))
    assert (MRC in theirs) == (path.dport == MRC_UDP_PORT)
    common = header.common
    assert (mrc.version, mrc.opcode, int(mrc.flags), mrc.reserved) == (
        1,
        common.opcode,
        common.flags,
        0,
    )
    assert (mrc.dst_conn, mrc.src_conn) == (common.dst_conn, common.src_conn)
    body = mrc.payload
    assert type(body) is BODY_CLASSES[common.opcode]
    assert {name: body.getfieldval(name) for name in _body_fields(header)} == _body_fields(header)
    rest = bytes(body.payload)
    assert rest == payload


@CROSSCHECK
@given(st.sampled_from(KINDS).flatmap(packets))
def test_scapy_dissects_ours(case: tuple[PathHeader, Header, bytes]) -> None:
    path, header, payload = case
    assert_scapy_sees(deliver(path, encode(path, header, payload)), path, header, payload)


@CROSSCHECK
@given(packets("usid"))
def test_scapy_disagrees_before_the_usid_shifts(case: tuple[PathHeader, Header, bytes]) -> None:
    """Sent, the container's checksum is wrong by scapy's (and the kernel's) reckoning; only
    the packet the last host receives verifies."""
    path, header, payload = case
    sent = IPv6(encode(path, header, payload))
    _, usids = usid.unpack(path.dst)
    # One's complement: the two sums differ by the dropped uSIDs, unless those add up to a
    # multiple of 0xffff (e.g. ffff alone, "negative zero").
    coincide = sum(usids[:-1]) % 0xFFFF == 0
    assert (sent[UDP].chksum == _scapy_checksum(sent)) == coincide
    delivered = IPv6(deliver(path, encode(path, header, payload)))
    assert delivered[UDP].chksum == _scapy_checksum(delivered)


def _scapy_body(header: Header) -> ScapyPacket:
    body: ScapyPacket = BODY_CLASSES[header.common.opcode]()
    for name, value in _body_fields(header).items():
        body.setfieldval(name, value)
    return body


def build_with_scapy(path: PathHeader, header: Header, payload: bytes) -> bytes:
    """The delivered packet, built by scapy alone (scapy fills lengths and checksum)."""
    ip = IPv6(
        src=str(IPv6Address(path.src)),
        dst=str(IPv6Address(path.final_dst or path.dst)),
        tc=path.dscp << 2 | path.ecn,
        fl=path.ev & 0xFFFFF,
        hlim=path.hop_limit,
    )
    if path.segments:
        ip.dst = str(IPv6Address(path.segments[0]))
        ip = ip / IPv6ExtHdrSegmentRouting(
            addresses=[str(IPv6Address(s)) for s in reversed(path.segments)], nh=17
        )
    elif path.encap:  # the outer header as delivered: the container shifted to the last uSID
        ip = ip / ip.copy()
    common = header.common
    mrc = MRC(
        opcode=int(common.opcode),
        flags=int(common.flags),
        dst_conn=common.dst_conn,
        src_conn=common.src_conn,
    )
    layers = ip / UDP(sport=path.ev >> 16, dport=path.dport) / mrc / _scapy_body(header)
    if payload:
        layers = layers / Raw(payload)
    return bytes(layers)


@CROSSCHECK
@given(st.sampled_from(KINDS).flatmap(packets))
def test_ours_parses_scapy(case: tuple[PathHeader, Header, bytes]) -> None:
    path, header, payload = case
    wire = build_with_scapy(path, header, payload)
    parsed = decode_untrusted(wire, dport=path.dport)
    assert parsed.header == header
    assert parsed.payload == payload
    assert parsed.path.segments == path.segments
    assert parsed.path.ev == path.ev
    assert (parsed.path.dscp, parsed.path.ecn, parsed.path.hop_limit) == (
        path.dscp,
        path.ecn,
        path.hop_limit,
    )
    # Byte for byte: scapy and we agree on the whole packet (SRH packets as sent; scapy
    # puts the first hop in the IPv6 destination like we do).
    if path.segments:
        assert wire == encode(path, header, payload)
    else:
        assert wire == deliver(path, encode(path, header, payload))


def test_scapy_checksum_with_corrupted_field_is_rejected() -> None:
    path, header, payload = _example()
    wire = bytearray(build_with_scapy(path, header, payload))
    wire[-1] ^= 0xFF
    with pytest.raises(BadPacket, match="bad_checksum"):
        decode_untrusted(bytes(wire))


def _example() -> tuple[PathHeader, DataHeader, bytes]:
    from tests.unit.test_codec import ONE_OF_EACH, usid_path

    header, payload = ONE_OF_EACH[0]
    assert isinstance(header, DataHeader)
    return usid_path(), header, payload


def test_pcap_shows_every_field(tmp_path: Path) -> None:
    from tests.unit.test_codec import ONE_OF_EACH, srh_path, usid_path

    packets_out = []
    for make_path in (usid_path, srh_path):
        path = make_path()
        for header, payload in ONE_OF_EACH:
            packets_out.append(IPv6(deliver(path, encode(path, header, payload))))
    pcap = tmp_path / "mrc.pcap"
    wrpcap(str(pcap), packets_out)
    read = rdpcap(str(pcap))
    assert len(read) == 2 * len(ONE_OF_EACH)
    for captured, (header, _) in zip(read, ONE_OF_EACH * 2, strict=True):
        mrc = captured[MRC]
        assert mrc.opcode == header.common.opcode
        shown = mrc.show(dump=True)
        for name, value in _body_fields(header).items():
            assert mrc.payload.getfieldval(name) == value
            assert f"{name}" in shown


def test_bind_port_adds_a_port() -> None:
    from tests.unit.test_codec import ONE_OF_EACH, plain_path

    wire = encode(plain_path(dport=4971), *ONE_OF_EACH[7])
    assert MRC not in IPv6(wire)
    bind_port(4971)  # the port some spec-derived code uses (mrc-protocol-notes.md)
    try:
        assert IPv6(wire)[MRC].opcode == ONE_OF_EACH[7][0].common.opcode
    finally:
        split_layers(UDP, MRC, dport=4971)  # other tests expect only 4791 to be bound
    assert MRC not in IPv6(wire)
