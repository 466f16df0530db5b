"""`mrc lab export`: a fabric as a containerlab topology file, or as the clabernetes
``Topology`` resource that carries one, generated from the plan `mrc lab up` applies.

containerlab (https://containerlab.dev) runs each node as a container and wires them with
veth pairs, or VXLAN links between machines; clabernetes runs a containerlab topology on
Kubernetes, a node per pod, every link a VXLAN tunnel between pods. Either way a node here
is a ``kind: linux`` container of the mrc node image (labs/image.py), one per host and
switch, whose ``exec`` is its share of labs/plan.py's ops (labs/nodescript.py) and whose
``sysctls`` are the plan's; links are the plan's veths with the interface names the lab
uses, and the MTU its ports get. Nothing of the addressing is written here twice. For
clabernetes the switch-to-switch ports get short names (labs/portnames.py): it names a
tunnel device after each link end, and the lab's names make one too long for Linux.

Pure: a topology in, the documents out as text; the CLI writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from labs import image, nodescript, portnames
from labs.errors import LabError, TopologyError
from labs.plan import Op, Veth, build
from labs.topology import Topology
from labs.yamlfile import dump_yaml
from mrc_transport.wire.frames import DATA_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN

FORMATS = ("containerlab", "clabernetes")
CLABERNETES_API = "clabernetes.containerlab.dev/v1alpha1"
CLABERNETES_MTU = 1400
"""The MTU a clabernetes export plans for unless told: its links are VXLAN tunnels between
pods, which carry about 1400 bytes of frame on a 1450-1500 byte pod network."""
IPV6_MIN_MTU = 1280
"""Every IPv6 link carries at least this (RFC 8200 section 5)."""
MIN_MSS = 256
"""The smallest data payload `mrc perf --mss` takes (cli/perf.py)."""
SRH_FIXED, SRH_SEGMENT = 8, 16
"""An SRH's fixed part and each segment's bytes (RFC 8754 section 2)."""
OBJECT_LIMIT = 1_572_864
"""The largest object Kubernetes stores: etcd's default --max-request-bytes, 1.5 MiB."""


class ExportError(LabError):
    """A fabric the target cannot carry, or an MTU it cannot be planned for (one line)."""


@dataclass(frozen=True, slots=True)
class Exported:
    """What an export writes, generated in full before anything is written."""

    text: str
    """The containerlab topology file, or the clabernetes resource."""
    dockerfile: str
    """The node image's recipe (labs/image.py)."""
    topo: Topology
    """The fabric as exported: its SRv6 dataplane decided, its MTU planned."""


def decided(topo: Topology) -> Topology:
    """``srv6: auto`` exported as the kernel's seg6local, which the kernels that run
    containers usually have; a topology asks for the BPF switch with ``srv6: bpf``."""
    return replace(topo, srv6="seg6local") if topo.srv6 == "auto" else topo


def headers_needed(topo: Topology) -> int:
    """Bytes of headers on the fabric's longest SRH path (host, T0, T1, T0, host: three
    switch segments and the host's), with MRC's UDP and data headers."""
    segments = (3 if topo.racks > 1 else 1) + 1
    srh = SRH_FIXED + SRH_SEGMENT * segments
    return IPV6_HEADER_LEN + srh + UDP_HEADER_LEN + DATA_HEADER_LEN


def planned(topo: Topology, mtu: int | None) -> Topology:
    """The fabric with every link at ``mtu`` (None: as it is); ExportError if no MRC
    packet would fit, or if the link classes cannot take that MTU."""
    if mtu is None:
        return topo
    floor = max(IPV6_MIN_MTU, headers_needed(topo) + MIN_MSS)
    if not floor <= mtu <= 65535:
        raise ExportError(
            f"--mtu {mtu}: must be in {floor}..65535 (IPv6 links carry at least "
            f"{IPV6_MIN_MTU}, RFC 8200 section 5; this fabric's longest SRH path takes "
            f"{headers_needed(topo)} bytes of headers before MRC's data)"
        )
    try:
        return replace(
            topo,
            host_link=replace(topo.host_link, mtu=mtu),
            fabric_link=replace(topo.fabric_link, mtu=mtu),
        )
    except TopologyError as exc:
        raise ExportError(f"--mtu {mtu}: {exc}") from None


def link_mtus(topo: Topology) -> str:
    """The links' MTU, for people: "9000", or "4000 to hosts, 9000 between switches"."""
    host, fabric = topo.host_link.mtu, topo.fabric_link.mtu
    return f"{host}" if host == fabric else f"{host} to hosts, {fabric} between switches"


def node_config(topo: Topology, name: str, mine: list[Op], img: str) -> dict[str, Any]:
    """A node of the containerlab topology: kind, image, the plan's sysctls, and its script
    from ``mine``, its ops."""
    script = nodescript.script(topo, name, mine)
    return {
        "kind": "linux",
        "image": img,
        "sysctls": nodescript.sysctls(mine),
        "exec": [nodescript.exec_command(script)],
    }


