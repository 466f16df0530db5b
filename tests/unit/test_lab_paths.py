"""Paths and addresses: every distinct path, both encodings ending at the same address."""

from __future__ import annotations

from ipaddress import IPv6Address

import pytest

from labs import addressing as addr
from labs.paths import path_links, paths
from labs.topology import preset
from srv6 import usid


def test_same_rack_one_path_per_plane() -> None:
    topo = preset("tiny")
    ps = paths(topo, "h0", "h1")
    assert [(p.plane, p.hops) for p in ps] == [(0, ("t0-p0-0",)), (1, ("t0-p1-0",))]
    assert ps[0].usid_dst == IPv6Address("fcbb:bb00:1000:a001::")
    assert ps[0].segments == (IPv6Address("fcbb:bb00:1000:ffff::"), IPv6Address("fcbb:bb00:a001::"))


def test_cross_rack_one_path_per_t1_per_plane() -> None:
    topo = preset("default")
    ps = paths(topo, "h0", "h7")
    assert len(ps) == topo.planes * topo.t1_per_plane
    assert len({(p.plane, p.hops) for p in ps}) == len(ps)
    p = ps[5]
    assert p.plane == 1
    assert p.hops == ("t0-p1-0", "t1-p1-1", "t0-p1-1")
    assert p.usid_dst == IPv6Address("fcbb:bb01:1000:2001:1001:a007::")
    assert p.port == "p1"
    assert p.src == IPv6Address("fcbb:bb01:a000::")


@pytest.mark.parametrize("name", ["tiny", "default", "large"])
def test_usid_shifts_to_the_srh_final_destination(name: str) -> None:
    topo = preset(name)
    hosts = topo.hosts
    for src, dst in [(hosts[0], hosts[-1]), (hosts[-1], hosts[1])]:
        for p in paths(topo, src, dst):
            assert usid.final_destination(p.usid_dst) == p.dst == p.segments[-1]
            block, usids = usid.unpack(p.usid_dst)
            assert block == addr.block(p.plane)
            assert len(usids) == len(p.hops) + 1
            # Every SRH segment but the last is the classic End SID of that hop.
            assert p.segments[:-1] == tuple(addr.classic_sid(topo, p.plane, h) for h in p.hops)


def test_usids_are_unique_per_plane_and_never_reserved() -> None:
    topo = preset("large")
    ids = [addr.node_usid(topo, n) for n in topo.hosts] + [
        addr.node_usid(topo, s) for s in topo.switches if topo.plane_of(s) == 0
    ]
    assert len(ids) == len(set(ids))
    assert all(0 < i < addr.CLASSIC_END_MARK for i in ids)


def test_path_links_names_each_cable_lower_tier_first() -> None:
    topo = preset("tiny")
    p = paths(topo, "h0", "h3")[1]
    assert path_links("h0", "h3", p) == (
        "h0:t0-p0-0",
        "t0-p0-0:t1-p0-1",
        "t0-p0-1:t1-p0-1",
        "h3:t0-p0-1",
    )
    for name in path_links("h0", "h3", p):
        assert topo.link(name).name == name


def test_no_path_to_self_or_to_a_switch() -> None:
    topo = preset("tiny")
    with pytest.raises(ValueError, match="itself"):
        paths(topo, "h0", "h0")
    with pytest.raises(ValueError, match="between hosts"):
        paths(topo, "h0", "t0-p0-0")
