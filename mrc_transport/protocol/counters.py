"""Named counters of one connection and of an endpoint: cheap to read for a live view.

Bad input is never an exception: it increments one of these and is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ConnCounters:
    """Counters of one connection (both directions)."""

    packets_sent: int = 0
    """Every packet handed to the IO layer."""
    data_sent: int = 0
    """Data packets, retransmissions included."""
    bytes_sent: int = 0
    """Payload bytes of data packets, retransmissions included."""
    retransmits: int = 0
    """Data packets sent again."""
    lost: int = 0
    """Data packets declared lost."""
    rtos: int = 0
    """Retransmission timeouts."""
    messages_sent: int = 0
    """Messages queued by the application."""
    messages_acked: int = 0
    """Messages fully acknowledged."""
    packets_received: int = 0
    """Every packet given to ``receive``."""
    data_received: int = 0
    """Data packets accepted (not duplicates)."""
    bytes_received: int = 0
    """Payload bytes accepted."""
    messages_received: int = 0
    """Messages delivered."""
    sacks_sent: int = 0
    """SACKs sent."""
    sacks_superseded: int = 0
    """Times a SACK fell due while one was already owed: merged into it, since the SACK
    is built from the state at the moment it is sent (connection.py ``_queue_sack``)."""
    sacks_received: int = 0
    """SACKs accepted."""
    ecn_echoes: int = 0
    """SACKs with ECN echo received."""
    ce_received: int = 0
    """Data packets that arrived with CE."""
    trimmed_received: int = 0
    """Trimmed data packets (stubs) that arrived and were NACKed."""
    trimmed_ignored: int = 0
    """Stubs for a PSN already received or outside the reorder window: no NACK."""
    nacks_sent: int = 0
    """NACKs sent."""
    nacks_received: int = 0
    """NACKs accepted."""
    rtx_nack: int = 0
    """Retransmissions a NACK asked for (a trimmed packet resent at once)."""
    rtx_go_back: int = 0
    """Go-back-N: packets a sequence error sent again (every one in flight from it on)."""
    go_back_dropped: int = 0
    """Go-back-N: data packets dropped for arriving out of PSN order."""
    probes_sent: int = 0
    """PROBEs sent (EV probes and window probes)."""
    probe_replies: int = 0
    """PROBE_REPLYs accepted."""
    spurious_rtx: int = 0
    """Packets acknowledged after being declared lost."""
    send_failed: int = 0
    """Packets the local stack refused at once (e.g. ENETUNREACH: our port is down)."""
    # bad input, counted and dropped
    dup_packets: int = 0
    """Data packets whose PSN had already arrived."""
    psn_out_of_window: int = 0
    """Data packets beyond the reorder window."""
    msn_out_of_window: int = 0
    """Data packets for a message outside the message window or already delivered."""
    inconsistent_header: int = 0
    """Headers that contradict themselves or earlier packets (lengths, offsets)."""
    bad_segment: int = 0
    """Data packets off the segment grid: offset not a multiple of the segment size, or a
    payload that is neither a full segment nor the last one ending at msg_len."""
    dup_segment: int = 0
    """Data packets with a new PSN for a segment already placed (forged or buggy)."""
    sack_beyond_sent: int = 0
    """SACKs acknowledging PSNs never sent."""
    sack_stale: int = 0
    """SACKs older than the current cumulative PSN (still used for their bitmap)."""
    sack_unknown_ev: int = 0
    """SACKs reflecting an EV this connection does not own."""
    nack_invalid: int = 0
    """NACKs for PSNs not in flight, or for an earlier transmission than the one in
    flight."""
    probe_unknown: int = 0
    """PROBE_REPLYs that match no outstanding probe."""
    reverse_probes: int = 0
    """Probes of a reverse EV (the EVs acknowledgements go on) while idle (reverse.py)."""
    reverse_retired: int = 0
    """Reverse EVs retired because their probe went unanswered: a dead return path."""
    wrong_type: int = 0
    """Opcode and header type disagree."""
    wrong_state: int = 0
    """Packets that make no sense in the connection's state."""
    close_early: int = 0
    """CLOSEs received before every PSN below final_psn arrived."""
    illegal_transitions: int = 0
    """Inputs the connection's state had no transition for: a bug of the core, raised
    under the test suite (protocol/transitions.py)."""


@dataclass(slots=True)
class EndpointCounters:
    """Counters of an endpoint (packets no connection could take)."""

    unknown_connection: int = 0
    """Packets for a connection id the endpoint does not know."""
    setup_refused: int = 0
    """SETUPs with no path back to the peer or when not accepting."""
    connections: int = 0
    """Connections created."""
    connections_removed: int = 0
    """Connections dropped after their drain period (and their events were read)."""
