"""labs/units.py: one rule set for sizes (K = 1024) and rates (K = 1000), iperf3's and tc's;
both whole numbers, and written back in iperf3's units."""

from __future__ import annotations

import pytest

from labs.units import UnitError, format_rate, format_size, parse_rate, parse_size


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("9000", 9000), ("64K", 65536), ("64kb", 65536), ("32 KB", 32768), ("1.5M", 1572864),
     ("0.5k", 512), ("2G", 2 << 30), ("1t", 1 << 40), (" 7 ", 7), ("9000b", 9000),
     ("0.1k", 102), ("12345678901234567890", 12345678901234567890), (4096, 4096)],
)  # fmt: skip
def test_sizes_count_in_1024s(text: str | int, nbytes: int) -> None:
    assert parse_size(text, "-n") == nbytes
    assert type(parse_size(text, "-n")) is int


@pytest.mark.parametrize(
    ("text", "bps"),
    [("100", 100), ("100M", 10**8), ("100mbit", 10**8), ("2.5Gbit", 25 * 10**8),
     ("10G", 10**10), ("8000bit", 8000), ("1k", 1000), ("1T", 10**12), ("100 m", 10**8),
     ("4.35m", 4_350_000), ("0.5", 0), (10**9, 10**9), (100.5, 100)],
)  # fmt: skip
def test_rates_count_in_1000s_as_whole_bits(text: str | int | float, bps: int) -> None:
    """Exactly, not through a float: 4.35 x 10^6 as a float product is 4349999.99..."""
    assert parse_rate(text, "-b") == bps
    assert type(parse_rate(text, "-b")) is int


@pytest.mark.parametrize(
    "text", ["", "k", "-1", "1e3", "1x", "1 kib", "1kbit", "1.", ".5k", True, None, [1]]
)
def test_bad_sizes_raise_one_error_naming_where(text: object) -> None:
    with pytest.raises(UnitError, match=r"^-l: bad size .* \(write e\.g\. 128K or 32kb\)$"):
        parse_size(text, "-l")


@pytest.mark.parametrize("text", ["100mbps", "1gbps", "100Mb", "fast", "", "-100mbit", "1e9"])
def test_bad_rates_raise_one_error_naming_where(text: str) -> None:
    """bps especially: tc reads it as bytes per second, so it would be off by 8."""
    with pytest.raises(UnitError, match=r"^links\.rate: bad rate .* \(write e\.g\. 100M"):
        parse_rate(text, "links.rate")


@pytest.mark.parametrize(
    ("nbytes", "width", "text"),
    [(0, 6, "     0 Bytes "), (1023, 6, "  1023 Bytes "), (1024, 6, "  1.00 KBytes"),
     (3 << 20, 6, "  3.00 MBytes"), (5 << 30, 6, "  5.00 GBytes"), (1536, 0, "1.50 KBytes"),
     (12, 0, "12 Bytes")],
)  # fmt: skip
def test_sizes_are_written_in_iperf3s_units(nbytes: int, width: int, text: str) -> None:
    assert format_size(nbytes, width) == text


@pytest.mark.parametrize(
    ("bps", "kw", "text"),
    [(0.0, {}, "     0 bits/sec "), (999.0, {}, "   999 bits/sec "),
     (1000.0, {}, "  1.00 Kbits/sec"), (941.23e6, {}, "941.23 Mbits/sec"),
     (2.5e9, {}, "  2.50 Gbits/sec"), (25e6, {"width": 0}, "25.00 Mbits/sec"),
     (2.5e9, {"width": 0, "prefix": "M"}, "2500.00 Mbits/sec"),
     (500.0, {"width": 0, "prefix": "M"}, "0.00 Mbits/sec")],
)  # fmt: skip
def test_rates_are_written_in_iperf3s_units(bps: float, kw: dict[str, object], text: str) -> None:
    assert format_rate(bps, **kw) == text  # type: ignore[arg-type]
