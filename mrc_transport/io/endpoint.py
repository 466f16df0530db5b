"""One trio MRC endpoint per process: sockets, the loop, timers and the protocol core.

Theory of operation
-------------------
The sans-IO core (mrc_transport/protocol) does the protocol; this package only moves
bytes and time, like aioquic's asyncio glue. Everything runs in one nursery that
``serve()`` opens (trio ``_dtls.py`` is the model):

- the main task loops: receive what is waiting (``Receiving``, io/receive.py) -> one
  pump -> again at once while there is more to do, else wait until the socket is
  readable, the core's next timer, the pacer, or ``kick()`` (the application queued data
  or closed), whichever comes first. It never spins. When datagrams come at a bulk
  rate it waits ``RX_COALESCE`` instead of waking at the next datagram (interrupt
  moderation, as a NIC does at high packet rates); with ``moderation="paced"`` an
  endpoint that sends no data does so at a paced rate too, since there each wake-up's
  fixed price is most of its CPU.
- the transmit task (``Transmitter.run``, io/transmit.py) only runs when the kernel
  pushed back (the raw socket's buffer or a port's queue is full): it waits and flushes
  the backlogs, each port's in order (io/backlog.py).
- the link task tells the core at once when one of this host's ports goes down or comes
  back (io/linkwatch.py).

One pump = ``handle_timer`` if due -> route events to connection handles -> one burst of
``burst_to_send`` (at most ``IO_MAX_BURST`` data packets per connection, new data as
``DataRun``s) -> ``Transmitter.transmit``, paced at the NIC rate (io/pacer.py).
Receiving comes first in every turn, so SACKs waiting in the socket are processed before
a timer can declare their packets lost, and each burst reads the clock anew, so a
packet's timestamp is within one burst of its real send time. Time is
``time.monotonic()`` (the lab's fault log uses the same clock), converted to trio's clock
for deadlines. The tuning constants and why each has its value: io/tuning.py.

Graceful shutdown: ``aclose(grace)`` closes every connection and waits for their ends
at most ``grace`` seconds, then cancels the nursery. Ctrl-C cancels it at once.
"""

from __future__ import annotations

import contextlib
import math
import random
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager

import trio

from mrc_transport.io import linkwatch
from mrc_transport.io.handle import ConnectionLost, ConnHandle
from mrc_transport.io.pacer import Pacer
from mrc_transport.io.receive import Receiving
from mrc_transport.io.sockets import Datagram, interface_mtus, open_rx, open_rx_encap, open_tx
from mrc_transport.io.transmit import ENCODINGS, Encoding, Transmitter, path_header
from mrc_transport.io.tuning import (
    DRAIN_BURSTS,
    MODERATIONS,
    RECV_BURST,
    RX_COALESCE,
    RX_PACED_QUIET,
    WAIT_FLOOR,
    Moderation,
    io_config,
)
from mrc_transport.protocol import Config, Endpoint, Transmit, events
from mrc_transport.protocol.endpoint import PathsFor
from mrc_transport.wire.frames import DATA_HEADER_LEN, IPV6_HEADER_LEN, MRC_UDP_PORT
from srv6.path import SrPath

SRH_ALLOWANCE = 8 + 16 * 8  # SRH of up to 8 segments (Config.mss docstring)
UDP_LEN = 8


def default_mss(encoding: Encoding, mtus: dict[str, int] | None = None) -> int:
    """Largest data payload that fits the smallest MTU of this namespace's interfaces."""
    mtus = interface_mtus() if mtus is None else mtus
    mtu = min(mtus.values(), default=1500)
    overhead = IPV6_HEADER_LEN + UDP_LEN + DATA_HEADER_LEN
    if encoding == "srh":
        overhead += SRH_ALLOWANCE
    elif encoding == "encap":
        overhead += IPV6_HEADER_LEN  # the inner header
    return max(256, mtu - overhead)


