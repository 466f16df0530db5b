"""The Internet checksum (RFC 1071) and the UDP-over-IPv6 checksum (RFC 8200 section 8.1).

Pure Python but not a byte loop: because 2**16 = 1 (mod 0xffff), the one's complement sum of
the 16-bit words of a buffer equals the buffer read as one big-endian integer, modulo 0xffff
(RFC 1071 section 2(B), "deferred carries" taken to the limit). ``int.from_bytes`` and one
modulo do the whole sum in C.

The only subtlety is one's complement's two zeros: a non-empty sum that is a multiple of
0xffff is 0xffff ("negative zero"), and only an all-zero input sums to 0.
"""

from __future__ import annotations

_FOLD = 0xFFFF
UDP_PROTO = 17
_UDP_CHECKSUM_OFFSET = 6


def _words_value(data: bytes | bytearray | memoryview) -> int:
    """The buffer as one integer, zero-padded to a whole number of 16-bit words."""
    value = int.from_bytes(data, "big")
    if len(data) & 1:
        value <<= 8  # RFC 1071: an odd last byte is padded with a zero byte on the right
    return value


def _fold(total: int) -> int:
    """One's complement sum in [0, 0xffff] of a non-negative integer of word sums."""
    if total == 0:
        return 0
    return total % _FOLD or _FOLD


def ones_complement_sum(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    """The (uncomplemented) 16-bit one's complement sum of ``data``, plus ``initial``.

    ``initial`` is a partial sum, e.g. of a pseudo-header, so sums compose.
    """
    return _fold(initial + _words_value(data))


def internet_checksum(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    """RFC 1071 checksum: the one's complement of the one's complement sum.

    A buffer that already holds its correct checksum gives 0.
    """
    return _FOLD - ones_complement_sum(data, initial)


def pseudo_header_sum(src: bytes, dst: bytes, upper_len: int, next_header: int) -> int:
    """One's complement sum of the IPv6 pseudo-header (RFC 8200 section 8.1).

    ``dst`` is the FINAL destination: the last segment with an SRH, the address after the
    last shift with uSIDs (the kernel does not fix checksums when it shifts).
    """
    if len(src) != 16 or len(dst) != 16:
        raise ValueError("IPv6 addresses are 16 bytes")
    # The 32-bit length and the 24 zero bits + next header are plain words of the sum.
    return _fold(int.from_bytes(src, "big") + int.from_bytes(dst, "big") + upper_len + next_header)


def udp6_checksum(src: bytes, dst: bytes, udp: bytes | bytearray | memoryview) -> int:
    """The checksum field for the UDP datagram ``udp`` (header + payload) from src to dst.

    The checksum field already in ``udp`` is ignored (treated as zero), so the result can
    be compared with it to verify a received datagram. A computed 0 is returned as 0xffff:
    in IPv6 a zero UDP checksum means "none" and is invalid (RFC 8200 section 8.1).
    """
    if len(udp) < 8:
        raise ValueError(f"a UDP datagram is at least 8 bytes, got {len(udp)}")
    field = int.from_bytes(udp[_UDP_CHECKSUM_OFFSET : _UDP_CHECKSUM_OFFSET + 2], "big")
    padded_len = len(udp) + (len(udp) & 1)
    body = _words_value(udp) - (field << ((padded_len - _UDP_CHECKSUM_OFFSET - 2) * 8))
    total = pseudo_header_sum(src, dst, len(udp), UDP_PROTO) + body
    # The pseudo-header's next header (17) is non-zero, so the sum is never 0: a fold of 0
    # here is 0xffff, whose complement 0 is sent as 0xffff.
    return _FOLD - (total % _FOLD) if total % _FOLD else _FOLD
