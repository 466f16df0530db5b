"""Multi-plane Clos sizing: pure arithmetic behind `mrc plan` (no IO, no root).

Theory of operation (arXiv 2605.04333, "three prongs" item 2; docs/plan.md shows the sums):

* A NIC of ``nic_gbps`` is split into ``planes`` ports of ``nic_gbps / planes`` each; port p
  goes to plane p. Every plane is an independent folded Clos (fat tree) built from switches
  with ``radix`` ports at that port speed. The switch ASIC is the same either way
  (512 x 100G = 64 x 800G = 51.2 Tb/s), so the single-plane baseline uses
  ``radix / planes`` ports at full NIC speed.
* A folded Clos of n tiers and radix k is full-bisection: every switch below the top uses
  k/2 ports down and k/2 up, the top tier uses all k down. It holds 2 (k/2)^n hosts:
  k^2/2 in two tiers, k^3/4 in three. Because every tier boundary carries exactly one
  port-speed link per host port, a fabric sized for N hosts has N links at each boundary,
  ceil(N / (k/2)) switches in each lower tier and ceil(N / k) at the top.
* Optics are counted in modules of ``optic_gbps`` (default: the NIC speed, an 800G module,
  which a switch breaks out into 8 x 100G lanes): one per switch-side link end and one per
  NIC. That is the count that gives the paper's 2/3; without the NIC-side module it is 3/5.
* A T0 has k/2 uplinks; losing one costs 1/(k/2) of the T0's uplink capacity, i.e. of the
  cross-rack capacity each NIC port under it gets (the paper's 0.4% vs 3%). A node that
  spreads evenly over all planes loses that divided by the number of planes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

MAX_TIERS = 6
"""Deepest fabric `mrc plan` will size; deeper ones are not what anyone builds."""

PAPER_RADIX = 512
"""Switch ports per ASIC in the paper's multi-plane design (51.2 Tb/s at 100G)."""

PAPER_PLANES = 8
"""Planes, hence ports per NIC, in the paper (800G -> 8 x 100G)."""

PAPER_NIC_GBPS = 800
"""NIC speed in the paper."""


class SizingError(ValueError):
    """Inputs that describe no buildable fabric (the CLI turns this into a usage error)."""


