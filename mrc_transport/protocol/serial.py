"""32-bit sequence numbers on the wire, unbounded integers inside the core.

PSNs and MSNs wrap at 2**32 on the wire (RFC 1982 serial arithmetic). The core keeps them
as Python ints that never wrap and expands each received 32-bit value to the integer
nearest a reference it already knows (the cumulative PSN, the next MSN).
"""

from __future__ import annotations

from typing import Final

MASK32: Final = 0xFFFF_FFFF  # Final: mypyc compiles it in as a constant
_HALF: Final = 1 << 31


def expand(wire: int, ref: int) -> int:
    """The integer congruent to ``wire`` mod 2**32 nearest ``ref``."""
    d = (wire - ref) & MASK32
    if d >= _HALF:
        d -= 1 << 32
    return ref + d
