"""collective/groups.py without a lab: how ranks are split over processes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrc_transport.collective.groups import default_procs, split


@given(st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_a_split_is_every_rank_once_in_contiguous_groups_of_near_equal_size(
    case: tuple[int, int],
) -> None:
    ranks, procs = case
    groups = split(ranks, procs)
    assert len(groups) == procs
    assert [r for g in groups for r in g] == list(range(ranks))
    sizes = {len(g) for g in groups}
    assert max(sizes) - min(sizes) <= 1
    assert min(sizes) >= 1


def test_eight_ranks_on_two_processes_are_the_two_racks() -> None:
    assert split(8, 2) == [(0, 1, 2, 3), (4, 5, 6, 7)]


@pytest.mark.parametrize(("ranks", "procs"), [(4, 0), (4, 5), (1, 2)])
def test_a_split_needs_one_to_n_processes(ranks: int, procs: int) -> None:
    with pytest.raises(ValueError, match="processes for"):
        split(ranks, procs)


def test_the_default_is_a_process_per_cpu_at_most_one_per_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert (default_procs(8), default_procs(2)) == (2, 2)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert default_procs(4) == 4
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert default_procs(8) == 1
