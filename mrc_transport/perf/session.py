"""`mrc perf` sessions: iperf3's test over one or more MRC connections, verified end to end.

Theory of operation
-------------------
The client sends its parameters (P), the sender its data (D messages) and then its report
(E), the receiver its report and verdict (R): messages.py defines each. The receiver
hashes the body of every D it is delivered, in MSN order (``StreamDigest``).

The digest (the ``digest`` key) is a hash chain: xxh3-128 over the xxh3-128 of each D body
in order. The receiver hashes every byte it is delivered, so a changed, missing,
duplicated or reordered byte or message changes it (as a hash over the concatenation
would, and message boundaries count too). xxh3 rather than a cryptographic hash: the
digest catches delivery faults, not an adversary, and sha256 (~1 GB/s here) took ~19% of
the receiver's CPU at 1.8 Gbit/s; xxh3-128 runs at ~35 GB/s.

The client closes the connection after the last of these (CLOSE waits until everything
sent is acknowledged). The sender is the client, or the server with ``reverse``. Both
sides end knowing both hashes, so either can fail loudly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import trio
import xxhash

from mrc_transport.io.endpoint import ConnHandle
from mrc_transport.perf.interrupt import INTERRUPTED
from mrc_transport.perf.messages import (
    KIND_DATA,
    KIND_END,
    KIND_PARAMS,
    KIND_RESULT,
    ConnReport,
    CpuSeconds,
    EvReport,
    PerfError,
    PerfParams,
    PlaneReport,
    ReceiverReport,
    SenderReport,
)
from mrc_transport.protocol.ev import Ev, PlaneCounters, Role

POOL_SIZE = 8 << 20  # random bytes that data messages are cut from, at least (ours)
UNACKED_LIMIT = 4 << 20  # bytes a run queues in the core beyond what is acknowledged,
# shared by its -P connections (each at least two messages): bounds how long the data
# queued before -t takes to deliver (ours: ~160 ms at 200 Mbit/s)
DRAIN_ESTIMATE_S = 0.25  # seconds of acknowledgements before the drain is estimated (ours)
CONTROL_TIMEOUT = 30.0  # seconds to wait for a control message once data is done (ours)


@dataclass(slots=True)
class StreamStats:
    """Live numbers of one connection's test, read by the interval reporter."""

    handle: ConnHandle
    """The connection."""
    sending: bool
    """True on the data sender."""
    t0: float = 0.0
    """Monotonic time the data phase started."""
    t1: float = 0.0
    """Monotonic time it ended (0 while running)."""
    data_bytes: int = 0
    """Sender: data bytes queued. Receiver: data bytes delivered."""
    data_acked: int = 0
    """Sender: data bytes acknowledged, once the data phase ended."""
    acked_base: int = 0
    """Sender: the connection's acked bytes when the data phase started."""
    length: int = 1
    """Sender: message body size."""
    keep_records: bool = False
    """Receiver: keep a record per message delivered (--records); off, a long run's memory
    does not grow with the messages it receives."""
    records: list[tuple[float, int]] = field(default_factory=list)
    """Receiver, with ``keep_records``: (monotonic time, bytes) of every data message."""
    sender_report: SenderReport | None = None
    """The E message, ours or the peer's, once sent or received."""
    receiver_report: ReceiverReport | None = None
    """The R message, ours or the peer's, once sent or received."""
    error: str | None = None
    """Why this connection's test failed, if it did."""
    verified: bool | None = None
    """Both hashes and byte counts equal (None until known)."""
    cpu0: tuple[float, float] = (0.0, 0.0)
    """This process's (user, system) CPU seconds when the data phase started."""

    @property
    def progress_bytes(self) -> int:
        """What an interval line counts: acknowledged on the sender, delivered on the
        receiver (iperf3 counts written bytes; acknowledged ones say more)."""
        if not self.sending:
            return self.data_bytes
        if self.t1:
            return self.data_acked
        # acked bytes include each message's type byte (and maybe P): close enough for lines
        acked = (self.handle.acked_bytes - self.acked_base) * self.length // (self.length + 1)
        return max(0, min(acked, self.data_bytes))

    @property
    def own_report(self) -> SenderReport | ReceiverReport | None:
        """Our E or R message, once sent."""
        return self.sender_report if self.sending else self.receiver_report

    @property
    def peer_report(self) -> SenderReport | ReceiverReport | None:
        """The peer's E or R message, once received."""
        return self.receiver_report if self.sending else self.sender_report


