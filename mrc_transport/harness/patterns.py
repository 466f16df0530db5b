"""Who sends to whom: one host pair across racks, and the two-rack permutation as flows."""

from __future__ import annotations

from collections.abc import Sequence

from labs.topology import Topology
from mrc_transport.harness.baselines import FlowKind
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.flows import Flow


def pick_hosts(topo: Topology, src: str | None, dst: str | None) -> tuple[str, str]:
    """The sender and receiver: different racks, so the traffic crosses T0-T1 links."""
    if topo.racks < 2:
        raise HarnessError("the failover demo needs at least 2 racks (traffic must cross a T1)")
    src = src or topo.hosts_in_rack(topo.racks - 1)[0]
    dst = dst or topo.hosts_in_rack(0)[0]
    for h in (src, dst):
        if h not in topo.hosts:
            raise HarnessError(f"no host {h!r} in this fabric ({', '.join(topo.hosts)})")
    if topo.rack_of(src) == topo.rack_of(dst):
        raise HarnessError(f"{src} and {dst} share a rack: pick hosts in different racks")
    return src, dst


TCP_PORT = 5201
MRC_BASE_PORT = 4791
"""Pair k's MRC endpoints use UDP port MRC_BASE_PORT + k: a host runs a client and a
server at once, and two endpoints cannot share a port in one namespace."""


def permutation(topo: Topology) -> list[tuple[str, str]]:
    """(src, dst) pairs: rack 0 host i -> rack 1 host i, rack 1 host i -> rack 0 host i+1,
    so every host sends once and receives once and no pair is a reversed pair (when a rack
    has more than one host)."""
    a, b = topo.hosts_in_rack(0), topo.hosts_in_rack(1)
    n = len(a)
    return [(a[i], b[i]) for i in range(n)] + [(b[i], a[(i + 1) % n]) for i in range(n)]


def pair_name(src: str, dst: str) -> str:
    return f"{src}->{dst}"


def pair_flows(
    pairs: Sequence[tuple[str, str]], kind: FlowKind, seconds: float, scheduler: str = "random"
) -> list[Flow]:
    """One flow per pair: a baseline's all on one TCP port (each receiver is in its own
    host), MRC on a port per pair (MRC_BASE_PORT docstring)."""
    if kind != "mrc":
        return [Flow(pair_name(s, d), kind, s, d, TCP_PORT, seconds) for s, d in pairs]
    return [
        Flow(pair_name(s, d), "mrc", s, d, MRC_BASE_PORT + k, seconds, scheduler=scheduler)
        for k, (s, d) in enumerate(pairs)
    ]
