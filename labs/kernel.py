"""What this kernel can do for a lab, probed once per process in a throwaway namespace.

Some kernels are built without CONFIG_IPV6_SEG6_LWTUNNEL: they route IPv6 but have no
seg6local routes, so a switch cannot run the SRv6 End behaviours. The lab then runs them
as a tc-BPF program (labs/bpf/srv6_switch.c) instead. Some are built without CONFIG_MPTCP:
the lab then configures no MPTCP endpoints.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Literal

Dataplane = Literal["seg6local", "bpf"]


def _ip(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=False)


@cache
def has_seg6local() -> bool:
    """Whether the kernel accepts a seg6local route (tried in a namespace of our own)."""
    ns = f"mrc-probe-{os.getpid()}"
    if _ip("netns", "add", ns).returncode != 0:
        return False
    try:
        res = _ip("-n", ns, "-6", "route", "add", "fc00::/64", "encap", "seg6local",
                  "action", "End", "dev", "lo")  # fmt: skip
        return res.returncode == 0
    finally:
        _ip("netns", "del", ns)


MPTCP_SYSCTLS = Path("/proc/sys/net/mptcp")
"""Present when the kernel has MPTCP (CONFIG_MPTCP); every namespace has its own values."""


def has_mptcp() -> bool:
    """Whether the kernel has MPTCP (its sysctls exist)."""
    return (MPTCP_SYSCTLS / "enabled").exists()


def srv6_dataplane() -> Dataplane:
    """The kernel's own seg6local where it has it, else the BPF switch."""
    return "seg6local" if has_seg6local() else "bpf"
