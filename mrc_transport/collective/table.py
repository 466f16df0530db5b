"""nccl-tests' table, as its programs print it (src/common.cu there): a header of
comment lines, a row per size, the out-of-bounds and average bus bandwidth footer.

The columns and their widths are nccl-tests' (size, count, type, redop, root, then time,
algbw, busbw, #wrong of the out-of-place run; there is no in-place run here). One change:
the bandwidths have four decimals, not two, because a lab host's 400 Mbit/s is 0.05 GB/s,
which two decimals cannot tell from 0.04.

Pure: strings only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mrc_transport.collective.algorithms import Algorithm


@dataclass(frozen=True, slots=True)
class Row:
    """One size of a sweep, measured."""

    size: int
    """Bytes (S)."""
    count: int
    """Elements, as nccl-tests counts them (algorithms.py ``count_divisor``)."""
    dtype: str
    """float or int32."""
    seconds: float
    """Mean time of one iteration."""
    algbw: float
    """GB/s."""
    busbw: float
    """GB/s."""
    wrong: int
    """Elements that differed from the expected result, over every rank and iteration."""


def _cells(values: Sequence[str], widths: Sequence[int], seps: Sequence[str]) -> str:
    """ "# " and the values right-aligned in their widths, each after its separator."""
    return "# " + "".join(f"{sep}{v:>{w}}" for v, w, sep in zip(values, widths, seps, strict=True))


_WIDTHS = (10, 12, 8, 6, 6, 7, 6, 6, 6)
_HEAD_SEPS = ("", "  ", "  ", "  ", "  ", "  ", "  ", "  ", " ")
_UNIT_SEPS = ("", "  ", "  ", "  ", "  ", "  ", "  ", "  ", "  ")


def header() -> list[str]:
    """The column heads (nccl-tests' out-of-place group)."""
    names = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
    units = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
    group = _cells(("",) * 5, _WIDTHS[:5], _HEAD_SEPS[:5]) + "           out-of-place"
    return [
        "#",
        group,
        _cells(names, _WIDTHS, _HEAD_SEPS),
        _cells(units, (*_WIDTHS[:8], 5), _UNIT_SEPS).rstrip(),
    ]


def time_text(seconds: float) -> str:
    """Microseconds as nccl-tests prints them: fewer decimals as the number grows."""
    us = seconds * 1e6
    decimals = 0 if us >= 10000.0 else 1 if us >= 100.0 else 2
    return f"{us:7.{decimals}f}"


def row_line(alg: Algorithm, row: Row) -> str:
    """One size's line; root is -1 as nccl-tests prints it for a collective without one."""
    head = f"{row.size:12d}  {row.count:12d}  {row.dtype:>8}  {alg.redop:>6}  {-1:6d}"
    return head + f"  {time_text(row.seconds)}  {row.algbw:6.4f}  {row.busbw:6.4f}  {row.wrong:5d}"


def footer(rows: Sequence[Row], ideal: float | None) -> list[str]:
    """The out-of-bounds line and the average bus bandwidth (nccl-tests' footer), and the
    ideal beside the largest size's busbw."""
    wrong = sum(r.wrong for r in rows)
    avg = sum(r.busbw for r in rows) / len(rows) if rows else 0.0
    out = [
        f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {avg:.4f}",
    ]
    if ideal is not None and rows and ideal > 0:
        last = max(rows, key=lambda r: r.size)
        out.append(
            f"# {'Ideal bus bandwidth':<20} : {ideal:.4f} (the largest size's busbw "
            f"{last.busbw:.4f} is {last.busbw / ideal:.2f} of it)"
        )
    return [*out, "#"]
