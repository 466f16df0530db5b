"""A host's SRv6 paths to every other host, as the file `mrc perf --paths-file` reads
(mrc_transport/io/paths.py ``load_static``), so MRC runs between hosts no lab built:
exported containers, or real machines wired and addressed as the plan says.

The file is one host's view: ``peers`` maps every other host to its addresses (one per
plane) and the paths towards it (labs/paths.py), each with both encodings written out.
A server reads the same file to map a SETUP's source address back to its peer.
"""

from __future__ import annotations

from typing import Any

from labs import addressing as addr
from labs.errors import TopologyError
from labs.paths import paths
from labs.topology import Topology
from labs.yamlfile import dump_yaml
from srv6.path import SrPath


def path_mapping(path: SrPath) -> dict[str, Any]:
    """One path as the file's mapping (io/paths.py ``path_from_mapping`` reads it back)."""
    return {
        "plane": path.plane,
        "hops": list(path.hops),
        "port": path.port,
        "src": str(path.src),
        "dst": str(path.dst),
        "usid": str(path.usid_dst),
        "segments": [str(s) for s in path.segments],
    }


def host_document(topo: Topology, host: str) -> dict[str, Any]:
    """``host``'s paths file: ``{"peers": {peer: {"addresses": [...], "paths": [...]}}}``;
    TopologyError for a switch or an unknown node, or a fabric of one host (no peers)."""
    if topo.kind_of(topo.check_node(host)) != "host":
        raise TopologyError(f"{host} is a switch: paths files are for hosts ({topo.hosts[0]}..)")
    if len(topo.hosts) < 2:
        raise TopologyError("a fabric of one host has no paths to export")
    peers = {
        peer: {
            "addresses": [str(addr.host_address(topo, p, peer)) for p in range(topo.planes)],
            "paths": [path_mapping(path) for path in paths(topo, host, peer)],
        }
        for peer in topo.hosts
        if peer != host
    }
    return {"peers": peers}


def host_file(topo: Topology, host: str) -> str:
    """``host``'s paths file as text: a comment saying whose it is and how to use it, then
    the document, each path's lists on one line."""
    doc = host_document(topo, host)
    peer = next(iter(doc["peers"]))
    return (
        f"# SRv6 paths from {host} to every other host of a {topo.planes}-plane fabric "
        f"({len(topo.hosts)} hosts), from `mrc paths export`.\n"
        f"# On {host}: mrc perf -s --paths-file FILE, or mrc perf -c {peer} --paths-file FILE\n"
        + dump_yaml(doc, flow_leaves=True)
    )
