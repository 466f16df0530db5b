"""The trio endpoint's tuning: every constant that sets how much work one pass of its loop
does, with a sentence of why. The figures behind them are in docs/measurements.md
("The io endpoint's tuning constants"); "ours" marks a choice of this project rather than
a rule from the paper or an RFC.

A userspace endpoint pays a fixed price per pass (a system call, a trio checkpoint, a
SACK at each end), so most of these trade a little latency for larger batches, bounded by
the host delay the protocol is told about (``IO_HOST_DELAY``) and trio's timer resolution
(``TIMER_TICK``).
"""

from __future__ import annotations

import dataclasses
from typing import Final, Literal

from mrc_transport.protocol import Config
from mrc_transport.wire.frames import IPV6_HEADER_LEN

# ------------------------------------------------------------------ receiving

RECV_BURST: Final = 256
"""Datagrams per receive call: a moderated wake-up finds a few dozen waiting, and one
``recvmmsg`` takes them all."""
RX_SLOT_MIN: Final = 1500 - IPV6_HEADER_LEN
"""Receive slot of a host whose MTUs cannot be read: an Ethernet frame's UDP payload."""
DRAIN_BURSTS: Final = 8
"""Full receive calls that may run back to back before a pump: the socket is drained
before timers run, but a flood still gets a pump now and then (ours)."""
RX_FLUSH: Final = 64
"""Received packets after which the SACKs owed go out, mid-burst: each SACK costs the
receiver tens of microseconds, and 64 packets are well under a millisecond of work, short
of the peer's RACK and RTO windows (ours)."""
RX_COALESCE: Final = 1e-3
"""Interrupt moderation, as a NIC's (ethtool -C rx-usecs): after a wake-up that served a
bulk rate, the loop waits this long before it reads again, so each pass serves several
times more packets; trio waits in whole milliseconds, so a shorter wait is not possible."""
RX_COALESCE_PACKETS: Final = 16
"""Datagrams a wake-up must have served for the loop to moderate the next one."""
RX_COALESCE_RATE: Final = 20_000.0
"""Datagrams per second (since the loop last waited) above which an endpoint that sends
data moderates: bulk transfers above ~1.5 Gbit/s of 9 KB packets, not a paced flow of a few
hundred Mbit/s, whose SACKs moderation would delay at the end that detects loss by them."""
Moderation = Literal["bulk", "paced"]
MODERATIONS: Final[tuple[Moderation, ...]] = ("bulk", "paced")
"""When a receive loop moderates: at bulk rates only (the default), or also at paced ones
where the endpoint only receives (``RX_PACED_*``, ours: about half the CPU per Gbit of a
paced flow, its SACKs about a millisecond later, so failover stalls ~2 ms longer;
docs/measurements.md, "fourth session: receive moderation at paced rates")."""
RX_PACED_PACKETS: Final = 2
"""With ``paced`` moderation, datagrams a wake-up of an endpoint that only receives must
have served to moderate the next one: at a paced rate a wake-up serves a few packets, and
its fixed price (epoll, trio, a SACK through the lab) is most of the receiver's CPU (ours)."""
RX_PACED_RATE: Final = 1000.0
"""With ``paced`` moderation, datagrams per second above which an endpoint that only
receives moderates: ~70 Mbit/s of 9 KB packets. Its SACKs then wait about one
``RX_COALESCE``, the ``IO_ACK_DELAY`` the sender is told of; the sender's own SACK reads
are never held, since its loss detection would wait with them (ours)."""
RX_PACED_QUIET: Final = 10e-3
"""An endpoint counts as only receiving once it has sent no new data for this long: a
bidirectional or request-response connection keeps the bulk thresholds (ours)."""

# ------------------------------------------------------------------ sending

IO_MAX_BURST: Final = 64
"""Data packets per connection per pump (``Config.max_burst``): a pump's fixed cost is
spread over more packets, and a burst still takes about the host delay to build and send,
so a packet's timestamp stays within ``IO_HOST_DELAY`` of its real send time (ours)."""
TX_BURST: Final = 64
"""Packets encoded into the burst buffer per send call (one ``sendmmsg`` chunk)."""
PACE_BURST: Final = 4
"""Packets per port the pacer lets a burst run ahead of the NIC rate (ours)."""
TIMER_TICK: Final = 1e-3
"""trio waits in epoll_wait, whose timeout is whole milliseconds: the pacer allows a
burst that much slack, since it cannot wait less."""
WAIT_FLOOR: Final = 50e-6
"""Shortest wait for a timer: one the core left in the past must not make the loop spin
(ours)."""
BACKOFF_PACKETS: Final = 4
"""After ENOBUFS, the backlog is retried once this many packets drained at the NIC rate."""
BACKOFF_MIN: Final = 50e-6
"""The backoff's floor, for a fast NIC (ours)."""
BACKOFF_MAX: Final = 2e-3
"""The backoff's ceiling, for a slow one (ours)."""
MAX_BACKLOG: Final = 65536
"""Packets held behind full ports or a full socket buffer before new ones are dropped
(ours: a bound on memory, far above a window of jumbo packets)."""
HEADER_CACHE_LIMIT: Final = 1 << 16
"""Cached ``PathHeader``s (path, EV, DSCP) before the cache starts over: every connection
brings its own EVs, so a long-running server's would grow without bound."""

# ------------------------------------------------------------------ the protocol's knobs

IO_HOST_DELAY: Final = 1e-3
"""``Config.host_delay`` of a userspace endpoint: it handles packets in batches and is
scheduled in slices, so its min RTT is a lucky sample (protocol/config.py)."""
IO_SACK_PACKETS: Final = 4
"""Data packets per SACK at least (htsim's 16 KB is two packets at a 9000-byte MTU): each
SACK costs a userspace endpoint tens of microseconds at both ends. Gaps, CE marks,
ACK_REQ and the ack delay still SACK at once."""
IO_ACK_DELAY: Final = 1e-3
"""``Config.ack_delay`` of a userspace endpoint: trio's timers fire in whole
milliseconds, so 50 us meant a SACK at the next arrival anyway (ours)."""


def io_config(cfg: Config) -> Config:
    """``cfg`` as an endpoint on real sockets needs it: at most ``IO_MAX_BURST`` packets
    per burst, unless set ``IO_HOST_DELAY`` of host delay, a SACK for at least every
    ``IO_SACK_PACKETS`` data packets, and at least ``IO_ACK_DELAY`` of ack delay (Config
    docstrings)."""
    changes: dict[str, float] = {}
    if cfg.max_burst > IO_MAX_BURST:
        changes["max_burst"] = IO_MAX_BURST
    if cfg.host_delay == 0:
        changes["host_delay"] = IO_HOST_DELAY
    if cfg.sack_every_bytes < IO_SACK_PACKETS * cfg.mss:
        changes["sack_every_bytes"] = IO_SACK_PACKETS * cfg.mss
    if cfg.ack_delay < IO_ACK_DELAY:
        changes["ack_delay"] = IO_ACK_DELAY
    return dataclasses.replace(cfg, **changes) if changes else cfg  # type: ignore[arg-type]
