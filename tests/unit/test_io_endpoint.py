"""The trio endpoint without root: its pure helpers, one pump at a time with a fake
``send_batch``, and the whole loop on loopback UDP sockets under trio's MockClock.

A fake wire stands in for the raw socket: it accepts packets until its queue is full
(then ENOBUFS, with ``sendmmsg(2)`` semantics: a short count if some went out) and
refuses packets from a port that is down (ENETUNREACH)."""

from __future__ import annotations

import errno
import itertools
import math
import os
import random
import select
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol

import pytest
import trio
import trio.testing

from mrc_transport import wire
from mrc_transport.io import batchio, transmit, tuning
from mrc_transport.io import endpoint as ep_mod
from mrc_transport.io.endpoint import MrcEndpoint
from mrc_transport.io.sockets import Datagram, open_rx_encap
from mrc_transport.io.tuning import IO_ACK_DELAY, IO_HOST_DELAY, IO_MAX_BURST, io_config
from mrc_transport.protocol import Config, Connection, ConnState, Transmit, events
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Common, Flags, Opcode
from mrc_transport.wire.records import RxMeta
from tests.unit.helpers import paths

MSS = 1200
PEER = 0x5EE5


class FakeWire:
    """``batchio.send_batch`` (and ``send_raw6``) into port queues that take ``room``
    more packets in all, a set of full ports and a set of dead ports (by source address)."""

    def __init__(self) -> None:
        self.room = math.inf
        self.full: set[bytes] = set()
        self.dead: set[bytes] = set()
        self.sent: list[bytes] = []
        self.calls: list[int] = []
        """Packets offered per call."""
        self.data = 0
        """Data packets sent."""
        self._want = (math.inf, trio.Event())

    async def wait_data(self, n: int) -> None:
        """Until ``n`` data packets went out."""
        if self.data < n:
            self._want = (n, trio.Event())
            await self._want[1].wait()

    def send_batch(
        self, sock: object, buf: bytes, offsets: Sequence[int], addrs: Sequence[batchio.Destination]
    ) -> int:
        self.calls.append(len(offsets) - 1)
        n = 0
        for a, b in itertools.pairwise(offsets):
            pkt = buf[a:b]
            code = (
                errno.ENETUNREACH
                if pkt[8:24] in self.dead
                else (errno.ENOBUFS if self.room <= 0 or pkt[8:24] in self.full else 0)
            )
            if code:
                if n:
                    return n  # the error shows up on the next call
                raise OSError(code, "fake")
            self.room -= 1
            self.sent.append(pkt)
            n += 1
            if isinstance(wire.decode_untrusted(pkt).header, frames.DataHeader):
                self.data += 1
                if self.data >= self._want[0]:
                    self._want[1].set()
        return n

    def send_raw6(self, sock: object, buf: batchio.Buffer, offsets: Sequence[int]) -> int:
        """``batchio.send_raw6``: the same wire, each packet to its own header's
        destination (the port is its source address, as for ``send_batch``)."""
        base = offsets[0]
        packets = bytes(memoryview(buf)[base : offsets[-1]])
        return self.send_batch(sock, packets, [o - base for o in offsets], [])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeWire:
    w = FakeWire()
    monkeypatch.setattr(batchio, "send_batch", w.send_batch)
    monkeypatch.setattr(batchio, "send_raw6", w.send_raw6)
    return w


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    yield s
    s.close()


