"""Exact delivery over a terrible network, in virtual time (seeded)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport.protocol import events
from mrc_transport.wire import frames

from .fabric import Host, Link
from .scenarios import blob, start


@pytest.mark.parametrize("seed", range(4))
def test_every_byte_arrives_exactly_once_and_intact(seed: int) -> None:
    rng = random.Random(seed)
    terrible = Link(rate_bps=1e9, drop=0.02, dup=0.02, jitter=60e-6, mark=0.02)
    run = start(seed, planes=2, paths=3, link=terrible)
    sizes = [rng.choice([0, 1, 1199, 1200, 1201, rng.randrange(300_000)]) for _ in range(12)]
    sizes.append(rng.randrange(300_000, 600_000))
    msgs = [blob(n, seed * 100 + i) for i, n in enumerate(sizes)]
    for m in msgs:
        run.conn.send_message(m, run.fabric.now)
    run.fabric.run(5.0, lambda: len(run.b.messages) == len(msgs))
    received = [e for e in run.b.events if isinstance(e, events.MessageReceived)]
    assert [e.msn for e in received] == list(range(len(msgs)))  # each once, in order
    assert [bytes(e.data) for e in received] == msgs
    assert run.conn.counters.retransmits > 0  # the network really was terrible
    assert run.server.counters.dup_packets > 0
    links = run.fabric.links.values()
    assert sum(lk.dropped for lk in links) > 0
    run.conn.close(run.fabric.now)
    run.fabric.run(run.fabric.now + 2.0, lambda: run.conn.state.value == "closed")
    assert run.conn.state.value == "closed"
    assert run.server.state.value == "closed"


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40_000), min_size=1, max_size=6),
    fate=st.lists(st.sampled_from(["ok", "drop", "dup", "late"]), min_size=1, max_size=200),
    seed=st.integers(0, 2**16),
)
def test_any_loss_and_reorder_pattern_delivers_exactly(
    sizes: list[int], fate: list[str], seed: int
) -> None:
    """Packets (data and control, both ways) meet the fates drawn, in order, then all pass."""
    run = start(seed % 7, planes=2, paths=2, link=Link(rate_bps=1e9))
    fates = iter(fate)
    fabric = run.fabric

    def tamper(host: Host, p: frames.Packet) -> list[frames.Packet]:
        what = next(fates, "ok")
        if what == "drop":
            return []
        if what == "dup":
            return [p, p]
        if what == "late":
            fabric.at(fabric.now + 300e-6, lambda: host.endpoint.receive(p, fabric.now))
            return []
        return [p]

    fabric.tamper = tamper
    msgs = [blob(n, seed + i) for i, n in enumerate(sizes)]
    for m in msgs:
        run.conn.send_message(m, fabric.now)
    fabric.run(10.0, lambda: len(run.b.messages) == len(msgs))
    received = [e for e in run.b.events if isinstance(e, events.MessageReceived)]
    assert [bytes(e.data) for e in received] == msgs

    def acked() -> list[int]:
        return sorted(e.msn for e in run.a.events if isinstance(e, events.MessageAcked))

    # the sender hears of the last delivery up to a few backed-off RTOs later (six drops
    # in a row after the data packet: 63 ms): wait for it, not for a fixed time
    fabric.run(fabric.now + 5.0, lambda: len(acked()) == len(msgs))
    assert acked() == list(range(len(msgs)))
