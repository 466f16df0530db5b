"""The pure topology model of a multi-plane Clos lab: nodes, links and link classes, no IO.

Fabric (mrc-protocol-notes.md, "Multi-plane Clos"): P independent planes; in plane p every
rack has one T0 (leaf) and the plane has T1 spines; every host has P NIC ports and port p
goes to its rack's T0 in plane p; every T0 is wired to every T1 of its plane.

Names: hosts ``h0..``, switches ``t0-p<plane>-<rack>`` and ``t1-p<plane>-<j>``, links
``"a:b"`` with the host or lower tier first, namespaces ``mrc-<lab>-<node>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from labs import units
from labs.errors import TopologyError
from labs.units import Rate, Size
from labs.yamlfile import read_yaml

EcnMode = Literal["none", "probability", "rate", "red"]
ECN_MODES = ("none", "probability", "rate", "red")
Srv6Mode = Literal["auto", "seg6local", "bpf"]
SRV6_MODES = ("auto", "seg6local", "bpf")
MptcpMode = Literal["auto", "on", "off"]
MPTCP_MODES = ("auto", "on", "off")
LinkKind = Literal["host-t0", "t0-t1"]

LAB_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
MAX_INDEX = 0x0FFF  # uSIDs put the index in 12 bits (labs/addressing.py)


@dataclass(frozen=True, slots=True)
class LinkClass:
    """Shaping and marking settings shared by every link of one kind."""

    rate_bps: Rate = 100_000_000
    """tbf rate of each direction, bits per second."""
    mtu: int = 9000
    """MTU of both veth ends."""
    burst: Size = 32 * 1024
    """tbf bucket size in bytes (at least 2 MTU so a jumbo frame always fits)."""
    limit: Size = 256 * 1024
    """tbf queue limit in bytes: the switch buffer of this port."""
    ecn: EcnMode = "probability"
    """How switch egress marks CE (kernel-facts: no queue AQM here, so by chance or rate)."""
    ecn_probability: float = 0.01
    """With ecn="probability": fraction of ECT packets marked CE."""
    ecn_rate_fraction: float = 0.9
    """With ecn="rate": mark every ECT packet above this fraction of rate_bps, once one
    second's worth of it has passed unmarked (nft's byte-limit bucket; docs/lab.md).
    With ecn="red": the mark probability at ecn_max (RED's max_p)."""
    ecn_min: Size = 0
    """With ecn="red": virtual queue bytes below which nothing is marked."""
    ecn_max: Size = 0
    """With ecn="red": virtual queue bytes at which the probability reaches
    ecn_probability; every ECT packet is marked above (labs/bpf/mrc_port.c)."""
    trim_at: Size = 0
    """Trimming threshold, bytes of the port's virtual queue (0: no trimming): above it a
    switch cuts an MRC data packet to its headers (labs/bpf/mrc_port.c, docs/lab.md)."""
    trim_limit: Size = 0
    """With trimming: virtual queue bytes above which every packet is dropped (0: limit)."""

    @property
    def hard_limit(self) -> int:
        """Where the port program drops everything: the trim limit, else the port's."""
        return self.trim_limit or self.limit

    @property
    def programmed(self) -> bool:
        """Whether switch ports of this class run the port program (trimming or RED)."""
        return self.trim_at > 0 or self.ecn == "red"


@dataclass(frozen=True, slots=True)
class Link:
    """One cable: a veth pair between two nodes."""

    a: str
    """Lower end: the host, or the T0 of a T0-T1 link."""
    a_dev: str
    """Interface name on a."""
    b: str
    """Upper end: the T0 of a host link, or the T1."""
    b_dev: str
    """Interface name on b."""
    kind: LinkKind
    """Link class."""
    plane: int
    """Plane the link belongs to."""

    @property
    def name(self) -> str:
        return f"{self.a}:{self.b}"


@dataclass(frozen=True)
class Topology:
    """A multi-plane two-tier Clos: P planes x (racks T0 + t1_per_plane T1)."""

    planes: int = 2
    """Number of planes = NIC ports per host."""
    racks: int = 2
    """T0 switches per plane (one per rack)."""
    hosts_per_rack: int = 2
    """Hosts under each T0."""
    t1_per_plane: int = 2
    """Spine switches per plane."""
    host_link: LinkClass = field(default_factory=LinkClass)
    """Host-T0 link class."""
    fabric_link: LinkClass = field(default_factory=LinkClass)
    """T0-T1 link class."""
    srv6: Srv6Mode = "auto"
    """How switches run the SRv6 End behaviours: the kernel's seg6local routes, or a
    tc-BPF program on every switch port (labs/bpf/srv6_switch.c) where the kernel has no
    seg6local; "auto" picks seg6local when the kernel has it (labs/kernel.py)."""
    mptcp: MptcpMode = "auto"
    """Every host's plane ports as MPTCP endpoints, so that one MPTCP connection has a
    subflow per plane (docs/lab.md, "MPTCP"): "on" needs a kernel with MPTCP, "auto" is on
    where the kernel has it (labs/kernel.py), "off" leaves MPTCP unconfigured."""

    def __post_init__(self) -> None:
        validate(self)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(f"h{i}" for i in range(self.racks * self.hosts_per_rack))

    def rack_of(self, host: str) -> int:
        return host_index(host) // self.hosts_per_rack

    def hosts_in_rack(self, rack: int) -> tuple[str, ...]:
        first = rack * self.hosts_per_rack
        return tuple(f"h{i}" for i in range(first, first + self.hosts_per_rack))

    def t0(self, plane: int, rack: int) -> str:
        return f"t0-p{plane}-{rack}"

    def t1(self, plane: int, j: int) -> str:
        return f"t1-p{plane}-{j}"

    @property
    def switches(self) -> tuple[str, ...]:
        out: list[str] = []
        for p in range(self.planes):
            out += [self.t0(p, r) for r in range(self.racks)]
            out += [self.t1(p, j) for j in range(self.t1_per_plane)]
        return tuple(out)

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.hosts + self.switches

    @cached_property
    def links(self) -> tuple[Link, ...]:
        out: list[Link] = []
        for p in range(self.planes):
            for h in self.hosts:
                t0 = self.t0(p, self.rack_of(h))
                out.append(Link(h, f"p{p}", t0, h, "host-t0", p))
            for r in range(self.racks):
                for j in range(self.t1_per_plane):
                    t0, t1 = self.t0(p, r), self.t1(p, j)
                    out.append(Link(t0, t1, t1, t0, "t0-t1", p))
        return tuple(out)

    @cached_property
    def _links_by_name(self) -> dict[str, Link]:
        return {ln.name: ln for ln in self.links}

    def link(self, name: str) -> Link:
        """The link called "a:b" (either order); TopologyError if there is none."""
        a, _, b = name.partition(":")
        found = self._links_by_name.get(f"{a}:{b}") or self._links_by_name.get(f"{b}:{a}")
        if found is None:
            raise TopologyError(f"no link {name!r} (links are named like 'h0:t0-p0-0')")
        return found

    def link_class(self, link: Link) -> LinkClass:
        return self.host_link if link.kind == "host-t0" else self.fabric_link

    def ports(self, node: str) -> tuple[tuple[str, str, Link], ...]:
        """(local interface, peer node, link) for every port of node."""
        out: list[tuple[str, str, Link]] = []
        for ln in self.links:
            if ln.a == node:
                out.append((ln.a_dev, ln.b, ln))
            elif ln.b == node:
                out.append((ln.b_dev, ln.a, ln))
        return tuple(out)

    def kind_of(self, node: str) -> Literal["host", "t0", "t1"]:
        if node.startswith("h"):
            return "host"
        return "t0" if node.startswith("t0-") else "t1"

    def plane_of(self, switch: str) -> int:
        return int(switch.split("-")[1][1:])

    def index_of(self, node: str) -> int:
        return int(node.rsplit("-", 1)[-1]) if "-" in node else host_index(node)

    def check_node(self, node: str) -> str:
        if node not in self.nodes:
            raise TopologyError(f"no node {node!r} (nodes: h0.., t0-p<plane>-<i>, t1-p<plane>-<j>)")
        return node

    def to_dict(self) -> dict[str, Any]:
        return {
            "planes": self.planes,
            "racks": self.racks,
            "hosts_per_rack": self.hosts_per_rack,
            "t1_per_plane": self.t1_per_plane,
            "links": {
                "host_t0": _class_to_dict(self.host_link),
                "t0_t1": _class_to_dict(self.fabric_link),
            },
            "srv6": self.srv6,
            "mptcp": self.mptcp,
        }


def host_index(host: str) -> int:
    return int(host[1:])


def namespace(lab: str, node: str) -> str:
    return f"mrc-{lab}-{node}"


def check_lab_name(lab: str) -> str:
    if not LAB_NAME_RE.match(lab):
        raise TopologyError(
            f"bad lab name {lab!r}: 1-12 characters, lowercase letters and digits, letter first"
        )
    return lab


def validate(topo: Topology) -> None:
    """Raise TopologyError with one line naming the first bad field."""
    for name, low, high in (
        ("planes", 1, 64),
        ("racks", 1, MAX_INDEX),
        ("hosts_per_rack", 1, MAX_INDEX),
        ("t1_per_plane", 1, MAX_INDEX),
    ):
        value = getattr(topo, name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise TopologyError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    if topo.racks * topo.hosts_per_rack > MAX_INDEX:
        raise TopologyError(f"at most {MAX_INDEX} hosts")
    for label, lc in (("host_t0", topo.host_link), ("t0_t1", topo.fabric_link)):
        _validate_class(label, lc)
    if topo.srv6 not in SRV6_MODES:
        raise TopologyError(f"srv6 must be one of {', '.join(SRV6_MODES)}, got {topo.srv6!r}")
    if topo.mptcp not in MPTCP_MODES:
        raise TopologyError(f"mptcp must be one of {', '.join(MPTCP_MODES)}, got {topo.mptcp!r}")


def _validate_class(label: str, lc: LinkClass) -> None:
    if lc.rate_bps < 8000:
        raise TopologyError(f"links.{label}.rate must be at least 8kbit")
    if not 1280 <= lc.mtu <= 65535:
        raise TopologyError(f"links.{label}.mtu must be in 1280..65535 (IPv6 minimum 1280)")
    if lc.burst < lc.mtu + 64:
        raise TopologyError(f"links.{label}.burst must hold one MTU-sized frame ({lc.mtu + 64}+)")
    if lc.limit < lc.burst:
        raise TopologyError(f"links.{label}.limit must be at least burst")
    if lc.ecn not in ECN_MODES:
        raise TopologyError(f"links.{label}.ecn.mode must be one of {', '.join(ECN_MODES)}")
    if not 0.0 <= lc.ecn_probability <= 1.0:
        raise TopologyError(f"links.{label}.ecn.probability must be in 0..1")
    if not 0.0 < lc.ecn_rate_fraction <= 10.0:
        raise TopologyError(f"links.{label}.ecn.rate_fraction must be in (0, 10]")
    if lc.programmed:
        _validate_programmed(label, lc)


def _validate_programmed(label: str, lc: LinkClass) -> None:
    """The port program's thresholds: all inside the port's buffer (its tbf/htb limit)."""
    if lc.limit >= 1 << 32:
        raise TopologyError(f"links.{label}.limit must be below 4gb with trim or ecn red")
    if not 0 <= lc.trim_limit <= lc.limit:
        raise TopologyError(
            f"links.{label}.trim.limit ({lc.trim_limit}) does not fit the port's limit ({lc.limit})"
        )
    if lc.trim_at and not 0 < lc.trim_at < lc.hard_limit:
        raise TopologyError(
            f"links.{label}.trim.threshold ({lc.trim_at}) must be below the port's "
            f"{'trim ' if lc.trim_limit else ''}limit ({lc.hard_limit})"
        )
    if lc.ecn == "red" and not 0 <= lc.ecn_min < lc.ecn_max <= lc.hard_limit:
        raise TopologyError(
            f"links.{label}.ecn: red needs 0 <= min < max <= the port's limit "
            f"({lc.hard_limit}), got min {lc.ecn_min}, max {lc.ecn_max}"
        )


def _class_to_dict(lc: LinkClass) -> dict[str, Any]:
    ecn: dict[str, Any] = {
        "mode": lc.ecn,
        "probability": lc.ecn_probability,
        "rate_fraction": lc.ecn_rate_fraction,
    }
    if lc.ecn == "red":
        ecn |= {"min": lc.ecn_min, "max": lc.ecn_max}
    out = {"rate": lc.rate_bps, "mtu": lc.mtu, "burst": lc.burst, "limit": lc.limit, "ecn": ecn}
    if lc.trim_at:
        out["trim"] = {"threshold": lc.trim_at} | (
            {"limit": lc.trim_limit} if lc.trim_limit else {}
        )
    return out


def _class_from_dict(raw: object, where: str, base: LinkClass) -> LinkClass:
    """A link class from its YAML mapping over ``base``; a size or rate that does not
    parse (labs/units.py) as a TopologyError."""
    try:
        return _link_class(raw, where, base)
    except units.UnitError as exc:
        raise TopologyError(str(exc)) from None


def _link_class(raw: object, where: str, base: LinkClass) -> LinkClass:
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise TopologyError(f"{where} must be a mapping")
    known = {"rate", "mtu", "burst", "limit", "ecn", "trim"}
    _reject_unknown(raw, known, where)
    lc = base
    if "rate" in raw:
        lc = replace(lc, rate_bps=units.parse_rate(raw["rate"], f"{where}.rate"))
    if "mtu" in raw:
        lc = replace(lc, mtu=_int(raw["mtu"], f"{where}.mtu"))
    if "burst" in raw:
        lc = replace(lc, burst=units.parse_size(raw["burst"], f"{where}.burst"))
    if "limit" in raw:
        lc = replace(lc, limit=units.parse_size(raw["limit"], f"{where}.limit"))
    ecn = raw.get("ecn")
    if ecn is not None:
        lc = _ecn_from(ecn, f"{where}.ecn", lc)
    if "trim" in raw:
        lc = _trim_from(raw["trim"], f"{where}.trim", lc)
    return lc


def _trim_from(trim: object, where: str, lc: LinkClass) -> LinkClass:
    """``trim: {threshold: 64kb, limit: 256kb}``; ``trim: off`` (or false) turns it off."""
    if trim is None or trim is False or trim == "off":
        return replace(lc, trim_at=0, trim_limit=0)
    if not isinstance(trim, Mapping):
        raise TopologyError(f"{where} must be a mapping like {{threshold: 64kb}} or off")
    _reject_unknown(trim, {"threshold", "limit"}, where)
    if "threshold" not in trim:
        raise TopologyError(f"{where}.threshold is missing (e.g. 64kb)")
    at = units.parse_size(trim["threshold"], f"{where}.threshold")
    limit = units.parse_size(trim["limit"], f"{where}.limit") if "limit" in trim else 0
    return replace(lc, trim_at=at, trim_limit=limit)


def _ecn_from(ecn: object, where: str, lc: LinkClass) -> LinkClass:
    if isinstance(ecn, str):
        ecn = {"mode": ecn}
    if not isinstance(ecn, Mapping):
        raise TopologyError(f"{where} must be a mode name or a mapping")
    _reject_unknown(ecn, {"mode", "probability", "rate_fraction", "min", "max"}, where)
    mode = ecn.get("mode", lc.ecn)
    if mode not in ECN_MODES:
        raise TopologyError(f"{where}.mode must be one of {', '.join(ECN_MODES)}, got {mode!r}")
    if mode != "red" and ("min" in ecn or "max" in ecn):
        raise TopologyError(f"{where}: min and max are for mode red")
    # RED's probability is its max_p, 1 unless given (linear 0..1 as htsim's switches)
    default_p = 1.0 if mode == "red" and lc.ecn != "red" else lc.ecn_probability
    prob = _float(ecn.get("probability", default_p), f"{where}.probability")
    frac = _float(ecn.get("rate_fraction", lc.ecn_rate_fraction), f"{where}.rate_fraction")
    low = units.parse_size(ecn["min"], f"{where}.min") if "min" in ecn else lc.ecn_min
    high = units.parse_size(ecn["max"], f"{where}.max") if "max" in ecn else lc.ecn_max
    return replace(
        lc,
        ecn=mode,
        ecn_probability=prob,
        ecn_rate_fraction=frac,
        ecn_min=low if mode == "red" else 0,
        ecn_max=high if mode == "red" else 0,
    )


def _reject_unknown(raw: Mapping[Any, Any], known: set[str], where: str) -> None:
    extra = sorted(str(k) for k in raw if k not in known)
    if extra:
        raise TopologyError(
            f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(known))})"
        )


