"""The application's side of one connection (``ConnHandle``): send, receive, wait.

The endpoint's loop delivers each connection's events here (``MrcEndpoint._dispatch``);
a task waiting for one of them parks until the loop wakes it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from mrc_transport.protocol import Connection, ConnState, events

if TYPE_CHECKING:
    from mrc_transport.io.endpoint import MrcEndpoint


class ConnectionLost(Exception):
    """The connection ended before the operation could complete."""


class ConnHandle:
    """The application's side of one connection: send, receive, wait."""

    def __init__(self, endpoint: MrcEndpoint, conn: Connection) -> None:
        self.endpoint, self.conn = endpoint, conn
        self.inbox: collections.deque[tuple[float, bytearray]] = collections.deque()
        self.acked_bytes = 0
        self.queued_bytes = 0
        self.established = False
        self.closed_reason: str | None = None
        self.on_event: Callable[[events.Event], None] | None = None
        self._lot = trio.lowlevel.ParkingLot()
        self._ack_goal = -1
        """The largest ``limit`` a parked ``wait_unacked_below`` waits for, else -1: an
        acknowledgement that does not reach it wakes nobody (a task switch per message
        costs the endpoint's loop more than the message's bookkeeping)."""

    @property
    def unacked_bytes(self) -> int:
        return self.queued_bytes - self.acked_bytes

    def _wake(self, event: events.Event) -> None:
        if isinstance(event, events.MessageAcked) and self.unacked_bytes > self._ack_goal:
            return  # only wait_unacked_below waits for acknowledgements
        if self._lot:
            self._ack_goal = -1
            self._lot.unpark_all()

    async def _park(self) -> None:
        await self._lot.park()

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Queue one message (the buffer must not change until acked); returns its MSN."""
        if self.closed_reason is not None:
            raise ConnectionLost(self.closed_reason)
        msn = self.conn.send_message(data, self.endpoint.clock())
        self.queued_bytes += memoryview(data).nbytes
        self.endpoint.kick()
        return msn

    async def wait_established(self) -> None:
        while not self.established:
            if self.closed_reason is not None:
                raise ConnectionLost(self.closed_reason)
            await self._park()

    async def receive(self) -> tuple[float, bytearray]:
        """The next whole message and the monotonic time it completed."""
        while not self.inbox:
            if self.closed_reason is not None:
                raise ConnectionLost(self.closed_reason)
            await self._park()
        return self.inbox.popleft()

    def recycle(self, buf: bytearray) -> None:
        """Give back a message buffer ``receive`` returned, for a later message of its size
        (it is overwritten: do not use it afterwards). Optional; saves zero-filling a new
        buffer per message."""
        self.conn.recycle(buf)

    async def wait_unacked_below(self, limit: int) -> None:
        """Until at most ``limit`` queued bytes are unacknowledged."""
        while self.unacked_bytes > limit:
            if self.closed_reason is not None:
                raise ConnectionLost(self.closed_reason)
            self._ack_goal = max(self._ack_goal, limit)
            await self._park()

    def close(self) -> None:
        """Close once every message sent is acknowledged (CLOSE ends both directions)."""
        if self.conn.state in (ConnState.ESTABLISHED, ConnState.SETUP_SENT):
            self.conn.close(self.endpoint.clock())
            self.endpoint.kick()

    async def wait_closed(self) -> str:
        while self.closed_reason is None:
            await self._park()
        return self.closed_reason
