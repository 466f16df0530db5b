"""The ranks' connections, over MRC, MPTCP or TCP, for the ranks one process serves.

Theory of operation. A collective over n lab hosts needs a connection per (src, dst) rank
pair its schedule sends over (collective/algorithms.py ``pairs``): n for a ring, n(n-1)
for all-to-all. Each is a ``Link`` at both ends: the sender queues slices (``send`` never
blocks, so a rank that forwards what it receives never waits on its right neighbour while
its left one waits on it), the receiver takes them in order, each exactly the size the
schedule says. A process's transport holds the ends of its own ranks (``Transport.ranks``):
it connects the pairs they send over and accepts those they receive over, whichever
process the other end is in. Its part of a ``Mesh`` is up before it is handed over (every
process's, collective/groups.py: no rank starts before every rank can send), and each
connection announces which pair it is in its first bytes (``HELLO``, with the run's
cookie, one for every process), since a host accepts its peers in whatever order they
come.

- MRC: an endpoint per host, its sockets made in the host's namespace (io/endpoint.py
  ``netns``, as `mrc perf --pairs` does); a slice is one message.
- TCP and MPTCP (harness/baselines.py: TCP pinned to the ECMP path it hashed onto, the
  stand-in for single-path RoCE; MPTCP with a subflow per plane): each socket made in its
  host's namespace (labs/netns.py ``entered``) and handed to trio; a listener per host;
  a send task per link writes its queue to the socket.

A new mesh on the same transport makes new connections (new source ports: ECMP hashes
TCP's flows anew, ``--collide``).
"""

from __future__ import annotations

import contextlib
import math
import random
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Iterator, Sequence, Set
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import trio

from labs.topology import Topology, namespace
from mrc_transport.collective.errors import RunFailed
from mrc_transport.harness.baselines import BASELINES
from mrc_transport.harness.tcpflow import Stream
from mrc_transport.io.endpoint import ConnectionLost, ConnHandle, MrcEndpoint, open_endpoint
from mrc_transport.io.paths import LabPaths
from mrc_transport.wire.frames import MRC_UDP_PORT

TRANSPORTS = ("mrc", "mptcp", "tcp")
HELLO = struct.Struct("!4sIHH")
"""A connection's first bytes: magic, the run's cookie, the src and dst rank."""
MAGIC = b"MRCC"
MRC_PORT = MRC_UDP_PORT + 100
"""The endpoints' UDP port: in MRC's range (labs/trim.py), clear of `mrc perf`'s."""
TCP_PORT = 5301
CONNECT_TIMEOUT_S = 20.0
"""How long a mesh may take to come up (a host's first SETUP or SYN is lost on a cut
path and retried)."""
RECV_CHUNK = 256 * 1024
"""Bytes a TCP receive asks the kernel for at most (a socket's buffer is several MB)."""


class Link(Protocol):
    """One end of one (src, dst) connection."""

    def send(self, data: bytes) -> None:
        """Queue one slice (the sender's end); never blocks."""

    async def receive(self, nbytes: int) -> bytearray:
        """The next slice, which must be ``nbytes`` long (the receiver's end)."""

    def recycle(self, buf: bytearray) -> None:
        """A slice ``receive`` returned is no longer needed."""


@dataclass
class Mesh:
    """The links of one collective's pairs, both ends of each."""

    out: dict[tuple[int, int], Link] = field(default_factory=dict)
    """(src, dst) -> the src's end."""
    into: dict[tuple[int, int], Link] = field(default_factory=dict)
    """(src, dst) -> the dst's end."""


class Transport(Protocol):
    """Makes meshes between the ranks' hosts."""

    name: str

    async def mesh(self, pairs: Sequence[tuple[int, int]]) -> Mesh:
        """This process's ends of the pairs connected, each knowing its pair: the pairs
        its ranks send over connected, those they receive over accepted."""

    def close(self, mesh: Mesh) -> None:
        """Let a mesh's connections go (they close once their data is acknowledged)."""


