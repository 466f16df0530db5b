"""The pure plan, read without root: ordering, SIDs, neighbours, shaping, marking, and a
walk of every path through the planned routing tables (longest prefix match, uSID shift,
End on the SRH) that must end in the destination's local catch-all, with the kernel's
seg6local SIDs and with the BPF switch's SID table alike."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv6Address, IPv6Network

import pytest

from labs import plan as P
from labs.paths import paths
from labs.topology import Topology, preset
from srv6 import usid

DATAPLANES = ("seg6local", "bpf")


@pytest.fixture(scope="module")
def tiny() -> Topology:
    return replace(preset("tiny"), srv6="seg6local")


@pytest.fixture(scope="module")
def tiny_bpf() -> Topology:
    return replace(preset("tiny"), srv6="bpf")


@pytest.fixture(scope="module")
def ops(tiny: Topology) -> list[P.Op]:
    return P.build(tiny)


def test_namespaces_then_sysctls_then_veths_then_config(tiny: Topology, ops: list[P.Op]) -> None:
    kinds = [type(op).__name__ for op in ops]
    assert kinds[: len(tiny.nodes)] == ["Netns"] * len(tiny.nodes)
    last_sysctl = max(i for i, k in enumerate(kinds) if k == "Sysctl")
    first_veth = kinds.index("Veth")
    last_veth = max(i for i, k in enumerate(kinds) if k == "Veth")
    assert last_sysctl < first_veth
    assert all(k not in ("Veth", "Sysctl", "Netns") for k in kinds[last_veth + 1 :])


def test_every_veth_is_created_with_its_peer_in_the_target_namespace(
    tiny: Topology, ops: list[P.Op]
) -> None:
    veths = [op for op in ops if isinstance(op, P.Veth)]
    assert len(veths) == len(tiny.links) + len(tiny.switches)
    line = P.ip_line("lab", next(v for v in veths if v.node == "h0"))
    assert line == "link add p0 type veth peer name h0 netns mrc-lab-t0-p0-0"


def test_sysctls_per_role(ops: list[P.Op]) -> None:
    sys = {(op.node, op.key): op.value for op in ops if isinstance(op, P.Sysctl)}
    assert sys[("t1-p0-0", "net.ipv6.conf.all.forwarding")] == "1"
    assert ("h0", "net.ipv6.conf.all.forwarding") not in sys
    assert sys[("h0", "net.ipv6.conf.default.seg6_enabled")] == "1"
    assert sys[("h0", "net.ipv6.fib_multipath_hash_policy")] == "1"


def test_switch_sids_use_next_csid_on_the_sid_veth_never_lo(
    tiny: Topology, ops: list[P.Op]
) -> None:
    for sw in tiny.switches:
        sids = [
            op for op in ops if isinstance(op, P.Route) and op.node == sw and "seg6local" in op.spec
        ]
        lines = [P.ip_line("lab", op) for op in sids]
        assert any("action End flavors next-csid lblen 32 nflen 16 dev sid0" in ln for ln in lines)
        assert any(ln.endswith("action End dev sid0") for ln in lines)
        assert not any("dev lo" in ln for ln in lines)


def test_the_plan_needs_the_dataplane_decided() -> None:
    with pytest.raises(ValueError, match="auto"):
        P.build(preset("tiny"))


def test_bpf_switch_sids_are_blackholes_in_the_sid_table_and_the_program_on_every_port(
    tiny_bpf: Topology,
) -> None:
    ops = P.build(tiny_bpf)
    assert not [op for op in ops if isinstance(op, P.Route) and "seg6local" in op.spec]
    assert not [op for op in ops if isinstance(op, P.Veth) and op.dev == P.SID_DEV]
    sw = "t0-p0-0"
    sids = [P.ip_line("lab", op) for op in ops if isinstance(op, P.Route) and op.node == sw]
    assert f"route replace blackhole fcbb:bb00:1000::/48 table {P.SID_TABLE}" in sids
    progs = {(op.node, op.dev) for op in ops if isinstance(op, P.TcBpf)}
    ports = {(s, dev) for s in tiny_bpf.switches for dev, _, _ in tiny_bpf.ports(s)}
    assert progs == ports  # every switch port, no host port
    op = next(op for op in ops if isinstance(op, P.TcBpf) and op.node == sw)
    assert P.tc_lines(op, {"srv6_switch": "/pin/x"}) == [
        f"qdisc replace dev {op.dev} clsact",
        f"filter replace dev {op.dev} ingress pref 1 handle 1 bpf da object-pinned /pin/x",
    ]
    assert op.dev in P.op_devs(op)  # a hard restore re-attaches it


def test_static_neighbours_match_the_peer_mac(tiny: Topology, ops: list[P.Op]) -> None:
    macs = {(op.node, op.dev): op.mac for op in ops if isinstance(op, P.LinkUp) and op.mac}
    neighs = [op for op in ops if isinstance(op, P.Neigh)]
    assert len(neighs) == 2 * len(tiny.links)
    for ln in tiny.links:
        by_end = {(n.node, n.dev): n for n in neighs}
        assert by_end[(ln.a, ln.a_dev)].lladdr == macs[(ln.b, ln.b_dev)]
        assert by_end[(ln.b, ln.b_dev)].lladdr == macs[(ln.a, ln.a_dev)]
    assert "nud permanent" in P.ip_line("lab", neighs[0])


def test_tbf_on_both_ends_of_every_link(tiny: Topology, ops: list[P.Op]) -> None:
    qd = {(op.node, op.dev): op for op in ops if isinstance(op, P.Qdisc)}
    assert len(qd) == 2 * len(tiny.links)
    q = qd[("h0", "p0")]
    assert P.tc_lines(q) == [
        "qdisc replace dev p0 root tbf rate 100000000bit burst 32768 limit 262144"
    ]


def test_ecn_marks_every_switch_egress_but_the_last_hop(tiny: Topology, ops: list[P.Op]) -> None:
    nft = {op.node: op.text for op in ops if isinstance(op, P.Nft)}
    assert set(nft) == set(tiny.switches)
    assert 'oifname "t1-p0-0"' in nft["t0-p0-0"]
    assert 'oifname "h0"' not in nft["t0-p0-0"]  # T0 -> host is the last hop: no marking
    assert nft["t1-p0-0"].count("ip6 ecn set ce") == tiny.racks
    assert "numgen random mod 1000000 < 10000" in nft["t1-p0-0"]


def test_ecn_none_and_rate_modes() -> None:
    topo = replace(preset("tiny"), srv6="bpf")
    off = replace(topo, fabric_link=replace(topo.fabric_link, ecn="none"))
    assert not [op for op in P.build(off) if isinstance(op, P.Nft)]
    rate = replace(topo, fabric_link=replace(topo.fabric_link, ecn="rate"))
    text = next(op.text for op in P.build(rate) if isinstance(op, P.Nft))
    assert "limit rate over 11250 kbytes/second ip6 ecn set ce" in text


# -- walking the planned tables --------------------------------------------------------------


Tables = dict[str, list[tuple[IPv6Network, P.Route]]]


def _tables(ops: list[P.Op]) -> tuple[Tables, Tables]:
    """(main tables, BPF SID tables) per node."""
    main: Tables = {}
    sids: Tables = {}
    for op in ops:
        if isinstance(op, P.Route):
            table = sids if f"table {P.SID_TABLE}" in op.spec else main
            table.setdefault(op.node, []).append((IPv6Network(op.dst.split()[-1]), op))
    return main, sids


def _bpf_switch(da: IPv6Address, segs: list[IPv6Address]) -> IPv6Address:
    """What labs/bpf/srv6_switch.c does to a packet for one of its SIDs."""
    following = (int(da) >> 64) & 0xFFFF
    if following not in (0, 0xFFFF):
        return usid.shift(da)
    segs.pop(0)
    return segs[0]


def _walk(
    topo: Topology,
    tables: tuple[Tables, Tables],
    src: str,
    da: IPv6Address,
    segs: list[IPv6Address],
) -> str:
    """Forward from src by longest prefix match until delivered locally; return the node."""
    main, sids = tables
    node = src
    peer_of = {(n, dev): peer for n in topo.nodes for dev, peer, _ in topo.ports(n)}
    for _ in range(16):
        if any(da in net for net, _ in sids.get(node, [])):
            da = _bpf_switch(da, segs)  # the program runs before the routing lookup
        matches = [(n, r) for n, r in main[node] if da in n]
        _net, route = max(matches, key=lambda x: x[0].prefixlen)
        if route.dst.startswith("local"):
            return node
        if "next-csid" in route.spec:
            da = usid.shift(da)
            continue
        if "action End " in route.spec + " ":
            segs.pop(0)
            da = segs[0]
            continue
        dev = route.spec.split(" dev ")[1].split()[0]  # first next hop: every path is unique
        node = peer_of[(node, dev)]
    raise AssertionError("routing loop")


@pytest.mark.parametrize("dataplane", DATAPLANES)
@pytest.mark.parametrize("name", ["tiny", "default"])
def test_every_planned_path_delivers_in_both_encodings(name: str, dataplane: str) -> None:
    topo = replace(preset(name), srv6=dataplane)
    tables = _tables(P.build(topo))
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            for p in paths(topo, src, dst):
                assert _walk(topo, tables, src, p.usid_dst, []) == dst
                assert _walk(topo, tables, src, p.segments[0], list(p.segments)) == dst


def test_hosts_have_ecmp_baseline_route_over_every_plane(tiny: Topology, ops: list[P.Op]) -> None:
    base = [
        op
        for op in ops
        if isinstance(op, P.Route)
        and op.node == "h0"
        and op.dst.startswith("fd00")
        and "table" not in op.spec  # not MPTCP's per-plane tables
    ]
    assert len(base) == 1
    assert base[0].devs == ("p0", "p1")
    assert base[0].spec.count("nexthop via") == tiny.planes


def test_restore_ops_cover_what_admin_down_deletes(ops: list[P.Op]) -> None:
    on_dev = [op for op in ops if op.node == "t0-p0-0" and "t1-p0-1" in P.op_devs(op)]
    kinds = {type(op).__name__ for op in on_dev}
    assert {"LinkUp", "Addr", "Neigh", "Route", "Qdisc"} <= kinds


def _mptcp(ops: list[P.Op], host: str) -> list[str]:
    return [
        P.ip_line("lab", op)
        for op in ops
        if isinstance(op, P.MptcpLimits | P.MptcpEndpoint | P.SourceRule)
        or (isinstance(op, P.Route) and "table 2" in op.spec)
        if op.node == host
    ]


def test_every_host_opens_a_subflow_from_each_plane_routed_through_that_plane() -> None:
    topo = replace(preset("default"), srv6="seg6local")
    ops = P.build(topo)
    lines = _mptcp(ops, "h4")
    assert lines[0] == "mptcp limits set subflow 3 add_addr_accepted 0"
    assert [ln for ln in lines if "endpoint" in ln] == [
        f"mptcp endpoint add fcbb:bb0{p}:a004:: dev p{p} subflow" for p in (1, 2, 3)
    ]
    plane2 = [ln for ln in lines if "table 202" in ln]
    assert plane2 == [
        "rule add from fcbb:bb02:a004:: table 202 pref 1002",
        "route replace fd00:6d72::/32 via fe80::1001 dev p2 table 202",  # every peer's
        "route replace fcbb:bb02::/32 via fe80::1001 dev p2 table 202",  # its own plane
        "route replace unreachable ::/0 table 202",  # nothing else: a server's try fails
    ]
    assert "rule add from fcbb:bb00:a004:: table 200 pref 1000" in lines  # the first subflow
    assert not [op for op in ops if isinstance(op, P.MptcpLimits) and op.node.startswith("t")]
    # after the addresses; a restore re-adds the routes of its port and nothing else
    kinds = [type(op).__name__ for op in ops if op.node == "h4"]
    assert kinds.index("MptcpLimits") > max(i for i, k in enumerate(kinds) if k == "Addr")
    mptcp = [op for op in ops if isinstance(op, P.MptcpEndpoint | P.SourceRule | P.MptcpLimits)]
    assert all(P.op_devs(op) == () for op in mptcp)
    tabled = [op for op in ops if isinstance(op, P.Route) and "table 202" in op.spec]
    assert {P.op_devs(op) for op in tabled} == {("p2",), ()}


def test_mptcp_off_plans_none_and_the_kernel_cap_holds_above_9_planes() -> None:
    off = replace(preset("tiny"), srv6="seg6local", mptcp="off")
    assert not [
        op for op in P.build(off) if isinstance(op, P.MptcpLimits | P.MptcpEndpoint | P.SourceRule)
    ]
    wide = replace(preset("tiny"), srv6="seg6local", planes=12)
    lines = _mptcp(P.build(wide), "h0")
    assert lines[0] == "mptcp limits set subflow 8 add_addr_accepted 0"
    endpoints = [ln for ln in lines if "endpoint" in ln]
    assert len(endpoints) == P.MPTCP_MAX_SUBFLOWS
    assert endpoints[-1] == "mptcp endpoint add fcbb:bb08:a000:: dev p8 subflow"
    assert not [ln for ln in lines if "table 209" in ln]  # plane 9 carries no subflow
