"""The endpoint's receiving side: what is waiting on the UDP socket (or, encapsulated,
the raw IPPROTO_IPV6 one), a burst at a time, into the core, and when the loop should read
next.

One receive call takes up to ``RECV_BURST`` datagrams, decoded by one C call into records
(wire/burst.py); data packets and SACKs go to the core as their fields, anything else is
decoded one at a time with the untrusted decoder, and a ``BadPacket`` is counted by reason
and dropped. The SACKs the core owes go out every ``RX_FLUSH`` packets, mid-burst: held
until the pump after a long burst, they made the peer resend packets that had arrived
(docs/protocol.md, SACKs). Interrupt moderation (``moderate``) keeps a bulk receiver,
and one that only receives a paced flow, from waking for every few datagrams.
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Callable, Sequence

from mrc_transport import wire
from mrc_transport.io import batchio
from mrc_transport.io.sockets import interface_mtus
from mrc_transport.io.tuning import (
    RECV_BURST,
    RX_COALESCE_PACKETS,
    RX_COALESCE_RATE,
    RX_FLUSH,
    RX_PACED_PACKETS,
    RX_PACED_RATE,
    RX_SLOT_MIN,
)
from mrc_transport.protocol import Endpoint
from mrc_transport.wire import frames
from mrc_transport.wire.frames import IPV6_HEADER_LEN
from mrc_transport.wire.records import RX_BAD_INNER, RX_CUT, RxRec


def rx_slot_size(mtus: dict[str, int] | None = None) -> int:
    """Receive slot per datagram: the largest UDP payload any interface here can carry
    (the kernel strips IPv6 and SRH); a larger one arrives cut and is dropped."""
    mtus = interface_mtus() if mtus is None else mtus
    return max(max(mtus.values(), default=0) - IPV6_HEADER_LEN, RX_SLOT_MIN)


class Receiving:
    """Hands what the socket holds to the core; counts what it could not."""

    def __init__(
        self,
        core: Endpoint,
        port: int,
        clock: Callable[[], float],
        flush: Callable[[], None],
        *,
        decap: bool = False,
    ) -> None:
        self.core, self.port, self.clock = core, port, clock
        self.burst = batchio.burst_receiver(RECV_BURST, rx_slot_size(), port if decap else None)
        """The reusable receive slots and their decoder (decapsulating: the encap
        encoding, whose inner packet fits the same slot)."""
        self.received = 0
        """Datagrams received."""
        self.bursts = 0
        """Receive calls that returned some."""
        self.bad: collections.Counter[str] = collections.Counter()
        """Datagrams dropped by the decoder, by BadPacket reason."""
        self._flush = flush
        self._mark, self._since = 0, clock()
        """``received`` when the loop last went to wait, and when (``moderate``)."""

    def receive_ready(self, sock: socket.socket) -> int:
        """Hand every datagram waiting (at most RECV_BURST) to the core; how many.

        Data packets and SACKs go to the core as the fields the burst decoder read out of
        them, a payload as a view of its slot (the core copies it into its message before
        the next burst reuses the slot); anything else is decoded one at a time
        (``_receive_one``)."""
        burst = self.burst
        recs = burst.recv_records(sock)
        if not recs:
            return 0
        now = self.clock()
        self.received += len(recs)
        self.bursts += 1
        hand_over(
            self.core, recs, burst.view, now, lambda i: self._receive_one(burst, i, now),
            self._flush,
        )  # fmt: skip
        return len(recs)

    def _receive_one(self, burst: batchio.BurstReceiver, i: int, now: float) -> None:
        """Decode datagram i of the burst and hand it to the core, or count why not."""
        cut = burst.meta(i)[1]
        if cut == RX_CUT:  # larger than any MTU here, not a packet of ours
            self.bad["oversize"] += 1
            return
        try:
            if cut == RX_BAD_INNER:  # the decapsulator refused it: say why
                n = burst.meta(i)[0]
                off = i * burst.slot_size
                wire.decap_untrusted(burst.view[off : off + n], dport=self.port)
            packet = decode_one(burst, i, self.port)
        except wire.BadPacket as exc:
            self.bad[exc.reason] += 1
            return
        self.core.receive(packet, now)

    def moderate(self, receive_only: bool) -> bool:
        """Whether the loop, about to wait, waits RX_COALESCE rather than for the next
        datagram: the datagrams since it last waited came at a bulk rate, or, at an
        endpoint that sends no data (``receive_only``), at a paced one. Starts the count
        over."""
        now = self.clock()
        served, elapsed = self.received - self._mark, now - self._since
        self._mark, self._since = self.received, now
        if receive_only:
            return served >= RX_PACED_PACKETS and served >= RX_PACED_RATE * elapsed
        return served >= RX_COALESCE_PACKETS and served >= RX_COALESCE_RATE * elapsed


def hand_over(
    core: Endpoint,
    recs: Sequence[RxRec],
    view: memoryview,
    now: float,
    other: Callable[[int], None],
    flush: Callable[[], None],
) -> None:
    """Give the core a received burst's records: data packets and SACKs as their fields
    (``Endpoint.receive_records``, a payload as a view of its slot in ``view``), any other
    record i to ``other(i)`` in its turn; ``flush()`` after each chunk and after the last.
    The chunks are even, RX_FLUSH to 2 x RX_FLUSH - 1 records each: a moderated read a
    little over RX_FLUSH gets one SACK, not a second one for its last few packets."""
    n = len(recs)
    size = -(-n // max(1, n // RX_FLUSH))
    i = 0
    while i < n:
        stop = min(n, i - i % size + size)
        i = core.receive_records(recs, view, now, i, stop)
        if i < stop:
            other(i)
            i += 1
        if i == stop:
            flush()


def decode_one(burst: batchio.BurstReceiver, i: int, dport: int) -> frames.Packet:
    """Datagram i of the last burst ``burst`` received, decoded with the untrusted decoder
    (raises BadPacket); what the burst decoder leaves to be decoded one at a time."""
    n, _, tclass, sport, flow, src, dst = burst.meta(i)
    off = i * burst.slot_size
    return wire.decode_datagram_untrusted(
        burst.view[off : off + n], src=src, dst=dst, sport=sport, dport=dport,
        tclass=tclass, flow_label=flow,
    )  # fmt: skip
