"""An endpoint: the connections of one host, demultiplexed by connection id.

Same sans-IO API as a connection (``receive``, ``datagrams_to_send``, ``get_timer``,
``handle_timer``, ``next_event``), so the IO layer drives one object per host.

A connection leaves ``connections`` (and the peer map) once it is CLOSED, its drain period
is over and the application has read its last event, so a long-running server holds only
the connections that are open or draining.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from mrc_transport.wire import frames
from mrc_transport.wire.records import RX_OTHER, DataField, RxRec
from srv6.path import SrPath

from . import events
from .config import Config
from .connection import Connection
from .counters import EndpointCounters
from .segments import Outgoing, expand_runs
from .transmit import Transmit

PathsFor = Callable[[frames.PathHeader], Sequence[SrPath]]
"""Given an arriving SETUP's path header (its source address), the paths back to that
peer; an empty sequence refuses the connection."""


class Endpoint:
    """The MRC connections of one host."""

    def __init__(self, cfg: Config, rng: random.Random, paths_for: PathsFor | None = None) -> None:
        self.cfg, self.rng, self.paths_for = cfg, rng, paths_for
        self.connections: dict[int, Connection] = {}
        self._by_peer: dict[int, Connection] = {}
        self.counters = EndpointCounters()
        self._next_reader = 0
        self._turn = 0
        """Which connection takes the first share of the next burst."""
        self.ports_busy: set[int] = set()
        """Planes whose local port queue is full (``port_busy``); every connection's EV set
        reads it, since the host's ports are shared."""

    def _new_id(self) -> int:
        while True:
            conn = self.rng.getrandbits(32)
            if conn and conn not in self.connections:
                return conn

    def _child_rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def connect(self, paths: Sequence[SrPath], now: float) -> Connection:
        """Open a connection over ``paths``; SETUP goes out with the next send."""
        return self._add(paths, now)

    def _add(
        self, paths: Sequence[SrPath], now: float, peer_setup: frames.SetupHeader | None = None
    ) -> Connection:
        """A new connection of this host (its id, random stream and ports), kept."""
        rng, conn_id = self._child_rng(), self._new_id()
        conn = Connection(
            self.cfg, paths, rng, conn_id, now, peer_setup=peer_setup, ports_busy=self.ports_busy
        )
        self.connections[conn.conn] = conn
        self.counters.connections += 1
        return conn

    def port_busy(self, plane: int, busy: bool) -> None:
        """The IO layer's word that the local port of ``plane`` has a full queue (True:
        it refused a packet with ENOBUFS) or drained (False). Every connection then
        sprays on the other planes while one is free, as a NIC serves each port's queue
        at that port's rate; the paper's EV SKIP on ECN echo does the same for a busy
        path further on."""
        if busy:
            self.ports_busy.add(plane)
        else:
            self.ports_busy.discard(plane)

    def receive(self, packet: frames.Packet, now: float) -> None:
        """Hand one packet to its connection; unknown connections are counted, dropped."""
        common = packet.header.common
        if common.dst_conn == 0 and isinstance(packet.header, frames.SetupHeader):
            self._on_setup(packet, packet.header, now)
            return
        conn = self._connection(common.dst_conn)
        if conn is not None:
            conn.receive(packet, now)

    def _connection(self, conn_id: int) -> Connection | None:
        """Our connection ``conn_id``; None, counted, if there is none."""
        conn = self.connections.get(conn_id)
        if conn is None:
            self.counters.unknown_connection += 1
        return conn

    def receive_records(
        self,
        recs: Sequence[RxRec],
        view: memoryview,
        now: float,
        start: int,
        stop: int,
    ) -> int:
        """``receive`` of records ``start`` to ``stop`` of a received burst, in order:
        data packets (a payload as a view of its slot in ``view``) and SACKs as their
        fields, each run of one connection's records handed to it whole
        (``Connection.receive_records``), without an object per packet; stops at the
        first record of another kind and returns its index (``stop`` if none), for the
        caller to decode. One compiled loop: a call per packet from the IO layer's
        Python, with its 12 arguments, cost more than the loop's work."""
        i = start
        while i < stop:
            rec = recs[i]
            if rec[DataField.KIND] == RX_OTHER:
                return i
            conn = self._connection(rec[DataField.DST_CONN])
            if conn is None:
                i += 1
                continue
            i = conn.receive_records(recs, view, i, stop, now)
        return stop

    def _on_setup(self, packet: frames.Packet, h: frames.SetupHeader, now: float) -> None:
        known = self._by_peer.get(h.common.src_conn)
        if known is not None:
            known.receive(packet, now)
            return
        paths = self.paths_for(packet.path) if self.paths_for is not None else ()
        if not paths or h.common.opcode is not frames.Opcode.SETUP:
            self.counters.setup_refused += 1
            return
        conn = self._add(paths, now, h)
        self._by_peer[h.common.src_conn] = conn

    def send_failed(self, tx: Transmit, now: float) -> None:
        """The local stack refused ``tx`` at once (ENETUNREACH, EHOSTUNREACH, ENETDOWN):
        its port is down. Its connection moves off that port and sends it again."""
        conn = self.connections.get(tx.header.common.src_conn)
        if conn is not None:
            conn.send_failed(tx, now)

    def port_state(self, port: str, up: bool, now: float) -> None:
        """The host announced that its interface ``port`` (``SrPath.port``) went down or
        came back: every connection with paths through it hears it at once."""
        for conn in list(self.connections.values()):
            for plane in {p.plane for p in conn.evs.paths if p.port == port}:
                conn.port_event(plane, up, now)

    def datagrams_to_send(self, now: float) -> list[Transmit]:
        """Every connection's packets."""
        return expand_runs(self.burst_to_send(now))

    def burst_to_send(self, now: float) -> list[Outgoing]:
        """Every connection's packets, new data as runs (Connection.burst_to_send), at most
        ``Config.max_burst`` data packets in all: the connections share one burst, as the
        QPs of a NIC share its ports, so N connections do not put N bursts at once into a
        port's queue (ours). Each takes its share in turn, the first place rotating from
        call to call; what one does not use goes to the next."""
        conns = list(self.connections.values())
        out: list[Outgoing] = []
        if not conns:
            return out
        first = self._turn % len(conns)
        self._turn += 1
        budget = self.cfg.max_burst
        for k, conn in enumerate(conns[first:] + conns[:first]):
            share = -(-budget // (len(conns) - k))  # ceil: the last ones take the rest
            budget -= conn.fill_burst(now, out, share)
        return out

    def trimmed_to_send(self, now: float) -> list[Outgoing]:
        """Only the resends of trimmed packets (``Connection.trimmed_waiting``), each
        connection's with its queued control packets: what the IO layer sends ahead of its
        pacing."""
        out: list[Outgoing] = []
        for conn in self.connections.values():
            if conn.trimmed_waiting():
                conn.fill_burst(now, out, self.cfg.max_burst, trimmed_only=True)
        return out

    def control_to_send(self, now: float | None = None) -> list[Transmit]:
        """Every connection's queued control packets (Connection.control_to_send)."""
        out: list[Transmit] = []
        for conn in self.connections.values():
            out.extend(conn.control_to_send(now))
        return out

    def get_timer(self) -> float | None:
        """Earliest timer of any connection."""
        first: float | None = None
        for conn in self.connections.values():
            t = conn.get_timer()
            if t is not None and (first is None or t < first):
                first = t
        return first

    def handle_timer(self, now: float) -> None:
        """Run every expired connection timer; forget connections whose drain ended."""
        for conn in list(self.connections.values()):
            t = conn.get_timer()
            if t is not None and t <= now:
                conn.handle_timer(now)
                self._forget_if_done(conn)

    def _forget_if_done(self, conn: Connection) -> None:
        """Drop a drained connection whose events were all read (they name it by id)."""
        if not conn.drained or conn.has_events:
            return
        if self.connections.pop(conn.conn, None) is None:
            return  # the owner removed it already
        if self._by_peer.get(conn.peer_conn) is conn:
            del self._by_peer[conn.peer_conn]
        self.counters.connections_removed += 1

    def next_event(self) -> events.Event | None:
        """The next event of any connection (connections take turns)."""
        conns = list(self.connections.values())
        for i in range(len(conns)):
            conn = conns[(self._next_reader + i) % len(conns)]
            event = conn.next_event()
            if event is not None:
                self._next_reader = (self._next_reader + i + 1) % len(conns)
                self._forget_if_done(conn)
                return event
        return None