def conn_report(handle: ConnHandle) -> ConnReport:
    """A connection's counters, per plane and per EV, for E/R messages and -J."""
    conn = handle.conn
    srtt = conn.sender.srtt
    return ConnReport(
        counters=asdict(conn.counters),
        planes=tuple(_plane_report(pc) for pc in conn.plane_counters().values()),
        evs=tuple(
            _ev_report(e) for e in conn.evs.by_value.values() if e.sent or e.role is not Role.BACKUP
        ),
        srtt_us=None if srtt is None else round(srtt * 1e6, 1),
    )


def _plane_report(pc: PlaneCounters) -> PlaneReport:
    return PlaneReport(
        plane=pc.plane,
        up=pc.up,
        active_evs=len(pc.evs),
        usable_evs=pc.usable,
        retired_evs=pc.retired,
        sent=pc.sent,
        acked=pc.acked,
        ecn=pc.ecn,
        lost=pc.lost,
        window=pc.window,
        marked=round(pc.marked, 3),
    )


def _ev_report(e: Ev) -> EvReport:
    return EvReport(
        ev=e.value,
        plane=e.plane,
        hops=tuple(e.path.hops),
        state=e.state.value,
        role=e.role.value,
        sent=e.sent,
        acked=e.acked,
        ecn=e.ecn,
        lost=e.lost,
        retired=e.retired,
        readmitted=e.readmitted,
    )


async def _receive_result(handle: ConnHandle) -> ReceiverReport:
    """The next message, which must be the R message."""
    with trio.move_on_after(CONTROL_TIMEOUT) as scope:
        _, msg = await handle.receive()
    if scope.cancelled_caught:
        raise PerfError(f"no R message within {CONTROL_TIMEOUT:.0f} s")
    if msg[:1] != KIND_RESULT:
        raise PerfError(f"expected a R message, got {bytes(msg[:1])!r}")
    return ReceiverReport.decode_untrusted(msg[1:])


class StreamDigest:
    """The digest of a stream of data messages: xxh3-128 over each body's xxh3-128, in
    order."""

    def __init__(self) -> None:
        self._chain = xxhash.xxh3_128()

    def add(self, body: bytes | bytearray | memoryview) -> None:
        """One message body, sent or delivered."""
        self._chain.update(xxhash.xxh3_128_digest(body))

    def add_digest(self, digest: bytes) -> None:
        """One message body by its xxh3-128 (``MessagePool.take``)."""
        self._chain.update(digest)

    def hexdigest(self) -> str:
        return self._chain.hexdigest()


_pools: dict[tuple[int, int], tuple[bytearray, dict[tuple[int, int], bytes]]] = {}
"""Message pools by (length, size), each with its bodies' digests: shared by the sending
connections of a process; at most ``POOL_CACHE`` kept (a long-running server sends with
whatever -l each client asks for)."""
POOL_CACHE = 4


