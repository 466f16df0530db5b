"""labs/sizing.py: the paper's multi-plane numbers and the Clos invariants behind them.

Paper numbers (arXiv 2605.04333, reference notes "The three prongs" item 2): 512-port
switches, 8 planes -> T0 256 down / 256 up, T1 reaching 512 T0s, 131,072 NICs in two tiers;
versus a 3-tier 800G fabric: 2/3 of the optics, 3/5 of the switches, 3 switches on the
longest path instead of 5-7, 0.4% instead of ~3% lost per T0-T1 link.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labs.sizing import (
    FabricSize,
    SizingError,
    compare,
    fewest_tiers,
    max_hosts,
    multiplane_clos,
    single_plane,
    three_tier,
)


def _per_plane(fabric: FabricSize, tier: int) -> int:
    assert fabric.tier(tier) % fabric.planes == 0
    return fabric.tier(tier) // fabric.planes


def test_paper_multiplane_is_two_tiers_of_131072_nics() -> None:
    mp = multiplane_clos(512, 8, 800)
    assert mp.tiers == 2
    assert mp.nics == 512 * 256 == 131_072
    assert mp.port_gbps == 100
    assert mp.radix * mp.port_gbps == 51_200  # the 51.2 Tb/s ASIC


def test_paper_t0_has_256_down_256_up_and_t1_reaches_512_t0s() -> None:
    mp = multiplane_clos(512, 8, 800)
    t0, t1 = _per_plane(mp, 0), _per_plane(mp, 1)
    host_links, up_links = mp.host_links // mp.planes, mp.fabric_links // mp.planes
    assert host_links // t0 == 256  # down ports per T0
    assert up_links // t0 == 256  # up ports per T0
    assert up_links // t1 == 512  # every T1 port goes down to a distinct T0
    assert t0 == 512


def test_three_tier_fat_tree_holds_k_cubed_over_4_with_5k_squared_over_4_switches() -> None:
    for k in (8, 16, 64):
        base = three_tier(k)
        assert base.nics == k**3 // 4
        assert base.switches == 5 * k**2 // 4
        assert base.longest_path == 5


def test_paper_ratios_against_three_tier_800g() -> None:
    cmp = compare(512, 8, 800)
    assert cmp.baseline.radix == 64  # 51.2T / 800G
    assert cmp.baseline.tiers == 3
    assert cmp.optics == Fraction(2, 3)
    assert cmp.switches == Fraction(3, 5)
    assert (cmp.multiplane.longest_path, cmp.baseline.longest_path) == (3, 5)


def test_paper_loss_per_t0_t1_link() -> None:
    cmp = compare(512, 8, 800)
    mp_loss, base_loss = cmp.multiplane.uplink_loss, cmp.baseline.uplink_loss
    assert mp_loss is not None
    assert base_loss is not None
    assert round(float(mp_loss) * 100, 1) == 0.4  # 1/256 = 0.39%
    assert round(float(base_loss) * 100) == 3  # 1/32 = 3.1%
    # Spraying over all 8 planes, the whole node loses 8x less again.
    assert cmp.multiplane.node_loss == mp_loss / 8


def test_optics_ratio_depends_on_counting_the_nic_side_module() -> None:
    # The paper's 2/3 needs the NIC-side module counted; switch side alone gives 3/5.
    assert compare(nic_optics=True).optics == Fraction(2, 3)
    assert compare(nic_optics=False).optics == Fraction(3, 5)


def test_same_nic_count_needs_a_fourth_tier_single_plane() -> None:
    # "5-7 switches": 131,072 NICs on 64-port 800G switches exceed k^3/4 = 65,536.
    cmp = compare(hosts=131_072)
    assert cmp.multiplane.tiers == 2
    assert cmp.baseline.tiers == 4
    assert cmp.baseline.longest_path == 7
    assert cmp.baseline.nics == cmp.multiplane.nics == 131_072


@given(
    half=st.integers(min_value=2, max_value=64),
    planes=st.sampled_from([1, 2, 4, 8]),
)
def test_full_fabric_ratios_hold_for_any_radix(half: int, planes: int) -> None:
    # Per NIC: 3P/R switches in two tiers vs 5P/R in three -> 3/5, whatever R and P are.
    cmp = compare(radix=2 * half * planes, planes=planes, nic_gbps=100 * planes)
    assert cmp.switches == Fraction(3, 5)
    assert cmp.optics == Fraction(2, 3)
    assert cmp.uplink_loss == Fraction(1, planes)


@given(
    half=st.integers(min_value=2, max_value=40),
    hosts=st.integers(min_value=1, max_value=200_000),
    planes=st.sampled_from([1, 2, 8]),
)
def test_sized_fabric_is_smallest_that_holds_hosts(half: int, hosts: int, planes: int) -> None:
    radix = 2 * half
    try:
        fabric = multiplane_clos(radix, planes, 100 * planes, hosts)
    except SizingError:
        assert max_hosts(radix, 6) < hosts
        return
    assert fabric.nics == hosts <= fabric.max_nics
    assert fabric.tiers == 1 or max_hosts(radix, fabric.tiers - 1) < hosts
    assert fabric.host_links == planes * hosts
    for tier in range(fabric.tiers):
        # Ports a tier must offer per plane: hosts down, and as many up below the top tier.
        needed = hosts * (1 if tier == fabric.tiers - 1 else 2)
        switches = _per_plane(fabric, tier)
        assert (switches - 1) * radix < needed <= switches * radix


def test_full_fabric_uses_every_switch_port() -> None:
    for fabric in (multiplane_clos(512, 8, 800), three_tier(64), single_plane(16, 400, tiers=4)):
        used = fabric.host_links + 2 * fabric.fabric_links
        assert used == fabric.switches * fabric.radix


def test_fewest_tiers() -> None:
    assert fewest_tiers(64, 2048) == 2
    assert fewest_tiers(64, 2049) == 3
    assert fewest_tiers(64, 64) == 1


def test_as_dict_is_json_with_exact_fractions() -> None:
    doc = json.loads(json.dumps(compare().as_dict()))
    assert doc["multiplane"]["nics"] == 131_072
    assert doc["baseline"]["t2"] == 1024
    assert doc["ratios"]["optics_per_nic"]["fraction"] == "2/3"
    assert doc["ratios"]["switches_per_nic"]["fraction"] == "3/5"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"radix": 511}, "split"),
        ({"radix": 510, "planes": 7}, "split"),
        ({"planes": 0}, "split"),
        ({"nic_gbps": 801}, "equal ports"),
        ({"hosts": 0}, "at least 1"),
        ({"hosts": 10**30}, "tiers"),
        ({"radix": 16, "planes": 8}, "ports at NIC speed"),
    ],
)
def test_bad_inputs_raise_sizing_error(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SizingError, match=fragment):
        compare(**kwargs)


@pytest.mark.parametrize("radix", [2, 7, 0, -4])
def test_bad_radix_raises_directly(radix: int) -> None:
    with pytest.raises(SizingError, match="even"):
        single_plane(radix, 800)


def test_tiers_too_few_for_hosts_raise() -> None:
    with pytest.raises(SizingError, match="hold"):
        multiplane_clos(512, 8, 800, hosts=131_073, tiers=2)
