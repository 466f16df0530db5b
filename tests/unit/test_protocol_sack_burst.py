"""SACKs that arrive together are all booked before loss detection judges the flight.

A userspace endpoint reads SACKs in bursts (one receive call, one ``now``). Loss detection
that ran after each SACK declared packets lost that a later SACK of the same burst
acknowledged: in the unshaped lab most false losses of a fault-free transfer were of that
kind, and each one retired its EV.
"""

from __future__ import annotations

from mrc_transport.protocol import Connection, Transmit
from mrc_transport.wire import frames
from tests.unit.conftest import Established
from tests.unit.helpers import SMALL_CFG as CFG
from tests.unit.helpers import as_packet, psn


def _sacks(server: Connection, data: list[Transmit], now: float) -> list[frames.Packet]:
    """The server's SACKs for ``data``, delivered in the order given."""
    sacks = []
    for tx in data:
        server.receive(as_packet(tx), now)
        server.handle_timer(now + 1.0)  # flush a delayed SACK
        sacks += [
            as_packet(t)
            for t in server.datagrams_to_send(now + 1.0)
            if isinstance(t.header, frames.SackHeader)
        ]
    return sacks


def _early_and_late(conn: Connection, now: float) -> tuple[Transmit, Transmit]:
    """Two data packets on different planes, the first sent before the second."""
    conn.send_message(bytes(8 * CFG.mss), now)
    data = [tx for tx in conn.datagrams_to_send(now) if isinstance(tx.header, frames.DataHeader)]
    first = data[0]
    later = next(tx for tx in data if tx.path.plane != first.path.plane)
    return first, later


def test_a_sack_later_in_the_burst_saves_a_packet_from_a_false_loss(
    established: Established,
) -> None:
    fabric, conn, server = established
    now = fabric.now
    first, later = _early_and_late(conn, now)
    # the later packet overtakes the first (another plane), then the first arrives
    sacks = _sacks(server, [later, first], now)
    assert len(sacks) >= 2
    # both SACKs reach the sender in one burst, long after the first packet was sent:
    # the first SACK alone says a packet sent after it on another plane was delivered
    t = now + 1.0
    for sack in sacks:
        conn.receive(sack, t)
    conn.datagrams_to_send(t)
    assert conn.counters.lost == 0
    assert conn.sender.inflight.get(psn(first)) is None
    assert all(ev.lost == 0 for ev in conn.evs.by_value.values())


def test_a_loss_is_still_declared_at_the_next_send_decision(established: Established) -> None:
    fabric, conn, server = established
    now = fabric.now
    first, later = _early_and_late(conn, now)
    sacks = _sacks(server, [later], now)  # the first packet never arrives
    t = now + 1.0
    for sack in sacks:
        conn.receive(sack, t)
    assert conn.get_timer() == t  # detection is due now, not forgotten
    out = conn.datagrams_to_send(t)
    assert conn.counters.lost >= 1
    assert conn.evs.by_value[first.ev].lost == 1
    data = [tx for tx in out if isinstance(tx.header, frames.DataHeader)]
    resent = [tx for tx in data if psn(tx) == psn(first)]
    if not resent:  # one window for the connection: the resend waits for its room
        assert conn.cc.total + CFG.mss > conn.cc.window
        return
    assert resent[0].header.common.flags & frames.Flags.RTX
