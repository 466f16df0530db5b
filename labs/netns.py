"""Enter a lab namespace from Python: setns(2) on the calling thread only.

Sockets keep the namespace they were created in, so a caller can enter, open sockets,
and leave; children forked while inside run inside (used to start `nft -f`).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


@contextmanager
def entered(ns: str) -> Iterator[None]:
    """Run the body in namespace ``ns`` (this thread), then return to where we were."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        setns(target)
        try:
            yield
        finally:
            setns(home)
    finally:
        os.close(target)
        os.close(home)


def write_sysctl(key: str, value: str) -> None:
    """Write a sysctl of the CURRENT thread's namespace (/proc/sys/net resolves at open)."""
    Path("/proc/sys", *key.split(".")).write_text(value)


PR_SET_PDEATHSIG = 1
SIGKILL = 9


def die_with_parent(signal: int = SIGKILL) -> None:
    """For Popen(preexec_fn=...): a SIGKILLed `up` must not leave a batch running that
    creates namespaces after `down` has removed the others. A capture asks for SIGTERM,
    on which dumpcap still completes its file."""
    _libc.prctl(PR_SET_PDEATHSIG, signal, 0, 0, 0)


def preexec_enter(ns: str | None, death_signal: int = SIGKILL) -> None:
    """For Popen(preexec_fn=...): die with the parent; move into ``ns`` before exec."""
    die_with_parent(death_signal)
    if ns is None:
        return
    fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
    setns(fd)
    os.close(fd)
