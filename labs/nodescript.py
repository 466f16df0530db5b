"""One node's share of the plan as a shell script, for a node that is a container (or a
machine) instead of one of this box's namespaces: what `mrc lab export` puts in each node.

`mrc lab up` batches the ops of labs/plan.py per node (labs/apply.py); the script runs the
same batches with the same lines (``ip_line``, ``tc_lines``, the nft table, the port
program's map entries), in the order apply uses: interfaces, addresses, neighbours and
routes; the BPF programs loaded and pinned; queues and filters; map entries; nft. What
differs is what containerlab does itself: it creates the links (as the plan's veths) and
applies the sysctls when it creates the container, before any link exists, so their
``default`` values reach every port (``sysctls`` below).

The BPF programs are loaded by labs/bpf.py in the node, into a bpf filesystem the script
mounts for itself at /run/mrc-bpf (a container's own; a namespace of this box's tests gets
its own mount too, as `ip netns exec` runs in a fresh mount namespace).

A host also writes its paths file (labs/pathsfile.py, with `mrc paths export` from the
topology in the script) at ``$MRC_PATHS_FILE``, /etc/mrc/paths.yaml unless the node's
environment says otherwise, for `mrc perf --paths-file`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence

from labs import bpf, trim
from labs.plan import (
    IpOp,
    LinkUp,
    Nft,
    Op,
    PortMap,
    Sysctl,
    TcBpf,
    TcOp,
    Veth,
    ip_line,
    tc_lines,
)
from labs.topology import Topology

PATHS_FILE = "/etc/mrc/paths.yaml"
"""Where a host's paths file goes unless ``MRC_PATHS_FILE`` says otherwise."""
PATHS_ENV = "MRC_PATHS_FILE"
EXTRA_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "0",
    "net.ipv6.conf.default.disable_ipv6": "0",
}
"""Docker may turn IPv6 off in a container on an IPv4-only network; every port needs it."""
_HEREDOC_UNSAFE = ("$", "`", "\\")


def is_link(op: Op) -> bool:
    """A veth between two nodes: a containerlab link, not a command (the SID veth is one)."""
    return isinstance(op, Veth) and op.peer_node != op.node


def by_node(ops: Iterable[Op]) -> dict[str, list[Op]]:
    """Each node's ops, in plan order."""
    out: dict[str, list[Op]] = {}
    for op in ops:
        out.setdefault(op.node, []).append(op)
    return out


def sysctls(ops: Iterable[Op]) -> dict[str, str]:
    """The node's sysctls as containerlab's ``sysctls`` (docker's, set at creation)."""
    return {op.key: op.value for op in ops if isinstance(op, Sysctl)} | EXTRA_SYSCTLS


def mtus(ops: Iterable[Op]) -> dict[tuple[str, str], int]:
    """The MTU the plan gives each (node, device) it sets one on."""
    return {
        (op.node, op.dev): op.mtu for op in ops if isinstance(op, LinkUp) and op.mtu is not None
    }


def heredoc(command: str, body: Sequence[str]) -> str:
    """``command <<EOF`` with ``body``'s lines. The plan's lines hold no shell expansion
    characters; a line that did would be a bug here, not the user's input."""
    for line in body:
        if line == "EOF" or any(c in line for c in _HEREDOC_UNSAFE):
            raise ValueError(f"not safe in a here-document: {line!r}")
    return "\n".join([f"{command} <<EOF", *body, "EOF"])


def script(topo: Topology, name: str, ops: Sequence[Op]) -> str:
    """The shell script that configures one node from its ops (``node_ops``); ``name`` is
    the exported lab's, which names the node's BPF pins as `lab up` names a lab's."""
    ip_ops = [op for op in ops if isinstance(op, IpOp) and not is_link(op)]
    tc_ops = [op for op in ops if isinstance(op, TcOp)]
    programs = sorted({op.program for op in ops if isinstance(op, TcBpf)})
    entries = [op for op in ops if isinstance(op, PortMap)]
    parts = ["set -e"]
    if ip_ops:
        parts.append(heredoc("ip -6 -b -", [ip_line(name, op) for op in ip_ops]))
    if programs:
        parts += load_programs(name, programs)
    if tc_ops:
        pins = {p: str(bpf.pin_dir(name) / p) for p in programs}
        parts.append(heredoc("tc -b -", [ln for op in tc_ops for ln in tc_lines(op, pins)]))
    if entries:
        parts.append(heredoc("bpftool batch file -", trim.update_lines(name, entries)))
    for op in ops:
        if isinstance(op, Nft):
            # as apply.nft_job: add then delete, so the table is replaced as a whole
            body = [f"add table {op.table}", f"delete table {op.table}", *op.text.splitlines()]
            parts.append(heredoc("nft -f -", body))
    hosts = {op.node for op in ops if topo.kind_of(op.node) == "host"}
    parts += [write_paths(topo, host) for host in sorted(hosts)]
    return "\n".join(parts) + "\n"


def load_programs(name: str, programs: Sequence[str]) -> list[str]:
    """Mount a bpf filesystem of the node's own, then load and pin each program there with
    labs/bpf.py (its maps beside it), as `lab up` does once per lab."""
    load = (
        'python3 -c "import sys; from labs.bpf import pinned; '
        '[pinned(sys.argv[1], p) for p in sys.argv[2:]]"'
    )
    return [
        f"mkdir -p {bpf.BPFFS}",
        f"mount -t bpf bpf {bpf.BPFFS}",
        " ".join([load, name, *programs]),
    ]


def write_paths(topo: Topology, host: str) -> str:
    """The host's paths file, made in the node by `mrc paths export` from the topology."""
    target = f"${{{PATHS_ENV}:-{PATHS_FILE}}}"
    export = f'mrc paths export --topology /dev/stdin --host {host} -o "{target}"'
    return "\n".join(
        [
            f'mkdir -p "$(dirname "{target}")"',
            heredoc(export, [json.dumps(topo.to_dict())]),
        ]
    )


def exec_command(text: str) -> str:
    """The script as one containerlab ``exec`` entry: containerlab splits an entry into
    words with shell quoting (google/shlex) and runs them without a shell."""
    return f"sh -c {shlex.quote(text)}"
