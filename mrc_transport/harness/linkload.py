"""Bytes each link carried, from the lab's interface counters: how the TCP baseline's path
is found (ECMP hashes it, so it is measured, not predicted), and the schedule placeholders
that path fills (``@tcp-link``, ``@tcp-t1``, ``@src-port``)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from labs.faultkinds import TargetKind
from labs.topology import Topology, namespace
from mrc_transport.harness.errors import HarnessError

PLACEHOLDERS: Mapping[str, TargetKind] = {
    "@tcp-link": "link",
    "@tcp-t1": "switch",
    "@src-port": "port",
}
"""Each placeholder and the kind of target it stands for (``bindings_for``)."""


def bindings_for(topo: Topology, tcp_link: str, src: str) -> dict[str, str]:
    """Placeholder values once the TCP flow's T0-T1 link is known."""
    link = topo.link(tcp_link)
    return {"@tcp-link": link.name, "@tcp-t1": link.b, "@src-port": f"{src}:p{link.plane}"}


Counters = Mapping[tuple[str, str], int]
"""(node, interface) -> tx bytes."""


def fabric_link_deltas(topo: Topology, before: Counters, after: Counters) -> dict[str, int]:
    """Bytes each T0-T1 link carried (both directions) between two counter snapshots."""
    out: dict[str, int] = {}
    for link in topo.links:
        if link.kind != "t0-t1":
            continue
        total = 0
        for end in ((link.a, link.a_dev), (link.b, link.b_dev)):
            total += max(0, after.get(end, 0) - before.get(end, 0))
        out[link.name] = total
    return out


def pick_tcp_link(topo: Topology, before: Counters, after: Counters, min_bytes: int) -> str:
    """The T0-T1 link that carried the most bytes while only the TCP flow ran.

    ECMP hashes the flow's 5-tuple (fib_multipath_hash_policy=1) at the host and at the T0,
    so the path is found by looking, not by predicting. Raises HarnessError when no link carried
    min_bytes (the flow did not run, or stayed inside one rack)."""
    deltas = fabric_link_deltas(topo, before, after)
    if not deltas:
        raise HarnessError("the fabric has no T0-T1 links (one rack?): no TCP path to cut")
    name, most = max(sorted(deltas.items()), key=lambda kv: kv[1])
    if most < min_bytes:
        raise HarnessError(
            f"no T0-T1 link carried {min_bytes} bytes of the TCP flow (most: {most} on {name})"
        )
    return name


def parse_ip_link_json(text: str) -> dict[str, int]:
    """interface -> tx bytes, from `ip -s -j link` output."""
    out: dict[str, int] = {}
    for entry in json.loads(text):
        stats = entry.get("stats64") or entry.get("stats") or {}
        out[str(entry["ifname"])] = int(stats.get("tx", {}).get("bytes", 0))
    return out


def read_tx_counters(lab: str, nodes: Sequence[str]) -> dict[tuple[str, str], int]:
    """A tx-bytes snapshot of every interface of the given lab nodes."""
    out: dict[tuple[str, str], int] = {}
    for node in nodes:
        res = subprocess.run(
            ["ip", "-n", namespace(lab, node), "-s", "-j", "link", "show"],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            raise HarnessError(f"{node}: cannot read counters: {res.stderr.strip() or 'ip failed'}")
        for dev, tx in parse_ip_link_json(res.stdout).items():
            out[(node, dev)] = tx
    return out


def measure_tcp_link(
    lab: str,
    topo: Topology,
    window_s: float,
    min_bytes: int,
    wait: Callable[[float], None] = time.sleep,
) -> str:
    """Snapshot the T0 counters, let the running TCP flow go for window_s, pick its link."""
    t0s = [s for s in topo.switches if topo.kind_of(s) == "t0"]
    before = read_tx_counters(lab, t0s)
    wait(window_s)  # the measurement window itself, not a wait for a condition
    after = read_tx_counters(lab, t0s)
    return pick_tcp_link(topo, before, after, min_bytes)


def busiest_host(
    topo: Topology, hosts: Sequence[str], link_name: str, before: Counters, after: Counters
) -> str:
    """Of ``hosts`` in the rack below a T0-T1 link, the one whose port in the link's plane
    sent the most bytes between two snapshots (the sender whose traffic the link carried,
    where that is one flow); HarnessError when none of them is in that rack."""
    link = topo.link(link_name)
    rack = next(r for r in range(topo.racks) if topo.t0(link.plane, r) == link.a)
    below = [h for h in hosts if topo.rack_of(h) == rack]
    if not below:
        raise HarnessError(f"none of the hosts is in the rack below {link_name}")
    dev = f"p{link.plane}"
    return max(below, key=lambda h: after.get((h, dev), 0) - before.get((h, dev), 0))
