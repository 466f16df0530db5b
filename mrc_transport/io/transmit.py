"""The endpoint's sending side: a burst from the core encoded into one reusable buffer and
handed to the raw IPv6 socket, each packet to its own first hop.

The packets are encoded back to back (the C codec writes them in place, a ``DataRun`` in
one call) and sent from the buffer, ``TX_BURST`` per ``send_raw6`` call. Only packets the
kernel does not take at once are copied out, into the ``Backlog`` of their port; the
transmit task (``run``) offers them again once the socket is writable or the port had
time to drain. ENETUNREACH and its kin (our port is down) are told to the core at once
(``on_port_down``), which retires that port's EVs and resends the packet on another plane.
"""

from __future__ import annotations

import collections
import errno
import itertools
import socket
from collections.abc import Callable, Sequence
from typing import Literal

import trio

from mrc_transport.io import batchio
from mrc_transport.io.backlog import Backlog, Queued
from mrc_transport.io.tuning import HEADER_CACHE_LIMIT, TX_BURST
from mrc_transport.protocol import Config, Transmit
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.segments import DataRun, Outgoing
from mrc_transport.wire.frames import PathHeader, data_dscp
from srv6.path import SrPath

Encoding = Literal["usid", "srh", "encap"]
ENCODINGS: tuple[Encoding, ...] = ("usid", "srh", "encap")
PORT_DOWN = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN})
"""Errors by which the kernel says our own port is down: certain, not congestion."""


def path_header(path: SrPath, ev: int, dscp: int, encoding: Encoding, dport: int) -> PathHeader:
    """The IPv6/SRH/UDP fields of a packet on ``path`` (ECT(0) so switches can mark CE).
    uSID and encap both go to the uSID container; encap wraps an inner header to the
    final destination (the receiving NIC's address) around the UDP datagram."""
    if encoding != "srh":
        return PathHeader(
            src=path.src.packed,
            dst=path.usid_dst.packed,
            final_dst=path.dst.packed,
            ev=ev,
            dscp=dscp,
            dport=dport,
            encap=encoding == "encap",
        )
    segments = tuple(s.packed for s in path.segments)
    return PathHeader(
        src=path.src.packed, dst=segments[0], segments=segments, ev=ev, dscp=dscp, dport=dport
    )