def _int(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"{where} must be an integer, got {value!r}")
    return value


def _float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TopologyError(f"{where} must be a number, got {value!r}")
    return float(value)


def from_dict(raw: object, where: str = "topology") -> Topology:
    """Build and validate a Topology from parsed YAML; one-line TopologyError on any fault."""
    if not isinstance(raw, Mapping):
        raise TopologyError(f"{where}: the top level must be a mapping")
    counts = {"planes", "racks", "hosts_per_rack", "t1_per_plane"}
    _reject_unknown(raw, counts | {"links", "preset", "srv6", "mptcp"}, where)
    base = preset(str(raw["preset"])) if "preset" in raw else Topology()
    kwargs: dict[str, Any] = {k: _int(raw[k], f"{where}.{k}") for k in counts if k in raw}
    links = raw.get("links") or {}
    if not isinstance(links, Mapping):
        raise TopologyError(f"{where}.links must be a mapping")
    _reject_unknown(links, {"host_t0", "t0_t1"}, f"{where}.links")
    kwargs["host_link"] = _class_from_dict(
        links.get("host_t0"), f"{where}.links.host_t0", base.host_link
    )
    kwargs["fabric_link"] = _class_from_dict(
        links.get("t0_t1"), f"{where}.links.t0_t1", base.fabric_link
    )
    if "srv6" in raw:
        kwargs["srv6"] = raw["srv6"]
    if "mptcp" in raw:
        kwargs["mptcp"] = _mptcp_mode(raw["mptcp"])
    merged = {f.name: getattr(base, f.name) for f in fields(Topology)} | kwargs
    return Topology(**merged)


