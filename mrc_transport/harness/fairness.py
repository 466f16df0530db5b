"""Fairness of per-flow throughputs: min/max and Jain's index (Jain, Chiu, Hawe 1984).

The collisions demo and the permutation experiment compare them for single-path flows
over ECMP and for MRC: the paper's two-rack permutation test (mrc-protocol-notes.md,
"Headline comparisons") has ECMP flows at 1/2 or 1/3 of line rate and MRC flows all at
full rate. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def jain_index(xs: Sequence[float]) -> float:
    """(sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one flow takes everything.
    All-zero throughputs are equal, so 1.0."""
    if not xs:
        raise ValueError("Jain's index of no flows")
    if any(x < 0 for x in xs):
        raise ValueError("throughputs must be >= 0")
    top = max(xs)
    if top == 0:
        return 1.0
    # scaled by the largest: squares of tiny values underflow to subnormals and the
    # quotient drifts above 1 (hypothesis found 1.0001 for two flows of 1e-160)
    scaled = [x / top for x in xs]
    return sum(scaled) ** 2 / (len(xs) * sum(x * x for x in scaled))


def min_over_max(xs: Sequence[float]) -> float:
    """Worst flow over best flow (1.0 when equal; 1.0 when all are zero)."""
    if not xs:
        raise ValueError("min/max of no flows")
    top = max(xs)
    return 1.0 if top == 0 else min(xs) / top


@dataclass(frozen=True, slots=True)
class Fairness:
    """Summary of one set of per-flow throughputs."""

    n: int
    """Number of flows."""
    min_bps: float
    """Slowest flow."""
    max_bps: float
    """Fastest flow."""
    mean_bps: float
    """Mean."""
    min_over_max: float
    """min_bps / max_bps."""
    jain: float
    """Jain's fairness index."""

    def to_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "min_bps": self.min_bps,
            "max_bps": self.max_bps,
            "mean_bps": self.mean_bps,
            "min_over_max": self.min_over_max,
            "jain": self.jain,
        }


def fairness(xs: Sequence[float]) -> Fairness:
    return Fairness(
        len(xs),
        min(xs) if xs else 0.0,
        max(xs) if xs else 0.0,
        sum(xs) / len(xs) if xs else 0.0,
        min_over_max(xs),
        jain_index(xs),
    )
