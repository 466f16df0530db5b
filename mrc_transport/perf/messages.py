"""What the two ends of an `mrc perf` connection tell each other, one class per message.

Every message starts with one type byte; the rest is its body (session.py runs them):

- ``P`` (client -> server, first message): ``PerfParams``, the test asked for;
- ``D``: data, a body of random bytes (no class: it is only hashed);
- ``E`` (sender -> receiver, after the last D): ``SenderReport``, the bytes sent, their
  digest, the sender's seconds, CPU and counters;
- ``R`` (receiver -> sender): ``ReceiverReport``, the same from the receiver, and whether
  both ends' byte counts and digests agree.

Each is a frozen dataclass written once: ``encode()`` makes the message, and
``decode_untrusted(body)`` reads one from the peer, every value checked against its field
(jsonobj.py), raising ``PerfError`` for anything else. Their JSON is also what the server's
--json-stream ``stream_end`` event carries as ``report``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar, Self

from labs.units import Rate, Size
from mrc_transport.perf.jsonobj import INLINE, Record, SchemaError

KIND_PARAMS, KIND_DATA, KIND_END, KIND_RESULT = b"P", b"D", b"E", b"R"


class PerfError(Exception):
    """The peer broke the session's rules (one line)."""


class Message(Record):
    """A control message: its type byte, then its JSON object. A subclass sets ``KIND``
    without an annotation, which would make it a dataclass field."""

    __slots__ = ()
    KIND: ClassVar[bytes]

    def encode(self) -> bytes:
        """The message as sent: the type byte and the JSON body."""
        return self.KIND + json.dumps(self.to_json()).encode()

    @classmethod
    def decode_untrusted(cls, body: bytes | bytearray) -> Self:
        """The message from its body (the bytes after the type byte); PerfError."""
        name = cls.KIND.decode()
        try:
            raw = json.loads(body)
        except ValueError:
            raise PerfError(f"{name} message is not JSON") from None
        try:
            return cls.from_json_untrusted(raw)
        except SchemaError as exc:
            raise PerfError(f"{name} message is not valid: {exc}") from None


@dataclass(frozen=True, slots=True)
class PerfParams(Message):
    """What the client asks for: the P message."""

    KIND = KIND_PARAMS
    session: str
    """Random id shared by the connections of one client run."""
    index: int
    """This connection's number, 0 .. parallel - 1."""
    parallel: int
    """Connections in the session (-P)."""
    reverse: bool
    """The server sends (-R)."""
    duration: float
    """Seconds to send (-t) when nbytes is 0."""
    nbytes: Size
    """Bytes this connection sends (its share of -n), 0 = by duration."""
    length: Size
    """Message size (-l)."""
    rate_bps: Rate
    """Target rate per connection (-b), 0 = as fast as possible."""
    planes: tuple[int, ...] = ()
    """Planes the sender may use (--planes); empty = all."""

    @classmethod
    def decode_untrusted(cls, body: bytes | bytearray) -> Self:
        p = super(PerfParams, cls).decode_untrusted(body)
        if not 1 <= p.length <= 1 << 30 or p.nbytes < 0 or p.duration < 0 or p.parallel < 1:
            raise PerfError("parameters out of range")
        return p


@dataclass(frozen=True, slots=True)
class CpuSeconds(Record):
    """A process's CPU seconds over its data phase: the peer prints them as iperf3 prints
    its remote CPU utilization (the whole process, as iperf3's)."""

    user_s: float
    system_s: float


@dataclass(frozen=True, slots=True)
class PlaneReport(Record):
    """One plane of a connection at the end of its data phase."""

    plane: int
    up: bool
    """Its port is up."""
    active_evs: int
    usable_evs: int
    retired_evs: int
    sent: int
    """Data packets sent."""
    acked: int
    ecn: int
    lost: int
    window: int
    """Congestion window, bytes."""
    marked: float
    """Moving average of ECN echoes, rounded to 3 places."""


@dataclass(frozen=True, slots=True)
class EvReport(Record):
    """One EV of a connection (those that sent, and every non-backup one)."""

    ev: int
    plane: int
    hops: tuple[str, ...]
    """Switches of its path."""
    state: str
    """good, skip, assumed_bad or denied (protocol/ev.py)."""
    role: str
    """active, backup or retired."""
    sent: int
    acked: int
    ecn: int
    lost: int
    retired: int
    """Times it was retired."""
    readmitted: int


@dataclass(frozen=True, slots=True)
class ConnReport(Record):
    """A connection's counters, per plane and per EV: the end of an E or R message, and
    what the interval lines read while it runs."""

    counters: dict[str, int]
    """Its ConnCounters (protocol/counters.py) by name."""
    planes: tuple[PlaneReport, ...]
    evs: tuple[EvReport, ...]
    srtt_us: float | None
    """Smoothed RTT, microseconds; None before the first sample."""


@dataclass(frozen=True, slots=True)
class SenderReport(Message):
    """The E message: what the sender says once its last data byte is acknowledged."""

    KIND = KIND_END
    bytes: int
    """Data bytes sent."""
    digest: str
    """Their digest (session.py ``StreamDigest``), hex."""
    seconds: float
    """The data phase's length."""
    cpu: CpuSeconds | None
    """The sender process's CPU seconds over it; None: not said."""
    conn: ConnReport = field(metadata=INLINE)


@dataclass(frozen=True, slots=True)
class ReceiverReport(Message):
    """The R message: what the receiver got, and its verdict."""

    KIND = KIND_RESULT
    bytes: int
    """Data bytes delivered."""
    digest: str
    """Their digest, hex."""
    seconds: float
    """The data phase's length."""
    verified: bool
    """The byte count and the digest equal the E message's."""
    cpu: CpuSeconds | None
    """The receiver process's CPU seconds over it; None: not said."""
    conn: ConnReport = field(metadata=INLINE)
