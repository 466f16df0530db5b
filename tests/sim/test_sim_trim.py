"""An incast in virtual time over links that trim, against the same links dropping at the
same depth: with trimming every loss is a NACK answered within about one RTT and no RTO
fires, and a retransmission trimmed again (it travels in a trimmable class of its own) is
NACKed in turn; without it, or for connections in the no-trim class, which a trimming link
drops at the same depth, losses wait for SACK gaps. Every byte arrives either way."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from mrc_transport.protocol import Config, Connection, events

from .fabric import Fabric, Host, Link
from .scenarios import blob

SENDERS = 6
MESSAGES = 2  # per sender
SIZE = 120_000
RATE = 1e9
DEPTH = 30_000  # bytes: where a link trims (or, without trimming, drops)
DELAY = 50e-6  # per link: a 100 us base RTT, so each sender starts with a deep window
CFG = Config(nic_rate_bps=4 * RATE)


@dataclass
class Incast:
    fabric: Fabric
    sink: Host
    conns: list[Connection]
    sent: dict[int, list[bytes]]
    """By sender index: the messages it sent, in MSN order."""

    def retransmits(self) -> list[events.Retransmit]:
        return [
            e for h in self.fabric.hosts[1:] for e in h.events if isinstance(e, events.Retransmit)
        ]


def incast(seed: int, trim: bool, cfg: Config = CFG) -> Incast:
    """SENDERS hosts send MESSAGES messages each to one host, all at once, over 2 planes x
    2 paths whose links trim (or drop) at DEPTH bytes."""

    def link() -> Link:
        if trim:
            return Link(rate_bps=RATE, delay=DELAY, queue_bytes=10 * DEPTH, trim_bytes=DEPTH)
        return Link(rate_bps=RATE, delay=DELAY, queue_bytes=DEPTH)

    fabric = Fabric(seed, planes=2, paths_per_plane=2, link=link)
    sink = fabric.add_host("sink", cfg)
    hosts = [fabric.add_host(f"s{i}", cfg) for i in range(SENDERS)]
    conns = [h.endpoint.connect(fabric.paths(h, sink), 0.0) for h in hosts]
    fabric.run(1e-3)
    sent = {}
    for i, conn in enumerate(conns):
        sent[i] = [blob(SIZE, 100 * i + k) for k in range(MESSAGES)]
        for m in sent[i]:
            conn.send_message(m, fabric.now)
    done = fabric.run(2.0, lambda: len(sink.messages) == SENDERS * MESSAGES)
    assert done, f"{len(sink.messages)} of {SENDERS * MESSAGES} messages arrived"
    return Incast(fabric, sink, conns, sent)


def assert_every_byte(run: Incast) -> None:
    by_conn = {c.peer_conn: i for i, c in enumerate(run.conns)}
    got: dict[int, list[bytes]] = {}
    for (conn, msn), data in sorted(run.sink.messages.items()):
        got.setdefault(by_conn[conn], []).append(data)
        assert msn == len(got[by_conn[conn]]) - 1
    assert got == run.sent


@pytest.mark.parametrize("seed", range(2))
def test_trimming_turns_every_loss_into_a_nack_answered_within_two_rtts(seed: int) -> None:
    run = incast(seed, trim=True)
    assert_every_byte(run)
    assert sum(link.trimmed for link in run.fabric.links.values()) > 0
    assert sum(link.dropped for link in run.fabric.links.values()) == 0
    assert sum(c.counters.rtos for c in run.conns) == 0
    nacked = sum(c.counters.rtx_nack for c in run.conns)
    assert nacked > 0
    assert nacked == sum(c.counters.nacks_received for c in run.conns)
    rtx = run.retransmits()
    causes = {e.cause for e in rtx}
    assert causes <= {"trimmed", "loss"}, causes
    # a trimmed packet is resent at once: about one RTT after it was sent
    base_rtt = min(c.sender.min_rtt for c in run.conns)
    after = sorted(e.after for e in rtx if e.cause == "trimmed")
    assert after[len(after) // 2] <= 2 * base_rtt, (after[len(after) // 2], base_rtt)
    # a resend meets the same full queue and, in its own trimmable class, is cut again
    assert sum(link.trimmed_rtx for link in run.fabric.links.values()) > 0


@pytest.mark.parametrize("seed", range(2))
def test_a_no_trim_connection_is_dropped_where_others_are_trimmed(seed: int) -> None:
    """The same trimming links, every sender in the no-trim class: nothing is cut, the
    links drop at the trim depth instead, and SACK gaps find the losses."""
    run = incast(seed, trim=True, cfg=dataclasses.replace(CFG, no_trim=True))
    assert_every_byte(run)
    links = run.fabric.links.values()
    assert sum(link.trimmed for link in links) == 0
    assert sum(link.dropped for link in links) == sum(link.dropped_no_trim for link in links) > 0
    assert sum(c.counters.nacks_received for c in run.conns) == 0
    assert "loss" in {e.cause for e in run.retransmits()}


@pytest.mark.parametrize("seed", range(2))
def test_without_trimming_the_same_incast_drops_and_recovers_by_sack(seed: int) -> None:
    run = incast(seed, trim=False)
    assert_every_byte(run)
    assert sum(link.dropped for link in run.fabric.links.values()) > 0
    assert sum(c.counters.nacks_received for c in run.conns) == 0
    assert "loss" in {e.cause for e in run.retransmits()}
