"""The sender's packets in flight by PSN (rack.Flight): a ring, checked against a dict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport.protocol import Config
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.rack import Flight, SentPacket
from mrc_transport.protocol.segments import OutMessage
from tests.unit.conftest import MakePair

WINDOW = 8
MSG = OutMessage(0, memoryview(b"x" * 64), 64)


@pytest.fixture(scope="module")
def ev(make_pair: MakePair) -> Ev:
    """The EV of a connection that has one, for the packets put in flight."""
    fabric, a, b = make_pair(cfg=Config(ev_count=1))
    return next(iter(a.endpoint.connect(fabric.paths(a, b), 0.0).evs.by_value.values()))


def packet(ev: Ev, psn: int) -> SentPacket:
    return SentPacket(psn, MSG, 0, 1, ev)


def test_a_packet_is_found_by_its_psn_only(ev: Ev) -> None:
    flight = Flight(WINDOW)
    pkt = packet(ev, 5)
    flight.put(pkt)
    assert flight.get(5) is pkt
    assert len(flight) == 1
    # the same slot, one ring further on: not the packet in flight
    assert flight.get(5 + WINDOW) is None
    assert flight.pop(5 + WINDOW) is None
    assert flight.pop(5) is pkt
    assert flight.get(5) is None
    assert len(flight) == 0


def test_a_slot_taken_is_refused(ev: Ev) -> None:
    flight = Flight(WINDOW)
    flight.put(packet(ev, 3))
    with pytest.raises(ValueError, match="PSN 11: its slot holds PSN 3"):
        flight.put(packet(ev, 3 + WINDOW))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, WINDOW - 1)), max_size=300))
def test_the_ring_holds_what_a_dict_holds(ev: Ev, ops: list[tuple[bool, int]]) -> None:
    """As the sender uses it: new PSNs in order, acks anywhere in the window, the window
    never wider than ``WINDOW``; every lookup answers as a dict would."""
    flight, ref = Flight(WINDOW), dict[int, SentPacket]()
    una = nxt = 1 << 33  # expanded PSNs, far past 32 bits
    for send, k in ops:
        if send and nxt - una < WINDOW:
            flight.put(pkt := packet(ev, nxt))
            ref[nxt] = pkt
            nxt += 1
        elif una < nxt:
            psn = una + k % (nxt - una)
            assert flight.pop(psn) is ref.pop(psn, None)
            while una < nxt and una not in ref:
                una += 1
        for psn in range(una - WINDOW, nxt + WINDOW):
            assert flight.get(psn) is ref.get(psn)
        assert len(flight) == len(ref)
        assert sorted(p.psn for p in flight.values()) == sorted(ref)
