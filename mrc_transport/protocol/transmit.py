"""What the core hands to the IO layer: one packet to encode and send."""

from __future__ import annotations

from dataclasses import dataclass

from mrc_transport.frozen import fast_constructor
from mrc_transport.wire.frames import Header
from srv6.path import SrPath


@dataclass(frozen=True, slots=True)
class Transmit:
    """One packet to send: enough for the IO layer to call the codec."""

    path: SrPath
    """SRv6 path (source address, uSID or SRH encoding, port)."""
    ev: int
    """32-bit EV: flow label and UDP source port."""
    header: Header
    """The MRC header."""
    payload: memoryview | bytes
    """Data payload: a slice of the application's message, not a copy."""
    dscp: int
    """DSCP of the traffic class (data, retransmission, no-trim, control: wire/frames.py)."""


new_transmit = fast_constructor(Transmit)
"""``Transmit(...)`` for per-packet paths: the same object without the frozen ``__init__``
(mrc_transport/frozen.py)."""
