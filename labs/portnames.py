"""Short names for the switch-to-switch ports of a fabric whose links become tunnels.

The lab names a switch port after its peer (``t1-p0-1`` on a T0), which a veth carries
fine. clabernetes carries a link between pods by naming, in the pod, a veth
``<node>-<port>`` and a VXLAN device ``vx-<node>-<port>`` (its launcher, and containerlab's
``tools vxlan create``), and Linux names hold 15 characters (IFNAMSIZ 16 with the NUL):
``vx-t0-p0-0-t1-p0-1`` does not fit. So an export for clabernetes names a T0's port to
T1 j ``u<j>`` (up) and a T1's port to the T0 of rack r ``d<r>`` (down); host ports (``p<p>``
on a host, ``h<i>`` on its T0) keep their names. The ops are renamed, field by field, before
they are rendered, so every command of a node names its ports alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from labs.plan import Addr, LinkUp, Neigh, Nft, Op, PortMap, PrioQdisc, Qdisc, Route, TcBpf, Veth
from labs.topology import Topology

LINUX_NAME = 15
"""Characters in a Linux interface name (IFNAMSIZ 16, with the NUL)."""
TUNNEL_PREFIX = "vx-"
"""What clabernetes' VXLAN device adds to ``<node>-<port>``."""
_DEV = re.compile(r"\bdev (\S+)")
_OIFNAME = re.compile(r'oifname "([^"]+)"')


def short_ports(topo: Topology) -> dict[tuple[str, str], str]:
    """(switch, lab port name) -> short name, for every switch-to-switch port."""
    names: dict[tuple[str, str], str] = {}
    for link in topo.links:
        if link.kind == "t0-t1":
            names[link.a, link.a_dev] = f"u{topo.index_of(link.b)}"
            names[link.b, link.b_dev] = f"d{topo.index_of(link.a)}"
    return names


def renamed(ops: Iterable[Op], names: dict[tuple[str, str], str]) -> list[Op]:
    """``ops`` with every device of ``names`` renamed: in a device field, and in the text
    of a route (``dev X``) or of an nft table (``oifname "X"``)."""
    out: list[Op] = []
    for op in ops:

        def new(dev: str, node: str = op.node) -> str:
            return names.get((node, dev), dev)

        if isinstance(op, Veth):
            op = replace(op, dev=new(op.dev), peer_dev=new(op.peer_dev, op.peer_node))
        elif isinstance(op, Route):
            spec = _DEV.sub(lambda m: f"dev {new(m.group(1))}", op.spec)
            op = replace(op, spec=spec, devs=tuple(new(d) for d in op.devs))
        elif isinstance(op, Nft):
            op = replace(op, text=_OIFNAME.sub(lambda m: f'oifname "{new(m.group(1))}"', op.text))
        elif isinstance(op, LinkUp | Addr | Neigh | Qdisc | PrioQdisc | TcBpf | PortMap):
            op = replace(op, dev=new(op.dev))
        out.append(op)
    return out


def too_long(ends: Iterable[tuple[str, str]]) -> str | None:
    """The first tunnel device name ``vx-<node>-<port>`` over Linux's 15 characters."""
    for node, dev in ends:
        name = f"{TUNNEL_PREFIX}{node}-{dev}"
        if len(name) > LINUX_NAME:
            return name
    return None
