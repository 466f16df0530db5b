"""One trio MRC endpoint per process: sockets, receive loop, timers and the protocol core.

Theory of operation
-------------------
The sans-IO core (mrc_transport/protocol) does the protocol; this module only moves
bytes and time, like aioquic's asyncio glue. Everything runs in one nursery that
``serve()`` opens (trio ``_dtls.py`` is the model):

- the main task loops: receive what is waiting (at most ``RECV_BURST`` datagrams,
  decoded by one C call per burst, data packets handed to the core as their fields, the
  rest decoded one by one with the untrusted decoder: a BadPacket is counted by reason
  and dropped) ->
  one pump -> again at once while there is more to do, else wait until the socket is
  readable, the core's next timer, the pacer, or ``kick()`` (the application queued data
  or closed), whichever comes first. It never spins. When datagrams come at a bulk
  rate it waits ``RX_COALESCE`` instead of waking at the next datagram (interrupt
  moderation, as a NIC does at high packet rates).
- the transmit task only runs when the kernel pushed back (the raw socket's buffer or a
  port's queue is full): it waits and flushes the backlogs, each port's in order.

One pump = ``handle_timer`` if due -> route events to connection handles -> one burst of
``burst_to_send`` (at most ``IO_MAX_BURST`` data packets per connection, new data as
``DataRun``s) -> encode into one reusable buffer (a run in one C call) -> ``send_raw6``.
Receiving comes first in every turn, so SACKs waiting in the socket are processed before
a timer can declare their packets lost, and each burst reads the clock anew, so a
packet's timestamp is within one burst of its real send time (encode + send of a 9 KB
packet through the lab costs 15-20 microseconds here, a burst of 64 about 1-1.3 ms).
Bursts are paced at the NIC rate (``Config.nic_rate_bps``), as a NIC would send them.
Time is ``time.monotonic()`` (the lab's fault log uses the same clock), converted to
trio's clock for deadlines.

Backpressure is not loss: a raw send into a full local port queue (tbf) fails with
ENOBUFS (IPV6_RECVERR is set, else the kernel drops it silently), and that packet and
every later one for the same port wait in that port's backlog and are retried after a
few packet times. The core hears the port is busy (``Endpoint.port_busy``) and sprays on
the other ports meanwhile, paced at their rate; only when every port is busy (or the
socket buffer is full) does it get no new burst. A port shared with other traffic thus
costs the connection that port's lost share, not the same share of every port.
ENETUNREACH (a port that is down) is told to the core (``send_failed``), which retires
that port's EVs and resends the packet on another plane.

Graceful shutdown: ``aclose(grace)`` closes every connection and waits for their ends
at most ``grace`` seconds, then cancels the nursery. Ctrl-C cancels it at once.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import itertools
import math
import random
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Literal

import trio

from mrc_transport import wire
from mrc_transport.io import batchio, linkwatch
from mrc_transport.io.sockets import Datagram, interface_mtus, open_rx, open_tx
from mrc_transport.protocol import Config, Connection, ConnState, Endpoint, Transmit, events
from mrc_transport.protocol.endpoint import PathsFor
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.segments import DataRun, Outgoing
from mrc_transport.wire import frames
from mrc_transport.wire.frames import (
    DATA_HEADER_LEN,
    DSCP_DATA,
    IPV6_HEADER_LEN,
    MRC_UDP_PORT,
    PathHeader,
)
from mrc_transport.wire.records import RxRec
from srv6.path import SrPath

Encoding = Literal["usid", "srh"]
Queued = tuple[bytes, Transmit]
"""A packet on its way out: its bytes (the first hop is its IPv6 destination) and what
it encodes."""
ENCODINGS: tuple[Encoding, ...] = ("usid", "srh")
RECV_BURST = 256  # datagrams per receive call
RX_SLOT_MIN = 1500 - IPV6_HEADER_LEN  # receive slot of a host whose MTUs we cannot read
DRAIN_BURSTS = 8  # receive calls that may run back to back before a pump (ours)
RX_FLUSH = 64  # received packets after which owed SACKs go out, mid-burst (ours). Each
# SACK costs the receiver ~50 us (its raw send carries it through the lab in the syscall);
# with RX_COALESCE's ~50-packet reads, 64 instead of 32 took its CPU per Gbit from
# 0.13-0.14 s to 0.10-0.13 s (3 interleaved pairs), while 64 packets are well under 1 ms
# of work, short of the peer's RACK and RTO windows.
# Receive-side interrupt moderation, as a NIC's (ethtool -C adaptive-rx, rx-usecs): once a
# wake-up served at least RX_COALESCE_PACKETS datagrams at RX_COALESCE_RATE or more (per
# second since the loop last went to wait), the endpoint waits RX_COALESCE before it reads
# again instead of waking at the next datagram, so each pass (a receive call, a pump, a
# SACK, trio's wake-up) serves several times more packets. Unshaped lab, 4 s transfers:
# the receiver's CPU per Gbit 0.21-0.28 s without, 0.13-0.14 with, goodput no lower. A
# SACK then waits up to RX_COALESCE. The rate keeps it to bulk transfers above ~1.5 Gbit/s
# of 9 KB packets (a sender's SACKs, one per read of a moderated receiver, stay far
# below): with the count alone, the failover demo's 400 Mbit/s (~5.5k packets/s, 16 of
# them after any 3 ms hiccup) was moderated now and then, and MRC took the plane it
# shares with the TCP flow from it (TCP 13-26 Mbit/s instead of 41-48, 4 of 7 runs). trio
# waits in whole milliseconds, so a shorter wait is not possible.
RX_COALESCE = 1e-3
RX_COALESCE_PACKETS = 16
RX_COALESCE_RATE = 20_000.0
IO_MAX_BURST = 64  # data packets per connection per pump (Config.max_burst; ours). What a
# pump costs besides its packets (a receive call, timers, events, a trio checkpoint, the
# burst's ACK_REQ SACK at both ends) was ~1/4 of a 32-packet burst's time in the unshaped
# lab (timed per loop section, 2026-12-03), so 64 took 13% less user CPU per packet at the
# sender and 15% less at the receiver (7 interleaved sets of 5 s transfers; 128 was worse
# than 64, and in an earlier state of the code 64 was no better than 32). A burst of 64
# 9 KB packets takes ~1-1.3 ms to build, encode and hand to the kernel here (15-20 us per
# packet), about the host delay ``IO_HOST_DELAY`` allows for
IO_HOST_DELAY = 1e-3  # Config.host_delay of a userspace endpoint (measured, see there)
# Data packets per SACK at least (htsim's 16 KB is four 4 KB packets; at a 9000-byte MTU
# it is two). Each SACK costs a userspace endpoint tens of microseconds on both sides:
# unshaped lab, 5 interleaved pairs of 5 s transfers, every 4 instead of every 2 packets
# gave 1.04-1.93x the goodput (median 1.33x). Gaps, CE marks, ACK_REQ and the ack delay
# still SACK at once.
IO_SACK_PACKETS = 4
IO_ACK_DELAY = 1e-3  # Config.ack_delay of a userspace endpoint (ours: trio's timers fire in
# whole ms, so 50 us meant a SACK at the next arrival, one per ~2 packets at 400 Mbit/s;
# shaped lab: one per ~2.8 with 1 ms, the sender's CPU 58% instead of 66%)
PACE_BURST = 4  # packets per port the pacer lets out back to back (ours)
TIMER_TICK = 1e-3  # trio waits in epoll_wait, whose timeout is whole milliseconds
BACKOFF_PACKETS = 4  # after ENOBUFS, retry once this many packets drained at the NIC rate
PORT_DOWN = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN})  # local refusals
MAX_BACKLOG = 65536  # packets queued behind a full socket buffer before we drop (ours)
TX_BURST = 64  # packets encoded into the burst buffer per send call (one sendmmsg chunk)
SRH_ALLOWANCE = 8 + 16 * 8  # SRH of up to 8 segments (Config.mss docstring)
UDP_LEN = 8
HEADER_CACHE_LIMIT = 1 << 16  # cached PathHeaders (path, EV, DSCP) before a fresh start


def io_config(cfg: Config) -> Config:
    """``cfg`` as an endpoint on real sockets needs it: at most ``IO_MAX_BURST`` packets
    per burst, unless set ``IO_HOST_DELAY`` of host delay, a SACK for at least every
    ``IO_SACK_PACKETS`` data packets, and at least ``IO_ACK_DELAY`` of ack delay (Config
    docstrings)."""
    changes: dict[str, float] = {}
    if cfg.max_burst > IO_MAX_BURST:
        changes["max_burst"] = IO_MAX_BURST
    if cfg.host_delay == 0:
        changes["host_delay"] = IO_HOST_DELAY
    if cfg.sack_every_bytes < IO_SACK_PACKETS * cfg.mss:
        changes["sack_every_bytes"] = IO_SACK_PACKETS * cfg.mss
    if cfg.ack_delay < IO_ACK_DELAY:
        changes["ack_delay"] = IO_ACK_DELAY
    return dataclasses.replace(cfg, **changes) if changes else cfg  # type: ignore[arg-type]


def default_mss(encoding: Encoding, mtus: dict[str, int] | None = None) -> int:
    """Largest data payload that fits the smallest MTU of this namespace's interfaces."""
    mtus = interface_mtus() if mtus is None else mtus
    mtu = min(mtus.values(), default=1500)
    overhead = IPV6_HEADER_LEN + UDP_LEN + DATA_HEADER_LEN
    if encoding == "srh":
        overhead += SRH_ALLOWANCE
    return max(256, mtu - overhead)


