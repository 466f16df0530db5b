"""The link-state socket in a real namespace: an interface set down and up is announced."""

from __future__ import annotations

import select
import socket
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from mrc_transport.io.linkwatch import open_link_socket, parse_link_events

from .conftest import require_root_netns

pytestmark = pytest.mark.lab


@pytest.fixture
def netns() -> Iterator[str]:
    require_root_netns()
    name = "mrclw-" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _ip(ns: str, *args: str) -> None:
    subprocess.run(["ip", "-n", ns, *args], check=True)


def _events_until(
    sock: socket.socket, want: tuple[str, bool], timeout: float = 5.0
) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []
    while want not in seen:
        ready, _, _ = select.select([sock], [], [], timeout)
        assert ready, f"no {want} within {timeout} s; saw {seen}"
        seen += parse_link_events(sock.recv(1 << 16))
    return seen


def test_a_port_going_down_and_up_is_announced(netns: str) -> None:
    from labs.netns import entered

    with entered(netns):
        sock = open_link_socket()
    try:
        _ip(netns, "link", "add", "p0", "type", "veth", "peer", "name", "sw0")
        _ip(netns, "link", "set", "sw0", "up")
        _ip(netns, "link", "set", "p0", "up")
        _events_until(sock, ("p0", True))
        _ip(netns, "link", "set", "p0", "down")
        _events_until(sock, ("p0", False))
        _ip(netns, "link", "set", "p0", "up")
        _events_until(sock, ("p0", True))
        _ip(netns, "link", "set", "sw0", "down")  # the far end: carrier lost
        _events_until(sock, ("p0", False))
    finally:
        sock.close()
