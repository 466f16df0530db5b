"""`mrc lab capture`: record the ports of one lab node into one pcapng, from its namespace.

The recorder is dumpcap, Wireshark's capture engine (Debian package wireshark-common,
which tshark pulls in), not tcpdump: dumpcap opens several interfaces at once and writes
ONE pcapng with an Interface Description Block per port (its name, link type Ethernet,
snap length), so Wireshark shows which port each packet crossed. tcpdump writes pcap:
one interface per file and no interface name (files merged with mergecap keep
unnamed interfaces), and `tcpdump -i any` replaces the Ethernet header with a Linux
cooked one. dumpcap interleaves its ports buffer by buffer, not by time, so a file is
sorted by time with reordercap when the capture ends; a stream to stdout goes out as
captured.

Pure parts (parse_target, resolve, the argv builders) are unit-tested; `run` starts the
process inside the namespace and forwards Ctrl-C (SIGINT) and SIGTERM to it, on which
dumpcap and tshark complete their output and exit 0.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from labs import netns
from labs.errors import ApplyError, LabError
from labs.topology import Topology, namespace

DUMPCAP = "dumpcap"
REORDERCAP = "reordercap"
TSHARK = "tshark"
INSTALL_HINT = "apt-get install tshark"


@dataclass(frozen=True, slots=True)
class Target:
    """One node of a running lab and the ports to record."""

    lab: str
    """Lab name."""
    node: str
    """Node name (h0, t0-p0-0, ...)."""
    ports: tuple[str, ...]
    """Interfaces inside the node's namespace, in the topology's order."""

    @property
    def namespace(self) -> str:
        return namespace(self.lab, self.node)


def parse_target(text: str) -> tuple[str, tuple[str, ...]]:
    """ "h0" -> ("h0", ()): every port; "h0:p1" or "h0:p0,p1" -> those ports."""
    node, sep, ports = text.partition(":")
    names = tuple(p.strip() for p in ports.split(",")) if sep else ()
    if not node or (sep and not all(names)):
        raise LabError(f"bad capture target {text!r}: write NODE or NODE:PORT[,PORT...]")
    return node, names


def resolve(lab: str, topo: Topology, text: str) -> Target:
    """The Target that ``text`` names in ``topo``; LabError for an unknown node or port."""
    node, wanted = parse_target(text)
    topo.check_node(node)
    ports = tuple(dev for dev, _peer, _link in topo.ports(node))
    unknown = [p for p in wanted if p not in ports]
    if unknown:
        raise LabError(f"{node} has no port {unknown[0]!r} (its ports: {', '.join(ports)})")
    chosen = tuple(p for p in ports if p in wanted) if wanted else ports
    return Target(lab, node, chosen)


def _stops(count: int | None, duration: float | None) -> list[str]:
    """Stop conditions shared by dumpcap and tshark: after N packets, after S seconds."""
    argv = ["-c", str(count)] if count is not None else []
    return argv + (["-a", f"duration:{duration:g}"] if duration is not None else [])


def _interfaces(target: Target) -> list[str]:
    return [arg for port in target.ports for arg in ("-i", port)]


def dumpcap_argv(
    target: Target, out: str, count: int | None = None, duration: float | None = None
) -> list[str]:
    """dumpcap recording every port of target into the pcapng ``out`` ("-" is stdout)."""
    comment = f"mrc lab capture: lab {target.lab}, node {target.node}"
    return [
        DUMPCAP,
        "-q",
        *_interfaces(target),
        "-w",
        out,
        "--capture-comment",
        comment,
        *_stops(count, duration),
    ]


def tshark_argv(
    target: Target, lua: Path, count: int | None = None, duration: float | None = None
) -> list[str]:
    """tshark printing one line per packet, MRC decoded by the dissector at ``lua``."""
    lua_arg = f"lua_script:{lua}"
    return [TSHARK, "-l", "-X", lua_arg, *_interfaces(target), *_stops(count, duration)]


def require_tools(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise LabError(f"{tool} is missing ({INSTALL_HINT})")


def _child_setup(ns: str) -> None:
    """In the child before exec: the default Ctrl-C and SIGTERM actions (a shell starts
    background jobs with SIGINT ignored), SIGTERM when we die, the node's namespace."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    netns.preexec_enter(ns, death_signal=signal.SIGTERM)


def run(target: Target, argv: Sequence[str], stdout: IO[bytes] | None = None) -> int:
    """Run argv in the target's namespace until it stops by itself or is signalled; its
    exit code. SIGINT and SIGTERM reach it once, from us: it runs in its own process
    group, so a terminal's Ctrl-C goes to this process only."""
    if not netns.exists(target.namespace):
        raise LabError(f"namespace {target.namespace} is missing: is lab {target.lab} up?")
    proc = subprocess.Popen(
        argv,
        stdout=stdout,
        preexec_fn=partial(_child_setup, target.namespace),
        process_group=0,
    )

    def forward(signum: int, _frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    before = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def sort_by_time(path: Path) -> None:
    """Rewrite the pcapng at ``path`` in time order (reordercap keeps every interface)."""
    tmp = path.with_name(f".{path.name}.sorting")
    done = subprocess.run(
        [REORDERCAP, str(path), str(tmp)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ApplyError(f"reordercap {path}: {done.stderr.strip() or done.returncode}")
    os.replace(tmp, path)


def check_writable(path: Path) -> None:
    """LabError now rather than a dumpcap failure after the capture started."""
    folder = path.parent
    if not folder.is_dir():
        raise LabError(f"cannot write {path}: no directory {folder}")
    if path.is_dir() or not os.access(folder, os.W_OK):
        raise LabError(f"cannot write {path}: not a writable file path")
