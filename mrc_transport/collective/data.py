"""Each rank's data, the result every rank must end with, and the count of wrong elements.

Theory of operation. A rank's contribution in an iteration is a base pattern (random
elements, drawn once per size) plus a constant of its rank and the iteration, so a chunk
in the wrong place (the pattern differs), from the wrong rank or counted twice (the rank's
constant), or left over from the iteration before (the iteration's) is a wrong element,
and the expected result is one array operation away. The sums are exact in any order:
int32 wraps (two's complement addition is associative), and float values are integers
small enough that every partial sum of up to MAX_RANKS ranks stays below 2^24, where
float32 represents integers exactly. So #wrong compares the result element by element
with ``==``, as nccl-tests' check does with its own exact data.

Pure (numpy, no IO).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
DTYPES: Mapping[str, type[np.generic]] = {"float": np.float32, "int32": np.int32}
"""nccl-tests' type names (its -d) and their numpy types."""
ELEMENT_BYTES = 4
"""Both types' element size."""
MAX_RANKS = 64
"""Ranks a float sum stays exact for (the module docstring): the large preset's hosts."""
FLOAT_BASE = 1 << 10
"""Float elements of the base pattern are integers in [0, FLOAT_BASE); a rank adds
(rank + 1) x FLOAT_BASE and the iteration modulo FLOAT_ITERS: 64 ranks sum to < 2^23."""
FLOAT_ITERS = 64
SEED = 0x6D7263  # "mrc"


def base(dtype: str, elements: int) -> Array:
    """The base pattern of ``elements`` elements (the same for every run of a size)."""
    rng = np.random.default_rng(SEED + elements)
    if dtype == "float":
        return rng.integers(0, FLOAT_BASE, elements).astype(np.float32)
    return rng.integers(-(1 << 31), 1 << 31, elements, dtype=np.int64).astype(np.int32)


def offset(dtype: str, rank: int, iteration: int) -> int:
    """The constant rank ``rank`` adds in ``iteration``."""
    if dtype == "float":
        return (rank + 1) * FLOAT_BASE + iteration % FLOAT_ITERS
    return _wrap32((rank + 1) * 0x01000193 + iteration * 0x9E3779B1)


def _wrap32(value: int) -> int:
    """``value`` as an int32 wraps it."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _plus(values: Array, constant: int) -> Array:
    """values + constant in values' type (int32 wraps)."""
    out: Array = np.add(values, values.dtype.type(constant), dtype=values.dtype)
    return out


def start(
    name: str, pattern: Array, dtype: str, n: int, rank: int, iteration: int,
    result: Array, send: Array | None = None,
) -> None:  # fmt: skip
    """Fill a rank's buffers for ``iteration``, in place (no allocation, no page faults
    between steps): all-reduce's result is its whole contribution, all-gather's its own
    chunk of it; all-to-all's send buffer is its contribution and its result its own block
    of it. The rest of the result is left as the iteration before left it: the collective
    overwrites it, and what it does not is wrong (the iteration's constant differs)."""
    c = pattern.dtype.type(offset(dtype, rank, iteration))
    if name == "allreduce":
        np.add(pattern, c, out=result)
        return
    part = chunk(pattern, n, rank)
    if send is not None:
        np.add(pattern, c, out=send)
    np.add(pattern[part], c, out=result[part])


def expected(name: str, pattern: Array, dtype: str, n: int, rank: int, iteration: int) -> Array:
    """The result rank ``rank`` must end with."""
    if name == "allreduce":
        total = sum(offset(dtype, r, iteration) for r in range(n))
        summed = np.multiply(pattern, pattern.dtype.type(n), dtype=pattern.dtype)
        return _plus(summed, total if dtype == "float" else _wrap32(total))
    out = np.empty_like(pattern)
    for j in range(n):
        # all-gather: chunk j is rank j's chunk j; all-to-all: block j is rank j's block
        # for this rank
        src = chunk(pattern, n, j if name == "allgather" else rank)
        out[chunk(pattern, n, j)] = _plus(pattern[src], offset(dtype, j, iteration))
    return out


def chunk(values: Array, n: int, index: int) -> slice:
    """Chunk ``index`` of n, in elements."""
    size = len(values) // n
    return slice(index * size, (index + 1) * size)


def count_wrong(result: Array, want: Array) -> int:
    """Elements that differ."""
    return int(np.count_nonzero(result != want))