def _mptcp_mode(value: object) -> object:
    """YAML reads a bare on/off as a boolean: take those as the words they were."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


def load_yaml(path: str | Path) -> Topology:
    return from_dict(read_yaml(path, TopologyError), where=str(path))


TRIM_AT = 64 * 1024
"""The trimming presets' threshold: a quarter of the default 256 KB port buffer."""


def preset(name: str) -> Topology:
    """tiny: 2 planes, 2 racks x 2 hosts, 2 T1 each. default: 4 planes, 2 racks x 4 hosts,
    4 T1 per plane at the host rate (full bisection: 4 x 100M down = 4 x 100M up per T0).
    large: 4 planes, 8 racks x 8 hosts, 8 T1 per plane: 64 hosts + 64 switches = 128 ns.
    NAME-trim: NAME with trimming above TRIM_AT on every switch port (docs/lab.md)."""
    if name.endswith("-trim") and name in PRESETS:
        base = preset(name[: -len("-trim")])
        return replace(
            base,
            host_link=replace(base.host_link, trim_at=TRIM_AT),
            fabric_link=replace(base.fabric_link, trim_at=TRIM_AT),
        )
    if name == "tiny":
        return Topology(planes=2, racks=2, hosts_per_rack=2, t1_per_plane=2)
    if name == "default":
        return Topology(planes=4, racks=2, hosts_per_rack=4, t1_per_plane=4)
    if name == "large":
        return Topology(
            planes=4,
            racks=8,
            hosts_per_rack=8,
            t1_per_plane=8,
            host_link=LinkClass(rate_bps=50_000_000),
            fabric_link=LinkClass(rate_bps=50_000_000),
        )
    raise TopologyError(f"unknown preset {name!r} ({', '.join(PRESETS)})")


PRESETS = ("tiny", "default", "large", "tiny-trim", "default-trim", "large-trim")
