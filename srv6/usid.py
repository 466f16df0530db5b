"""uSID (NEXT-C-SID) addresses in the "F3216" format: a 32-bit locator block followed by up
to six 16-bit uSIDs, all in the IPv6 destination address (RFC 9800, NEXT-C-SID flavor).

A switch with ``End flavors next-csid lblen 32 nflen 16`` matches block + its own uSID,
keeps the block, drops that (active) uSID and shifts the remaining 80 bits left by 16,
zero-filling (RFC 9800 section 4.1.1). It does NOT fix the UDP checksum, which is why a
sender computes it over :func:`final_destination` (RFC 8200 section 8.1,
kernel-facts.md "Checksums").

Layout of an address, most significant bits first::

    | block (32) | active uSID (16) | argument: next uSIDs and spare bits (80) |
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv6Address

BLOCK_BITS = 32
USID_BITS = 16
MAX_USIDS = (128 - BLOCK_BITS) // USID_BITS  # 6

_ADDR_BITS = 128
_BELOW_BLOCK_BITS = _ADDR_BITS - BLOCK_BITS  # 96: active uSID + 80-bit argument
_BELOW_BLOCK_MASK = (1 << _BELOW_BLOCK_BITS) - 1
_ARG_BITS = _BELOW_BLOCK_BITS - USID_BITS  # 80
_ARG_MASK = (1 << _ARG_BITS) - 1
_USID_MASK = (1 << USID_BITS) - 1
_BLOCK_MASK = (1 << BLOCK_BITS) - 1

# Byte offsets of the destination address in an IPv6 header (RFC 8200 section 3).
_IPV6_HEADER_LEN = 40
_DST_OFFSET = 24


def _block_value(block: IPv6Address | int) -> int:
    """The 32-bit block from a /32 prefix given as an address or an int.

    An int below 2**32 is the block itself (0xfcbbbbbb); a larger int is read as a whole
    128-bit address (int(IPv6Address("fcbb:bbbb::"))).
    """
    if isinstance(block, IPv6Address):
        value = int(block)
    elif isinstance(block, int) and not isinstance(block, bool):
        if block < 0 or block >= 1 << _ADDR_BITS:
            raise ValueError(f"block {block:#x} is not a 32-bit block or a 128-bit address")
        if block <= _BLOCK_MASK:
            return block
        value = block
    else:
        raise TypeError(f"block must be an IPv6Address or an int, not {type(block).__name__}")
    if value & _BELOW_BLOCK_MASK:
        raise ValueError(
            f"block {IPv6Address(value)} is not a /32 prefix: the low 96 bits must be zero"
        )
    return value >> _BELOW_BLOCK_BITS


def pack(block: IPv6Address | int, usids: Sequence[int]) -> IPv6Address:
    """The uSID container for ``usids`` (path order, first hop first) under ``block``.

    >>> pack(IPv6Address("fcbb:bbbb::"), [0x100, 0x201])
    IPv6Address('fcbb:bbbb:100:201::')
    """
    if not usids:
        raise ValueError("a uSID container needs at least one uSID")
    if len(usids) > MAX_USIDS:
        raise ValueError(
            f"too many uSIDs: {len(usids)} given, at most {MAX_USIDS} fit after a 32-bit block"
        )
    value = _block_value(block)
    for index, usid in enumerate(usids):
        if not isinstance(usid, int) or isinstance(usid, bool):
            raise TypeError(f"uSID #{index} must be an int, not {type(usid).__name__}")
        if usid == 0:
            # A zero uSID is the end-of-container marker: nothing after it would be used.
            raise ValueError(f"uSID #{index} is 0, which marks the end of the container")
        if not 0 < usid <= _USID_MASK:
            raise ValueError(f"uSID #{index} = {usid:#x} does not fit in 16 bits")
        value = (value << USID_BITS) | usid
    value <<= USID_BITS * (MAX_USIDS - len(usids))
    return IPv6Address(value)


def _as_int(addr: IPv6Address | bytes | int) -> int:
    if isinstance(addr, IPv6Address):
        return int(addr)
    if isinstance(addr, bytes | bytearray):
        if len(addr) != 16:
            raise ValueError(f"an IPv6 address is 16 bytes, got {len(addr)}")
        return int.from_bytes(addr, "big")
    if isinstance(addr, int) and 0 <= addr < 1 << _ADDR_BITS:
        return addr
    raise ValueError(f"not an IPv6 address: {addr!r}")


def unpack(addr: IPv6Address | bytes | int) -> tuple[int, list[int]]:
    """``(block, usids)``: the 32-bit block and the uSIDs up to the first zero one."""
    value = _as_int(addr)
    usids: list[int] = []
    for index in range(MAX_USIDS):
        usid = (value >> (_BELOW_BLOCK_BITS - USID_BITS * (index + 1))) & _USID_MASK
        if usid == 0:
            break
        usids.append(usid)
    return value >> _BELOW_BLOCK_BITS, usids


def _shift_int(value: int) -> int:
    argument = value & _ARG_MASK
    if argument == 0:
        # The kernel checks the whole argument (seg6_next_csid_is_arg0): when it is zero it
        # falls back to plain End, which needs an SRH; there is nothing to shift.
        raise ValueError(
            f"{IPv6Address(value)}: no bits after the active uSID; the kernel would fall "
            "back to End (needs an SRH) instead of shifting"
        )
    block = value & ~_BELOW_BLOCK_MASK
    return block | (argument << USID_BITS)


def shift(addr: IPv6Address | bytes | int) -> IPv6Address:
    """The destination after one ``End flavors next-csid lblen 32 nflen 16`` hop.

    Keeps the block, drops the active uSID, shifts the 80-bit argument left by 16 and
    zero-fills; spare bits move along (``fcbb:bbbb:100:201:aa::`` -> ``fcbb:bbbb:201:aa::``).
    Raises ValueError when the argument is all zero: the kernel would not shift.
    """
    return IPv6Address(_shift_int(_as_int(addr)))


def _next_usid(value: int) -> int:
    return (value >> (_ARG_BITS - USID_BITS)) & _USID_MASK


def final_destination(addr: IPv6Address | bytes | int) -> IPv6Address:
    """The address the last host receives: shifted until the next uSID is zero.

    The last uSID is the host's own (a local route, not a SID), so it never shifts; a
    4-uSID path is shifted 3 times.
    """
    value = _as_int(addr)
    while _next_usid(value):
        value = _shift_int(value)
    return IPv6Address(value)


def shift_packet(buf: bytes | bytearray | memoryview) -> bytes:
    """``buf`` (a full IPv6 packet) after one uSID hop: only the destination changes.

    Like the kernel, it leaves the UDP checksum alone, so replaying a path hop by hop shows
    whether the sender checksummed over the final destination.
    """
    data = bytes(buf)
    if len(data) < _IPV6_HEADER_LEN:
        raise ValueError(f"an IPv6 packet is at least 40 bytes, got {len(data)}")
    if data[0] >> 4 != 6:
        raise ValueError(f"not an IPv6 packet: version {data[0] >> 4}")
    dst_end = _DST_OFFSET + 16
    shifted = _shift_int(int.from_bytes(data[_DST_OFFSET:dst_end], "big"))
    return data[:_DST_OFFSET] + shifted.to_bytes(16, "big") + data[dst_end:]
