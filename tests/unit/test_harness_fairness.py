"""demo.fairness: Jain's index and min/max on flows whose answers are known by hand."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mrc_transport.harness.fairness import fairness, jain_index, min_over_max


def test_equal_flows_are_perfectly_fair() -> None:
    assert jain_index([100.0] * 8) == pytest.approx(1.0)
    assert min_over_max([3.0, 3.0]) == 1.0


def test_one_flow_takes_everything() -> None:
    assert jain_index([10.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_ecmp_collision_example() -> None:
    # Four flows at line rate 1, two of them share one uplink: 1, 1, 0.5, 0.5.
    assert jain_index([1.0, 1.0, 0.5, 0.5]) == pytest.approx(9 / 10)
    f = fairness([1.0, 1.0, 0.5, 0.5])
    assert (f.n, f.min_bps, f.max_bps, f.mean_bps) == (4, 0.5, 1.0, 0.75)
    assert f.min_over_max == 0.5
    assert f.to_dict()["jain"] == pytest.approx(0.9)


def test_edge_cases() -> None:
    assert jain_index([0.0, 0.0]) == 1.0
    assert min_over_max([0.0, 0.0]) == 1.0
    for fn in (jain_index, min_over_max):
        with pytest.raises(ValueError, match="no flows"):
            fn([])
    with pytest.raises(ValueError, match=">= 0"):
        jain_index([1.0, -1.0])


@example([1.0239582852254399e-160, 1.0239582852254399e-160])  # squares underflow
@given(st.lists(st.floats(min_value=0, max_value=1e12), min_size=1, max_size=50))
def test_jain_is_between_one_over_n_and_one(xs: list[float]) -> None:
    j = jain_index(xs)
    assert 1 / len(xs) - 1e-9 <= j <= 1 + 1e-9
    assert 0.0 <= min_over_max(xs) <= 1.0