def hello(cookie: int, src: int, dst: int) -> bytes:
    return HELLO.pack(MAGIC, cookie, src, dst)


def read_hello_untrusted(data: bytes, cookie: int, ranks: int) -> tuple[int, int]:
    """(src, dst) of a connection's first bytes; RunFailed for anything else (a stray
    peer, a run of another process)."""
    if len(data) != HELLO.size:
        raise RunFailed(f"a connection began with {len(data)} bytes, not a hello")
    magic, got, src, dst = HELLO.unpack(data)
    if magic != MAGIC or got != cookie or not (src < ranks and dst < ranks):
        raise RunFailed("a connection from another run (its hello does not match)")
    return src, dst


# -- MRC -------------------------------------------------------------------------------------


class MrcLink:
    """An MRC connection's end: a slice is a message."""

    def __init__(self, handle: ConnHandle) -> None:
        self.handle = handle

    def send(self, data: bytes) -> None:
        try:
            self.handle.send(data)
        except ConnectionLost as exc:
            raise RunFailed(f"an MRC connection was lost: {exc}") from None

    async def receive(self, nbytes: int) -> bytearray:
        try:
            _, msg = await self.handle.receive()
        except ConnectionLost as exc:
            raise RunFailed(f"an MRC connection was lost: {exc}") from None
        if len(msg) != nbytes:
            raise RunFailed(f"a message of {len(msg)} bytes where {nbytes} were due")
        return msg

    def recycle(self, buf: bytearray) -> None:
        self.handle.recycle(buf)


class MrcTransport:
    """An endpoint per host, each in its namespace."""

    name = "mrc"

    def __init__(
        self, lab: str, hosts: Sequence[str], eps: dict[str, MrcEndpoint], cookie: int
    ) -> None:
        self.lab, self.hosts, self.eps, self.cookie = lab, list(hosts), eps, cookie
        self.ranks = frozenset(r for r, h in enumerate(self.hosts) if h in eps)
        self.paths = {h: LabPaths(lab, host=h) for h in eps}

    async def mesh(self, pairs: Sequence[tuple[int, int]]) -> Mesh:
        mesh = Mesh()
        with trio.move_on_after(CONNECT_TIMEOUT_S) as scope:
            async with trio.open_nursery() as nursery:
                for dst, count in _incoming(pairs, self.ranks).items():
                    nursery.start_soon(self._accept, self.hosts[dst], count, mesh)
                for src, dst in _outgoing(pairs, self.ranks):
                    a, b = self.hosts[src], self.hosts[dst]
                    handle = self.eps[a].connect(self.paths[a].paths_to(b))
                    handle.send(hello(self.cookie, src, dst))
                    mesh.out[(src, dst)] = MrcLink(handle)
                for link in mesh.out.values():
                    assert isinstance(link, MrcLink)
                    await link.handle.wait_established()
        if scope.cancelled_caught:
            raise RunFailed(f"the MRC connections were not up within {CONNECT_TIMEOUT_S:g} s")
        return mesh

    async def _accept(self, host: str, count: int, mesh: Mesh) -> None:
        for _ in range(count):
            handle = await self.eps[host].accept()
            link = MrcLink(handle)
            first = await link.receive(HELLO.size)
            mesh.into[read_hello_untrusted(bytes(first), self.cookie, len(self.hosts))] = link

    def close(self, mesh: Mesh) -> None:
        for link in mesh.out.values():
            assert isinstance(link, MrcLink)
            link.handle.close()


def _incoming(pairs: Sequence[tuple[int, int]], ranks: Set[int]) -> dict[int, int]:
    """dst rank -> how many pairs connect to it, for the dst ranks in ``ranks``."""
    out: dict[int, int] = {}
    for _, dst in pairs:
        if dst in ranks:
            out[dst] = out.get(dst, 0) + 1
    return out


