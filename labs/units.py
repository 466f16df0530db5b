"""Sizes and rates as people write them, one rule set for the lab's YAML and `mrc perf`.

iperf3 (-n, -l, -b) and tc (tbf's burst, limit and rate) agree, so the rules are theirs:

- a number, decimals allowed ("1.5M"), blanks around it and between it and the prefix;
- then an optional prefix k, m, g or t, in either case;
- a size counts the prefix in 1024s (iperf3's "-n 1M", tc's "32kb": K = 1024 bytes) and may
  end in "b" (bytes: "64kb"); it is a whole number of bytes, rounded down ("0.5k" = 512);
- a rate counts the prefix in 1000s (iperf3's "-b 100M", tc's "100mbit": 10^8 bits/s) and
  may end in "bit"; it is bits per second, as a float.

"bps" is refused: tc reads it as bytes per second, iperf3 does not know it, so either way
it would be off by 8. So are exponents ("1e9"), signs and binary names ("kib").

This module sits in labs/, which mrc_transport already imports at its edges (cli/, demo/,
io/paths.py) and which imports nothing of mrc_transport, so both can use it.
"""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"\s*(\d+)(\.\d+)?\s*([kmgt]?)([a-z]*)\s*", re.IGNORECASE)
SIZE_PREFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
"""Bytes per unit of a size prefix."""
RATE_PREFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
"""Bits per second per unit of a rate prefix."""


class UnitError(ValueError):
    """A size or rate that does not parse: ``bad size '64x'`` (callers add where it was)."""


def _parse(text: str, suffix: str, kind: str) -> tuple[str, str, str]:
    """(whole digits, fraction or "", prefix in lower case) of a size or rate."""
    m = _QUANTITY.fullmatch(text)
    if m is None or m.group(4).lower() not in ("", suffix):
        raise UnitError(f"bad {kind} {text!r}")
    return m.group(1), m.group(2) or "", m.group(3).lower()


def parse_size(text: str) -> int:
    """'9000', '64K', '64kb', '1.5M' -> bytes (K = 1024)."""
    whole, fraction, prefix = _parse(text, "b", "size")
    if not fraction:  # exact at any size
        return int(whole) * SIZE_PREFIXES[prefix]
    return int(float(whole + fraction) * SIZE_PREFIXES[prefix])


def parse_rate(text: str) -> float:
    """'100M', '100mbit', '2.5Gbit', '8000' -> bits per second (M = 10^6)."""
    whole, fraction, prefix = _parse(text, "bit", "rate")
    return float(whole + fraction) * RATE_PREFIXES[prefix]
