"""nccl-tests' bandwidth formulas, the fabric's ideal, the table as nccl-tests prints it,
and the sizes a sweep takes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from labs.topology import preset
from mrc_transport.collective import bandwidth, table
from mrc_transport.collective.algorithms import ALGORITHMS
from mrc_transport.collective.sweep import check_sizes, size_steps
from mrc_transport.harness.errors import HarnessError

ALLREDUCE, ALLGATHER, ALLTOALL = (ALGORITHMS[n] for n in ("allreduce", "allgather", "alltoall"))


def test_bus_factors_are_nccl_tests() -> None:
    assert ALLREDUCE.bus_factor(8) == pytest.approx(2 * 7 / 8)
    assert ALLGATHER.bus_factor(8) == pytest.approx(7 / 8)
    assert ALLTOALL.bus_factor(4) == pytest.approx(3 / 4)
    assert ALLREDUCE.bus_factor(2) == 1.0


def test_algbw_is_size_over_time_in_gb_per_second() -> None:
    assert bandwidth.algbw(16_000_000, 0.5) == pytest.approx(0.032)
    assert bandwidth.busbw(ALLREDUCE, 8, 0.032) == pytest.approx(0.056)
    assert bandwidth.algbw(1, 0.0) == 0.0


def test_count_column_is_what_a_rank_passes_to_nccl() -> None:
    assert ALLREDUCE.count_divisor(8) == 1
    assert ALLGATHER.count_divisor(8) == 8
    assert ALLTOALL.count_divisor(8) == 8


def test_the_ideal_on_default_is_a_hosts_four_ports() -> None:
    topo = preset("default")
    fabric = bandwidth.Fabric.of(topo, topo.hosts)
    assert fabric.host_bps == 400e6
    assert fabric.rack_uplink_bps == 1.6e9
    for alg in ALGORITHMS.values():  # full bisection: the host's ports are the bottleneck
        assert bandwidth.ideal_busbw(alg, 1 << 24, 8, fabric) == pytest.approx(0.05)


def test_the_ideal_is_the_uplinks_when_they_are_the_bottleneck() -> None:
    topo = replace(preset("default"), t1_per_plane=1)  # a rack's uplinks: 4 x 100 Mbit/s
    fabric = bandwidth.Fabric.of(topo, topo.hosts)
    size = 8 << 20
    # all-to-all: each rack sends 4 hosts x 4 blocks of S/8 out, 2S over 400 Mbit/s
    seconds = 2 * size * 8 / 400e6
    want = size / 1e9 / seconds * 7 / 8
    assert bandwidth.ideal_busbw(ALLTOALL, size, 8, fabric) == pytest.approx(want)
    # a ring crosses between racks once each way: the uplinks carry what a host sends
    assert bandwidth.ideal_busbw(ALLREDUCE, size, 8, fabric) == pytest.approx(0.05)


def test_header_is_nccl_tests_out_of_place_group() -> None:
    lines = table.header()
    assert lines[2] == (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    )
    assert lines[3] == (
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    )


def test_a_row_lines_up_under_its_heads() -> None:
    row = table.Row(16777216, 4194304, "float", 0.7234, 0.0232, 0.0406, 0)
    line = table.row_line(ALLREDUCE, row)
    assert line == (
        "    16777216       4194304     float     sum      -1   723400  0.0232  0.0406      0"
    )
    assert len(line) == len(table.header()[2])


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.7234, " 723400"), (0.00123, " 1230.0"), (42e-6, "  42.00")]
)
def test_time_has_fewer_decimals_as_it_grows(seconds: float, text: str) -> None:
    assert table.time_text(seconds) == text


def test_footer_counts_wrong_elements_and_compares_with_the_ideal() -> None:
    rows = [
        table.Row(1 << 20, 1 << 18, "float", 0.1, 0.01, 0.02, 0),
        table.Row(1 << 24, 1 << 22, "float", 0.9, 0.02, 0.04, 3),
    ]
    lines = table.footer(rows, 0.05)
    assert lines[0] == "# Out of bounds values : 3 FAILED"
    assert lines[1] == "# Avg bus bandwidth    : 0.0300"
    assert "0.0400 is 0.80 of it" in lines[2]


def test_sizes_step_by_the_factor_up_to_max() -> None:
    assert size_steps(1 << 20, 1 << 24, 4) == (1 << 20, 1 << 22, 1 << 24)
    assert size_steps(1 << 20, 3 << 20, 2) == (1 << 20, 2 << 20)
    assert size_steps(1024, 1024, 2) == (1024,)


@pytest.mark.parametrize(
    ("low", "high", "factor", "words"),
    [(0, 1, 2, "0 < MIN"), (8, 4, 2, "MIN <= MAX"), (8, 64, 1, "-f must be")],
)
def test_bad_sweeps_are_one_line(low: int, high: int, factor: int, words: str) -> None:
    with pytest.raises(HarnessError, match=words):
        size_steps(low, high, factor)


def test_a_size_must_split_into_whole_elements_per_rank() -> None:
    check_sizes([32 * 8, 64 * 8], 8)
    with pytest.raises(HarnessError, match="1000 is not a multiple of 32 bytes"):
        check_sizes([1000], 8)
    with pytest.raises(HarnessError, match="buffers would take"):
        check_sizes([1 << 30], 8)
