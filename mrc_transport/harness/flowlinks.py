"""Which links each baseline flow crosses, counted per flow in the lab.

ECMP hashes a TCP flow (or an MPTCP subflow) onto one path, which nobody can predict (the
hash seed is the socket's, carried in the packet through every veth) and which moves when a
rehash on RTO or a deleted nexthop moves it. Several baselines run at once beside MRC, so
the links' own counters mix them all; instead an nft table counts, per TCP port, the bytes
each flow's packets leave by on every port where ECMP decides: the two hosts' plane ports
and the uplinks of their T0s, data at the sender's end and ACKs at the receiver's. Two
snapshots give each flow's path over the time between them (``FlowPath``), in both
directions, since a fault on the ACKs' path stalls a flow as surely as one on its data's;
``on_path`` says whether a fault's target is on it.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from labs.apply import nft_job, run_jobs
from labs.plan import Nft
from labs.topology import Topology, namespace
from mrc_transport.harness.errors import HarnessError

TABLE = "inet mrc_flows"
SHARE = 0.05
"""A port is on a flow's path when it carried this share of the flow's bytes at its node
(an MPTCP connection's subflows carry about 1/planes each; a pinned TCP flow all of it)."""
MIN_BYTES = 3000
"""...and at least this many bytes (two full-sized segments), so a stray packet is not a path."""
_HOST_PORT = re.compile(r"^(h\d+):(p\d+)$")

Key = tuple[str, str, int, str]
"""(node, interface, TCP port, "data" or "ack")."""
Counts = Mapping[Key, int]


@dataclass(frozen=True, slots=True)
class Flow:
    """A baseline flow, by the TCP port its receiver listens on."""

    port: int
    """The receiver's TCP port: data goes to it, ACKs come from it."""
    src: str
    """Sending host."""
    dst: str
    """Receiving host."""


@dataclass(frozen=True, slots=True)
class FlowPath:
    """The links and switches a flow's packets crossed between two snapshots."""

    links: frozenset[str]
    """Link names "a:b", host links and T0-T1 links, data and ACKs."""
    switches: frozenset[str]
    """T0 and T1 switches on those links."""
    data_bytes: int
    """Bytes of its data packets that left the sender's ports (0: it sent nothing)."""

    def to_json(self) -> list[str]:
        return sorted(self.links)


def meters(topo: Topology, host: str) -> dict[str, list[str]]:
    """node -> the ports counted there for a flow from or to ``host``: the host's plane
    ports and its T0s' uplinks (where ECMP chooses; everything after follows)."""
    rack = topo.rack_of(host)
    out = {host: [f"p{p}" for p in range(topo.planes)]}
    for plane in range(topo.planes):
        t0 = topo.t0(plane, rack)
        out[t0] = [dev for dev, peer, _ in topo.ports(t0) if topo.kind_of(peer) == "t1"]
    return out


def table_text(devs: Sequence[str], ports: Sequence[int]) -> str:
    """The nft table of one node: a counter per (port, TCP port, direction), after a rule
    that lets everything but TCP (MRC's packets) pass at once."""
    rules = ["meta l4proto != tcp accept"]
    for dev in devs:
        for port in ports:
            for field, way in (("dport", "data"), ("sport", "ack")):
                rules.append(
                    f'oifname "{dev}" th {field} {port} counter comment "{dev} {port} {way}"'
                )
    body = "".join(f"    {r}\n" for r in rules)
    return (
        f"table {TABLE} {{\n  chain out {{\n"
        f"    type filter hook postrouting priority 0; policy accept;\n{body}  }}\n}}\n"
    )


def install(lab: str, topo: Topology, flows: Sequence[Flow]) -> list[str]:
    """The counters on every node where the flows' paths are chosen; returns those nodes."""
    devs: dict[str, list[str]] = {}
    for flow in flows:
        for host in (flow.src, flow.dst):
            for node, ds in meters(topo, host).items():
                devs[node] = sorted(set(devs.get(node, [])) | set(ds))
    ports = sorted({f.port for f in flows})
    run_jobs([nft_job(lab, Nft(node, TABLE, table_text(ds, ports))) for node, ds in devs.items()])
    return sorted(devs)


def parse_counters(node: str, text: str) -> dict[Key, int]:
    """`nft -j list table inet mrc_flows` -> bytes per counter (its rule's comment)."""
    out: dict[Key, int] = {}
    for item in json.loads(text).get("nftables", []):
        rule = item.get("rule")
        if not rule or "comment" not in rule:
            continue
        dev, port, way = str(rule["comment"]).split()
        counter = next((e["counter"] for e in rule.get("expr", []) if "counter" in e), None)
        if counter is not None:
            out[(node, dev, int(port), way)] = int(counter["bytes"])
    return out


def read(lab: str, nodes: Iterable[str]) -> dict[Key, int]:
    """A snapshot of every counter on the given nodes."""
    out: dict[Key, int] = {}
    for node in nodes:
        res = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                namespace(lab, node),
                "nft",
                "-j",
                "list",
                "table",
                *TABLE.split(),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            raise HarnessError(f"{node}: cannot read the flow counters: {res.stderr.strip()}")
        out |= parse_counters(node, res.stdout)
    return out


def _busy(counts: Mapping[str, int]) -> list[str]:
    """The ports of one node that carried SHARE of its bytes of a flow, and MIN_BYTES."""
    total = sum(counts.values())
    return sorted(d for d, n in counts.items() if n >= MIN_BYTES and n >= SHARE * total)


def _deltas(before: Counts, after: Counts, node: str, port: int, way: str) -> dict[str, int]:
    return {
        k[1]: max(0, n - before.get(k, 0))
        for k, n in after.items()
        if k[0] == node and k[2] == port and k[3] == way
    }


def _one_way(
    topo: Topology, before: Counts, after: Counts, flow: Flow, way: str
) -> tuple[set[str], set[str], int]:
    """Links and switches of one direction: the ports its packets left the sending host by,
    then the uplinks they left that plane's T0 by (its T1, the T1's downlink to the other
    rack's T0, and that T0's port to the other host follow)."""
    here, there = (flow.src, flow.dst) if way == "data" else (flow.dst, flow.src)
    links: set[str] = set()
    switches: set[str] = set()
    sent = _deltas(before, after, here, flow.port, way)
    for dev in _busy(sent):
        plane = int(dev[1:])
        t0, t0_far = topo.t0(plane, topo.rack_of(here)), topo.t0(plane, topo.rack_of(there))
        links |= {f"{here}:{t0}", f"{there}:{t0_far}"}
        switches |= {t0, t0_far}
        for t1 in _busy(_deltas(before, after, t0, flow.port, way)):
            links |= {f"{t0}:{t1}", f"{t0_far}:{t1}"}
            switches.add(t1)
    return links, switches, sum(sent.values())


def flow_path(topo: Topology, before: Counts, after: Counts, flow: Flow) -> FlowPath:
    """Where the flow's data and ACKs went between two snapshots."""
    data = _one_way(topo, before, after, flow, "data")
    ack = _one_way(topo, before, after, flow, "ack")
    return FlowPath(frozenset(data[0] | ack[0]), frozenset(data[1] | ack[1]), data[2])


def busiest_uplink(topo: Topology, before: Counts, after: Counts, flow: Flow) -> str:
    """The T0-T1 link that carried most of the flow's data: a single-path flow's link, the
    one the schedule's @tcp-link names. HarnessError when none carried MIN_BYTES."""
    best: tuple[int, str] = (0, "")
    for plane in range(topo.planes):
        t0 = topo.t0(plane, topo.rack_of(flow.src))
        for t1, n in sorted(_deltas(before, after, t0, flow.port, "data").items()):
            best = max(best, (n, f"{t0}:{t1}"))
    if best[0] < MIN_BYTES:
        raise HarnessError(
            f"no T0-T1 link carried the TCP flow {flow.src} -> {flow.dst} (the flow did not "
            "run, or stayed inside one rack)"
        )
    return best[1]


def on_path(topo: Topology, target: str, path: FlowPath) -> bool:
    """Whether a fault on ``target`` (a link, a switch, a HOST:PORT, several joined by "+",
    or a group such as @links) hits a packet of the flow on that path."""
    for part in target.split("+"):
        if part.startswith("@"):
            return True  # a group of links: every link of a kind, so this flow's too
        port = _HOST_PORT.match(part)
        if port is not None:
            host, dev = port.groups()
            part = f"{host}:{topo.t0(int(dev[1:]), topo.rack_of(host))}"
        if ":" in part:
            if topo.link(part).name in path.links:
                return True
        elif part in path.switches:
            return True
    return False
