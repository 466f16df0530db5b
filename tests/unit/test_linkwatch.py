"""rtnetlink link messages -> (interface, up): built by hand here, read from a real
namespace in tests/lab/test_linkwatch.py."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from mrc_transport.io.linkwatch import (
    IFF_LOWER_UP,
    IFF_UP,
    IFLA_IFNAME,
    RTM_DELLINK,
    RTM_NEWLINK,
    parse_link_events,
)

RTM_NEWADDR = 20


def msg(kind: int, flags: int, name: str | None = "p1", extra: bytes = b"") -> bytes:
    """One netlink message: nlmsghdr + ifinfomsg + attributes (IFLA_MTU first, so the
    name is not the first attribute)."""
    attrs = struct.pack("=HHI", 8, 4, 9000) + extra
    if name is not None:
        raw = name.encode() + b"\0"
        attr = struct.pack("=HH", 4 + len(raw), IFLA_IFNAME) + raw
        attrs += attr + b"\0" * (-len(attr) % 4)
    body = struct.pack("=BxHiII", 10, 1, 7, flags, 0xFFFFFFFF) + attrs
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 0, 0) + body


def test_up_needs_admin_up_and_carrier() -> None:
    up = IFF_UP | IFF_LOWER_UP
    buf = msg(RTM_NEWLINK, up) + msg(RTM_NEWLINK, IFF_UP, "p2") + msg(RTM_NEWLINK, 0, "p3")
    assert parse_link_events(buf) == [("p1", True), ("p2", False), ("p3", False)]
    assert parse_link_events(msg(RTM_DELLINK, up)) == [("p1", False)]


def test_other_messages_and_nameless_links_are_skipped() -> None:
    assert parse_link_events(msg(RTM_NEWADDR, 0)) == []
    assert parse_link_events(msg(RTM_NEWLINK, IFF_UP, None)) == []


def test_a_truncated_datagram_keeps_what_is_whole() -> None:
    buf = msg(RTM_NEWLINK, IFF_UP | IFF_LOWER_UP) + msg(RTM_NEWLINK, 0, "p2")
    assert parse_link_events(buf[:-3]) == [("p1", True)]
    assert parse_link_events(buf[:10]) == []


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(buf: bytes) -> None:
    for name, up in parse_link_events(buf):
        assert isinstance(name, str)
        assert isinstance(up, bool)
