"""A seeded simulated multi-plane fabric in virtual time, for protocol tests.

Hosts are endpoints (the real protocol core); between every pair of hosts there are
``paths_per_plane`` paths in each of ``planes`` planes. Each path is one bottleneck link per
direction ("fwd" from a lower host index to a higher one, "rev" back), shared by every host
pair, with a rate, a propagation delay, a drop-tail queue and ECN marking above a queue
threshold (marking happens at enqueue, as at every hop but the last). Links can drop,
duplicate, reorder (jitter), mark at random, and be killed silently or degraded at a given
time. A link may trim instead of drop (``trim_bytes``): a data packet of a trimmable class
(new data or a retransmission) that finds more than that queued is cut to its headers,
marked with a trimmed DSCP and sent ahead of the queue, and one of the no-trim class is
dropped there, as the lab's trimming ports do (labs/bpf/mrc_port.c). A host's NIC port
(its plane) can go down: its sends on that plane are refused at once (the endpoint's
``send_failed``, as ENETUNREACH does on Linux) and packets to it on that plane vanish.
Optionally every packet first crosses its host's NIC port on its plane (``uplink``): one
FIFO per (host, plane) shared by all paths of that plane, as in the lab, where the port's
queue holds most of a plane's delay; a competing flow can hold that queue at a standing
depth (``hold_queue``, a TCP flow filling the port's buffer). Everything random comes
from one seeded ``random.Random``.

No real time is read: the fabric's clock jumps from event to event.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv6Address

from mrc_transport.protocol import Config, Endpoint, Transmit
from mrc_transport.protocol import events as ev_mod
from mrc_transport.wire import frames
from srv6.path import SrPath

OVERHEAD = 84  # IPv6 + UDP + MRC data header bytes on the wire


@dataclass
class Link:
    """One direction of one path: a FIFO bottleneck."""

    rate_bps: float = 1e9
    delay: float = 20e-6
    queue_bytes: int = 100_000
    ecn_bytes: int = 10_000
    drop: float = 0.0
    dup: float = 0.0
    jitter: float = 0.0
    mark: float = 0.0
    dead: bool = False
    trim_bytes: int = 0
    """Trim a data packet that finds more than this queued (0: never trim)."""
    trim_dscp: int = frames.DSCP_TRIMMED
    """The DSCP a stub leaves with (DSCP_TRIMMED_LASTHOP for a receiver's last hop)."""
    busy_until: float = 0.0
    packets: int = 0
    data_packets: int = 0
    dropped: int = 0
    marked: int = 0
    dead_drops: int = 0
    dead_data: int = 0
    trimmed: int = 0
    trimmed_rtx: int = 0
    """Of ``trimmed``, packets of the retransmission class (DSCP_RTX)."""
    dropped_no_trim: int = 0
    """Of ``dropped``, packets of the no-trim class dropped at ``trim_bytes``."""

    def send(
        self, now: float, size: int, rng: random.Random, dscp: int | None = frames.DSCP_DATA
    ) -> list[tuple[float, bool, bool]]:
        """Arrival times, CE and whether trimmed, of the copies of one packet; [] if it
        is lost. ``dscp``: a data packet's class; None for any other packet."""
        self.packets += 1
        data = dscp is not None
        self.data_packets += data
        if self.dead:
            self.dead_drops += 1
            self.dead_data += data
            return []
        queued = max(0.0, self.busy_until - now) * self.rate_bps / 8
        if data and self.trim_bytes and queued + size > self.trim_bytes:
            if dscp not in frames.TRIMMABLE_DSCPS:
                self.dropped += 1
                self.dropped_no_trim += 1
                return []
            # the stub goes ahead of the queue (a strict-priority class), so its delay is
            # its own serialisation and the propagation only
            self.trimmed += 1
            self.trimmed_rtx += dscp == frames.DSCP_RTX
            return [(now + OVERHEAD * 8 / self.rate_bps + self.delay, False, True)]
        if queued + size > self.queue_bytes or (self.drop and rng.random() < self.drop):
            self.dropped += 1
            return []
        ce = queued > self.ecn_bytes or bool(self.mark and rng.random() < self.mark)
        self.marked += ce
        start = max(now, self.busy_until)
        self.busy_until = start + size * 8 / self.rate_bps
        copies = 2 if self.dup and rng.random() < self.dup else 1
        t = self.busy_until + self.delay
        return [(t + rng.random() * self.jitter, ce, False) for _ in range(copies)]


@dataclass
class Host:
    """One endpoint and what its application saw."""

    name: str
    index: int
    endpoint: Endpoint
    read: bool = True
    events: list[ev_mod.Event] = field(default_factory=list)
    messages: dict[tuple[int, int], bytes] = field(default_factory=dict)
    received_bytes: int = 0


class Fabric:
    """Planes x paths between hosts, driven in virtual time."""

    def __init__(
        self,
        seed: int,
        planes: int = 2,
        paths_per_plane: int = 4,
        link: Callable[[], Link] = Link,
        uplink: Callable[[], Link] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.planes, self.paths_per_plane = planes, paths_per_plane
        self.now = 0.0
        self.hosts: list[Host] = []
        self.links = {
            (p, k, d): link()
            for p in range(planes)
            for k in range(paths_per_plane)
            for d in ("fwd", "rev")
        }
        self._path_link: dict[SrPath, Link] = {}
        self._uplink = uplink
        self.uplinks: dict[tuple[int, int], Link] = {}
        """(host index, plane) -> that host's NIC port on that plane (with ``uplink``)."""
        self._addr_host: dict[bytes, Host] = {}
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.tamper: Callable[[Host, frames.Packet], list[frames.Packet]] | None = None
        self.sent_log: list[tuple[float, Transmit]] | None = None
        self.ports_down: set[tuple[int, int]] = set()
        """(host index, plane) of NIC ports that are down."""
        self.refused = 0
        """Sends refused by a port that is down."""
        self.port_drops = 0
        """Packets that arrived at a port that is down."""

    # -- topology -----------------------------------------------------------------------
    def add_host(self, name: str, cfg: Config) -> Host:
        """A host with an endpoint that accepts connections from any other host."""
        index = len(self.hosts)
        endpoint = Endpoint(cfg, random.Random(self.rng.getrandbits(64)), self._paths_back)
        host = Host(name, index, endpoint)
        self.hosts.append(host)
        for p in range(self.planes):
            self._addr_host[self.addr(index, p).packed] = host
        return host

    @staticmethod
    def addr(index: int, plane: int) -> IPv6Address:
        """Address of host ``index`` on plane ``plane``."""
        return IPv6Address(f"fd00:{plane}::{index + 1}")

    def paths(self, src: Host, dst: Host) -> list[SrPath]:
        """Every path from ``src`` to ``dst``."""
        out = []
        direction = "fwd" if src.index < dst.index else "rev"
        for p in range(self.planes):
            for k in range(self.paths_per_plane):
                s, d = self.addr(src.index, p), self.addr(dst.index, p)
                path = SrPath(
                    p, (f"t0-{src.name}", f"t1-p{p}-{k}", f"t0-{dst.name}"), s, d, d, (d,), f"p{p}"
                )
                self._path_link[path] = self.links[(p, k, direction)]
                out.append(path)
        return out

    def set_port(self, host: Host, plane: int, up: bool) -> None:
        """Bring a host's NIC port on ``plane`` down or back up."""
        if up:
            self.ports_down.discard((host.index, plane))
        else:
            self.ports_down.add((host.index, plane))

    def uplink_of(self, host: Host, plane: int) -> Link | None:
        """The host's NIC port on ``plane`` (None: the fabric has no uplinks)."""
        if self._uplink is None:
            return None
        key = (host.index, plane)
        if key not in self.uplinks:
            self.uplinks[key] = self._uplink()
        return self.uplinks[key]

    def hold_queue(
        self, host: Host, plane: int, depth: float, until: float, every: float = 50e-6
    ) -> None:
        """A competing flow keeps the host's port on ``plane`` at least ``depth`` seconds
        deep until ``until`` (it uses whatever the port's rate leaves)."""
        port = self.uplink_of(host, plane)
        assert port is not None, "hold_queue needs uplinks"

        def top_up() -> None:
            port.busy_until = max(port.busy_until, self.now + depth)
            if self.now + every < until:
                self.at(self.now + every, top_up)

        self.at(self.now, top_up)

    def link_of(self, path: SrPath) -> Link:
        """The link a path crosses."""
        return self._path_link[path]

    def _paths_back(self, ph: frames.PathHeader) -> list[SrPath]:
        src = self._addr_host.get(ph.src)
        dst = self._addr_host.get(ph.dst)
        if src is None or dst is None:
            return []
        return self.paths(dst, src)

    # -- events -------------------------------------------------------------------------
    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual time ``t``."""
        heapq.heappush(self._heap, (t, next(self._seq), fn))

    def _send(self, host: Host, tx: Transmit) -> None:
        if self.sent_log is not None:
            self.sent_log.append((self.now, tx))
        dst = self._addr_host[tx.path.dst.packed]
        plane = tx.path.plane
        if (host.index, plane) in self.ports_down:
            self.refused += 1
            host.endpoint.send_failed(tx, self.now)
            return
        size = len(tx.payload) + OVERHEAD
        is_data = isinstance(tx.header, frames.DataHeader)
        packet = frames.Packet(
            frames.PathHeader(tx.path.src.packed, tx.path.dst.packed, ev=tx.ev, dscp=tx.dscp),
            tx.header,
            bytes(tx.payload),
        )
        port = self.uplink_of(host, plane)
        if port is None:
            self._cross(tx.path, packet, dst, size, is_data, False)
            return
        for t, ce, cut in port.send(self.now, size, self.rng, tx.dscp if is_data else None):
            sent = _trimmed(packet, port.trim_dscp) if cut else packet
            self.at(t, functools.partial(self._cross, tx.path, sent, dst, size, is_data, ce))

    def _cross(
        self,
        path: SrPath,
        packet: frames.Packet,
        dst: Host,
        size: int,
        is_data: bool,
        ce_before: bool,
    ) -> None:
        """``packet`` enters ``path``'s link now; it was CE-marked before if ``ce_before``."""
        link = self._path_link[path]
        dscp = packet.path.dscp
        is_data = is_data and dscp not in frames.TRIM_REASONS
        for t, ce, cut in link.send(self.now, size, self.rng, dscp if is_data else None):
            ecn = frames.Ecn.CE if ce or ce_before else frames.Ecn.ECT0
            marked = dataclasses.replace(packet, path=dataclasses.replace(packet.path, ecn=ecn))
            if cut:
                marked = _trimmed(marked, link.trim_dscp)
            self.at(t, functools.partial(self._deliver, dst, marked, path.plane))

    def _deliver(self, host: Host, packet: frames.Packet, plane: int = 0) -> None:
        if (host.index, plane) in self.ports_down:
            self.port_drops += 1
            return
        packets = [packet] if self.tamper is None else self.tamper(host, packet)
        for p in packets:
            host.endpoint.receive(p, self.now)

    def _drain(self, host: Host) -> None:
        while host.read and (event := host.endpoint.next_event()) is not None:
            host.events.append(event)
            if isinstance(event, ev_mod.MessageReceived):
                host.messages[(event.conn, event.msn)] = bytes(event.data)
                host.received_bytes += len(event.data)

    def run(self, until: float, stop: Callable[[], bool] | None = None) -> bool:
        """Advance to ``until`` or until ``stop()``; True if stopped by ``stop``."""
        spins = 0
        while True:
            for host in self.hosts:
                for tx in host.endpoint.datagrams_to_send(self.now):
                    self._send(host, tx)
                self._drain(host)
            if stop is not None and stop():
                return True
            timers = [t for h in self.hosts if (t := h.endpoint.get_timer()) is not None]
            t = min([self._heap[0][0]] if self._heap else [], default=math.inf)
            t = max(min(t, min(timers, default=math.inf)), self.now)
            if t > until:
                self.now = until
                return False
            spins = spins + 1 if t == self.now else 0
            if spins > 100_000:
                raise RuntimeError(f"no progress at t={t}")
            self.now = t
            while self._heap and self._heap[0][0] <= t:
                heapq.heappop(self._heap)[2]()
            for host in self.hosts:
                timer = host.endpoint.get_timer()
                if timer is not None and timer <= t:
                    host.endpoint.handle_timer(t)


def _trimmed(packet: frames.Packet, dscp: int) -> frames.Packet:
    """``packet`` cut to its headers, its DSCP set to a trimmed class."""
    return frames.Packet(dataclasses.replace(packet.path, dscp=dscp), packet.header, b"")
