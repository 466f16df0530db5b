"""Closed and failed connections drain, then leave the endpoint (RFC 9000 section 10.2)."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from mrc_transport.protocol import Connection, ConnState, events, transitions
from mrc_transport.protocol.connection import CONN_TRANSITIONS, ConnInput
from mrc_transport.wire import frames
from mrc_transport.wire.frames import Opcode
from tests.sim.fabric import Host
from tests.unit.conftest import MakeEstablished, Pair
from tests.unit.helpers import PAIR_CFG as CFG
from tests.unit.helpers import payload


def closed_events(host: Host) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in host.events:
        if isinstance(e, events.ConnectionClosed):
            out.setdefault(e.conn, []).append(e.reason)
    return out


def all_closed(conns: list[Connection]) -> bool:
    return all(c.state is ConnState.CLOSED for c in conns)


def test_many_short_connections_leave_nothing_behind(pair: Pair) -> None:
    """A long-running server (``mrc perf -s``) must not grow with every client."""
    fabric, a, b = pair
    n, gap, peak = 60, 10e-3, 0  # three clients every 10 ms
    for i in range(n):
        t0 = fabric.now
        conns = [a.endpoint.connect(fabric.paths(a, b), t0) for _ in range(3)]
        for k, conn in enumerate(conns):
            conn.send_message(payload(3000 + k, i), t0)
            conn.close(t0)
        fabric.run(t0 + 1.0, functools.partial(all_closed, conns))
        peak = max(peak, len(b.endpoint.connections), len(a.endpoint.connections))
        fabric.run(t0 + gap)
    assert len(b.messages) == 3 * n
    # only the connections of the last drain period are held, not every one ever made
    drain = CFG.drain_rtos * CFG.setup_timeout
    assert peak <= 3 * (drain / gap + 2)
    fabric.run(fabric.now + 1.0)
    assert a.endpoint.connections == {}
    assert b.endpoint.connections == {}
    assert b.endpoint._by_peer == {}
    assert a.endpoint.get_timer() is None
    assert b.endpoint.get_timer() is None
    assert b.endpoint.counters.connections_removed == 3 * n
    for host, reason in ((a, "closed"), (b, "peer closed")):
        closed = closed_events(host)
        assert len(closed) == 3 * n
        assert all(r == [reason] for r in closed.values())  # exactly once each


def test_late_close_is_answered_while_draining(pair: Pair) -> None:
    """Lost CLOSE_ACKs: the server, already closed, still answers the retransmitted CLOSE."""
    fabric, a, b = pair
    dropped: list[float] = []

    def tamper(host: Host, p: frames.Packet) -> list[frames.Packet]:
        if p.header.common.opcode is Opcode.CLOSE_ACK and len(dropped) < 2:
            dropped.append(fabric.now)
            return []
        return [p]

    fabric.tamper = tamper
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    conn.send_message(payload(10_000), 0.0)
    conn.close(0.0)
    fabric.run(1.0, lambda: conn.state is ConnState.CLOSED)
    assert len(dropped) == 2
    assert closed_events(a) == {conn.conn: ["closed"]}  # not "close failed"
    [server_id] = closed_events(b)
    assert closed_events(b)[server_id] == ["peer closed"]
    fabric.run(fabric.now + 1.0)
    assert a.endpoint.connections == b.endpoint.connections == {}
    assert len(closed_events(b)[server_id]) == 1


def test_failed_connections_are_removed_once(make_established: MakeEstablished) -> None:
    cfg = dataclasses.replace(CFG, max_rto_count=4, setup_retries=4)
    fabric, ok, _ = make_established(cfg=cfg)
    a, b = fabric.hosts
    for link in fabric.links.values():
        link.dead = True
    ok.send_message(payload(20_000), fabric.now)  # ends in "rto failed"
    never = a.endpoint.connect(fabric.paths(a, b), fabric.now)  # ends in "setup failed"
    fabric.run(60.0, lambda: not a.endpoint.connections)
    assert a.endpoint.connections == {}
    assert closed_events(a) == {ok.conn: ["rto failed"], never.conn: ["setup failed"]}
    assert a.endpoint.get_timer() is None
    # the server side, whose peer went silent, stays open (no data of its own to time out)
    assert len(b.endpoint.connections) == 1


def test_unread_events_keep_a_drained_connection_until_read(pair: Pair) -> None:
    fabric, a, b = pair
    b.read = False
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    msg = payload(5000)
    conn.send_message(msg, 0.0)
    conn.close(0.0)
    fabric.run(1.0, lambda: conn.state is ConnState.CLOSED)
    fabric.run(fabric.now + 1.0)
    assert a.endpoint.connections == {}
    [server] = b.endpoint.connections.values()  # drained, but its events are unread
    assert server.state is ConnState.CLOSED
    assert b.endpoint.get_timer() is None
    # the connection's own events (the EVs its acknowledgements went on are the EV set's)
    got = [
        e for e in iter(b.endpoint.next_event, None) if not isinstance(e, events.ReverseEvChosen)
    ]
    assert [type(e) for e in got] == [
        events.ConnectionEstablished,
        events.MessageReceived,
        events.ConnectionClosed,
    ]
    assert isinstance(got[1], events.MessageReceived)
    assert bytes(got[1].data) == msg
    assert b.endpoint.connections == {}


def test_drain_lasts_three_rtos_and_a_late_close_extends_it(pair: Pair) -> None:
    fabric, a, b = pair
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    conn.close(0.0)
    fabric.run(1.0, lambda: conn.state is ConnState.CLOSED)
    t_closed = fabric.now
    [server] = b.endpoint.connections.values()
    drain = CFG.drain_rtos * max(server.sender.path_rto, CFG.setup_timeout)
    fabric.run(t_closed + 0.9 * drain)
    assert server.conn in b.endpoint.connections
    fabric.run(t_closed + 1.2 * drain)
    assert server.conn not in b.endpoint.connections
    assert len(closed_events(b)) == 1


def test_the_table_lists_what_every_state_may_meet() -> None:
    """close() is an input of every state; every open state can fail; CLOSED is final."""
    assert set(CONN_TRANSITIONS) == set(ConnState)
    assert all(ConnInput.CLOSE in moves for moves in CONN_TRANSITIONS.values())
    opened = [s for s in ConnState if s is not ConnState.CLOSED]
    assert all(CONN_TRANSITIONS[s][ConnInput.GIVE_UP] is ConnState.CLOSED for s in opened)
    assert set(CONN_TRANSITIONS[ConnState.CLOSED].values()) == {ConnState.CLOSED}


def test_an_illegal_transition_is_counted_and_raised_under_tests(
    monkeypatch: pytest.MonkeyPatch, pair: Pair
) -> None:
    """DRAINED while ESTABLISHED (nothing was closing) is the core's own bug: raised under
    the suite (tests/conftest.py sets STRICT), counted and ignored by a running endpoint;
    a peer's CLOSE_ACK out of turn is the peer's doing, counted as wrong_state."""
    fabric, a, b = pair
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(1e-2, lambda: conn.state is ConnState.ESTABLISHED)
    with pytest.raises(transitions.IllegalTransition, match="ESTABLISHED has no transition"):
        conn._move(ConnInput.DRAINED, fabric.now)
    monkeypatch.setattr(transitions, "STRICT", False)  # as an endpoint runs
    conn._move(ConnInput.DRAINED, fabric.now)
    assert conn.counters.illegal_transitions == 2
    assert conn.state is ConnState.ESTABLISHED
    path = frames.PathHeader(bytes(16), bytes(16))
    ack = frames.CloseHeader(frames.Common(Opcode.CLOSE_ACK, frames.Flags.NONE, conn.conn, 0), 0)
    wrong = conn.counters.wrong_state
    conn.receive(frames.Packet(path, ack, b""), fabric.now)
    assert conn.counters.wrong_state == wrong + 1
    assert conn.state is ConnState.ESTABLISHED
