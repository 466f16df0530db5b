"""A flow's SRv6 paths against a fault: which of them it kills. Pure."""

from __future__ import annotations

from typing import Any

from labs.paths import path_links
from mrc_transport.harness.timeline import FaultWindow


def path_killed(fault: FaultWindow, src: str, dst: str, path: Any) -> bool:
    """True when the fault stops every packet on this SRv6 path (a degrade does not)."""
    if fault.kind in ("cut", "flap"):
        return fault.target in path_links(src, dst, path)
    if fault.kind != "fail":
        return False
    host, _, port = fault.target.partition(":")
    if port:
        return host in (src, dst) and path.port == port
    return fault.target in path.hops
