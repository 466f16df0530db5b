"""Path providers: where an endpoint's SRv6 paths come from. Never code that assumes a lab.

A provider answers two questions:

- ``paths_to(peer)``: the paths a client uses towards ``peer`` (a lab host name or an
  address the provider knows);
- ``paths_for(path_header)``: the server side. A SETUP arrives with the peer's source
  address (its address on the plane the SETUP came over); the provider maps it back to
  that peer's paths. An empty list refuses the connection.

Two providers: ``LabPaths`` (a running lab's state file and labs.paths; the lab host this
process runs in is found by comparing network namespace inodes) and ``StaticPaths`` (a
YAML file or command-line list of SRv6 paths between plain Linux hosts).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any, Protocol

from mrc_transport.wire.frames import PathHeader
from srv6.path import SrPath

NETNS_DIR = Path("/run/netns")


class PathError(Exception):
    """No paths, an unknown peer or a bad path description (one line)."""


class PathProvider(Protocol):
    """What an endpoint needs to know about paths."""

    def paths_to(self, peer: str) -> list[SrPath]: ...

    def paths_for(self, path: PathHeader) -> Sequence[SrPath]: ...


def netns_inode(path: str | Path = "/proc/self/ns/net") -> int:
    return os.stat(path).st_ino


def find_lab_host(labs: Iterable[str] | None = None) -> tuple[str, str] | None:
    """(lab, host) whose namespace this process runs in, or None outside every lab."""
    from labs.state import list_labs, load_state
    from labs.topology import namespace

    mine = netns_inode()
    for lab in list_labs() if labs is None else labs:
        try:
            topo = load_state(lab).topology
        except Exception:  # a half-written or foreign state file: not our lab
            continue
        for host in topo.hosts:
            ns = NETNS_DIR / namespace(lab, host)
            try:
                if netns_inode(ns) == mine:
                    return lab, host
            except OSError:
                continue
    return None


class LabPaths:
    """Paths of a running lab, for the host this process runs in (or ``host``)."""

    def __init__(self, lab: str | None = None, host: str | None = None) -> None:
        from labs.state import load_state

        if host is None:
            found = find_lab_host(None if lab is None else [lab])
            if found is None:
                where = f"lab {lab!r}" if lab else "any running lab"
                raise PathError(f"this process does not run in a host namespace of {where}")
            lab, host = found
        if lab is None:
            raise PathError("a host name needs a lab name")
        try:
            self.topo = load_state(lab).topology
        except Exception as exc:
            raise PathError(str(exc)) from None
        self.lab, self.host = lab, host
        from labs import addressing

        self._owner = {
            addressing.host_address(self.topo, p, h).packed: h
            for h in self.topo.hosts
            for p in range(self.topo.planes)
        }

    def resolve(self, peer: str) -> str:
        """A host name ("h3") or one of its plane addresses -> the host name."""
        if peer in self.topo.hosts:
            return peer
        try:
            owner = self._owner.get(IPv6Address(peer).packed)
        except ValueError:
            owner = None
        if owner is None:
            hosts = ", ".join(self.topo.hosts)
            raise PathError(f"{peer!r} is no host of lab {self.lab!r} ({hosts})")
        return owner

    def paths_to(self, peer: str) -> list[SrPath]:
        from labs.paths import paths

        dst = self.resolve(peer)
        if dst == self.host:
            raise PathError(f"{self.host} cannot connect to itself")
        return paths(self.topo, self.host, dst)

    def paths_for(self, path: PathHeader) -> Sequence[SrPath]:
        from labs.paths import paths

        peer = self._owner.get(bytes(path.src))
        if peer is None or peer == self.host:
            return []
        return paths(self.topo, self.host, peer)


@dataclass
class StaticPaths:
    """Paths written down by hand: per peer, its addresses and the paths towards it."""

    peers: dict[str, list[SrPath]] = field(default_factory=dict)
    """Peer name -> paths towards it."""
    addresses: dict[bytes, str] = field(default_factory=dict)
    """A peer's source addresses (as they arrive in its SETUP) -> peer name."""

    def add(self, peer: str, paths: Iterable[SrPath], addresses: Iterable[str] = ()) -> None:
        self.peers.setdefault(peer, []).extend(paths)
        for path in self.peers[peer]:
            self.addresses[path.dst.packed] = peer  # its address on that plane
        for a in addresses:
            self.addresses[_addr(a, f"peer {peer} address").packed] = peer

    def paths_to(self, peer: str) -> list[SrPath]:
        if peer in self.peers:
            return list(self.peers[peer])
        try:
            name = self.addresses.get(IPv6Address(peer).packed)
        except ValueError:
            name = None
        if name is None:
            known = ", ".join(self.peers) or "none"
            raise PathError(f"no paths to {peer!r} (known peers: {known})")
        return list(self.peers[name])

    def paths_for(self, path: PathHeader) -> Sequence[SrPath]:
        name = self.addresses.get(bytes(path.src))
        return [] if name is None else list(self.peers[name])