def _outgoing(pairs: Sequence[tuple[int, int]], ranks: Set[int]) -> list[tuple[int, int]]:
    """The pairs whose src rank is in ``ranks``."""
    return [(src, dst) for src, dst in pairs if src in ranks]


# -- TCP and MPTCP ---------------------------------------------------------------------------


class TcpLink:
    """A TCP or MPTCP socket's end; the sender's queue is written by a task of its own."""

    def __init__(self, sock: trio.socket.SocketType, label: str) -> None:
        self.sock, self.label = sock, label
        self._queue_in, self._queue_out = trio.open_memory_channel[bytes](math.inf)

    def send(self, data: bytes) -> None:
        self._queue_in.send_nowait(data)

    async def pump(self) -> None:
        """Write the queue to the socket until the link is closed, then close it."""
        try:
            async for data in self._queue_out:
                await _send_all(self.sock, data)
        except OSError as exc:
            raise RunFailed(f"a {self.label} send failed: {exc}") from None
        finally:
            self.sock.close()

    async def receive(self, nbytes: int) -> bytearray:
        buf = bytearray(nbytes)
        view, got = memoryview(buf), 0
        try:
            while got < nbytes:
                n = await self.sock.recv_into(view[got:], min(RECV_CHUNK, nbytes - got))
                if n == 0:
                    raise RunFailed(f"a {self.label} peer closed its connection mid-collective")
                got += n
        except OSError as exc:
            raise RunFailed(f"a {self.label} receive failed: {exc}") from None
        return buf

    def recycle(self, buf: bytearray) -> None:
        pass

    def close(self) -> None:
        self._queue_in.close()


class TcpTransport:
    """A listener per host; a socket per pair made in its sender's namespace."""

    def __init__(
        self, where: Placement, ranks: Set[int], stream: Stream, nursery: trio.Nursery,
        cookie: int,
    ) -> None:  # fmt: skip
        self.lab, self.topo, self.hosts, self.stream = where.lab, where.topo, where.hosts, stream
        self.ranks = frozenset(ranks)
        self.name = "mptcp" if stream.mptcp else "tcp"
        self.kind = BASELINES[self.name]
        self.nursery, self.cookie = nursery, cookie
        self.listeners: dict[int, trio.socket.SocketType] = {}

    def listen(self) -> None:
        """A listening socket in each of this process's ranks' hosts (once per run, before
        any process connects)."""
        for rank in sorted(self.ranks):
            with self._inside(rank):
                sock = self.stream.open()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("::", TCP_PORT))
            sock.listen(128)
            self.listeners[rank] = trio.socket.from_stdlib_socket(sock)

    @contextlib.contextmanager
    def _inside(self, rank: int) -> Iterator[None]:
        from labs.netns import entered

        with entered(namespace(self.lab, self.hosts[rank])):
            yield

    async def mesh(self, pairs: Sequence[tuple[int, int]]) -> Mesh:
        mesh = Mesh()
        with trio.move_on_after(CONNECT_TIMEOUT_S) as scope:
            async with trio.open_nursery() as nursery:
                for dst, count in _incoming(pairs, self.ranks).items():
                    nursery.start_soon(self._accept, dst, count, mesh)
                for src, dst in _outgoing(pairs, self.ranks):
                    nursery.start_soon(self._connect, src, dst, mesh)
        if scope.cancelled_caught:
            raise RunFailed(
                f"the {self.kind.label} connections were not up within {CONNECT_TIMEOUT_S:g} s"
            )
        for link in mesh.out.values():
            assert isinstance(link, TcpLink)
            self.nursery.start_soon(link.pump)
        return mesh

    async def _connect(self, src: int, dst: int, mesh: Mesh) -> None:
        with self._inside(src):
            raw = self.stream.open()
        source = self.kind.source(self.topo, self.hosts[src])
        if source is not None:
            raw.bind((source, 0))
        sock = trio.socket.from_stdlib_socket(raw)
        try:
            await sock.connect((self.kind.address(self.topo, self.hosts[dst]), TCP_PORT))
            await _send_all(sock, hello(self.cookie, src, dst))
        except OSError as exc:
            raise RunFailed(
                f"{self.hosts[src]} cannot connect to {self.hosts[dst]}: {exc}"
            ) from None
        mesh.out[(src, dst)] = TcpLink(sock, self.kind.label)

    async def _accept(self, dst: int, count: int, mesh: Mesh) -> None:
        for _ in range(count):
            sock, _ = await self.listeners[dst].accept()
            self.stream.pin(sock)  # its ACKs keep one path too (tcpflow's _drain)
            link = TcpLink(sock, self.kind.label)
            first = await link.receive(HELLO.size)
            mesh.into[read_hello_untrusted(bytes(first), self.cookie, len(self.hosts))] = link

    def close(self, mesh: Mesh) -> None:
        """The senders close their sockets once their queues are written (``pump``)."""
        for link in mesh.out.values():
            assert isinstance(link, TcpLink)
            link.close()
        for link in mesh.into.values():
            assert isinstance(link, TcpLink)
            link.sock.close()

    def close_listeners(self) -> None:
        for sock in self.listeners.values():
            sock.close()


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[await sock.send(view) :]


