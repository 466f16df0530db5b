"""The one error every ``*_untrusted`` parser raises (STYLE.md principle 6)."""

from __future__ import annotations

# Stable counter keys, one per class of malformed input (docs/protocol.md, "Parsing").
REASONS = frozenset(
    {
        "truncated",  # shorter than a header or a length field says
        "not_ipv6",  # IP version is not 6
        "bad_length",  # IPv6 payload length / UDP length / control body length inconsistent
        "not_udp",  # next header is neither UDP nor one SRH followed by UDP
        "bad_srh",  # malformed SRH (RFC 8754)
        "bad_port",  # UDP destination port is not the one expected
        "bad_checksum",  # zero or wrong UDP checksum (over the final destination)
        "bad_version",  # MRC version is not 1
        "unknown_opcode",  # MRC opcode not in the table
        "bad_message",  # data payload outside [0, msg_len] or first/last rules broken
        "bad_field",  # a field value outside its set: flags, NACK reason, ACK bitmap
    }
)


class BadPacket(Exception):
    """A received packet that is not a valid MRC packet.

    The receive loop counts ``reason`` and drops the packet; the message says what was
    wrong for a human.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        """Short stable counter key, one of REASONS."""