@contextlib.contextmanager
def in_netns(ns: str | None) -> Iterator[None]:
    """The body in network namespace ``ns`` (this thread only), or where it is for None."""
    if ns is None:
        yield
        return
    from labs.netns import entered

    with entered(ns):
        yield


def _open_links() -> socket.socket | None:
    """The link-state socket, or None where rtnetlink is not available (then a dead port
    is found by its first refused send)."""
    try:
        return linkwatch.open_link_socket()
    except OSError:
        return None


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
        netns: str | None = None,
        moderation: Moderation = "bulk",
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}")
        if moderation not in MODERATIONS:
            raise ValueError(
                f"moderation must be one of {', '.join(MODERATIONS)}, not {moderation!r}"
            )
        self.paced_moderation = moderation == "paced"
        """Whether the loop moderates paced rates too when it only receives (tuning.py)."""
        cfg = io_config(cfg)
        self.cfg, self.port, self.encoding, self.clock = cfg, port, encoding, clock
        self.netns = netns
        """The network namespace its sockets are opened in (None: this thread's): one
        process can serve the MRC ends of many lab hosts, since a socket stays in the
        namespace it was made in."""
        self.core = Endpoint(cfg, rng or random.Random(), paths_for)
        self.handles: dict[int, ConnHandle] = {}
        self.link_events = 0
        """Link up/down messages of this host's interfaces seen on rtnetlink."""
        self.on_event: Callable[[events.Event], None] | None = None
        """Called with every event of every connection (e.g. io/eventlog.EventLog.add)."""
        self.tx = Transmitter(cfg, encoding, port, self.core.port_busy, self._port_down, self.kick)
        with in_netns(netns):  # its receive slots fit the MTUs of its own ports
            self.rx = Receiving(
                self.core, port, clock, self._flush_control, decap=encoding == "encap"
            )
        self.pacer = Pacer(cfg.nic_rate_bps, cfg.mss)
        self._wait_scope = trio.CancelScope()
        self._kicked = False
        self._serve_scope: trio.CancelScope | None = None
        self._accept_send, self._accept_recv = trio.open_memory_channel[ConnHandle](math.inf)
        self._trio_offset = 0.0
        self._runs_seen, self._data_at = 0, -math.inf
        """``tx.data_runs`` when the loop last saw it change, and when (``_receive_only``)."""

    # -- lifecycle ------------------------------------------------------------------------
    async def serve(
        self, *, task_status: trio.TaskStatus[MrcEndpoint] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the sockets and run until cancelled (or ``aclose``)."""
        with in_netns(self.netns):  # no await inside: the thread leaves before trio runs on
            self.tx.sock = tx = open_tx()
            rx = open_rx_encap(self.port) if self.encoding == "encap" else open_rx(self.port)
            links = _open_links()
        self._trio_offset = trio.current_time() - self.clock()
        try:
            with trio.CancelScope() as self._serve_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._main_loop, rx)
                    nursery.start_soon(self.tx.run)
                    if links is not None:
                        nursery.start_soon(self._link_loop, links)
                    task_status.started(self)
        finally:
            tx.close()
            rx.close()
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

    # -- the loop -------------------------------------------------------------------------
    async def _main_loop(self, rx: socket.socket) -> None:
        receive_ready, full = self.rx.receive_ready, 0
        while True:
            got = receive_ready(rx)
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
            if self.rx.moderate(self.paced_moderation and self._receive_only()):
                until = min(self._wait_deadline(), trio.current_time() + RX_COALESCE)
                with trio.move_on_at(until) as self._wait_scope:
                    await trio.sleep_forever()  # a kick() still wakes it
                continue
            with trio.move_on_at(self._wait_deadline()) as self._wait_scope:
                await trio.lowlevel.wait_readable(rx)

    def _receive_only(self) -> bool:
        """Whether this endpoint sent no new data for ``RX_PACED_QUIET``: it only receives,
        so its wake-ups may be moderated at a paced rate (io/tuning.py)."""
        now = self.clock()
        if self.tx.data_runs != self._runs_seen:
            self._runs_seen, self._data_at = self.tx.data_runs, now
        return now - self._data_at > RX_PACED_QUIET

    def _flush_control(self) -> None:
        """Send the SACKs (and other control packets) the core owes now, in the middle
        of a receive burst (io/receive.py). No timers run here, so a sender still books
        every SACK waiting in its socket before an RTO can fire."""
        out = self.core.control_to_send(self.clock())
        if out:
            self.tx.transmit(out)

    def _wait_deadline(self) -> float:
        """Trio deadline of the next thing to do without a packet arriving."""
        t = self.core.get_timer()
        deadline = math.inf if t is None else t
        if self.pacer.pending and self.tx.can_send():
            deadline = min(deadline, self.pacer.next_at)
        if deadline == math.inf:
            return math.inf
        return max(deadline, self.clock() + WAIT_FLOOR) + self._trio_offset

    def pump(self, now: float) -> bool:
        """Timers, events, one paced burst; True if the core may have more to send now."""
        core, tx, pacer = self.core, self.tx, self.pacer
        t = core.get_timer()
        if t is not None and t <= now:
            core.handle_timer(now)
        self._dispatch()
        if not tx.can_send() or now < pacer.next_at:
            # the kernel pushed back on every port, or the pacer holds the next burst
            pacer.pending = True
            if tx.can_send():
                self._resend_trimmed(now)
            return False
        out = core.burst_to_send(now)
        pacer.pending = False
        if not out:
            return False
        sent = tx.sent
        self._paced(now, tx.transmit(out))
        pacer.pending = tx.sent - sent >= self.cfg.max_burst
        return pacer.pending and now >= pacer.next_at

    def _resend_trimmed(self, now: float) -> None:
        """Trimmed packets' resends go at once, ahead of the pacer: their bytes left the
        queue that trimmed them, and the receiver misses them now. Behind a large burst of
        new data the pacer held them for its whole length (ours; the burst's debt stays
        with the pacer)."""
        out = self.core.trimmed_to_send(now)
        if out:
            self._paced(now, self.tx.transmit(out))

    def _paced(self, now: float, nbytes: int) -> None:
        """A burst of ``nbytes`` left at ``now``: the pacer books it over the ports in use,
        less those the kernel pushed back on."""
        self.pacer.sent(now, nbytes, len(self.tx.planes), len(self.core.ports_busy))

    def _port_down(self, tx: Transmit) -> None:
        """The kernel refused a packet because our port is down: certain, so the core
        moves off it and resends now."""
        self.core.send_failed(tx, self.clock())
        self.kick()

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

    def counters(self) -> dict[str, object]:
        """Endpoint-level counters, for reports."""
        c = self.core.counters
        return {
            "datagrams_received": self.rx.received,
            "receive_bursts": self.rx.bursts,
            "packets_sent": self.tx.sent,
            "bad_packets": dict(self.rx.bad),
            "send_errors": dict(self.tx.send_errors),
            "backlog_drops": self.tx.backlog.drops,
            "link_events": self.link_events,
            "unknown_connection": c.unknown_connection,
            "setup_refused": c.setup_refused,
        }


@asynccontextmanager
async def open_endpoint(
    cfg: Config,
    *,
    paths_for: PathsFor | None = None,
    port: int = MRC_UDP_PORT,
    encoding: Encoding = "usid",
    rng: random.Random | None = None,
    netns: str | None = None,
    moderation: Moderation = "bulk",
) -> AsyncIterator[MrcEndpoint]:
    """An endpoint serving in a nursery of its own for the duration of the block, its
    sockets in namespace ``netns`` (None: this thread's)."""
    async with trio.open_nursery() as nursery:
        ep = MrcEndpoint(
            cfg,
            paths_for=paths_for,
            port=port,
            encoding=encoding,
            rng=rng,
            netns=netns,
            moderation=moderation,
        )
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
