"""The lab's address plan: one F3216 uSID block per plane, one 16-bit uSID per node.

Plan (docs/lab.md, "Address plan"):

- plane p's locator block is ``fcbb:bb00::/32 + p`` (``fcbb:bb00::/32``, ``fcbb:bb01::/32``..);
- uSIDs: T0 of rack i ``0x1000 + i``, T1 j ``0x2000 + j``, host h ``0xa000 + h``; 0xffff is
  reserved (it marks a classic End SID, below) and 0 ends a container (RFC 9800 4.1);
- switch s in plane p: ``block:s::/48`` is its ``End flavors next-csid`` SID (uN) and
  ``block:s:ffff::/128`` its classic ``End`` SID for SRH paths; static routes to a
  neighbour's ``block:n::/48`` cover both;
- host h in plane p: ``block:h::`` on port p, inside the ``local block:h::/48`` catch-all,
  so a uSID container shifted down to ``block:h::`` and the last SRH segment are the SAME
  final destination (the UDP checksum is computed over it, RFC 8200 8.1);
- baseline (non-SRv6) address of host h: ``fd00:6d72:h::/128`` on lo (``6d72`` = "mr"),
  reached through ECMP routes across planes and T1s;
- link-local on every port: ``fe80::<own uSID>``; neighbours are static (permanent), so no
  packet waits for neighbour discovery (kernel-facts "Cutting links").
"""

from __future__ import annotations

from ipaddress import IPv6Address

from labs.topology import Topology, host_index
from srv6 import usid

PLANE_BLOCK_BASE = 0xFCBB_BB00
BASELINE_BLOCK = 0xFD00_6D72
T0_USID_BASE = 0x1000
T1_USID_BASE = 0x2000
HOST_USID_BASE = 0xA000
CLASSIC_END_MARK = 0xFFFF


def block(plane: int) -> int:
    """The 32-bit locator block of a plane."""
    return PLANE_BLOCK_BASE + plane


def block_prefix(plane: int) -> str:
    return f"{IPv6Address(block(plane) << 96)}/32"


def node_usid(topo: Topology, node: str) -> int:
    kind = topo.kind_of(node)
    if kind == "host":
        return HOST_USID_BASE + host_index(node)
    base = T0_USID_BASE if kind == "t0" else T1_USID_BASE
    return base + topo.index_of(node)


def _addr(top32: int, usid16: int, rest: int = 0) -> IPv6Address:
    return IPv6Address((top32 << 96) | (usid16 << 80) | rest)


def node_prefix(topo: Topology, plane: int, node: str) -> str:
    """``block:usid::/48``: the uN SID of a switch, the local catch-all of a host."""
    return f"{_addr(block(plane), node_usid(topo, node))}/48"


def host_address(topo: Topology, plane: int, host: str) -> IPv6Address:
    """The host's address in a plane: the final destination of both encodings."""
    return _addr(block(plane), node_usid(topo, host))


def classic_sid(topo: Topology, plane: int, switch: str) -> IPv6Address:
    """A switch's classic ``End`` SID: ``block:usid:ffff::``."""
    return _addr(block(plane), node_usid(topo, switch), CLASSIC_END_MARK << 64)


def usid_container(topo: Topology, plane: int, nodes: tuple[str, ...]) -> IPv6Address:
    """The uSID destination that steers through ``nodes`` (switches then the host)."""
    return usid.pack(block(plane), [node_usid(topo, n) for n in nodes])


def baseline_address(topo: Topology, host: str) -> IPv6Address:
    return _addr(BASELINE_BLOCK, node_usid(topo, host))


def baseline_prefix() -> str:
    return f"{IPv6Address(BASELINE_BLOCK << 96)}/32"


def link_local(topo: Topology, node: str) -> IPv6Address:
    return IPv6Address(f"fe80::{node_usid(topo, node):x}")


def mac(link_index: int, end: int) -> str:
    """Locally administered MAC for end 0 (a) or 1 (b) of link number ``link_index``."""
    return f"02:6d:{(link_index >> 16) & 0xFF:02x}:{(link_index >> 8) & 0xFF:02x}:" + (
        f"{link_index & 0xFF:02x}:{end + 1:02x}"
    )