def rx_slot_size(mtus: dict[str, int] | None = None) -> int:
    """Receive slot per datagram: the largest UDP payload any interface here can carry
    (the kernel strips IPv6 and SRH); a larger one arrives cut and is dropped."""
    mtus = interface_mtus() if mtus is None else mtus
    return max(max(mtus.values(), default=0) - IPV6_HEADER_LEN, RX_SLOT_MIN)


def path_header(path: SrPath, ev: int, dscp: int, encoding: Encoding, dport: int) -> PathHeader:
    """The IPv6/SRH/UDP fields of a packet on ``path`` (ECT(0) so switches can mark CE)."""
    if encoding == "usid":
        return PathHeader(
            src=path.src.packed,
            dst=path.usid_dst.packed,
            final_dst=path.dst.packed,
            ev=ev,
            dscp=dscp,
            dport=dport,
        )
    segments = tuple(s.packed for s in path.segments)
    return PathHeader(
        src=path.src.packed, dst=segments[0], segments=segments, ev=ev, dscp=dscp, dport=dport
    )


def _open_links() -> socket.socket | None:
    """The link-state socket, or None where rtnetlink is not available (then a dead port
    is found by its first refused send)."""
    try:
        return linkwatch.open_link_socket()
    except OSError:
        return None


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