def config(rate: float = 1e12) -> Config:
    """No peer answers here, so the RTO is long enough never to fire in a test."""
    return Config(
        mss=MSS,
        ev_count=8,
        ev_backup=0,
        cc="fixed",
        fixed_window=64 << 20,
        nic_rate_bps=rate,
        min_rto=5.0,
        max_rto=10.0,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RefusalSpy:
    """The endpoint's core with its ``send_failed`` calls recorded, and passed on if
    ``forward``. A stand-in object, since a method of the compiled core cannot be replaced
    on the instance (csrc/build_core.py)."""

    def __init__(self, ep: MrcEndpoint, *, forward: bool) -> None:
        self._core, self._forward = ep.core, forward
        self.refused: list[Transmit] = []
        ep.core = self  # type: ignore[assignment]

    def __getattr__(self, name: str) -> object:
        return getattr(self._core, name)

    def send_failed(self, tx: Transmit, now: float) -> None:
        self.refused.append(tx)
        if self._forward:
            self._core.send_failed(tx, now)


def setup_ack(conn: Connection) -> frames.Packet:
    """The peer's SETUP_ACK of ``conn`` as it arrives (initial PSN 7, a 64 MiB window)."""
    back = conn.evs.paths[0]
    ph = frames.PathHeader(back.dst.packed, back.src.packed)
    common = Common(Opcode.SETUP_ACK, Flags.NONE, conn.conn, PEER)
    return frames.Packet(ph, frames.SetupHeader(common, 7, 64 << 20, MSS, 8, 0), b"")


Pumped = tuple[MrcEndpoint, Connection, Clock]
"""An endpoint that no loop serves, its one connection and its clock."""


class MakeEndpoint(Protocol):
    def __call__(self, rate: float = 1e12) -> Pumped: ...


@pytest.fixture
def make_endpoint(udp: socket.socket) -> MakeEndpoint:
    """``make_endpoint(rate=1e12)``: an endpoint sending on ``udp`` whose one connection
    is established (its SETUP_ACK fed to the core); the test pumps it by hand."""

    def make(rate: float = 1e12) -> Pumped:
        clock = Clock()
        ep = MrcEndpoint(config(rate), rng=random.Random(1), clock=clock)
        ep.tx.sock = udp
        conn = ep.connect(paths(2, 2)).conn
        ep.core.receive(setup_ack(conn), clock.now)
        assert conn.state is ConnState.ESTABLISHED
        return ep, conn, clock

    return make


@pytest.fixture
def endpoint(make_endpoint: MakeEndpoint) -> Pumped:
    """``make_endpoint()``: endpoint, connection and clock, at a rate never in the way."""
    return make_endpoint()


def data_psns(sent: Sequence[bytes]) -> list[int]:
    out = []
    for pkt in sent:
        h = wire.decode_untrusted(pkt).header
        if isinstance(h, frames.DataHeader):
            out.append(h.psn)
    return out


def ok_in_order(psns: list[int], conn: Connection) -> bool:
    first = conn.initial_psn
    return psns == list(range(first, first + len(psns)))


def in_order_per_port(sent: Sequence[bytes]) -> bool:
    """Every port's data packets left in PSN order (the backlogs keep order per port)."""
    by_port: dict[bytes, list[int]] = {}
    for pkt in sent:
        h = wire.decode_untrusted(pkt).header
        if isinstance(h, frames.DataHeader):
            by_port.setdefault(pkt[8:24], []).append(h.psn)
    return all(psns == sorted(psns) for psns in by_port.values())


# -- pure helpers ---------------------------------------------------------------------------
def test_io_config_caps_the_burst_and_sets_a_host_delay_and_sack_spacing() -> None:
    cfg = io_config(Config(mss=8916))
    assert (cfg.max_burst, cfg.host_delay) == (IO_MAX_BURST, IO_HOST_DELAY) == (64, 1e-3)
    assert cfg.ack_delay == IO_ACK_DELAY == 1e-3
    assert cfg.sack_every_bytes == 4 * 8916  # four jumbo packets, not htsim's two
    assert io_config(Config(mss=1000)).sack_every_bytes == Config().sack_every_bytes
    mine = Config(max_burst=4, host_delay=2e-3, mss=1000, ack_delay=2e-3)
    assert io_config(mine) is mine


def test_backoff_is_a_few_packet_times_within_bounds() -> None:
    assert MrcEndpoint(config(1e8)).tx.backlog.retry_after == pytest.approx(4 * MSS * 8 / 1e8)
    assert MrcEndpoint(config(1e12)).tx.backlog.retry_after == 50e-6
    assert MrcEndpoint(config(1e6)).tx.backlog.retry_after == 2e-3


# -- one pump at a time ---------------------------------------------------------------------
def test_a_pump_sends_at_most_a_burst_of_data_packets_stamped_with_its_clock(
    fake: FakeWire, endpoint: Pumped
) -> None:
    ep, conn, clock = endpoint
    ep.handles[conn.conn].send(bytes((3 * IO_MAX_BURST + 2) * MSS))
    bursts = []
    more = True
    while more:
        clock.now += 1e-6
        n = len(fake.sent)
        more = ep.pump(clock.now)
        burst = [wire.decode_untrusted(p).header for p in fake.sent[n:]]
        data = [h for h in burst if isinstance(h, frames.DataHeader)]
        assert {h.ts for h in data} <= {int(clock.now * 1e9)}  # a fresh clock per burst
        bursts.append(len(data))
    assert bursts == [IO_MAX_BURST, IO_MAX_BURST, IO_MAX_BURST, 2]
    assert ok_in_order(data_psns(fake.sent), conn)


def sent_bytes_by(times: list[tuple[float, int]], t: float) -> int:
    return sum(n for s, n in times if s <= t)


@pytest.mark.parametrize("rate", [1e8, 2e8])
def test_bursts_are_paced_at_the_nic_rate(
    fake: FakeWire, make_endpoint: MakeEndpoint, rate: float
) -> None:
    ep, conn, clock = make_endpoint(rate)
    ep.handles[conn.conn].send(bytes(2000 * MSS))
    t0, step, span = clock.now, 20e-6, 40e-3
    log: list[tuple[float, int]] = []
    while clock.now < t0 + span:
        n = len(fake.sent)
        ep.pump(clock.now)
        log.append((clock.now, sum(map(len, fake.sent[n:]))))
        if len(fake.sent) == n:  # paced: the loop would wait until the pacer's deadline
            assert ep._wait_deadline() <= max(ep.pacer.next_at, clock.now + 50e-6)
        clock.now += step
    burst = IO_MAX_BURST * (MSS + 100)
    slack = max(4 * 2 * MSS * 8 / rate, 1e-3)
    for t, _ in log:
        assert sent_bytes_by(log, t) <= rate / 8 * (t - t0 + slack) + burst
    total = sent_bytes_by(log, math.inf)
    assert total >= rate / 8 * span - burst


def test_a_trimmed_packets_resend_goes_ahead_of_the_pacer(
    fake: FakeWire, make_endpoint: MakeEndpoint
) -> None:
    """A NACK named a trimmed packet while the pacer holds the next burst: its resend goes
    at once, and only it (new data still waits for the pacer)."""
    ep, conn, clock = make_endpoint(1e8)
    ep.handles[conn.conn].send(bytes(4 * IO_MAX_BURST * MSS))
    ep.pump(clock.now)
    first = data_psns(fake.sent)
    assert len(first) == IO_MAX_BURST
    clock.now += 1e-6
    assert clock.now < ep.pacer.next_at  # the pacer holds the next burst
    trimmed = conn.sender.inflight.get(first[3])
    assert trimmed is not None
    conn.sender._requeue(trimmed, "trimmed")  # as Sender.on_nack does for a trim NACK
    n = len(fake.sent)
    assert ep.pump(clock.now) is False
    assert data_psns(fake.sent[n:]) == [first[3]]
    assert conn.sender.trimmed_waiting() == 0
    conn.sender._requeue(conn.sender.inflight.get(first[4]), "loss")  # type: ignore[arg-type]
    n = len(fake.sent)
    ep.pump(clock.now)
    assert data_psns(fake.sent[n:]) == []  # a loss found by RACK waits for the pacer


def test_enobufs_is_backpressure_not_loss(fake: FakeWire, endpoint: Pumped) -> None:
    ep, conn, clock = endpoint
    refused = RefusalSpy(ep, forward=False).refused
    ep.pump(clock.now)  # the SETUP
    fake.sent.clear()
    clock.now += 1e-6
    ep.handles[conn.conn].send(bytes((IO_MAX_BURST + 24) * MSS))
    fake.room = 5
    ep.pump(clock.now)
    assert len(fake.sent) == 5
    # each of the two ports refused one packet; the rest of the burst waits behind it
    assert ep.tx.send_errors == {"ENOBUFS": 2}
    assert ep.tx.backlog.queued == IO_MAX_BURST - 5
    assert ep.core.ports_busy == {0, 1}
    snd_nxt = conn.sender.snd_nxt
    for _ in range(3):  # no new burst while the kernel pushes back
        clock.now += 1e-3
        assert ep.pump(clock.now) is False
    assert conn.sender.snd_nxt == snd_nxt
    assert len(fake.sent) == 5
    fake.room = 3
    ep.tx.flush_backlog()  # the retry after the backoff: three more, then full again
    assert len(fake.sent) == 8
    assert ep.tx.backlog.queued == IO_MAX_BURST - 8
    fake.room = math.inf
    ep._kicked = False
    ep.tx.flush_backlog()
    assert not ep.tx.backlog.ports
    assert not ep.core.ports_busy
    assert ep._kicked  # the core may send again
    while ep.pump(clock.now) or conn.sender.pending:
        clock.now += 1e-3
    psns = data_psns(fake.sent)
    assert sorted(psns) == list(range(conn.initial_psn, conn.initial_psn + IO_MAX_BURST + 24))
    assert in_order_per_port(fake.sent)
    assert refused == []
    assert (conn.counters.lost, conn.counters.retransmits) == (0, 0)


def test_a_burst_larger_than_the_encoder_goes_out_in_chunks_in_order(
    fake: FakeWire, endpoint: Pumped, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bursts are encoded TX_BURST packets at a time; ENOBUFS in a later chunk still
    holds the rest of that port's packets behind its backlog, in order."""
    monkeypatch.setattr(transmit, "TX_BURST", 5)
    ep, conn, clock = endpoint
    ep.pump(clock.now)  # the SETUP
    fake.sent.clear()
    ep.handles[conn.conn].send(bytes(16 * MSS))
    fake.room = 7  # the second chunk's third packet is refused
    clock.now += 1e-6
    ep.pump(clock.now)
    assert len(fake.sent) == 7
    assert ep.tx.send_errors["ENOBUFS"] >= 1
    assert ep.tx.backlog.queued == 16 - 7
    fake.room = math.inf
    ep.tx.flush_backlog()
    psns = data_psns(fake.sent)
    assert sorted(psns) == list(range(conn.initial_psn, conn.initial_psn + 16))
    assert in_order_per_port(fake.sent)


def test_a_full_port_waits_while_the_other_ports_go_on(fake: FakeWire, endpoint: Pumped) -> None:
    """One port's queue is full (shared with other traffic): its packets wait in its own
    backlog, in order, and new bursts go to the other plane until it drains."""
    ep, conn, clock = endpoint
    ep.pump(clock.now)  # the SETUP
    fake.sent.clear()
    busy = conn.evs.paths[0]
    fake.full.add(busy.src.packed)
    ep.handles[conn.conn].send(bytes(5 * IO_MAX_BURST * MSS))
    for _ in range(3):
        clock.now += 1e-3
        assert ep.pump(clock.now) is True  # a free port: the core may send more now
    assert ep.core.ports_busy == {busy.plane}
    assert ep.tx.send_errors == {"ENOBUFS": 1}
    assert busy.src.packed not in {p[8:24] for p in fake.sent}
    held = [wire.decode_untrusted(q[0]).header for q in ep.tx.backlog.ports[busy.plane]]
    assert 0 < len(held) < IO_MAX_BURST  # only the first burst sprayed onto the busy port
    assert len(data_psns(fake.sent)) == 3 * IO_MAX_BURST - len(held)
    fake.full.clear()
    ep.tx.flush_backlog()
    assert not ep.tx.backlog.ports
    assert not ep.core.ports_busy
    while ep.pump(clock.now) or conn.sender.pending:
        clock.now += 1e-3
    psns = data_psns(fake.sent)
    assert sorted(psns) == list(range(conn.initial_psn, conn.initial_psn + 5 * IO_MAX_BURST))
    assert in_order_per_port(fake.sent)
    assert (conn.counters.lost, conn.counters.retransmits) == (0, 0)


def test_enetunreach_is_told_to_the_core_which_resends_on_another_plane(
    fake: FakeWire, endpoint: Pumped
) -> None:
    ep, conn, clock = endpoint
    refused = RefusalSpy(ep, forward=True).refused
    dead = conn.evs.paths[-1].src.packed
    plane = conn.evs.paths[-1].plane
    fake.dead.add(dead)
    ep.handles[conn.conn].send(bytes(16 * MSS))
    ep._kicked = False
    ep.pump(clock.now)
    assert refused
    assert {tx.path.plane for tx in refused} == {plane}
    assert ep.tx.send_errors == {"ENETUNREACH": len(refused)}
    assert ep._kicked
    assert conn.evs.usable_in(plane) == []
    # the rest of the burst went out; the refused ones go again, on the other plane (the
    # SETUP, too, if it went on that plane)
    refused_data = [tx for tx in refused if isinstance(tx.header, frames.DataHeader)]
    assert len(data_psns(fake.sent)) == 16 - len(refused_data)
    clock.now += 1e-6
    ep.pump(clock.now)
    assert sorted(data_psns(fake.sent)) == list(range(conn.initial_psn, conn.initial_psn + 16))
    assert all(p[8:24] != dead for p in fake.sent)
    assert conn.counters.lost == 0


def datagram(payload: bytes) -> Datagram:
    p = paths(1, 1)[0]
    return Datagram(payload, p.src.packed, 0x8001, p.dst.packed, 0, 1)


def test_bad_datagrams_are_counted_by_reason(
    udp: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = MrcEndpoint(config())
    p = paths(1, 1)[0]
    probe = frames.ProbeHeader(Common(Opcode.PROBE, Flags.NONE, 1234, 99), 1, 0, 0)
    good = wire.encode(frames.PathHeader(p.src.packed, p.dst.packed), probe)[48:]
    bad_version = bytes([good[0] ^ 0xFF]) + good[1:]
    bad_opcode = good[:1] + b"\xee" + good[2:]
    batch = [datagram(x) for x in (b"\x01\x02", good[:20], bad_version, bad_opcode, good)]
    ep.rx.burst = fake_rx = FakeRx()
    fake_rx.waiting = [(0.0, d) for d in batch]
    assert ep.rx.receive_ready(udp) == 5
    assert ep.rx.received == 5
    assert ep.rx.bad == {"truncated": 2, "bad_version": 1, "unknown_opcode": 1}
    assert ep.core.counters.unknown_connection == 1  # the good one reached the core


def _data_datagram(conn: Connection, psn: int, k: int, n: int) -> Datagram:
    """Data packet k of an n-packet message from the peer, PSN ``psn``."""
    back, p = conn.evs.paths[0], paths(1, 1)[0]
    op = Opcode.WRITE_FIRST if k == 0 else Opcode.WRITE_MIDDLE
    h = frames.DataHeader(Common(op, Flags.NONE, conn.conn, PEER), psn, 0, k * MSS, n * MSS, 0)
    pkt = wire.encode(frames.PathHeader(back.dst.packed, back.src.packed), h, bytes(MSS))
    return Datagram(pkt[48:], p.dst.packed, 0x8001, p.src.packed, 0, 1)


def test_a_long_receive_burst_sends_its_sacks_as_it_goes(
    fake: FakeWire, udp: socket.socket, endpoint: Pumped
) -> None:
    """SACKs owed in the middle of a receive burst go out every RX_FLUSH packets, not
    after the whole burst: 256 packets of Python outlasted the peer's RTO (ours)."""
    ep, conn, _ = endpoint
    n, peer_psn = 3 * tuning.RX_FLUSH, 7  # the SETUP_ACK's initial PSN
    burst = [(0.0, _data_datagram(conn, peer_psn + k, k, n + 1)) for k in range(n)]
    ep.rx.burst = fake_rx = FakeRx()
    fake_rx.waiting = burst
    assert ep.rx.receive_ready(udp) == n  # no pump has run
    sacks = [
        h
        for pkt in fake.sent
        if isinstance(h := wire.decode_untrusted(pkt).header, frames.SackHeader)
    ]
    assert sacks, "the burst's SACKs waited for the pump"
    # the last flush came before packet 3 x RX_FLUSH: everything up to it was acknowledged
    assert max(s.cum_psn for s in sacks) >= peer_psn + n - tuning.RX_FLUSH


@pytest.fixture
def loop_sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[socket.socket, socket.socket]]:
    """The endpoint's receive and transmit sockets for a loop test: loopback UDP, which
    the fakes stand in front of."""
    rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    rx.bind(("::1", 0))
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    monkeypatch.setattr(ep_mod, "open_tx", lambda: tx)
    monkeypatch.setattr(ep_mod, "open_rx", lambda port: rx)
    yield rx, tx
    rx.close()
    tx.close()


Establish = Callable[[MrcEndpoint], Awaitable[ep_mod.ConnHandle]]
"""The ``establish`` fixture: ``await establish(ep)``."""


@pytest.fixture
def establish() -> Establish:
    """``await establish(ep)``: a connection of ``ep``'s, whose loop is serving, once
    established (its SETUP_ACK fed to the core)."""

    async def connect(ep: MrcEndpoint) -> ep_mod.ConnHandle:
        handle = ep.connect(paths(2, 2))
        ep.core.receive(setup_ack(handle.conn), trio.current_time())
        ep.kick()
        await handle.wait_established()
        return handle

    return connect


# -- the whole loop, in virtual time ----------------------------------------------------------
async def test_the_loop_paces_bursts_and_rides_out_enobufs(
    fake: FakeWire,
    loop_sockets: tuple[socket.socket, socket.socket],
    autojump_clock: trio.testing.MockClock,
    establish: Establish,
) -> None:
    rate = 1e8
    ep = MrcEndpoint(config(rate), rng=random.Random(1), clock=trio.current_time)
    bursts: list[int] = []
    send_burst = ep.tx.transmit

    def spy(out: list[Transmit]) -> int:
        bursts.append(len(out))
        return send_burst(out)

    ep.tx.transmit = spy  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        await nursery.start(ep.serve)
        handle = await establish(ep)
        conn = handle.conn
        t0 = trio.current_time()
        n = 200
        fake.room = 40  # the port queue fills after 40 packets, then drains slowly

        async def drain_port() -> None:
            while True:
                await trio.sleep(1e-3)
                fake.room = max(fake.room, 0) + 4

        nursery.start_soon(drain_port)
        handle.send(bytes(n * MSS))
        with trio.fail_after(10):
            await fake.wait_data(n)
        elapsed = trio.current_time() - t0
        ep.stop()
        nursery.cancel_scope.cancel()
    psns = data_psns(fake.sent)
    assert sorted(psns) == list(range(conn.initial_psn, conn.initial_psn + n))
    assert in_order_per_port(fake.sent)
    assert ep.tx.send_errors["ENOBUFS"] > 0
    assert (conn.counters.lost, conn.counters.retransmits) == (0, 0)
    assert max(bursts) <= IO_MAX_BURST + 2  # bursts of data packets (+ control)
    # 4 packets per ms after the first 40: the port's drain rate, not the NIC's
    assert elapsed == pytest.approx((n - 40) / 4 * 1e-3, rel=0.1)


class FakeRx(batchio.PyBurstReceiver):
    """A ``BurstReceiver`` fed from a list of (time it arrives, datagram), not a socket."""

    def __init__(self, clock: Callable[[], float] = lambda: 0.0) -> None:
        super().__init__(tuning.RECV_BURST, 2048)
        self.clock = clock
        self.waiting: list[tuple[float, Datagram]] = []

    def recv(self, sock: object) -> list[RxMeta]:
        now = self.clock()
        ready = [d for t, d in self.waiting if t <= now][: self.max_pkts]
        self.waiting = [(t, d) for t, d in self.waiting if t > now or d not in ready]
        out: list[RxMeta] = []
        for i, d in enumerate(ready):
            off = i * self.slot_size
            self.view[off : off + len(d.payload)] = d.payload
            out.append((len(d.payload), 0, d.tclass, d.sport, d.flow_label, d.src, d.dst))
        return out


def _cumulative_sack(conn: int, cum_psn: int) -> frames.SackHeader:
    """The peer's SACK of everything before ``cum_psn``, with a 64 MiB window."""
    common = Common(Opcode.SACK, Flags.NONE, conn, PEER)
    return frames.SackHeader(common, cum_psn, cum_psn, 0, 0, 0, 0, 0, 64 << 20)


async def test_the_loop_reads_a_waiting_sack_before_the_rto_and_survives_bad_datagrams(
    fake: FakeWire,
    loop_sockets: tuple[socket.socket, socket.socket],
    autojump_clock: trio.testing.MockClock,
    establish: Establish,
) -> None:
    fake_rx = FakeRx(trio.current_time)
    cfg = Config(mss=MSS, ev_count=8, ev_backup=0, cc="fixed", nic_rate_bps=1e12)
    ep = MrcEndpoint(cfg, rng=random.Random(1), clock=trio.current_time)
    ep.rx.burst = fake_rx
    async with trio.open_nursery() as nursery:
        await nursery.start(ep.serve)
        handle = await establish(ep)
        conn = handle.conn
        back = conn.evs.paths[0]
        fake_rx.waiting = [(0.0, datagram(b"\x01")), (0.0, datagram(bytes(40)))]
        handle.send(bytes(MSS))
        await fake.wait_data(1)
        [h] = [
            h
            for p in fake.sent
            if isinstance(h := wire.decode_untrusted(p).header, frames.DataHeader)
        ]
        rto_at = conn.get_timer()
        assert rto_at is not None
        sack = _cumulative_sack(conn.conn, h.psn + 1)
        p = paths(1, 1)[0]
        payload = wire.encode(frames.PathHeader(back.dst.packed, back.src.packed), sack)[48:]
        # the SACK is in the socket exactly when the RTO is due: it must be read first
        fake_rx.waiting.append(
            (rto_at, Datagram(payload, p.dst.packed, 0x8001, p.src.packed, 0, 1))
        )
        with trio.fail_after(1):
            await handle.wait_unacked_below(1)
        ep.stop()
    assert conn.counters.rtos == 0
    assert conn.counters.retransmits == 0
    assert ep.rx.bad == {"truncated": 1, "bad_version": 1}
    assert ep.rx.received == 3


def test_a_refused_send_from_the_backlog_is_told_to_the_core(
    fake: FakeWire, endpoint: Pumped
) -> None:
    ep, conn, clock = endpoint
    ep.pump(clock.now)  # the SETUP
    fake.sent.clear()
    refused = RefusalSpy(ep, forward=False).refused
    ep.handles[conn.conn].send(bytes(16 * MSS))
    fake.room = 0
    ep.pump(clock.now)
    assert ep.tx.backlog.queued == 16
    fake.room = math.inf
    fake.dead.add(conn.evs.paths[-1].src.packed)  # the port goes down meanwhile
    ep.tx.flush_backlog()
    assert ep.tx.send_errors["ENETUNREACH"] > 0
    assert len(refused) == ep.tx.send_errors["ENETUNREACH"]


def test_the_header_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running server meets new EVs with every connection; the cache of their
    PathHeaders starts over at its limit instead of growing, and still answers right."""
    monkeypatch.setattr(transmit, "HEADER_CACHE_LIMIT", 8)
    ep = MrcEndpoint(config())
    path = paths(2, 2)[0]
    for ev in range(50):
        ph = ep.tx.header(path, ev, frames.DSCP_CONTROL)
        assert ph.ev == ev
        assert len(ep.tx._headers) <= 8
    again = (path, 49, frames.DSCP_CONTROL)
    assert ep.tx.header(*again) is ep.tx.header(*again)  # a hit returns the cached object


@pytest.mark.parametrize("end", ["acked", "closed"])
async def test_acks_wake_a_waiting_sender_only_once_its_limit_is_reached(end: str) -> None:
    """wait_unacked_below sleeps through acknowledgements that leave it above its limit
    (a task switch per message would cost more than the message), and wakes for the one
    that reaches it, or for the connection's end."""
    msg = 128 << 10
    handle = ep_mod.ConnHandle(None, None)  # type: ignore[arg-type]
    handle.queued_bytes = 10 * msg
    woken: list[int] = []
    park = handle._park

    async def counted_park() -> None:
        await park()
        woken.append(handle.unacked_bytes)

    handle._park = counted_park  # type: ignore[method-assign]
    result: list[str] = []

    async def sender() -> None:
        try:
            await handle.wait_unacked_below(4 * msg)
            result.append("below")
        except ep_mod.ConnectionLost as exc:
            result.append(str(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        for msn in range(6 if end == "acked" else 3):
            await trio.testing.wait_all_tasks_blocked()
            handle.acked_bytes += msg
            handle._wake(events.MessageAcked(0.0, 1, msn, msg))
        if end == "closed":
            await trio.testing.wait_all_tasks_blocked()
            handle.closed_reason = "rto failed"
            handle._wake(events.ConnectionClosed(0.0, 1, "rto failed"))
    assert woken == ([4 * msg] if end == "acked" else [7 * msg])
    assert result == (["below"] if end == "acked" else ["rto failed"])


class TimedRx(FakeRx):
    """A ``FakeRx`` that records when the loop reads."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self.reads: list[float] = []

    def recv(self, sock: object) -> list[RxMeta]:
        self.reads.append(self.clock())
        return super().recv(sock)


@pytest.mark.parametrize(
    ("moderation", "sending", "burst", "idle", "moderated"),
    [
        ("bulk", True, tuning.RX_COALESCE_PACKETS, 0.0, True),
        ("bulk", True, tuning.RX_COALESCE_PACKETS - 1, 0.0, False),  # too few: not bulk
        ("bulk", True, tuning.RX_COALESCE_PACKETS, 0.1, False),  # over 0.1 s waiting: too slow
        ("bulk", False, tuning.RX_COALESCE_PACKETS - 1, 0.0, False),  # the default: bulk only
        ("paced", False, tuning.RX_COALESCE_PACKETS - 1, 0.0, True),  # only receiving: enough
        ("paced", True, tuning.RX_COALESCE_PACKETS - 1, 0.0, False),  # a sender's reads: never
    ],
)
async def test_after_a_burst_of_data_at_a_bulk_rate_the_loop_reads_again_after_rx_coalesce(
    fake: FakeWire,
    loop_sockets: tuple[socket.socket, socket.socket],
    autojump_clock: trio.testing.MockClock,
    moderation: str,
    sending: bool,
    burst: int,
    idle: float,
    moderated: bool,
    establish: Establish,
) -> None:
    """Interrupt moderation: after a wake-up that served RX_COALESCE_PACKETS datagrams
    at RX_COALESCE_RATE or more, or with ``paced`` moderation RX_PACED_PACKETS at
    RX_PACED_RATE at an endpoint that sends no data, the loop reads again RX_COALESCE
    later and takes what came meanwhile; after fewer, or at a lower rate, it waits for the
    socket (which stays silent here) and its timers."""
    timed = TimedRx(trio.current_time)
    ep = MrcEndpoint(config(), rng=random.Random(1), clock=trio.current_time, moderation=moderation)
    ep.rx.burst = timed
    async with trio.open_nursery() as nursery:
        await nursery.start(ep.serve)
        handle = await establish(ep)
        conn = handle.conn
        await trio.sleep(idle)  # the loop waits meanwhile
        n = burst + 1
        t0 = trio.current_time()
        timed.waiting = [(t0, _data_datagram(conn, 7 + k, k, n)) for k in range(burst)]
        timed.waiting.append(
            (t0 + tuning.RX_COALESCE / 2, _data_datagram(conn, 7 + burst, burst, n))
        )
        if sending:
            ep.tx.data_runs += 1  # as if a run of new data had just left
        ep.kick()
        await trio.sleep(3 * tuning.RX_COALESCE)
        ep.stop()
        nursery.cancel_scope.cancel()
    later = [t - t0 for t in timed.reads if t > t0]  # the reads at t0 took the burst
    if moderated:
        assert later[0] == pytest.approx(tuning.RX_COALESCE)
        assert conn.counters.data_received == n
    else:
        assert not [t for t in later if t < 2 * tuning.RX_COALESCE]
        assert conn.counters.data_received == burst


@pytest.mark.parametrize(
    ("receive_only", "served", "elapsed", "moderated"),
    [
        (
            False,
            tuning.RX_COALESCE_PACKETS,
            tuning.RX_COALESCE_PACKETS / tuning.RX_COALESCE_RATE / 2,
            True,
        ),
        (False, tuning.RX_COALESCE_PACKETS - 1, 0.0, False),
        (False, 64, 2 * 64 / tuning.RX_COALESCE_RATE, False),  # half the bulk rate
        (True, tuning.RX_PACED_PACKETS, 1e-3, True),
        (True, tuning.RX_PACED_PACKETS - 1, 0.0, False),
        (True, 64, 2 * 64 / tuning.RX_PACED_RATE, False),  # half the paced rate
    ],
)
def test_moderation_needs_enough_datagrams_at_a_high_enough_rate(
    receive_only: bool, served: int, elapsed: float, moderated: bool
) -> None:
    """``Receiving.moderate``: the bulk thresholds for an endpoint that sends data, the
    paced ones for one that only receives, each counted since the loop last waited."""
    now = [0.0]
    ep = MrcEndpoint(config(), clock=lambda: now[0])
    ep.rx.moderate(receive_only)  # the loop waits: the count starts
    ep.rx.received += served
    now[0] += elapsed
    assert ep.rx.moderate(receive_only) is moderated


def test_an_unknown_moderation_is_refused() -> None:
    with pytest.raises(ValueError, match="moderation must be one of bulk, paced"):
        MrcEndpoint(config(), moderation="sometimes")


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
def test_bad_inner_packets_are_counted_by_reason() -> None:
    """The encap encoding's receive path, on loopback: an inner packet cut short or with a
    wrong checksum is counted by its reason and dropped; a good one reaches the core."""
    ep = MrcEndpoint(config(), encoding="encap")
    port = ep.port
    lo = socket.inet_pton(socket.AF_INET6, "::1")
    path = frames.PathHeader(src=lo, dst=lo, ev=0x8001_0001, dport=port, encap=True)
    good = wire.encode(path, frames.ProbeHeader(Common(Opcode.PROBE, Flags.NONE, 77, 9), 1, 0, 0))
    cut = bytearray(good[:84])  # four bytes of the inner UDP header
    cut[4:6] = (44).to_bytes(2, "big")
    wrong = good[:-1] + bytes([good[-1] ^ 1])
    rx = open_rx_encap(port)
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        for packet in (bytes(cut), wrong, good):
            raw.sendto(packet, ("::1", 0))
        while ep.core.counters.unknown_connection < 1:
            assert select.select([rx], [], [], 2.0)[0], "the good packet never arrived"
            ep.rx.receive_ready(rx)
    finally:
        rx.close()
        raw.close()
    assert ep.rx.bad["truncated"] == 1
    assert ep.rx.bad["bad_checksum"] == 1