@dataclass(frozen=True)
class FabricSize:
    """Size of one fabric; every count is a total over all planes."""

    name: str
    """Short label: "multi-plane" or "single-plane"."""
    planes: int
    """Independent Clos planes; each NIC has one port in every plane."""
    port_gbps: int
    """Speed of one NIC port and of one switch port."""
    nic_gbps: int
    """Speed of a whole NIC (port_gbps x planes)."""
    radix: int
    """Ports per switch at port_gbps."""
    optic_gbps: int
    """Capacity of one optical module; switch ports are lanes of these modules."""
    nics: int
    """NICs (hosts) this fabric connects."""
    max_nics: int
    """NICs the same tiers would hold if fully built: 2 (radix/2)^tiers."""
    tiers: int
    """Switch tiers: T0 (leaves), T1 (spines), T2, ..."""
    switches_by_tier: tuple[int, ...]
    """Switches in T0, T1, ... summed over planes."""
    host_links: int
    """NIC-port-to-T0 links of port_gbps."""
    fabric_links: int
    """Switch-to-switch links of port_gbps."""
    optics: int
    """Optical modules: NIC side plus every switch-side link end."""

    @property
    def switches(self) -> int:
        """All switches in all tiers and planes."""
        return sum(self.switches_by_tier)

    @property
    def links(self) -> int:
        """All port-speed links, host and switch-to-switch."""
        return self.host_links + self.fabric_links

    @property
    def longest_path(self) -> int:
        """Switches on the longest shortest path: up to the top tier and down again."""
        return 2 * self.tiers - 1

    @property
    def uplink_loss(self) -> Fraction | None:
        """Share of a T0's uplink capacity lost with one T0-T1 link (None with one tier)."""
        if self.tiers < 2:
            return None
        return Fraction(1, self.radix // 2)

    @property
    def node_loss(self) -> Fraction | None:
        """Share of a node's capacity lost with one T0-T1 link, spraying evenly over planes."""
        loss = self.uplink_loss
        return None if loss is None else loss / self.planes

    def tier(self, index: int) -> int:
        """Switches in tier `index` (0 = T0); 0 for a tier this fabric does not have."""
        return self.switches_by_tier[index] if index < self.tiers else 0

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able numbers, tier counts keyed t0, t1, ..."""
        return {
            "name": self.name,
            "planes": self.planes,
            "port_gbps": self.port_gbps,
            "nic_gbps": self.nic_gbps,
            "radix": self.radix,
            "switch_gbps": self.radix * self.port_gbps,
            "optic_gbps": self.optic_gbps,
            "nics": self.nics,
            "max_nics": self.max_nics,
            "tiers": self.tiers,
            **{f"t{i}": n for i, n in enumerate(self.switches_by_tier)},
            "switches": self.switches,
            "host_links": self.host_links,
            "fabric_links": self.fabric_links,
            "links": self.links,
            "optics": self.optics,
            "longest_path": self.longest_path,
            "uplink_loss": _as_float(self.uplink_loss),
            "node_loss": _as_float(self.node_loss),
        }


@dataclass(frozen=True)
class Comparison:
    """A multi-plane fabric beside the single-plane baseline built from the same ASIC."""

    multiplane: FabricSize
    """The multi-plane Clos (the paper's design)."""
    baseline: FabricSize
    """The single-plane fat tree at full NIC speed."""

    @property
    def optics(self) -> Fraction:
        """Optics per NIC, multi-plane over baseline (paper: 2/3)."""
        mp, base = self.multiplane, self.baseline
        return _per_nic(mp.optics, mp.nics, base.optics, base.nics)

    @property
    def switches(self) -> Fraction:
        """Switches per NIC, multi-plane over baseline (paper: 3/5)."""
        mp, base = self.multiplane, self.baseline
        return _per_nic(mp.switches, mp.nics, base.switches, base.nics)

    @property
    def longest_path(self) -> Fraction:
        """Switches on the longest path, multi-plane over baseline (paper: 3/5 to 3/7)."""
        return Fraction(self.multiplane.longest_path, self.baseline.longest_path)

    @property
    def uplink_loss(self) -> Fraction | None:
        """Capacity lost per T0-T1 link failure, multi-plane over baseline."""
        mp, base = self.multiplane.uplink_loss, self.baseline.uplink_loss
        return None if mp is None or base is None else mp / base

    def ratios(self) -> dict[str, Fraction | None]:
        """Every ratio by name, in table order."""
        return {
            "optics_per_nic": self.optics,
            "switches_per_nic": self.switches,
            "longest_path": self.longest_path,
            "uplink_loss": self.uplink_loss,
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: both fabrics and each ratio as a float and an exact fraction."""
        return {
            "multiplane": self.multiplane.as_dict(),
            "baseline": self.baseline.as_dict(),
            "ratios": {
                name: None if r is None else {"value": float(r), "fraction": str(r)}
                for name, r in self.ratios().items()
            },
        }


def max_hosts(radix: int, tiers: int) -> int:
    """Hosts a full folded Clos holds: 2 (k/2)^n (k^2/2 for two tiers, k^3/4 for three)."""
    return 2 * int((radix // 2) ** tiers)


def fewest_tiers(radix: int, hosts: int) -> int:
    """Fewest tiers of radix-`radix` switches that hold `hosts` hosts."""
    _check_radix(radix)
    for tiers in range(1, MAX_TIERS + 1):
        if max_hosts(radix, tiers) >= hosts:
            return tiers
    raise SizingError(f"{hosts} hosts need more than {MAX_TIERS} tiers of radix {radix}")


def plane_switches(radix: int, tiers: int, hosts: int) -> tuple[int, ...]:
    """Switches per tier in one plane: k/2 down + k/2 up below the top, k down at the top."""
    lower = _ceil_div(hosts, radix // 2)
    return (lower,) * (tiers - 1) + (_ceil_div(hosts, radix),)


def multiplane_clos(
    radix: int,
    planes: int,
    nic_gbps: int,
    hosts: int | None = None,
    *,
    tiers: int | None = None,
    optic_gbps: int | None = None,
    nic_optics: bool = True,
) -> FabricSize:
    """Each NIC split into `planes` ports, one independent Clos of `radix` switches per plane.

    Without `hosts` the fabric is fully built with `tiers` (default 2, the paper's design);
    with `hosts` it is the smallest that holds them (fewest tiers unless `tiers` is given).
    """
    if planes < 1:
        raise SizingError(f"planes must be at least 1, got {planes}")
    if nic_gbps < 1 or nic_gbps % planes:
        raise SizingError(f"NIC speed {nic_gbps}G does not split into {planes} equal ports")
    return _clos(
        "multi-plane",
        radix,
        planes,
        nic_gbps,
        hosts,
        tiers or (None if hosts else 2),
        optic_gbps or nic_gbps,
        nic_optics,
    )


def single_plane(
    radix_at_nic_speed: int,
    nic_gbps: int,
    hosts: int | None = None,
    *,
    tiers: int | None = None,
    optic_gbps: int | None = None,
    nic_optics: bool = True,
) -> FabricSize:
    """A classic fat tree with one NIC-speed port per host (default: full, three tiers)."""
    if nic_gbps < 1:
        raise SizingError(f"NIC speed must be positive, got {nic_gbps}G")
    return _clos(
        "single-plane",
        radix_at_nic_speed,
        1,
        nic_gbps,
        hosts,
        tiers or (None if hosts else 3),
        optic_gbps or nic_gbps,
        nic_optics,
    )


def three_tier(
    radix_at_nic_speed: int,
    nic_gbps: int = PAPER_NIC_GBPS,
    hosts: int | None = None,
    *,
    optic_gbps: int | None = None,
    nic_optics: bool = True,
) -> FabricSize:
    """The paper's baseline: a three-tier fat tree at NIC speed, k^3/4 hosts when full."""
    return single_plane(
        radix_at_nic_speed, nic_gbps, hosts, tiers=3, optic_gbps=optic_gbps, nic_optics=nic_optics
    )


def compare(
    radix: int = PAPER_RADIX,
    planes: int = PAPER_PLANES,
    nic_gbps: int = PAPER_NIC_GBPS,
    hosts: int | None = None,
    *,
    optic_gbps: int | None = None,
    nic_optics: bool = True,
) -> Comparison:
    """The multi-plane fabric beside a single-plane one built from the same switch ASIC.

    Without `hosts`: a full two-tier multi-plane fabric beside a full three-tier one, as the
    paper compares them (ratios per NIC). With `hosts`: each the smallest that holds them,
    so the baseline may need a fourth tier (the paper's "5-7 switches").
    """
    if planes < 1 or radix % planes:
        raise SizingError(f"radix {radix} does not split into {planes} planes evenly")
    if hosts is not None and hosts < 1:
        raise SizingError(f"hosts must be at least 1, got {hosts}")
    try:
        _check_radix(radix // planes)
    except SizingError:
        raise SizingError(
            f"radix {radix} / {planes} planes = {radix // planes} ports at NIC speed;"
            " the single-plane baseline needs an even number, at least 4"
        ) from None
    mp = multiplane_clos(
        radix, planes, nic_gbps, hosts, optic_gbps=optic_gbps, nic_optics=nic_optics
    )
    base = single_plane(
        radix // planes, nic_gbps, hosts, optic_gbps=optic_gbps, nic_optics=nic_optics
    )
    return Comparison(multiplane=mp, baseline=base)


def _clos(
    name: str,
    radix: int,
    planes: int,
    nic_gbps: int,
    hosts: int | None,
    tiers: int | None,
    optic_gbps: int,
    nic_optics: bool,
) -> FabricSize:
    _check_radix(radix)
    if optic_gbps < 1:
        raise SizingError(f"optic speed must be positive, got {optic_gbps}G")
    if hosts is not None and hosts < 1:
        raise SizingError(f"hosts must be at least 1, got {hosts}")
    if tiers is None:
        tiers = fewest_tiers(radix, hosts or 1)
    if not 1 <= tiers <= MAX_TIERS:
        raise SizingError(f"tiers must be 1..{MAX_TIERS}, got {tiers}")
    full = max_hosts(radix, tiers)
    nics = full if hosts is None else hosts
    if nics > full:
        raise SizingError(f"{tiers} tiers of radix {radix} hold {full} NICs, not {nics}")
    port_gbps = nic_gbps // planes
    # One port-speed link per NIC port at every tier boundary (full bisection).
    host_links = planes * nics
    fabric_links = planes * nics * (tiers - 1)
    switch_ends = host_links + 2 * fabric_links
    optics = _ceil_div(switch_ends * port_gbps, optic_gbps)
    if nic_optics:
        optics += nics * _ceil_div(nic_gbps, optic_gbps)
    return FabricSize(
        name=name,
        planes=planes,
        port_gbps=port_gbps,
        nic_gbps=nic_gbps,
        radix=radix,
        optic_gbps=optic_gbps,
        nics=nics,
        max_nics=full,
        tiers=tiers,
        switches_by_tier=tuple(planes * n for n in plane_switches(radix, tiers, nics)),
        host_links=host_links,
        fabric_links=fabric_links,
        optics=optics,
    )


def _check_radix(radix: int) -> None:
    # k/2 down and k/2 up: an odd radix wastes a port, and k < 4 never grows past 2 hosts.
    if radix < 4 or radix % 2:
        raise SizingError(f"switch radix must be even and at least 4, got {radix}")


def _per_nic(mp: int, mp_nics: int, base: int, base_nics: int) -> Fraction:
    # Per-NIC ratio, so fabrics of different sizes (131,072 vs 65,536 NICs) compare fairly.
    return Fraction(mp * base_nics, base * mp_nics)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _as_float(value: Fraction | None) -> float | None:
    return None if value is None else float(value)
