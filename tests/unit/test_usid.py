"""uSID (F3216) packing and the kernel's next-csid shift, against hand-worked examples."""

from __future__ import annotations

from ipaddress import IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from srv6 import usid

BLOCK = IPv6Address("fcbb:bbbb::")

usid_values = st.integers(min_value=1, max_value=0xFFFF)
usid_lists = st.lists(usid_values, min_size=1, max_size=usid.MAX_USIDS)
blocks = st.integers(min_value=0, max_value=0xFFFF_FFFF)


def test_pack_places_usids_after_the_block() -> None:
    assert usid.pack(BLOCK, [0x100, 0x201]) == IPv6Address("fcbb:bbbb:100:201::")
    assert usid.pack(0xFCBBBBBB, [1, 2, 3, 4, 5, 6]) == IPv6Address("fcbb:bbbb:1:2:3:4:5:6")


def test_pack_accepts_block_as_32_bit_or_128_bit_int() -> None:
    expected = usid.pack(BLOCK, [7])
    assert usid.pack(0xFCBBBBBB, [7]) == expected
    assert usid.pack(int(BLOCK), [7]) == expected


@pytest.mark.parametrize(
    ("block", "usids", "message"),
    [
        (BLOCK, [1, 2, 3, 4, 5, 6, 7], "too many uSIDs"),
        (BLOCK, [1, 0, 3], "is 0"),
        (BLOCK, [0x10000], "16 bits"),
        (BLOCK, [-1], "16 bits"),
        (BLOCK, [], "at least one"),
        (IPv6Address("fcbb:bbbb:1::"), [1], "not a /32"),
        (1 << 128, [1], "not a 32-bit block"),
    ],
)
def test_pack_rejects_bad_input(block: IPv6Address | int, usids: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        usid.pack(block, usids)


@given(blocks, usid_lists)
def test_unpack_inverts_pack(block: int, usids: list[int]) -> None:
    assert usid.unpack(usid.pack(block, usids)) == (block, usids)


def test_unpack_stops_at_first_zero_usid() -> None:
    assert usid.unpack(IPv6Address("fcbb:bbbb:100:0:aa::")) == (0xFCBBBBBB, [0x100])


# Hand-worked from kernel-facts.md ("seg6 / seg6local"), measured on the lab kernel.
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("fcbb:bbbb:100:201::", "fcbb:bbbb:201::"),
        ("fcbb:bbbb:100:201:aa::", "fcbb:bbbb:201:aa::"),  # spare bits survive
        ("fcbb:bbbb:1:2:3:4:5:6", "fcbb:bbbb:2:3:4:5:6:0"),  # zero-fill at the end
        ("fcbb:bbbb:100:0:aa::", "fcbb:bbbb:0:aa::"),  # argument non-zero: kernel shifts
    ],
)
def test_shift_matches_kernel(before: str, after: str) -> None:
    assert usid.shift(IPv6Address(before)) == IPv6Address(after)


def test_shift_refuses_when_argument_is_zero() -> None:
    with pytest.raises(ValueError, match="fall back to End"):
        usid.shift(IPv6Address("fcbb:bbbb:201::"))


def test_final_destination_is_the_last_usid() -> None:
    addr = usid.pack(BLOCK, [0x100, 0x201, 0x300, 0x400])
    assert usid.final_destination(addr) == IPv6Address("fcbb:bbbb:400::")
    assert usid.final_destination(IPv6Address("fcbb:bbbb:100:201:0:aa::")) == IPv6Address(
        "fcbb:bbbb:201:0:aa::"
    )


@given(blocks, usid_lists)
def test_final_destination_is_len_minus_one_shifts(block: int, usids: list[int]) -> None:
    addr = usid.pack(block, usids)
    for _ in range(len(usids) - 1):
        addr = usid.shift(addr)
    assert addr == usid.final_destination(usid.pack(block, usids))
    assert usid.unpack(addr) == (block, usids[-1:])


def test_shift_packet_changes_only_the_destination() -> None:
    src = IPv6Address("2001:db8::1").packed
    dst = usid.pack(BLOCK, [0x100, 0x201]).packed
    header = bytes([0x60, 0, 0, 0, 0, 4, 17, 64]) + src + dst
    packet = header + b"\x12\x34\x56\x78"
    shifted = usid.shift_packet(packet)
    assert shifted[:24] == packet[:24]
    assert shifted[24:40] == IPv6Address("fcbb:bbbb:201::").packed
    assert shifted[40:] == packet[40:]


def test_shift_packet_rejects_non_ipv6() -> None:
    with pytest.raises(ValueError, match="at least 40"):
        usid.shift_packet(b"\x60" * 39)
    with pytest.raises(ValueError, match="version 4"):
        usid.shift_packet(b"\x45" + bytes(39))
