"""Linux MPTCP as the multipath baseline: is it there, how is it set up, which subflows a
connection has.

Why MPTCP: it is what a Linux user who wants one connection over several paths would pick
(CONFIG_MPTCP, an ``IPPROTO_MPTCP`` socket). The lab gives it one subflow per plane
(labs/plan.py ``mptcp_ops``: each host announces its plane addresses 1.. and accepts its
peer's), a connection goes to the peer's plane-0 address, and the lab's per-plane routes
carry each subflow in its plane, where ECMP hashes it onto one T1 like any TCP flow.
The path manager is the kernel's in-kernel one and the scheduler its default
(``settings`` reads both in the namespace, for the reports).
"""

from __future__ import annotations

import ctypes
import socket
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labs import kernel, netns
from labs.topology import namespace
from mrc_transport.harness.errors import Unavailable

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
SOL_MPTCP = 284
MPTCP_SUBFLOW_ADDRS = 3
"""getsockopt: every subflow's local and remote address (Linux 5.17+, linux/mptcp.h)."""
SYSCTLS = ("enabled", "path_manager", "scheduler", "stale_loss_cnt")
"""net.mptcp.* written into the reports: whether it is on, who opens subflows, who picks
the subflow for each packet, and how many RTOs without progress mark a subflow stale."""
CONGESTION_CONTROL = Path("/proc/sys/net/ipv4/tcp_congestion_control")
"""Each subflow's congestion control, as every TCP flow's in the namespace."""
SYSCTL_DIR = Path("/proc/sys/net/mptcp")
"""The calling thread's namespace's MPTCP sysctls (/proc/sys/net resolves at open)."""
_SUBFLOW_DATA = struct.Struct("=IIII")
"""struct mptcp_subflow_data: size of itself, subflows, size of an entry in the kernel and
in the caller."""
_SOCKADDR_STORAGE = 128
_ENTRY = 2 * _SOCKADDR_STORAGE
"""struct mptcp_subflow_addrs: the local then the remote address, each a sockaddr_storage."""
_libc = ctypes.CDLL(None, use_errno=True)


def read_settings() -> dict[str, str]:
    """This thread's namespace's MPTCP sysctls ({} on a kernel without MPTCP)."""
    out: dict[str, str] = {}
    for name in SYSCTLS:
        path = SYSCTL_DIR / name
        if path.exists():
            out[name] = path.read_text().strip()
    return out


def _ip_mptcp(lab: str, host: str, *what: str) -> str:
    res = subprocess.run(
        ["ip", "-n", namespace(lab, host), "mptcp", *what],
        capture_output=True,
        text=True,
        check=False,
    )
    return res.stdout.strip() if res.returncode == 0 else ""


def settings(lab: str, host: str) -> dict[str, Any]:
    """The host's MPTCP as the kernel has it: the sysctls (and the congestion control its
    subflows run), the path manager's limits and endpoints (`ip mptcp`), for the reports."""
    with netns.entered(namespace(lab, host)):
        sysctls = read_settings()
        cc = CONGESTION_CONTROL.read_text().strip()
    return {
        **{f"net.mptcp.{k}": v for k, v in sysctls.items()},
        "net.ipv4.tcp_congestion_control": cc,
        "limits": _ip_mptcp(lab, host, "limits", "show"),
        "endpoints": _ip_mptcp(lab, host, "endpoint", "show").splitlines(),
    }


NO_KERNEL = (
    "this kernel has no MPTCP (no /proc/sys/net/mptcp): leave mptcp out of --baselines, "
    "e.g. --baselines tcp"
)


def check_kernel() -> None:
    """Unavailable (one line) on a kernel built without MPTCP, before any lab is built."""
    if not kernel.has_mptcp():
        raise Unavailable(NO_KERNEL)


def check_ready(lab: str, hosts: Sequence[str]) -> None:
    """Unavailable (one line) unless MPTCP can run between these hosts of the lab."""
    for host in hosts:
        with netns.entered(namespace(lab, host)):
            enabled = read_settings().get("enabled")
        if enabled is None:
            raise Unavailable(NO_KERNEL)
        if enabled != "1":
            raise Unavailable(
                f"MPTCP is off in {host}'s namespace (net.mptcp.enabled={enabled}): leave "
                "mptcp out of --baselines, e.g. --baselines tcp"
            )


def subflow_addresses(sock: socket.socket) -> list[tuple[str, str]]:
    """(local, remote) IPv6 address of each of an MPTCP socket's subflows, [] when the
    kernel cannot say (too old) or the connection fell back to plain TCP."""
    count = 16
    head = _SUBFLOW_DATA.pack(_SUBFLOW_DATA.size, 0, 0, _ENTRY)
    buf = ctypes.create_string_buffer(head + bytes(count * _ENTRY))
    size = ctypes.c_uint32(len(buf.raw))
    rc = _libc.getsockopt(sock.fileno(), SOL_MPTCP, MPTCP_SUBFLOW_ADDRS, buf, ctypes.byref(size))
    if rc != 0:
        return []
    _size, n, _kernel, _user = _SUBFLOW_DATA.unpack_from(buf.raw)
    out = []
    for i in range(min(n, count)):
        at = _SUBFLOW_DATA.size + i * _ENTRY
        out.append((_in6(buf.raw, at), _in6(buf.raw, at + _SOCKADDR_STORAGE)))
    return out


def _in6(raw: bytes, at: int) -> str:
    """The address of a sockaddr_in6 (family, port, flowinfo, then 16 bytes)."""
    family = struct.unpack_from("=H", raw, at)[0]
    if family != socket.AF_INET6:
        return "?"
    return socket.inet_ntop(socket.AF_INET6, raw[at + 8 : at + 24])
