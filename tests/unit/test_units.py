"""labs/units.py: one rule set for sizes (K = 1024) and rates (K = 1000), iperf3's and tc's."""

from __future__ import annotations

import pytest

from labs.units import UnitError, parse_rate, parse_size


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("9000", 9000), ("64K", 65536), ("64kb", 65536), ("32 KB", 32768), ("1.5M", 1572864),
     ("0.5k", 512), ("2G", 2 << 30), ("1t", 1 << 40), (" 7 ", 7), ("9000b", 9000),
     ("12345678901234567890", 12345678901234567890)],
)  # fmt: skip
def test_sizes_count_in_1024s(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes
    assert isinstance(parse_size(text), int)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("100", 100.0), ("100M", 1e8), ("100mbit", 1e8), ("2.5Gbit", 2.5e9), ("10G", 1e10),
     ("8000bit", 8000.0), ("1k", 1000.0), ("1T", 1e12), ("100 m", 1e8)],
)  # fmt: skip
def test_rates_count_in_1000s(text: str, bps: float) -> None:
    assert parse_rate(text) == bps
    assert isinstance(parse_rate(text), float)


@pytest.mark.parametrize("text", ["", "k", "-1", "1e3", "1x", "1 kib", "1kbit", "1.", ".5k"])
def test_bad_sizes_raise_one_error(text: str) -> None:
    with pytest.raises(UnitError, match=r"^bad size "):
        parse_size(text)


@pytest.mark.parametrize("text", ["100mbps", "1gbps", "100Mb", "fast", "", "-100mbit", "1e9"])
def test_bad_rates_raise_one_error(text: str) -> None:
    """bps especially: tc reads it as bytes per second, so it would be off by 8."""
    with pytest.raises(UnitError, match=r"^bad rate "):
        parse_rate(text)