class MessagePool:
    """Data messages cut from a pool of random bytes in turn, each already led by its kind
    byte, so ``D`` + body is a view of the pool rather than a copy (copying each 128 KB
    body behind the byte took ~6% of the sender's CPU at 2 Gbit/s).

    The pool is ``size`` bytes (at least one message) of slots of ``1 + length`` bytes, a
    kind byte and a random body each; a shorter last message is the start of a slot."""

    def __init__(self, length: int, size: int = POOL_SIZE) -> None:
        self.slot = length + 1
        shared = _pools.get((length, size))
        if shared is None:
            count = max(1, size // self.slot)
            pool = bytearray(os.urandom(count * self.slot))
            pool[:: self.slot] = KIND_DATA * count
            if len(_pools) >= POOL_CACHE:
                _pools.clear()  # the connections using them keep their own references
            shared = _pools[(length, size)] = (pool, {})
        # the digests: xxh3-128 of the body at (start, n); the bodies repeat as the pool
        # wraps, and hashing each again from memory took ~2% of the sender's CPU
        pool, self._digests = shared
        self.view = memoryview(pool)
        self.start = 0

    def take(self, n: int) -> tuple[memoryview, bytes]:
        """The next data message (``D`` and a body of n bytes, n at most the length) and
        its body's xxh3-128."""
        if self.start + self.slot > len(self.view):
            self.start = 0
        start = self.start
        self.start += self.slot
        message = self.view[start : start + 1 + n]
        digest = self._digests.get((start, n))
        if digest is None:
            digest = self._digests[(start, n)] = xxhash.xxh3_128_digest(message[1:])
        return message, digest


async def send_data(stats: StreamStats, params: PerfParams, clock: Callable[[], float]) -> None:
    """The sender's data phase, then E; returns when every data byte is acknowledged."""
    handle = stats.handle
    length = params.length
    pool = MessagePool(length)
    digest = StreamDigest()
    stats.t0 = t0 = clock()
    stats.cpu0 = cpu_seconds()
    deadline = t0 + params.duration
    stats.acked_base, stats.length = handle.acked_bytes, length
    limit = max(UNACKED_LIMIT // params.parallel, 2 * length)
    while True:
        now = clock()
        left = params.nbytes - stats.data_bytes if params.nbytes else length
        if left <= 0 or (not params.nbytes and now + _drain_time(stats, now) >= deadline):
            break
        n = min(length, left)
        if params.rate_bps:
            due = t0 + (stats.data_bytes + n) * 8 / params.rate_bps
            if due > now:
                await trio.sleep(due - now)
        message, body_digest = pool.take(n)
        digest.add_digest(body_digest)
        handle.send(message)
        stats.data_bytes += n
        if handle.unacked_bytes > limit:
            # refill in batches: one wake-up per half the limit acknowledged, not one per
            # message (as a socket's low-water mark does)
            await handle.wait_unacked_below(limit // 2)
    await handle.wait_unacked_below(0)
    stats.t1 = clock()
    stats.data_acked = stats.data_bytes
    report = SenderReport(
        stats.data_bytes, digest.hexdigest(), stats.t1 - stats.t0, cpu_since(stats.cpu0),
        conn_report(handle),
    )  # fmt: skip
    stats.sender_report = report
    handle.send(report.encode())


def _drain_time(stats: StreamStats, now: float) -> float:
    """Seconds the data queued but not yet acknowledged will take at the rate acknowledged
    so far: a -t test stops queueing that much before its end, so it ends at -t (as
    iperf3's does) rather than up to UNACKED_LIMIT later on a slow path. 0 until the rate
    has been seen for DRAIN_ESTIMATE_S (the first acknowledgements say little of it)."""
    elapsed, acked = now - stats.t0, stats.progress_bytes
    if acked <= 0 or elapsed < DRAIN_ESTIMATE_S:
        return 0.0
    return (stats.data_bytes - acked) * elapsed / acked


async def receive_data(stats: StreamStats, clock: Callable[[], float]) -> None:
    """The receiver's data phase: D messages until E, then R with the verdict."""
    handle = stats.handle
    stream = StreamDigest()
    stats.t0 = clock()
    stats.cpu0 = cpu_seconds()
    while True:
        t, msg = await handle.receive()
        kind = msg[:1]
        if kind == KIND_DATA:
            n = len(msg) - 1
            stream.add(memoryview(msg)[1:])
            stats.data_bytes += n
            if stats.keep_records:
                stats.records.append((t, n))
            handle.recycle(msg)
            continue
        if kind != KIND_END:
            raise PerfError(f"expected data or E, got a {bytes(kind)!r} message")
        break
    stats.t1 = clock()
    end = stats.sender_report = SenderReport.decode_untrusted(msg[1:])
    mine = stream.hexdigest()
    stats.verified = end.bytes == stats.data_bytes and end.digest == mine
    report = ReceiverReport(
        stats.data_bytes, mine, stats.t1 - stats.t0, stats.verified, cpu_since(stats.cpu0),
        conn_report(handle),
    )  # fmt: skip
    stats.receiver_report = report
    handle.send(report.encode())


async def _sender_finish(stats: StreamStats) -> None:
    result = stats.receiver_report = await _receive_result(stats.handle)
    sent = stats.sender_report
    assert sent is not None  # send_data made it
    stats.verified = result.verified and result.bytes == sent.bytes and result.digest == sent.digest


def _deny_planes(handle: ConnHandle, planes: tuple[int, ...], now: float) -> None:
    if not planes:
        return
    evs = handle.conn.evs
    for e in list(evs.by_value.values()):
        if e.plane not in planes:
            evs.deny(e.value, now)


async def client_stream(
    handle: ConnHandle, params: PerfParams, stats: StreamStats, clock: Callable[[], float]
) -> None:
    """One connection of a client run, from SETUP to CLOSE_ACK."""
    await handle.wait_established()
    handle.send(params.encode())
    if params.reverse:
        await receive_data(stats, clock)
    else:
        _deny_planes(handle, params.planes, clock())
        await send_data(stats, params, clock)
        await _sender_finish(stats)
    handle.close()
    await handle.wait_closed()


async def server_stream(
    handle: ConnHandle,
    clock: Callable[[], float],
    on_params: Callable[[PerfParams, StreamStats], None] | None = None,
    keep_records: bool = False,
) -> tuple[PerfParams, StreamStats]:
    """One connection on the server: read P, run the test, wait for the client's CLOSE;
    ``keep_records``: a record per message received (--records)."""
    _, first = await handle.receive()
    if first[:1] != KIND_PARAMS:
        raise PerfError("the first message is not P")
    params = PerfParams.decode_untrusted(first[1:])
    stats = StreamStats(handle, sending=params.reverse, keep_records=keep_records)
    if on_params is not None:
        on_params(params, stats)
    if params.reverse:
        _deny_planes(handle, params.planes, clock())
        await send_data(stats, params, clock)
        await _sender_finish(stats)
    else:
        await receive_data(stats, clock)
    with trio.move_on_after(CONTROL_TIMEOUT):
        await handle.wait_closed()
    return params, stats


def cut_short(stats: StreamStats, clock: Callable[[], float], why: str = INTERRUPTED) -> None:
    """A test stopped before its end (Ctrl-C here, or the peer went away): what this end
    knows so far becomes its report, so the summary shows the bytes that got through, as
    iperf3's does; never verified. A connection that never reached its data phase, or
    finished it, is left as it is."""
    if not stats.t0 or stats.t1 or stats.error:
        return
    stats.error, stats.verified = why, False
    seconds, cpu = clock() - stats.t0, cpu_since(stats.cpu0)
    report = conn_report(stats.handle)
    if stats.sending:
        stats.sender_report = SenderReport(stats.progress_bytes, "", seconds, cpu, report)
    else:
        stats.receiver_report = ReceiverReport(stats.data_bytes, "", seconds, False, cpu, report)


def cpu_seconds() -> tuple[float, float]:
    """(user, system) CPU seconds of this process."""
    t = os.times()
    return t.user, t.system


def cpu_since(cpu0: tuple[float, float]) -> CpuSeconds:
    """This process's CPU seconds since cpu0, for the E and R messages."""
    user, system = cpu_seconds()
    return CpuSeconds(round(user - cpu0[0], 4), round(system - cpu0[1], 4))


def monotonic() -> float:
    return time.monotonic()
