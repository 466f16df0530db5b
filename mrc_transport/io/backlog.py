"""Packets the kernel did not take yet: one queue per local port, so a full port holds
back only its own packets.

Backpressure is not loss: a raw send into a full local port queue (tbf) fails with
ENOBUFS (IPV6_RECVERR is set, else the kernel drops it silently), and that packet and
every later one for the same port wait here and are retried after ``retry_after``. The
core hears the port is busy (``Endpoint.port_busy``) and sprays on the other ports
meanwhile; a full socket buffer (a send that took nothing) holds every port until the
socket is writable. A port shared with other traffic thus costs the connection that
port's lost share, not the same share of every port.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable

import trio

from mrc_transport.io.tuning import BACKOFF_MAX, BACKOFF_MIN, BACKOFF_PACKETS, MAX_BACKLOG
from mrc_transport.protocol import Config, Transmit

Queued = tuple[bytes, Transmit]
"""A packet on its way out: its bytes (the first hop is its IPv6 destination) and what
it encodes. The Transmit travels with its bytes: a port that goes down while they wait
must still be reported to the core (``send_failed``), not found later as a loss."""


def retry_delay(cfg: Config) -> float:
    """A few packet times at the NIC rate, within [BACKOFF_MIN, BACKOFF_MAX]: how long a
    full port is given to drain before its backlog is offered again."""
    packet_time = cfg.mss * 8 / cfg.nic_rate_bps
    return min(max(BACKOFF_PACKETS * packet_time, BACKOFF_MIN), BACKOFF_MAX)


class Backlog:
    """Per local port (plane), the packets waiting for its queue to drain, in order."""

    def __init__(self, cfg: Config, port_busy: Callable[[int, bool], None]) -> None:
        self.ports: dict[int, collections.deque[Queued]] = {}
        """Per plane, its waiting packets; a plane is here only while it has some."""
        self.queued = 0
        """Packets waiting, all ports."""
        self.sock_full = False
        """A send took nothing: every port waits until the socket is writable."""
        self.drops = 0
        """Packets dropped because ``MAX_BACKLOG`` were waiting already."""
        self.retry_after = retry_delay(cfg)
        """Seconds a full port is given before its packets are offered again."""
        self.lot = trio.lowlevel.ParkingLot()
        """Where the transmit task waits while nothing is queued."""
        self._port_busy = port_busy

    def can_send(self, planes: Iterable[int]) -> bool:
        """Whether a new burst can leave: the socket takes packets and one of ``planes``
        (the ports the connections use) has no backlog."""
        if self.sock_full:
            return False
        return not self.ports or any(p not in self.ports for p in planes)

    def hold(self, item: Queued) -> bool:
        """Queue ``item`` if its port has a backlog or the socket is full (order per
        port); whether it did."""
        if self.sock_full or self.ports.get(item[1].path.plane):
            self.add(item)
            return True
        return False

    def add(self, item: Queued) -> None:
        """Queue ``item`` behind its port's other packets; the port is busy from now."""
        if self.queued >= MAX_BACKLOG:
            self.drops += 1
            return
        plane = item[1].path.plane
        q = self.ports.get(plane)
        if q is None:
            q = self.ports[plane] = collections.deque()
            self._port_busy(plane, True)
        q.append(item)
        self.queued += 1
        self.lot.unpark_all()

    def take(self) -> list[Queued]:
        """Every waiting packet, port by port in order; every port free again."""
        ports, self.ports = self.ports, {}
        self.queued = 0
        self.sock_full = False
        items: list[Queued] = []
        for plane, q in ports.items():
            self._port_busy(plane, False)
            items.extend(q)
        return items
