"""RFC 1071 checksum and the UDP/IPv6 pseudo-header checksum, against a naive reference
and against scapy."""

from __future__ import annotations

import struct
from ipaddress import IPv6Address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from srv6.checksum import internet_checksum, ones_complement_sum, udp6_checksum


def naive_sum(data: bytes) -> int:
    """RFC 1071 section 4.1, word by word with end-around carry."""
    if len(data) & 1:
        data += b"\0"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return total


def test_rfc1071_example() -> None:
    # RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to ddf2.
    data = bytes.fromhex("0001f203f4f5f6f7")
    assert ones_complement_sum(data) == 0xDDF2
    assert internet_checksum(data) == 0xFFFF - 0xDDF2


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=0xFFFF))
def test_sum_matches_word_by_word_reference(data: bytes, initial: int) -> None:
    expected = naive_sum(data) + initial
    expected = (expected & 0xFFFF) + (expected >> 16)
    assert ones_complement_sum(data, initial) == expected


@given(st.binary(min_size=1, max_size=300).map(lambda b: b if len(b) % 2 == 0 else b + b"\1"))
def test_buffer_with_its_checksum_verifies(data: bytes) -> None:
    check = internet_checksum(data)
    assert internet_checksum(data + check.to_bytes(2, "big")) == 0


def test_all_zero_and_negative_zero() -> None:
    assert internet_checksum(b"") == 0xFFFF
    assert internet_checksum(b"\0\0") == 0xFFFF
    assert ones_complement_sum(b"\xff\xff") == 0xFFFF
    assert internet_checksum(b"\xff\xff") == 0


def _pseudo(src: bytes, dst: bytes, udp: bytes) -> bytes:
    return src + dst + struct.pack("!I3xB", len(udp), 17)


addresses = st.binary(min_size=16, max_size=16)


@given(addresses, addresses, st.binary(min_size=8, max_size=200))
def test_udp6_checksum_matches_naive_and_ignores_field(src: bytes, dst: bytes, raw: bytes) -> None:
    udp = raw[:6] + b"\0\0" + raw[8:]
    naive = 0xFFFF - naive_sum(_pseudo(src, dst, udp) + udp)
    assert udp6_checksum(src, dst, udp) == (naive or 0xFFFF)
    assert udp6_checksum(src, dst, raw) == udp6_checksum(src, dst, udp)


def test_udp6_checksum_zero_is_sent_as_ffff() -> None:
    src = bytes(16)
    dst = bytes(16)
    # Choose a payload word that makes the one's complement sum 0xffff.
    head = struct.pack("!HHHH", 0, 0, 10, 0)
    partial = naive_sum(_pseudo(src, dst, head + b"\0\0") + head)
    udp = head + (0xFFFF - partial).to_bytes(2, "big")
    assert udp6_checksum(src, dst, udp) == 0xFFFF


@settings(deadline=None)
@given(st.binary(max_size=100), st.integers(min_value=1, max_value=0xFFFF))
def test_udp6_checksum_agrees_with_scapy(payload: bytes, sport: int) -> None:
    src, dst = IPv6Address("2001:db8::1"), IPv6Address("fcbb:bbbb:400::")
    packet = IPv6(bytes(IPv6(src=str(src), dst=str(dst)) / UDP(sport=sport, dport=4791) / payload))
    udp = bytes(packet[UDP])
    assert udp6_checksum(src.packed, dst.packed, udp) == packet[UDP].chksum


def test_udp6_checksum_rejects_short_input() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        udp6_checksum(bytes(16), bytes(16), b"1234567")