def links(ops: list[Op]) -> list[dict[str, Any]]:
    """The plan's veths between nodes, named as the lab names them, at their MTU."""
    mtu = nodescript.mtus(ops)
    out = []
    for op in ops:
        if isinstance(op, Veth) and nodescript.is_link(op):
            ends = [f"{op.node}:{op.dev}", f"{op.peer_node}:{op.peer_dev}"]
            link: dict[str, Any] = {"endpoints": ends}
            if (op.node, op.dev) in mtu:
                link["mtu"] = mtu[op.node, op.dev]
            out.append(link)
    return out


def containerlab_doc(topo: Topology, name: str, img: str, ops: list[Op]) -> dict[str, Any]:
    """The containerlab topology of ``topo``, whose plan is ``ops``."""
    mine = nodescript.by_node(ops)
    nodes = {node: node_config(topo, name, mine[node], img) for node in topo.nodes}
    return {"name": name, "topology": {"nodes": nodes, "links": links(ops)}}


def header(topo: Topology, img: str, fmt: str) -> str:
    """The comment the exported file starts with: what it is and how to run it."""
    dataplane = "the kernel's seg6local" if topo.srv6 == "seg6local" else "the BPF switch"
    h0, h1 = topo.hosts[0], topo.hosts[-1]
    # server-side: a client-side apply keeps a copy in an annotation, limited to 256 KB
    run = (
        "kubectl apply --server-side -f FILE"
        if fmt == "clabernetes"
        else "containerlab deploy -t FILE"
    )
    return "\n".join(
        [
            f"# mrc lab export: a {topo.planes}-plane fabric of {len(topo.hosts)} hosts and "
            f"{len(topo.switches)} switches ({len(topo.links)} links), link MTU "
            f"{link_mtus(topo)}, SRv6 by {dataplane}.",
            f"# Every node runs {img}, built from {image.DOCKERFILE}; {run}.",
            f"# Then on {h1}: mrc perf -s --paths-file {nodescript.PATHS_FILE}",
            f"#   and on {h0}: mrc perf -c {h1} --paths-file {nodescript.PATHS_FILE}",
        ]
    )


def clabernetes_doc(name: str, definition: str) -> dict[str, Any]:
    """The Topology resource: the containerlab file as a string, nothing exposed (a node
    serves nothing outside the fabric), resources named ``<name>-<node>``."""
    return {
        "apiVersion": CLABERNETES_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {
            "naming": "prefixed",
            "definition": {"containerlab": definition},
            "expose": {"disableExpose": True},
        },
    }


def tunnel_ready(topo: Topology, ops: list[Op]) -> list[Op]:
    """The plan with short switch-to-switch port names (labs/portnames.py), so that each
    link's tunnel device in a clabernetes pod has a name Linux takes; ExportError where
    even those do not fit."""
    ops = portnames.renamed(ops, portnames.short_ports(topo))
    ends = [
        end
        for op in ops
        if isinstance(op, Veth) and nodescript.is_link(op)
        for end in ((op.node, op.dev), (op.peer_node, op.peer_dev))
    ]
    name = portnames.too_long(ends)
    if name is not None:
        raise ExportError(
            f"clabernetes would name a link's tunnel {name}, longer than Linux's "
            f"{portnames.LINUX_NAME} characters: export fewer racks, hosts, planes or T1s"
        )
    return ops


def export(
    topo: Topology, fmt: str, name: str, img: str = image.IMAGE, mtu: int | None = None
) -> Exported:
    """The documents of ``topo`` exported as ``fmt``; ExportError for what the target
    cannot carry. clabernetes plans for CLABERNETES_MTU unless ``mtu`` is given, with its
    switch-to-switch ports renamed for its tunnels."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if fmt == "clabernetes" and mtu is None:
        mtu = CLABERNETES_MTU
    topo = planned(decided(topo), mtu)
    ops = build(topo)
    if fmt == "clabernetes":
        ops = tunnel_ready(topo, ops)
    clab = header(topo, img, fmt) + "\n" + dump_yaml(containerlab_doc(topo, name, img, ops))
    text = clab
    if fmt == "clabernetes":
        resource = clabernetes_doc(name, clab)
        size = len(json.dumps(resource, separators=(",", ":")).encode())
        if size > OBJECT_LIMIT:
            raise ExportError(
                f"the Topology resource would be {size / 2**20:.1f} MiB as Kubernetes stores "
                f"it (JSON), over its 1.5 MiB per object: export a smaller fabric"
            )
        text = header(topo, img, fmt) + "\n" + dump_yaml(resource)
    return Exported(text, image.dockerfile(ops, img), topo)
