"""Two protocol cores pumped in memory, in explicit virtual time."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from mrc_transport.protocol import Config, Connection, ConnState, Transmit, events
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Opcode
from tests.sim.fabric import Fabric, Host
from tests.unit.conftest import MakeEstablished, MakePair, Pair
from tests.unit.helpers import PAIR_CFG as CFG
from tests.unit.helpers import payload


def kinds(host: Host) -> list[type[events.Event]]:
    return [type(e) for e in host.events]


def test_setup_both_sides_established(pair: Pair) -> None:
    fabric, a, b = pair
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    assert conn.state is ConnState.SETUP_SENT
    fabric.run(1e-3)
    [server] = b.endpoint.connections.values()
    assert conn.state is server.state is ConnState.ESTABLISHED
    assert conn.peer_conn == server.conn
    assert server.peer_conn == conn.conn
    assert conn.conn != 0
    assert server.conn != 0
    assert events.ConnectionEstablished in kinds(a)
    assert events.ConnectionEstablished in kinds(b)
    assert conn.sender.srtt is not None  # first RTT sample from SETUP / SETUP_ACK


@pytest.mark.parametrize("lost", [Opcode.SETUP, Opcode.SETUP_ACK])
def test_setup_retransmitted_with_backoff(lost: Opcode, pair: Pair) -> None:
    fabric, a, b = pair
    dropped: list[float] = []

    def tamper(host: Host, p: frames.Packet) -> list[frames.Packet]:
        if p.header.common.opcode is lost and len(dropped) < 2:
            dropped.append(fabric.now)
            return []
        return [p]

    fabric.tamper = tamper
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(0.1, lambda: conn.state is ConnState.ESTABLISHED)
    assert conn.state is ConnState.ESTABLISHED
    assert len(b.endpoint.connections) == 1  # a retransmitted SETUP reuses the connection
    assert dropped[1] - dropped[0] >= 0.99 * CFG.setup_timeout
    assert fabric.now >= CFG.setup_timeout * 3  # backoff: 10 ms, then 20 ms


def test_setup_gives_up(pair: Pair) -> None:
    fabric, a, b = pair
    fabric.tamper = lambda host, p: []
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(10.0)
    assert conn.state is ConnState.CLOSED
    closed = [e for e in a.events if isinstance(e, events.ConnectionClosed)]
    assert [e.reason for e in closed] == ["setup failed"]
    assert a.endpoint.get_timer() is None


SIZES = [0, 1, CFG.mss - 1, CFG.mss, CFG.mss + 1, 100_000, 3_000_000]


def transfer(fabric: Fabric, a: Host, b: Host, sizes: list[int], until: float = 2.0) -> None:
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    msgs = [payload(n, i) for i, n in enumerate(sizes)]
    msns = [conn.send_message(m, 0.0) for m in msgs]
    assert msns == list(range(len(sizes)))
    fabric.run(until, lambda: len(b.messages) == len(sizes))
    got = [e for e in b.events if isinstance(e, events.MessageReceived)]
    assert [e.msn for e in got] == msns  # delivered in MSN order
    assert [bytes(e.data) for e in got] == msgs  # intact
    fabric.run(fabric.now + 0.01)
    acked = {e.msn for e in a.events if isinstance(e, events.MessageAcked)}
    assert acked == set(msns)


def test_messages_of_several_sizes(pair: Pair) -> None:
    fabric, a, b = pair
    transfer(fabric, a, b, SIZES)
    [conn] = a.endpoint.connections.values()
    # no link dropped anything: at most a rare spurious retransmission from reordering
    assert conn.counters.retransmits <= conn.counters.data_sent // 200
    assert len(conn.sender.inflight) == 0
    assert conn.sender.fc_bytes == 0


def test_payload_is_a_slice_of_the_application_buffer(
    make_established: MakeEstablished,
) -> None:
    fabric, conn, _ = make_established(cfg=CFG)
    _, b = fabric.hosts
    fabric.sent_log = []
    big = bytearray(payload(50_000))
    conn.send_message(big, fabric.now)
    fabric.run(0.1, lambda: len(b.messages) == 1)
    data = [tx for _, tx in fabric.sent_log if isinstance(tx.header, frames.DataHeader)]
    assert data
    assert all(isinstance(tx.payload, memoryview) and tx.payload.obj is big for tx in data)


def test_out_of_order_arrival(make_pair: MakePair) -> None:
    fabric, a, b = make_pair(seed=3, jitter=200e-6)
    transfer(fabric, a, b, [200_000, 5, 70_000])
    [server] = b.endpoint.connections.values()
    assert server.receiver is not None
    assert server.counters.sacks_sent > 0


def test_loss_and_selective_retransmission_on_another_ev(make_pair: MakePair) -> None:
    fabric, a, b = make_pair(seed=4)
    fabric.sent_log = []
    rng = random.Random(9)

    def tamper(host: Host, p: frames.Packet) -> list[frames.Packet]:
        h = p.header
        if isinstance(h, frames.DataHeader) and not h.common.flags & frames.Flags.RTX:
            return [] if rng.random() < 0.05 else [p]
        return [p]

    fabric.tamper = tamper
    transfer(fabric, a, b, [400_000, 1000])
    [conn] = a.endpoint.connections.values()
    assert conn.counters.retransmits > 0
    first_ev: dict[int, int] = {}
    rtx_pairs = []
    for _, tx in fabric.sent_log:
        h = tx.header
        if isinstance(h, frames.DataHeader):
            if h.common.flags & frames.Flags.RTX:
                rtx_pairs.append((first_ev[h.psn], tx.ev))
            else:
                first_ev[h.psn] = tx.ev
    assert rtx_pairs
    assert all(old != new for old, new in rtx_pairs)
    assert any(isinstance(e, events.Retransmit) for e in a.events)


def test_clean_close_after_all_data(pair: Pair) -> None:
    fabric, a, b = pair
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    msg = payload(300_000)
    conn.send_message(msg, 0.0)
    conn.close(0.0)  # closes only once the message is acknowledged
    fabric.run(1.0, lambda: conn.state is ConnState.CLOSED)
    assert conn.state is ConnState.CLOSED
    assert list(b.messages.values()) == [msg]
    [server] = b.endpoint.connections.values()
    assert server.state is ConnState.CLOSED
    reasons = [e.reason for h in (a, b) for e in h.events if isinstance(e, events.ConnectionClosed)]
    assert reasons == ["closed", "peer closed"]
    with pytest.raises(RuntimeError):
        conn.send_message(b"late", fabric.now)


def test_slow_receiver_is_never_overrun(make_pair: MakePair) -> None:
    cfg = dataclasses.replace(CFG, rcvbuf=200_000)
    fabric, a, b = make_pair(cfg=cfg)
    b.read = False
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    msgs = [payload(50_000, i) for i in range(20)]
    for m in msgs:
        conn.send_message(m, 0.0)
    fabric.run(0.05)
    [server] = b.endpoint.connections.values()
    assert server.receiver is not None
    held = server.receiver.held
    assert 0 < held <= cfg.rcvbuf + 50_000  # at most the window plus a message in flight
    assert server.counters.messages_received < 20
    sent_before = conn.counters.bytes_sent
    fabric.run(0.1)
    assert conn.counters.bytes_sent - sent_before < 3 * cfg.mss  # only window probes
    b.read = True
    fabric.run(1.0, lambda: len(b.messages) == 20)
    assert [b.messages[(server.conn, i)] for i in range(20)] == msgs
    assert conn.counters.probes_sent > 0


def test_peer_vanishing_ends_in_rto_failure_with_backoff(pair: Pair) -> None:
    fabric, a, b = pair
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(1e-3)  # a whole millisecond: the RTOs' gaps below compare exactly
    for link in fabric.links.values():
        link.dead = True
    conn.send_message(payload(20_000), fabric.now)
    fabric.run(60.0, lambda: conn.state is ConnState.CLOSED)
    rtos = [e for e in a.events if isinstance(e, events.RtoFired)]
    assert len(rtos) == CFG.max_rto_count + 1
    gaps = [t1.time - t0.time for t0, t1 in itertools.pairwise(rtos)]
    # OCP's retries: the first rto_linear at one timeout, then doubling
    linear = gaps[: CFG.rto_linear]
    assert linear == pytest.approx([linear[0]] * len(linear))
    assert gaps[CFG.rto_linear] == pytest.approx(2 * linear[0])
    assert all(g1 >= g0 - 1e-9 for g0, g1 in itertools.pairwise(gaps))
    assert max(e.rto for e in rtos) == CFG.max_rto
    closed = [e for e in a.events if isinstance(e, events.ConnectionClosed)]
    assert [e.reason for e in closed] == ["rto failed"]


def test_counters_for_a_live_view(pair: Pair) -> None:
    fabric, a, b = pair
    transfer(fabric, a, b, [500_000])
    [conn] = a.endpoint.connections.values()
    planes = conn.plane_counters()
    assert set(planes) == {0, 1}
    assert sum(p.sent for p in planes.values()) == conn.counters.data_sent
    assert all(p.up and p.usable > 0 for p in planes.values())
    assert conn.counters.messages_acked == 1
    assert a.endpoint.counters.connections == 1
    assert b.endpoint.counters.connections == 1


def first_data(
    make_established: MakeEstablished, n: int, cfg: Config = CFG
) -> tuple[Connection, Connection, float, list[Transmit]]:
    """A fresh connection's client, server, the time, and the Transmits of its first n
    data packets (not delivered)."""
    fabric, client, server = make_established(cfg=cfg)
    now = fabric.now
    client.send_message(payload(n * cfg.mss), now)
    data = [tx for tx in client.datagrams_to_send(now) if isinstance(tx.header, frames.DataHeader)]
    assert len(data) == n
    return client, server, now, data


def sacks_over_a_gap(
    make_established: MakeEstablished,
) -> tuple[Connection, frames.PathHeader, float, list[frames.SackHeader]]:
    """Five data packets of a fresh connection reach the server in the order 1 2 3 4 0."""
    client, server, now, data = first_data(make_established, 5)
    path = frames.PathHeader(b"\0" * 16, b"\0" * 16, ev=data[0].ev)
    sacks = []
    for i in (1, 2, 3, 4, 0):
        server.receive(frames.Packet(path, data[i].header, bytes(data[i].payload)), now)
        server.handle_timer(now + CFG.ack_delay)  # a delayed SACK, if one is pending
        sacks += [
            t.header
            for t in server.datagrams_to_send(now)
            if isinstance(t.header, frames.SackHeader)
        ]
    return client, path, now, sacks


def test_ooo_count_means_what_the_docs_say(make_established: MakeEstablished) -> None:
    """ooo_count: packets accepted above cum_psn since it last advanced; the sender ignores
    it (docs/protocol.md, Behaviour: PSNs, SACKs and loss recovery). With the application
    reading, no window penalty."""
    client, path, now, sacks = sacks_over_a_gap(make_established)
    assert [s.ooo_count for s in sacks] == [1, 2, 3, 4, 0]  # 0: cum_psn passed all five
    assert all(s.rwnd_penalty == 0 for s in sacks)
    again, _, _, again_sacks = sacks_over_a_gap(make_established)  # the same seeded run
    assert again_sacks == sacks
    penalised = dataclasses.replace(sacks[-1], ooo_count=0xFFFF)
    client.receive(frames.Packet(path, sacks[-1], b""), now)
    again.receive(frames.Packet(path, penalised, b""), now)
    assert client.counters.sacks_received == 1
    assert (again.cc.window, again.sender.peer_rwnd, again.sender.snd_una, again.counters) == (
        client.cc.window,
        client.sender.peer_rwnd,
        client.sender.snd_una,
        client.counters,
    )


@pytest.mark.parametrize("ce_at", [None, 3])
def test_sacks_of_one_receive_burst_leave_as_one(
    ce_at: int | None, make_established: MakeEstablished
) -> None:
    """A receive burst of 8 packets (out of order: 1 2 .. 7 0), a SACK due after each,
    read before anything is sent: only the newest SACK leaves, plus the one echoing ECN,
    which names an EV no other SACK does."""
    client, server, now, data = first_data(
        make_established, 8, dataclasses.replace(CFG, sack_every_bytes=CFG.mss)
    )
    for i in (1, 2, 3, 4, 5, 6, 7, 0):
        ecn = frames.Ecn.CE if i == ce_at else frames.Ecn.ECT0
        path = frames.PathHeader(b"\0" * 16, b"\0" * 16, ev=data[i].ev, ecn=ecn)
        server.receive(frames.Packet(path, data[i].header, bytes(data[i].payload)), now)
    sacks = [t.header for t in server.control_to_send() if isinstance(t.header, frames.SackHeader)]
    assert server.counters.sacks_sent == len(sacks) == (1 if ce_at is None else 2)
    assert server.counters.sacks_superseded == 8 - len(sacks)
    assert sacks[-1].cum_psn == data[-1].header.psn + 1  # the newest: all eight
    assert sacks[-1].ev == data[0].ev  # the last packet read
    if ce_at is not None:
        echo = sacks[0]
        assert echo.common.flags & frames.Flags.ECN_ECHO
        assert echo.ev == data[ce_at].ev
    for sack in sacks:
        client.receive(frames.Packet(path, sack, b""), now)
    assert client.sender.snd_una == data[-1].header.psn + 1
    assert client.counters.ecn_echoes == (ce_at is not None)


def test_a_recycled_buffer_carries_the_next_message_of_its_size(
    make_established: MakeEstablished,
) -> None:
    """The application gives a delivered buffer back: the next message of that size is
    placed in it (no new zero-filled buffer) and delivered whole, old bytes overwritten;
    a message of another size gets a new buffer."""
    fabric, conn, server = make_established(cfg=CFG)
    _, b = fabric.hosts
    sizes = [10 * CFG.mss + 7, 10 * CFG.mss + 7, 3 * CFG.mss]
    bufs = []
    for i, n in enumerate(sizes):
        msg = payload(n, seed=i)
        conn.send_message(msg, fabric.now)
        fabric.run(fabric.now + 0.5, lambda i=i: len(b.messages) == i + 1)
        [got] = [e for e in b.events if isinstance(e, events.MessageReceived) and e.msn == i]
        assert got.data == msg
        bufs.append(got.data)
        server.recycle(got.data)
    assert bufs[1] is bufs[0]
    assert bufs[2] is not bufs[1]
    with pytest.raises(TypeError, match="bytearray"):
        server.recycle(bytes(10))  # type: ignore[arg-type]