def _addr(value: object, where: str) -> IPv6Address:
    try:
        return IPv6Address(str(value))
    except ValueError:
        raise PathError(f"{where}: bad IPv6 address {value!r}") from None


def path_from_mapping(raw: Mapping[str, Any], where: str) -> SrPath:
    """One path from a YAML mapping: plane, src, dst, port, and usid and/or segments.

    ``segments`` lists the SIDs first hop first and may omit the final ``dst``; a path
    with only ``usid`` gets ``segments: [dst]`` (an SRH of one segment) and one with only
    ``segments`` gets ``usid: dst`` (plain IPv6 to the destination).
    """
    known = {"plane", "src", "dst", "port", "usid", "segments", "hops"}
    unknown = set(raw) - known
    if unknown:
        raise PathError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    for key in ("plane", "src", "dst", "port"):
        if key not in raw:
            raise PathError(f"{where}: missing {key!r}")
    plane = raw["plane"]
    if not isinstance(plane, int) or isinstance(plane, bool) or not 0 <= plane < 64:
        raise PathError(f"{where}: plane must be an integer 0..63, got {plane!r}")
    dst = _addr(raw["dst"], f"{where}.dst")
    segs = tuple(_addr(s, f"{where}.segments") for s in raw.get("segments") or ())
    if segs and segs[-1] != dst:
        segs = (*segs, dst)
    usid = _addr(raw["usid"], f"{where}.usid") if "usid" in raw else None
    if usid is None and not segs:
        raise PathError(f"{where}: give usid, segments or both")
    return SrPath(
        plane=plane,
        hops=tuple(str(h) for h in raw.get("hops") or ()),
        src=_addr(raw["src"], f"{where}.src"),
        dst=dst,
        usid_dst=usid if usid is not None else dst,
        segments=segs or (dst,),
        port=str(raw["port"]),
    )


def parse_path_spec(spec: str) -> SrPath:
    """A command-line path: ``plane=0,src=A,dst=B,usid=C,segments=S1+S2,port=eth0``."""
    raw: dict[str, Any] = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise PathError(f"--path {spec!r}: expected key=value items separated by commas")
        key = key.strip()
        if key == "plane":
            try:
                raw[key] = int(value)
            except ValueError:
                raise PathError(f"--path {spec!r}: plane must be an integer") from None
        elif key == "segments":
            raw[key] = [s for s in value.split("+") if s]
        else:
            raw[key] = value.strip()
    return path_from_mapping(raw, f"--path {spec!r}")


def load_static(path: str | Path) -> StaticPaths:
    """A YAML file: ``peers: {NAME: {addresses: [...], paths: [{plane, src, dst, ...}]}}``."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise PathError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PathError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    peers = doc.get("peers") if isinstance(doc, dict) else None
    if not isinstance(peers, dict) or not peers:
        raise PathError(f"{path}: expected a mapping 'peers: {{NAME: {{paths: [...]}}}}'")
    out = StaticPaths()
    for name, body in peers.items():
        where = f"{path}: peers.{name}"
        if not isinstance(body, dict) or not isinstance(body.get("paths"), list):
            raise PathError(f"{where}: expected 'paths: [...]'")
        paths = [
            path_from_mapping(p, f"{where}.paths[{i}]")
            if isinstance(p, dict)
            else _bad(f"{where}.paths[{i}]: expected a mapping")
            for i, p in enumerate(body["paths"])
        ]
        addresses = body.get("addresses") or []
        if not isinstance(addresses, list):
            raise PathError(f"{where}.addresses: expected a list")
        out.add(str(name), paths, [str(a) for a in addresses])
    return out


def _bad(message: str) -> SrPath:
    raise PathError(message)
