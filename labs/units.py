"""Sizes and rates: one type, one parser and one formatter each, for the lab's YAML,
`mrc perf` and every report.

A ``Size`` is a whole number of bytes and a ``Rate`` a whole number of bits per second, as
iperf3 keeps them (-n and -l as byte counts, -b as an unsigned 64-bit integer) and tc
writes them; the lab's links and `mrc perf`'s -b hold the same type.

iperf3 (-n, -l, -b) and tc (tbf's burst, limit and rate) agree on how they are written, so
the parsers take both tools' forms:

- a number, decimals allowed ("1.5M"), blanks around it and between it and the prefix;
- then an optional prefix k, m, g or t, in either case;
- a size counts the prefix in 1024s (iperf3's "-n 1M", tc's "32kb": K = 1024 bytes) and may
  end in "b" (bytes: "64kb");
- a rate counts the prefix in 1000s (iperf3's "-b 100M", tc's "100mbit": 10^8 bits/s) and
  may end in "bit";
- a fraction of a byte or bit is dropped ("0.5k" = 512 bytes), computed exactly.

"bps" is refused: tc reads it as bytes per second, iperf3 does not know it, so either way
it would be off by 8. So are exponents ("1e9"), signs and binary names ("kib").

The formatters write iperf3's units ("1.25 GBytes", "941.23 Mbits/sec").

This module sits in labs/, which mrc_transport already imports at its edges (cli/, perf/,
demo/, io/paths.py) and which imports nothing of mrc_transport, so both can use it.
"""

from __future__ import annotations

import re
from typing import TypeAlias

Size: TypeAlias = int
"""Bytes."""
Rate: TypeAlias = int
"""Bits per second."""

_QUANTITY = re.compile(r"\s*(\d+)(?:\.(\d+))?\s*([kmgt]?)([a-z]*)\s*", re.IGNORECASE)
SIZE_PREFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
"""Bytes per unit of a size prefix."""
RATE_PREFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
"""Bits per second per unit of a rate prefix."""
SIZE_UNITS = (("GBytes", 1 << 30), ("MBytes", 1 << 20), ("KBytes", 1 << 10))
"""iperf3's size units, largest first."""
RATE_UNITS = (("G", 10**9), ("M", 10**6), ("K", 10**3))
"""iperf3's rate prefixes (Gbits/sec, ...), largest first."""


class UnitError(ValueError):
    """A size or rate that does not parse: ``-b: bad rate '100mbps' (write e.g. ...)``;
    the CLI prints it as one line and exits 2, a topology file reports it as a
    TopologyError."""


def _parse(value: object, suffix: str, prefixes: dict[str, int], kind: str) -> int:
    """An integer as it is, or text as the module docstring says, in the unit of
    ``prefixes``; UnitError naming ``kind``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # a topology's checks say what is wrong with a negative one
    if isinstance(value, float):  # YAML's 100.5 as the text it was
        value = str(value)
    m = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if m is None or m.group(4).lower() not in ("", suffix):
        raise UnitError(f"bad {kind} {str(value)!r}")
    whole, fraction, unit = m.group(1), m.group(2) or "", prefixes[m.group(3).lower()]
    scale: int = 10 ** len(fraction)
    return int(whole + fraction) * unit // scale


def parse_size(value: object, where: str) -> Size:
    """'9000', '64K', '64kb', '1.5M' or a whole number -> bytes (K = 1024); UnitError
    ``where: bad size ...``."""
    try:
        return _parse(value, "b", SIZE_PREFIXES, "size")
    except UnitError as exc:
        raise UnitError(f"{where}: {exc} (write e.g. 128K or 32kb)") from None


def parse_rate(value: object, where: str) -> Rate:
    """'100M', '100mbit', '2.5Gbit', '8000' or a whole number -> bits per second
    (M = 10^6); UnitError ``where: bad rate ...``."""
    try:
        return _parse(value, "bit", RATE_PREFIXES, "rate")
    except UnitError as exc:
        raise UnitError(f"{where}: {exc} (write e.g. 100M or 100mbit)") from None


def format_size(nbytes: float, width: int = 6) -> str:
    """'  1.25 GBytes': bytes in the largest of iperf3's units they reach, the number
    ``width`` wide (iperf3's column; 0: no padding); below 1 KByte, whole bytes."""
    for unit, size in SIZE_UNITS:
        if nbytes >= size:
            return f"{nbytes / size:{width}.2f} {unit}"
    return f"{nbytes:{width}.0f} Bytes" + (" " if width else "")


def format_rate(bps: float, width: int = 6, prefix: str | None = None) -> str:
    """'941.23 Mbits/sec': bits per second in the largest of iperf3's prefixes they reach
    (or in ``prefix``, "M" for Mbits/sec whatever the rate), the number ``width`` wide
    (iperf3's column; 0: no padding); below 1 Kbit/s, whole bits."""
    for unit, size in RATE_UNITS:
        if unit == prefix or (prefix is None and bps >= size):
            return f"{bps / size:{width}.2f} {unit}bits/sec"
    return f"{bps:{width}.0f} bits/sec" + (" " if width else "")