class MrcEndpoint:
    """The MRC endpoint of this process."""

    def __init__(
        self,
        cfg: Config,
        *,
        paths_for: PathsFor | None = None,
        port: int = MRC_UDP_PORT,
        encoding: Encoding = "usid",
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be usid or srh, not {encoding!r}")
        cfg = io_config(cfg)
        self.cfg, self.port, self.encoding, self.clock = cfg, port, encoding, clock
        self.core = Endpoint(cfg, rng or random.Random(), paths_for)
        self.handles: dict[int, ConnHandle] = {}
        self.bad: collections.Counter[str] = collections.Counter()
        """Datagrams dropped by the decoder, by BadPacket reason."""
        self.send_errors: collections.Counter[str] = collections.Counter()
        """Packets the kernel refused, by errno name (e.g. ENETUNREACH on a dead port)."""
        self.received = 0
        self.receive_bursts = 0
        self.sent = 0
        self.backlog_drops = 0
        self.link_events = 0
        """Link up/down messages of this host's interfaces seen on rtnetlink."""
        self.on_event: Callable[[events.Event], None] | None = None
        """Called with every event of every connection (e.g. io/eventlog.EventLog.add)."""
        self._headers: dict[tuple[int, int, int], tuple[SrPath, PathHeader]] = {}
        self._backlog: dict[int, collections.deque[Queued]] = {}
        """Per local port (plane): packets waiting for its full queue to drain."""
        self._queued = 0
        self._backlog_lot = trio.lowlevel.ParkingLot()
        self._sock_full = False
        self._wait_scope = trio.CancelScope()
        self._kicked = False
        self._want_send = False
        self._pace_at = -math.inf
        self._byte_time = 8 / cfg.nic_rate_bps
        self._plane_set: set[int] = set()
        self._serve_scope: trio.CancelScope | None = None
        self._accept_send, self._accept_recv = trio.open_memory_channel[ConnHandle](math.inf)
        self._tx: socket.socket | None = None
        self._rx: socket.socket | None = None
        self._rx_burst = batchio.burst_receiver(RECV_BURST, rx_slot_size())
        self._tx_burst: batchio.BurstEncoder | None = None  # made on the first burst
        self._trio_offset = 0.0
        self._rx_mark, self._rx_since = 0, clock()
        """``received`` when the loop last went to wait, and when (``_moderate``)."""

    # -- lifecycle ------------------------------------------------------------------------
    async def serve(
        self, *, task_status: trio.TaskStatus[MrcEndpoint] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the sockets and run until cancelled (or ``aclose``)."""
        self._tx, self._rx = open_tx(), open_rx(self.port)
        links = _open_links()
        self._trio_offset = trio.current_time() - self.clock()
        try:
            with trio.CancelScope() as self._serve_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._main_loop)
                    nursery.start_soon(self._tx_loop)
                    if links is not None:
                        nursery.start_soon(self._link_loop, links)
                    task_status.started(self)
        finally:
            self._tx.close()
            self._rx.close()
            if links is not None:
                links.close()

    async def _link_loop(self, sock: socket.socket) -> None:
        """Tell the core at once when one of this host's ports goes down or comes back
        (io/linkwatch.py: a NIC knows its carrier; a refused send is the fallback)."""
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                buf = sock.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # ENOBUFS: the kernel dropped link messages; keep listening
                continue
            for name, up in linkwatch.parse_link_events(buf):
                self.link_events += 1
                self.core.port_state(name, up, self.clock())
            self.kick()

    def stop(self) -> None:
        """Cancel everything now."""
        if self._serve_scope is not None:
            self._serve_scope.cancel()

    async def aclose(self, grace: float = 1.0) -> None:
        """Close every connection, wait for them at most ``grace`` seconds, stop."""
        for handle in list(self.handles.values()):
            handle.close()
        with trio.move_on_after(grace):
            for handle in list(self.handles.values()):
                await handle.wait_closed()
        self.stop()

    # -- application API ----------------------------------------------------------------
    def connect(self, paths: Sequence[SrPath]) -> ConnHandle:
        """Open a connection over ``paths``; await ``wait_established()`` on the result."""
        if not paths:
            raise ValueError("no paths to connect over")
        conn = self.core.connect(paths, self.clock())
        handle = self.handles[conn.conn] = ConnHandle(self, conn)
        self.kick()
        return handle

    async def accept(self) -> ConnHandle:
        """The next connection a peer opened."""
        return await self._accept_recv.receive()

    def kick(self) -> None:
        """Pump soon (the application queued data or closed)."""
        if self._kicked:  # not pumped since the last kick, which woke the loop already
            return
        self._kicked = True
        self._wait_scope.deadline = -math.inf  # ~2.5 us in trio: once per pump at most

    # -- the loops ------------------------------------------------------------------------
    async def _main_loop(self) -> None:
        assert self._rx is not None
        rx = self._rx
        full = 0
        while True:
            got = self._receive_ready(rx)
            # drain the socket before timers run, so no SACK that is already here can be
            # late for its packet's RTO or RACK deadline (each burst's own SACKs went out
            # at its end, hand_over); a flood gets a pump every DRAIN_BURSTS receive
            # bursts all the same
            full = full + 1 if got >= RECV_BURST else 0
            if 0 < full < DRAIN_BURSTS:
                await trio.lowlevel.checkpoint()
                continue
            full = 0
            busy = self.pump(self.clock()) or got >= RECV_BURST
            if busy or self._kicked:
                self._kicked = False
                await trio.lowlevel.checkpoint()
                continue
            if self._moderate():
                until = min(self._wait_deadline(), trio.current_time() + RX_COALESCE)
                with trio.move_on_at(until) as self._wait_scope:
                    await trio.sleep_forever()  # a kick() still wakes it
                continue
            with trio.move_on_at(self._wait_deadline()) as self._wait_scope:
                await trio.lowlevel.wait_readable(rx)

    def _moderate(self) -> bool:
        """Whether the loop, about to wait, waits RX_COALESCE rather than for the next
        datagram: the datagrams since it last waited came at a bulk rate. Starts the
        count over."""
        now = self.clock()
        served, elapsed = self.received - self._rx_mark, now - self._rx_since
        self._rx_mark, self._rx_since = self.received, now
        return served >= RX_COALESCE_PACKETS and served >= RX_COALESCE_RATE * elapsed

    def _receive_ready(self, rx: socket.socket) -> int:
        """Hand every datagram waiting (at most RECV_BURST) to the core; how many.

        Data packets and SACKs go to the core as the fields the burst decoder read out of
        them, a payload as a view of its slot (the core copies it into its message before
        the next burst reuses the slot); anything else is decoded one at a time
        (``_receive_one``)."""
        burst = self._rx_burst
        recs = burst.recv_records(rx)
        if not recs:
            return 0
        now = self.clock()
        self.received += len(recs)
        self.receive_bursts += 1
        hand_over(
            self.core, recs, burst.view, now, lambda i: self._receive_one(burst, i, now),
            self._flush_control,
        )  # fmt: skip
        return len(recs)

    def _receive_one(self, burst: batchio.BurstReceiver, i: int, now: float) -> None:
        """Decode datagram i of the burst and hand it to the core, or count why not."""
        if burst.meta(i)[1]:  # truncated: larger than any MTU here, not a packet of ours
            self.bad["oversize"] += 1
            return
        try:
            packet = decode_one(burst, i, self.port)
        except wire.BadPacket as exc:
            self.bad[exc.reason] += 1
            return
        self.core.receive(packet, now)

    def _flush_control(self) -> None:
        """Send the SACKs (and other control packets) the core owes now. A receive burst
        of 110-130 data packets took 9-14 ms of Python on a busy 2-core machine, longer
        than the peer's RTO and RACK windows: held until the pump after the burst, the
        SACKs made the peer resend packets that had arrived (docs/protocol.md, SACKs:
        false losses per run 0-151 before, at most 2 after). No timers run here, so a
        sender still books every SACK waiting in its socket before an RTO can fire."""
        out = self.core.control_to_send()
        if out:
            self._transmit(out)

    def _wait_deadline(self) -> float:
        """Trio deadline of the next thing to do without a packet arriving."""
        t = self.core.get_timer()
        deadline = math.inf if t is None else t
        if self._want_send and self._can_send():
            deadline = min(deadline, self._pace_at)
        if deadline == math.inf:
            return math.inf
        # a timer the core left in the past must not make us spin (ours: 50 us floor)
        return max(deadline, self.clock() + 50e-6) + self._trio_offset

    async def _tx_loop(self) -> None:
        assert self._tx is not None
        while True:
            while not self._queued:
                await self._backlog_lot.park()
            if self._sock_full:
                await trio.lowlevel.wait_writable(self._tx)
            else:
                # ENOBUFS: a port's queue is full; the socket is writable all along
                await trio.sleep(self._backoff())
            self._flush_backlog()

    def _backoff(self) -> float:
        """A few packet times at the NIC rate, within [50 us, 2 ms] (ours)."""
        return min(max(BACKOFF_PACKETS * self.cfg.mss * self._byte_time, 50e-6), 2e-3)

    # -- one pump -------------------------------------------------------------------------
    def pump(self, now: float) -> bool:
        """Timers, events, one paced burst; True if the core may have more to send now."""
        core = self.core
        t = core.get_timer()
        if t is not None and t <= now:
            core.handle_timer(now)
        self._dispatch()
        if not self._can_send() or now < self._pace_at:
            # the kernel pushed back on every port, or the pacer holds the next burst
            self._want_send = True
            return False
        out = core.burst_to_send(now)
        self._want_send = False
        if not out:
            return False
        sent = self.sent
        nbytes = self._transmit(out)
        # pacing (ours): the NIC rate over the ports that are not busy; a burst may run
        # ahead by a few packets per port or one timer tick, since a shorter wait is not
        # possible
        ports = len(self._plane_set)
        free = max(ports - len(self.core.ports_busy), 1)
        byte_time = self._byte_time * max(ports, 1) / free
        slack = max(PACE_BURST * ports * self.cfg.mss * self._byte_time, TIMER_TICK)
        self._pace_at = max(self._pace_at, now - slack) + nbytes * byte_time
        self._want_send = self.sent - sent >= self.cfg.max_burst
        return self._want_send and now >= self._pace_at

    def _dispatch(self) -> None:
        core = self.core
        while (event := core.next_event()) is not None:
            handle = self.handles.get(event.conn)
            if handle is None:
                conn = core.connections.get(event.conn)
                if conn is None:
                    continue
                handle = self.handles[event.conn] = ConnHandle(self, conn)
                if isinstance(event, events.ConnectionEstablished):
                    self._accept_send.send_nowait(handle)
            if isinstance(event, events.MessageReceived):
                handle.inbox.append((event.time, event.data))
            elif isinstance(event, events.MessageAcked):
                handle.acked_bytes += event.length
            elif isinstance(event, events.ConnectionEstablished):
                handle.established = True
            elif isinstance(event, events.ConnectionClosed):
                handle.closed_reason = event.reason
            if self.on_event is not None:
                self.on_event(event)
            if handle.on_event is not None:
                handle.on_event(event)
            handle._wake(event)
        if len(self.handles) > len(core.connections):
            # The core drains a closed connection (a late CLOSE is still answered), then
            # removes it; the application keeps its own reference to the handle.
            for conn_id in [c for c in self.handles if c not in core.connections]:
                del self.handles[conn_id]

    def _header(self, path: SrPath, ev: int, dscp: int) -> PathHeader:
        """The PathHeader of (path, EV, DSCP), cached: a connection uses few."""
        key = (id(path), ev, dscp)
        cached = self._headers.get(key)
        if cached is None or cached[0] is not path:
            ph = path_header(path, ev, dscp, self.encoding, self.port)
            if len(self._headers) >= HEADER_CACHE_LIMIT:
                # every connection brings its own EVs: a long-running server would grow
                # without bound; the live connections' entries come back at their next use
                self._headers.clear()
            cached = self._headers[key] = (path, ph)
            self._plane_set.add(path.plane)
        return cached[1]

    def _data_header(self, ev: Ev) -> PathHeader:
        """The PathHeader of a data packet on ``ev``."""
        return self._header(ev.path, ev.value, DSCP_DATA)

    def _transmit(self, out: Sequence[Outgoing]) -> int:
        """Encode and send one burst; returns its bytes on the wire.

        The packets are encoded back to back into one reusable buffer (the C codec writes
        them in place, a ``DataRun`` in one call) and sent from it, each to its own first
        hop (``send_raw6``), TX_BURST packets per call. Only the packets the kernel does
        not take at once become ``Queued`` items, copied out of the buffer, for ``_send``
        and the backlogs.
        """
        chunk: list[Outgoing] = []
        nbytes, count = 0, 0
        for item in out:
            # a run longer than the burst buffer (a TX_BURST below max_burst) goes as packets
            pieces = (
                item.transmits() if isinstance(item, DataRun) and len(item) > TX_BURST else [item]
            )
            for one in pieces:
                k = len(one) if isinstance(one, DataRun) else 1
                if count + k > TX_BURST:
                    nbytes += self._send_chunk(chunk)
                    chunk, count = [], 0
                chunk.append(one)
                count += k
        if chunk:
            nbytes += self._send_chunk(chunk)
        return nbytes

    def _send_chunk(self, chunk: list[Outgoing]) -> int:
        """Encode and send at most TX_BURST packets; their bytes on the wire."""
        enc = self._tx_burst
        if enc is None:
            enc = self._tx_burst = batchio.burst_encoder(TX_BURST)
        enc.clear()
        for item in chunk:
            if isinstance(item, DataRun):
                enc.add_run(item, self._data_header)
            else:
                enc.add(self._header(item.path, item.ev, item.dscp), item.header, item.payload)
        self.sent += len(enc)
        self._send_encoded(enc, chunk)
        return enc.nbytes

    def _send_encoded(self, enc: batchio.BurstEncoder, chunk: list[Outgoing]) -> None:
        """Send ``chunk`` (encoded in ``enc``) in order, straight from the buffer while no
        port has a backlog and the socket takes packets; the rest goes through ``_send``,
        which keeps each port's packets in order behind its backlog."""
        assert self._tx is not None
        i, n = 0, len(enc)
        while i < n and not self._backlog and not self._sock_full:
            try:
                k = enc.send(self._tx, i)
            except OSError as exc:
                self._refused((enc.packet(i), _nth(chunk, i)), exc)
                i += 1
                continue
            if k == 0:  # the socket buffer is full: every port waits until it is writable
                self._sock_full = True
            i += k
        if i < n:  # copies: the buffer is reused by the next chunk
            self._send([(enc.packet(j), _nth(chunk, j)) for j in range(i, n)])

    def _can_send(self) -> bool:
        """Whether a new burst can leave: the socket takes packets and some port that
        the connections use has no backlog."""
        if self._sock_full:
            return False
        return not self._backlog or any(p not in self._backlog for p in self._plane_set)

    def _send(self, items: list[Queued]) -> None:
        """Send in order; a packet whose port has a backlog joins it (order per port)."""
        assert self._tx is not None
        todo = [it for it in items if not self._hold(it)]
        while todo:
            buf = b"".join(it[0] for it in todo)
            offsets = list(itertools.accumulate((len(it[0]) for it in todo), initial=0))
            try:
                k = batchio.send_raw6(self._tx, buf, offsets)
            except OSError as exc:
                self._refused(todo[0], exc)
                todo = [it for it in todo[1:] if not self._hold(it)]
                continue
            if k == 0:  # the socket buffer is full: every port waits until it is writable
                self._sock_full = True
                todo = [it for it in todo if not self._hold(it)]
                assert not todo
                return
            todo = todo[k:]

    def _refused(self, item: Queued, exc: OSError) -> None:
        """The kernel refused ``item``'s packet (the first of a send call)."""
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        self.send_errors[name] += 1
        if exc.errno == errno.ENOBUFS:
            # a full local port queue is backpressure, not path loss: that port waits
            # and the other ports go on (IPV6_RECVERR reports it per packet)
            self._enqueue(item)
        elif exc.errno in PORT_DOWN:
            # our port is down: certain, so the core moves off it and resends now
            self.core.send_failed(item[1], self.clock())
            self.kick()

    def _hold(self, item: Queued) -> bool:
        """Queue ``item`` if its port has a backlog or the socket is full."""
        if self._sock_full or self._backlog.get(item[1].path.plane):
            self._enqueue(item)
            return True
        return False

    def _enqueue(self, item: Queued) -> None:
        # The Transmit travels with its bytes: a port that goes down while they wait must
        # still be reported to the core (send_failed), not found later as a loss.
        if self._queued >= MAX_BACKLOG:
            self.backlog_drops += 1
            return
        plane = item[1].path.plane
        q = self._backlog.get(plane)
        if q is None:
            q = self._backlog[plane] = collections.deque()
            self.core.port_busy(plane, True)
        q.append(item)
        self._queued += 1
        self._backlog_lot.unpark_all()

    def _flush_backlog(self) -> None:
        backlog, self._backlog = self._backlog, {}
        self._queued = 0
        self._sock_full = False
        items: list[Queued] = []
        for plane, q in backlog.items():
            self.core.port_busy(plane, False)
            items.extend(q)
        self._send(items)
        self.kick()  # a port is free again: the core may send

    def counters(self) -> dict[str, object]:
        """Endpoint-level counters, for reports."""
        c = self.core.counters
        return {
            "datagrams_received": self.received,
            "receive_bursts": self.receive_bursts,
            "packets_sent": self.sent,
            "bad_packets": dict(self.bad),
            "send_errors": dict(self.send_errors),
            "backlog_drops": self.backlog_drops,
            "link_events": self.link_events,
            "unknown_connection": c.unknown_connection,
            "setup_refused": c.setup_refused,
        }


def hand_over(
    core: Endpoint,
    recs: Sequence[RxRec],
    view: memoryview,
    now: float,
    other: Callable[[int], None],
    flush: Callable[[], None],
) -> None:
    """Give the core a received burst's records: data packets and SACKs as their fields
    (``Endpoint.receive_records``, a payload as a view of its slot in ``view``), any other
    record i to ``other(i)`` in its turn; ``flush()`` after each chunk and after the last.
    The chunks are even, RX_FLUSH to 2 x RX_FLUSH - 1 records each: a moderated read a
    little over RX_FLUSH (~70 packets at 5 Gbit/s) gets one SACK, not a second one for its
    last few packets, and a SACK costs the receiver ~50 us (ours)."""
    n = len(recs)
    size = -(-n // max(1, n // RX_FLUSH))
    i = 0
    while i < n:
        stop = min(n, i - i % size + size)
        i = core.receive_records(recs, view, now, i, stop)
        if i < stop:
            other(i)
            i += 1
        if i == stop:
            flush()


def decode_one(burst: batchio.BurstReceiver, i: int, dport: int) -> frames.Packet:
    """Datagram i of the last burst ``burst`` received, decoded with the untrusted decoder
    (raises BadPacket); what the burst decoder leaves to be decoded one at a time."""
    n, _, tclass, sport, flow, src, dst = burst.meta(i)
    off = i * burst.slot_size
    return wire.decode_datagram_untrusted(
        burst.view[off : off + n], src=src, dst=dst, sport=sport, dport=dport,
        tclass=tclass, flow_label=flow,
    )  # fmt: skip


def _nth(chunk: list[Outgoing], i: int) -> Transmit:
    """Packet i of a chunk, as a ``Transmit`` (for a refused or held packet: rare)."""
    for item in chunk:
        if isinstance(item, DataRun):
            if i < len(item):
                return item.transmit(i)
            i -= len(item)
        elif i == 0:
            return item
        else:
            i -= 1
    raise IndexError(i)


@asynccontextmanager
async def open_endpoint(
    cfg: Config,
    *,
    paths_for: PathsFor | None = None,
    port: int = MRC_UDP_PORT,
    encoding: Encoding = "usid",
    rng: random.Random | None = None,
) -> AsyncIterator[MrcEndpoint]:
    """An endpoint serving in a nursery of its own for the duration of the block."""
    async with trio.open_nursery() as nursery:
        ep = MrcEndpoint(cfg, paths_for=paths_for, port=port, encoding=encoding, rng=rng)
        await nursery.start(ep.serve)
        try:
            yield ep
        finally:
            ep.stop()


__all__ = [
    "ENCODINGS",
    "ConnHandle",
    "ConnectionLost",
    "Datagram",
    "Encoding",
    "MrcEndpoint",
    "default_mss",
    "open_endpoint",
    "path_header",
]
