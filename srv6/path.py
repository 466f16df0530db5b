"""An SRv6 path from one host port to another: the unit a path provider hands to MRC."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address


@dataclass(frozen=True, slots=True)
class SrPath:
    """One source-routed path; both encodings of it are precomputed."""

    plane: int
    """Fabric plane; equal to the sending NIC port's index."""
    hops: tuple[str, ...]
    """Switch names in order, e.g. ("t0-p0-0", "t1-p0-1", "t0-p0-1")."""
    src: IPv6Address
    """Source address: the sending host's address on this plane's port."""
    dst: IPv6Address
    """Final destination in this plane, the same for both encodings (what arrives)."""
    usid_dst: IPv6Address
    """uSID encoding: the destination address carrying every hop's uSID (F3216)."""
    segments: tuple[IPv6Address, ...]
    """SRH encoding: segment list in path order (first hop first, last == dst)."""
    port: str
    """Interface to send from (the host's NIC port in this plane), e.g. "p0"."""
