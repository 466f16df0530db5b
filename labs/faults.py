"""Fault injection on a running lab: failures as data (ipmininet's runFailurePlan), each one
timestamped into the lab's JSONL event log.

- cut hard: ``ip link set down`` on the lower end; the peer loses carrier in < 0.4 ms.
  Admin down deletes that device's addresses, routes and permanent neighbours, so restore
  re-applies every plan op that uses the device (kernel-facts "Cutting links").
- cut gray: netdev ingress chains with policy drop on both ends; no carrier change.
- degrade: netdev ingress ``numgen random`` drop on both ends (kernel-facts: no netem).
- fail switch: an inet prerouting chain with policy drop (nothing is received, so nothing
  is forwarded and no SID runs); fail HOST:PORT: that NIC port admin down.

``t_mono`` is time.monotonic() (CLOCK_MONOTONIC is system-wide, so traffic logs of other
processes on this machine join on it); ``t_wall`` is time.time().

This is the mechanism; what a fault is (its verb, targets and options, checked) is
labs/faultkinds.py, whose kinds call these methods: the CLI and the schedules go there.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from labs import netns
from labs.apply import Job, config_jobs, run_jobs
from labs.errors import ApplyError, LabError
from labs.faultkinds import CutMode, host_port, switch
from labs.plan import Netns, Op, Route, Sysctl, Veth, build, op_devs
from labs.state import events_path, load_state
from labs.topology import Link, Topology, namespace

FAULT_TABLE = "mrc_fault"
FAIL_TABLE = "mrc_fail"


@dataclass(frozen=True, slots=True)
class Event:
    """One line of the lab's event log."""

    t_mono: float
    """time.monotonic() when the fault took effect (after the command returned)."""
    t_wall: float
    """time.time() at the same moment."""
    kind: str
    """cut, restore, degrade, fail, flap."""
    target: str
    """Link "a:b", switch name or "host:port"."""
    action: str
    """What was done, e.g. "hard", "gray", "loss 5%", "down", "up"."""


def record(lab: str, kind: str, target: str, action: str) -> Event:
    ev = Event(time.monotonic(), time.time(), kind, target, action)
    path = events_path(lab)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(
            json.dumps(
                {
                    "t_mono": ev.t_mono,
                    "t_wall": ev.t_wall,
                    "kind": ev.kind,
                    "target": ev.target,
                    "action": ev.action,
                }
            )
            + "\n"
        )
    return ev


def read_events(lab: str) -> list[dict[str, Any]]:
    path = events_path(lab)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sh(
    lab: str,
    node: str,
    argv: Sequence[str],
    stdin: str = "",
    *,
    in_ns: bool = False,
    ok_errors: tuple[str, ...] = (),
) -> None:
    pre = partial(netns.preexec_enter, namespace(lab, node)) if in_ns else None
    res = subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, check=False, preexec_fn=pre
    )  # setns only, before exec
    if res.returncode != 0 and not any(e in res.stderr for e in ok_errors):
        first = next((ln for ln in res.stderr.splitlines() if ln.strip()), "failed")
        raise ApplyError(f"{node}: {' '.join(argv[:4])}: {first.strip()}")


def _ip(lab: str, node: str, *args: str) -> None:
    _sh(lab, node, ["ip", "-n", namespace(lab, node), *args])


def _nft(lab: str, node: str, text: str, ok_errors: tuple[str, ...] = ()) -> None:
    _sh(lab, node, ["nft", "-f", "-"], text, in_ns=True, ok_errors=ok_errors)


def _chain_name(kind: str, dev: str) -> str:
    return f"{kind}_{re.sub(r'[^A-Za-z0-9]', '_', dev)}"


def _ingress_chain(lab: str, node: str, dev: str, kind: str, policy: str, rule: str = "") -> None:
    name = _chain_name(kind, dev)
    body = f"    {rule}\n" if rule else ""
    _drop_chain(lab, node, dev, kind)
    _nft(
        lab,
        node,
        (
            f"table netdev {FAULT_TABLE} {{\n  chain {name} {{\n"
            f'    type filter hook ingress device "{dev}" priority -500; policy {policy};\n'
            f"{body}  }}\n}}\n"
        ),
    )


def _drop_chain(lab: str, node: str, dev: str, kind: str) -> None:
    _nft(
        lab,
        node,
        f"delete chain netdev {FAULT_TABLE} {_chain_name(kind, dev)}\n",
        ok_errors=("No such file or directory",),
    )


def _loss_rule(per_million: int) -> str:
    return "drop" if per_million >= 1_000_000 else f"numgen random mod 1000000 < {per_million} drop"


