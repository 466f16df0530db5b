"""A flow's SRv6 paths against a fault: which of them it kills, and the share it leaves. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from labs.paths import path_links
from mrc_transport.harness.timeline import FaultWindow
from srv6.path import SrPath


def path_killed(fault: FaultWindow, src: str, dst: str, path: SrPath) -> bool:
    """True when the fault stops every packet on this SRv6 path (a degrade does not)."""
    if fault.kind in ("cut", "flap"):
        return fault.target in path_links(src, dst, path)
    if fault.kind != "fail":
        return False
    host, _, port = fault.target.partition(":")
    if port:
        return host in (src, dst) and path.port == port
    return fault.target in path.hops


def surviving(fault: FaultWindow, src: str, dst: str, every: Sequence[SrPath]) -> float:
    """The share of ``every`` path from src to dst the fault leaves alive (the capacity a
    sprayed flow keeps: the paper's "one T0-T1 link lost costs 1/N", mrc-protocol-notes.md)."""
    return sum(not path_killed(fault, src, dst, p) for p in every) / len(every)