class Transmitter:
    """Encodes and sends the core's bursts; holds what the kernel pushed back."""

    def __init__(
        self,
        cfg: Config,
        encoding: Encoding,
        port: int,
        port_busy: Callable[[int, bool], None],
        on_port_down: Callable[[Transmit], None],
        wake: Callable[[], None],
    ) -> None:
        self.encoding, self.port = encoding, port
        self.sock: socket.socket | None = None
        """The raw IPv6 socket, once the endpoint serves."""
        self.sent = 0
        """Packets encoded for sending."""
        self.data_runs = 0
        """Runs of new data encoded: whether the endpoint sends (``MrcEndpoint``'s
        moderation)."""
        self.send_errors: collections.Counter[str] = collections.Counter()
        """Packets the kernel refused, by errno name (e.g. ENETUNREACH on a dead port)."""
        self.planes: set[int] = set()
        """The ports (planes) the connections have used."""
        self.backlog = Backlog(cfg, port_busy)
        self._on_port_down, self._wake = on_port_down, wake
        self._headers: dict[tuple[int, int, int], tuple[SrPath, PathHeader]] = {}
        self.data_dscp = data_dscp(rtx=False, no_trim=cfg.no_trim)
        """The class of every ``DataRun`` of this endpoint (its connections share the
        Config): one template per EV in the C encoder."""
        self._burst: batchio.BurstEncoder | None = None  # made on the first burst

    def can_send(self) -> bool:
        """Whether a new burst can leave: the socket takes packets and some port that
        the connections use has no backlog."""
        return self.backlog.can_send(self.planes)

    # -- headers --------------------------------------------------------------------------
    def header(self, path: SrPath, ev: int, dscp: int) -> PathHeader:
        """The PathHeader of (path, EV, DSCP), cached: a connection uses few."""
        key = (id(path), ev, dscp)
        cached = self._headers.get(key)
        if cached is None or cached[0] is not path:
            ph = path_header(path, ev, dscp, self.encoding, self.port)
            if len(self._headers) >= HEADER_CACHE_LIMIT:
                # the live connections' entries come back at their next use
                self._headers.clear()
            cached = self._headers[key] = (path, ph)
            self.planes.add(path.plane)
        return cached[1]

    def data_header(self, ev: Ev) -> PathHeader:
        """The PathHeader of a new data packet on ``ev``."""
        return self.header(ev.path, ev.value, self.data_dscp)

    # -- a burst --------------------------------------------------------------------------
    def transmit(self, out: Sequence[Outgoing]) -> int:
        """Encode and send one burst, TX_BURST packets per call; its bytes on the wire."""
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
        enc = self._burst
        if enc is None:
            enc = self._burst = batchio.burst_encoder(TX_BURST)
        enc.clear()
        for item in chunk:
            if isinstance(item, DataRun):
                assert item.dscp == self.data_dscp
                enc.add_run(item, self.data_header)
                self.data_runs += 1
            else:
                enc.add(self.header(item.path, item.ev, item.dscp), item.header, item.payload)
        self.sent += len(enc)
        self._send_encoded(enc, chunk)
        return enc.nbytes

    def _send_encoded(self, enc: batchio.BurstEncoder, chunk: list[Outgoing]) -> None:
        """Send ``chunk`` (encoded in ``enc``) in order, straight from the buffer while no
        port has a backlog and the socket takes packets; the rest goes through ``_send``,
        which keeps each port's packets in order behind its backlog."""
        assert self.sock is not None
        backlog = self.backlog
        i, n = 0, len(enc)
        while i < n and not backlog.ports and not backlog.sock_full:
            try:
                k = enc.send(self.sock, i)
            except OSError as exc:
                self._refused((enc.packet(i), _nth(chunk, i)), exc)
                i += 1
                continue
            if k == 0:  # the socket buffer is full: every port waits until it is writable
                backlog.sock_full = True
            i += k
        if i < n:  # copies: the buffer is reused by the next chunk
            self._send([(enc.packet(j), _nth(chunk, j)) for j in range(i, n)])

    def _send(self, items: list[Queued]) -> None:
        """Send in order; a packet whose port has a backlog joins it (order per port)."""
        assert self.sock is not None
        hold = self.backlog.hold
        todo = [it for it in items if not hold(it)]
        while todo:
            buf = b"".join(it[0] for it in todo)
            offsets = list(itertools.accumulate((len(it[0]) for it in todo), initial=0))
            try:
                k = batchio.send_raw6(self.sock, buf, offsets)
            except OSError as exc:
                self._refused(todo[0], exc)
                todo = [it for it in todo[1:] if not hold(it)]
                continue
            if k == 0:  # the socket buffer is full: every port waits until it is writable
                self.backlog.sock_full = True
                todo = [it for it in todo if not hold(it)]
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
            self.backlog.add(item)
        elif exc.errno in PORT_DOWN:
            self._on_port_down(item[1])

    # -- the backlog ----------------------------------------------------------------------
    def flush_backlog(self) -> None:
        """Offer every waiting packet again; a port is free again, so the core may send."""
        self._send(self.backlog.take())
        self._wake()

    async def run(self) -> None:
        """The transmit task: runs only when the kernel pushed back, waits until the
        socket is writable (a full buffer) or a full port had time to drain (ENOBUFS:
        the socket is writable all along), then flushes the backlog."""
        assert self.sock is not None
        backlog = self.backlog
        while True:
            while not backlog.queued:
                await backlog.lot.park()
            if backlog.sock_full:
                await trio.lowlevel.wait_writable(self.sock)
            else:
                await trio.sleep(backlog.retry_after)
            self.flush_backlog()


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