def _loss_lines(dev: str, per_million: int) -> str:
    """nft lines that set dev's loss chain to per_million, or remove it (0), whatever was
    there: "add" creates what is missing and leaves what exists, so one file does both."""
    name = f"netdev {FAULT_TABLE} {_chain_name('loss', dev)}"
    lines = [
        f"add table netdev {FAULT_TABLE}",
        f'add chain {name} {{ type filter hook ingress device "{dev}" priority -500; '
        "policy accept; }",
    ]
    if per_million:
        lines += [f"flush chain {name}", f"add rule {name} {_loss_rule(per_million)}"]
    else:
        lines.append(f"delete chain {name}")
    return "".join(line + "\n" for line in lines)


def _ip_json(lab: str, node: str, *args: str) -> list[dict[str, Any]]:
    """`ip -j ARGS` in node's namespace, parsed; LabError when it fails."""
    out = subprocess.run(
        ["ip", "-n", namespace(lab, node), "-j", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise LabError(f"{node}: ip {' '.join(args)}: {out.stderr.strip() or 'failed'}")
    got: list[dict[str, Any]] = json.loads(out.stdout or "[]")
    return got


def _admin_down(lab: str, node: str) -> set[str]:
    """node's devices that are administratively down (a hard cut's lower end)."""
    links = _ip_json(lab, node, "link", "show")
    return {d["ifname"] for d in links if "UP" not in d.get("flags", [])}


def _lost_neighbours(lab: str, node: str, dev: str) -> bool:
    """node's dev has no permanent neighbour: admin down flushed what the plan added
    (every link end has one), and with it the routes over the dev; still so after a bare
    `link set up`, which re-adds neither."""
    return not _ip_json(lab, node, "-6", "neigh", "show", "dev", dev, "nud", "permanent")


def _without_devs(op: Op, down: set[str]) -> Op | None:
    """A multipath route without its nexthops over ``down`` (None: none left); any other
    op as it is."""
    if not isinstance(op, Route) or len(op.devs) < 2 or not down & set(op.devs):
        return op
    keep = tuple(d for d in op.devs if d not in down)
    if not keep:
        return None
    spec = op.spec
    for dev in down & set(op.devs):
        spec = re.sub(rf" ?nexthop via \S+ dev {re.escape(dev)}(?= |$)", "", spec)
    return replace(op, spec=spec.strip(), devs=keep)


def _ends(link: Link) -> tuple[tuple[str, str], tuple[str, str]]:
    return (link.a, link.a_dev), (link.b, link.b_dev)


class Lab:
    """A running lab, loaded from its state file."""

    def __init__(self, lab: str) -> None:
        self.name = lab
        self.topo: Topology = load_state(lab).topology
        self._ops: list[Op] | None = None

    @property
    def ops(self) -> list[Op]:
        if self._ops is None:
            self._ops = build(self.topo)
        return self._ops

    def reapply(self, node: str, dev: str) -> None:
        """Re-add every address, neighbour, route and qdisc that uses node's dev. A route
        over several devices leaves out those still cut (admin down), which the kernel
        refuses as nexthops; restoring those re-adds it whole."""
        ops: list[Op] = [
            op
            for op in self.ops
            if op.node == node and dev in op_devs(op) and not isinstance(op, Veth | Netns | Sysctl)
        ]
        if any(isinstance(op, Route) and len(op.devs) > 1 for op in ops):
            down = _admin_down(self.name, node) - {dev}  # dev comes up in these jobs
            ops = [kept for op in ops if (kept := _without_devs(op, down)) is not None]
        run_jobs(config_jobs(self.name, ops))

    # -- links ------------------------------------------------------------------------------

    def cut(self, link_name: str, mode: CutMode = "hard") -> Event:
        link = self.topo.link(link_name)
        if mode == "hard":
            _ip(self.name, link.a, "link", "set", "dev", link.a_dev, "down")
        elif mode == "gray":
            for node, dev in _ends(link):
                _ingress_chain(self.name, node, dev, "gray", "drop")
        else:
            raise LabError(f"cut mode must be hard or gray, not {mode!r}")
        return record(self.name, "cut", link.name, mode)

    def restore(self, link_name: str) -> Event:
        """Undo cut (hard or gray) and degrade of a link; safe on a healthy link. Only a
        hard cut (an end admin down) deleted anything to re-add (``_lost_neighbours``)
        and then both ends are re-added whole; re-adding a live link's
        qdisc, neighbours and routes disturbs its traffic (a training step that overlapped
        a restore of a healthy link ran slow)."""
        link = self.topo.link(link_name)
        deleted = any(_lost_neighbours(self.name, node, dev) for node, dev in _ends(link))
        for node, dev in _ends(link):
            _drop_chain(self.name, node, dev, "gray")
            _drop_chain(self.name, node, dev, "loss")
            if deleted:
                self.reapply(node, dev)  # "link set up" first, then what admin down deleted
        return record(self.name, "restore", link.name, "up")

    def degrade(self, link_name: str, loss_pct: float) -> Event:
        link = self.topo.link(link_name)
        per_million = round(loss_pct * 10_000)
        for node, dev in _ends(link):
            if per_million == 0:
                _drop_chain(self.name, node, dev, "loss")
            else:
                _ingress_chain(self.name, node, dev, "loss", "accept", _loss_rule(per_million))
        return record(self.name, "degrade", link.name, f"loss {loss_pct:g}%")

    def degrade_many(self, link_names: Sequence[str], loss_pct: float, label: str) -> Event:
        """degrade every link named at once, logged as one event on ``label``; loss 0
        takes the loss off them (logged as a restore). One `nft -f` per node, run in
        parallel: random loss on all 64 links of the default preset one link at a time
        took ~10 s, so the loss of a lab-wide experiment would arrive link by link."""
        per_million = round(loss_pct * 10_000)
        devs: dict[str, list[str]] = {}
        for name in link_names:
            for node, dev in _ends(self.topo.link(name)):
                devs.setdefault(node, []).append(dev)
        # `ip netns exec` rather than setns in a preexec_fn: without one, Popen does not
        # wait for each child to exec, and 32 nodes take ~0.1 s instead of ~1 s
        run_jobs(
            [
                Job(
                    node,
                    ("ip", "netns", "exec", namespace(self.name, node), "nft", "-f", "-"),
                    (),
                    "".join(_loss_lines(dev, per_million) for dev in node_devs),
                )
                for node, node_devs in devs.items()
            ]
        )
        if per_million == 0:
            return record(self.name, "restore", label, "no loss")
        return record(self.name, "degrade", label, f"loss {loss_pct:g}%")

    def flap(self, link_name: str, period: float, count: int) -> list[Event]:
        """Down for period/2, up for period/2, count times (the sleeps ARE the flap)."""
        return self.flap_many([link_name], period, count)

    def flap_many(self, link_names: Sequence[str], period: float, count: int) -> list[Event]:
        """flap several links in step: all down, then all up (``restore_many``)."""
        # Absolute deadlines, so a slow restore (it re-adds addresses, routes and SIDs)
        # delays only its own event and the flap keeps its period.
        events: list[Event] = []
        t0 = time.monotonic()
        for k in range(count):
            events += [self.cut(name, "hard") for name in link_names]
            _sleep_until(t0 + (k + 0.5) * period)
            events += self.restore_many(link_names)
            _sleep_until(t0 + (k + 1) * period)
        return events

    def restore_many(self, link_names: Sequence[str]) -> list[Event]:
        """restore several links: every lower end set up first, then each restored, side by
        side, so a multipath route (a host's ECMP route over all its ports) comes back
        with every one of their devices at once, not first without the others
        (``reapply``)."""
        links = [self.topo.link(name) for name in link_names]
        for link in links:
            _ip(self.name, link.a, "link", "set", "dev", link.a_dev, "up")
        if len(links) == 1:
            return [self.restore(links[0].name)]
        # side by side: each restore runs its own `nft` and `ip` batches (~0.3-0.7 s)
        with ThreadPoolExecutor(len(links)) as pool:
            return list(pool.map(self.restore, [link.name for link in links]))

    # -- nodes and ports --------------------------------------------------------------------

    def fail(self, target: str) -> Event:
        if ":" in target:
            host, port = host_port(self.topo, target)
            _ip(self.name, host, "link", "set", "dev", port, "down")
            return record(self.name, "fail", target, "port down")
        sw = switch(self.topo, target, "fail")
        _nft(
            self.name,
            sw,
            (
                f"table inet {FAIL_TABLE} {{\n  chain pre {{\n"
                "    type filter hook prerouting priority -400; policy drop;\n  }\n}\n"
            ),
        )
        return record(self.name, "fail", sw, "stop forwarding")

    def unfail(self, target: str) -> Event:
        if ":" in target:
            host, port = host_port(self.topo, target)
            self.reapply(host, port)
            return record(self.name, "restore", target, "port up")
        sw = switch(self.topo, target, "restore")
        _nft(
            self.name,
            sw,
            f"delete table inet {FAIL_TABLE}\n",
            ok_errors=("No such file or directory",),
        )
        return record(self.name, "restore", sw, "forwarding")


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))
