"""Every distinct SRv6 path between two hosts, in every plane: the API the transport uses.

Same rack: host -> T0 -> host (2 uSIDs). Other rack: host -> T0 -> T1 j -> T0' -> host for
every T1 j of the plane (4 uSIDs, mrc-protocol-notes.md "SRv6 encoding"). The path's
plane equals the sending port's index, and both encodings end at the same address.
"""

from __future__ import annotations

import itertools

from labs import addressing as addr
from labs.topology import Topology
from srv6.path import SrPath


def paths(topo: Topology, src: str, dst: str) -> list[SrPath]:
    """All paths from host src to host dst, plane by plane, T1 by T1."""
    topo.check_node(src)
    topo.check_node(dst)
    if topo.kind_of(src) != "host" or topo.kind_of(dst) != "host":
        raise ValueError(f"paths run between hosts, not {src!r} -> {dst!r}")
    if src == dst:
        raise ValueError(f"{src}: a host has no path to itself")
    return [path for plane in range(topo.planes) for path in plane_paths(topo, plane, src, dst)]


def plane_paths(topo: Topology, plane: int, src: str, dst: str) -> list[SrPath]:
    t0_src = topo.t0(plane, topo.rack_of(src))
    t0_dst = topo.t0(plane, topo.rack_of(dst))
    if t0_src == t0_dst:
        return [_path(topo, plane, src, dst, (t0_src,))]
    return [
        _path(topo, plane, src, dst, (t0_src, topo.t1(plane, j), t0_dst))
        for j in range(topo.t1_per_plane)
    ]


def _path(topo: Topology, plane: int, src: str, dst: str, hops: tuple[str, ...]) -> SrPath:
    final = addr.host_address(topo, plane, dst)
    return SrPath(
        plane=plane,
        hops=hops,
        src=addr.host_address(topo, plane, src),
        dst=final,
        usid_dst=addr.usid_container(topo, plane, (*hops, dst)),
        segments=(*(addr.classic_sid(topo, plane, hop) for hop in hops), final),
        port=f"p{plane}",
    )


def path_links(src: str, dst: str, path: SrPath) -> tuple[str, ...]:
    """The link names ("a:b", lower tier first) a path crosses, in order."""
    nodes = (src, *path.hops, dst)
    out = []
    for a, b in itertools.pairwise(nodes):
        lower_first = (a, b) if _tier(a) < _tier(b) else (b, a)
        out.append(f"{lower_first[0]}:{lower_first[1]}")
    return tuple(out)


def _tier(node: str) -> int:
    return 0 if node.startswith("h") else 1 if node.startswith("t0-") else 2


def lab_paths(lab: str, src: str, dst: str) -> list[SrPath]:
    """Paths of a running lab, read from its state file (for the transport)."""
    from labs.state import load_state

    return paths(load_state(lab).topology, src, dst)
