"""Events the protocol core reports to its user, in the order they happened.

Every state change that a CLI, timeline or demo may want to show is one of these small
frozen dataclasses (the model is aioquic's quic/events.py). Each carries the time it
happened (the ``now`` the core was given) and the local connection id.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every event."""

    time: float
    """The ``now`` of the call during which it happened, seconds."""
    conn: int
    """Local connection id."""


@dataclass(frozen=True, slots=True)
class ConnectionEstablished(Event):
    """SETUP / SETUP_ACK completed."""

    peer_conn: int
    """The peer's connection id."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The connection ended; nothing more will be sent or delivered."""

    reason: str
    """"closed" (CLOSE / CLOSE_ACK), "peer closed", "setup failed", "rto failed"."""


@dataclass(frozen=True, slots=True)
class MessageReceived(Event):
    """A whole message arrived; messages are reported in MSN order."""

    msn: int
    """Message sequence number."""
    data: bytearray
    """The message, in the buffer it was reassembled in (no copy)."""


@dataclass(frozen=True, slots=True)
class MessageAcked(Event):
    """Every byte of a sent message was acknowledged."""

    msn: int
    """Message sequence number."""
    length: int
    """Message length in bytes."""


@dataclass(frozen=True, slots=True)
class PathRetired(Event):
    """An EV went ASSUMED_BAD (or DENIED) and left the active set."""

    ev: int
    """The EV."""
    plane: int
    """Its plane."""
    reason: str
    """"loss", "timeout", "path" (its SRv6 path failed on other EVs), "return path" (a
    reverse EV whose probe went unanswered, reverse.py), "port" (our NIC port of its
    plane is down), "peer port" (the peer's is, its SACK said) or "denied"."""


@dataclass(frozen=True, slots=True)
class ReverseEvChosen(Event):
    """An EV joined the reverse EV set: acknowledgements of its plane go on it
    (reverse.py)."""

    ev: int
    """The EV."""
    plane: int
    """Its plane."""


@dataclass(frozen=True, slots=True)
class PathReadmitted(Event):
    """A retired EV passed enough probes and is usable again."""

    ev: int
    """The EV."""
    plane: int
    """Its plane."""


@dataclass(frozen=True, slots=True)
class PathSkipped(Event):
    """An EV went to SKIP for a rotation (ECN echo or trimmed NACK)."""

    ev: int
    """The EV."""
    plane: int
    """Its plane."""


@dataclass(frozen=True, slots=True)
class PlaneDown(Event):
    """No EV of this plane is usable any more; traffic moved to the other planes."""

    plane: int
    """The plane."""


@dataclass(frozen=True, slots=True)
class PlaneUp(Event):
    """An EV of a plane that was down was readmitted."""

    plane: int
    """The plane."""


@dataclass(frozen=True, slots=True)
class Retransmit(Event):
    """A data packet was sent again."""

    psn: int
    """Its PSN (64-bit internal value)."""
    old_ev: int
    """The EV of the previous transmission."""
    new_ev: int
    """The EV of this one (different whenever another EV is usable)."""
    cause: str = ""
    """Why it was sent again: "loss" (RACK), "rto", "port" (our port refused or lost it),
    "trimmed" (a NACK for a trimmed packet) or "nack" (another NACK)."""
    after: float = 0.0
    """Seconds since the transmission it replaces."""


@dataclass(frozen=True, slots=True)
class TrimmedNacked(Event):
    """A stub of a data packet a switch trimmed arrived and was NACKed (receiving side)."""

    psn: int
    """Its PSN, as the stub carried it (32 bits)."""
    ev: int
    """The EV it arrived on."""
    lasthop: bool
    """Trimmed at the last hop (TRIMMED_LASTHOP), else on the way (TRIMMED)."""


@dataclass(frozen=True, slots=True)
class EcnMarked(Event):
    """A SACK echoed a CE mark for a packet sent on this EV."""

    ev: int
    """The EV."""


@dataclass(frozen=True, slots=True)
class RtoFired(Event):
    """The retransmission timer expired."""

    rto: float
    """The timeout that expired, seconds."""
    count: int
    """Consecutive RTOs so far."""
