"""This host's NIC port states from rtnetlink, as a NIC driver knows its ports' carrier.

Without it the endpoint learns that a port died only when it next sends through it
(ENETUNREACH). With a congestion window per plane that can be late: a plane whose window
is full sends nothing until acks come back, and none come back through a dead port, so
the loss was found only by RACK, a plane-RTT later (27-42 ms in the failover demo, where
the dead port's queue was shared with the TCP flow). The kernel announces every link
change to the RTMGRP_LINK group (rtnetlink(7)); this module opens that socket and parses
RTM_NEWLINK / RTM_DELLINK into (interface name, up). A port is up when it is both
administratively up (IFF_UP) and has carrier (IFF_LOWER_UP).
"""

from __future__ import annotations

import socket
import struct

RTMGRP_LINK = 0x1
RTM_NEWLINK = 16
RTM_DELLINK = 17
IFF_UP = 0x1
IFF_LOWER_UP = 0x10000
IFLA_IFNAME = 3

NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
RTATTR = struct.Struct("=HH")  # len, type


def open_link_socket() -> socket.socket:
    """A non-blocking rtnetlink socket subscribed to link changes (no privilege needed)."""
    sock = socket.socket(
        socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK, socket.NETLINK_ROUTE
    )
    try:
        sock.bind((0, RTMGRP_LINK))
    except OSError:
        sock.close()
        raise
    return sock


def _align(n: int) -> int:
    return (n + 3) & ~3


def _ifname(buf: bytes, start: int, end: int) -> str | None:
    """The IFLA_IFNAME attribute among the rtattrs in buf[start:end]."""
    off = start
    while off + RTATTR.size <= end:
        rta_len, rta_type = RTATTR.unpack_from(buf, off)
        if rta_len < RTATTR.size or off + rta_len > end:
            return None
        if rta_type == IFLA_IFNAME:
            raw = buf[off + RTATTR.size : off + rta_len]
            return raw.split(b"\0", 1)[0].decode("ascii", "replace")
        off += _align(rta_len)
    return None


def parse_link_events(buf: bytes) -> list[tuple[str, bool]]:
    """(interface name, up) for every link message in one datagram; anything malformed
    or without a name is skipped (the kernel is trusted, but a short read is not)."""
    out: list[tuple[str, bool]] = []
    off = 0
    while off + NLMSGHDR.size <= len(buf):
        length, kind = NLMSGHDR.unpack_from(buf, off)[:2]
        if length < NLMSGHDR.size or off + length > len(buf):
            break
        body = off + NLMSGHDR.size
        if kind in (RTM_NEWLINK, RTM_DELLINK) and body + IFINFOMSG.size <= off + length:
            flags = IFINFOMSG.unpack_from(buf, body)[3]
            name = _ifname(buf, body + IFINFOMSG.size, off + length)
            if name is not None:
                up = kind == RTM_NEWLINK and bool(flags & IFF_UP) and bool(flags & IFF_LOWER_UP)
                out.append((name, up))
        off += _align(length)
    return out