# -- opening a transport ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a collective runs: a running lab's hosts, one rank each, in ring order."""

    lab: str
    """The running lab."""
    topo: Topology
    """Its fabric."""
    hosts: tuple[str, ...]
    """The ranks' hosts: rank i is hosts[i]."""


@asynccontextmanager
async def open_transport(
    kind: str, where: Placement, seed: int | None = None, ranks: Set[int] | None = None,
    cookie: int | None = None,
) -> AsyncIterator[Transport]:  # fmt: skip
    """The transport ``kind`` at the hosts of ``ranks`` (default: every rank) for the
    duration of the block: MRC's endpoints opened (and closed after), or TCP's listeners
    listening. Every process of one run passes the same ``cookie``."""
    mine = frozenset(range(len(where.hosts)) if ranks is None else ranks)
    cookie = secrets.randbits(32) if cookie is None else cookie
    async with AsyncExitStack() as stack:
        if kind == "mrc":
            eps = await _open_endpoints(where, mine, seed, stack)
            yield MrcTransport(where.lab, where.hosts, eps, cookie)
            for ep in eps.values():
                await ep.aclose(0.5)
            return
        nursery = await stack.enter_async_context(trio.open_nursery())
        base = BASELINES[kind]
        stream = Stream(mptcp=base.mptcp, rehash=base.rehash)
        tcp = TcpTransport(where, mine, stream, nursery, cookie)
        try:
            tcp.listen()
            yield tcp
        finally:
            tcp.close_listeners()
            nursery.cancel_scope.cancel()


async def _open_endpoints(
    where: Placement, ranks: Set[int], seed: int | None, stack: AsyncExitStack
) -> dict[str, MrcEndpoint]:
    """An endpoint per rank's host, each in its namespace, with the lab's rates (perf's
    Config); rank i's random numbers seeded with seed + i."""
    from mrc_transport.io.endpoint import default_mss, in_netns
    from mrc_transport.perf.config import endpoint_config
    from mrc_transport.perf.options import PerfOptions

    with in_netns(namespace(where.lab, where.hosts[0])):
        opts = PerfOptions(lab=where.lab, port=MRC_PORT, mss=default_mss("usid"))
    eps: dict[str, MrcEndpoint] = {}
    for i, host in enumerate(where.hosts):
        if i not in ranks:
            continue
        paths = LabPaths(where.lab, host=host)
        rng = random.Random(None if seed is None else seed + i)
        ep = open_endpoint(
            endpoint_config(opts, paths), paths_for=paths.paths_for, port=MRC_PORT, rng=rng,
            netns=namespace(where.lab, host),
        )  # fmt: skip
        eps[host] = await stack.enter_async_context(ep)
    return eps
