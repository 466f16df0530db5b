"""MRC frames: the protocol core's view of a packet, independent of how it is encoded.

The protocol core (mrc_transport/protocol/) consumes and produces these frozen dataclasses;
the codecs (mrc_transport/wire/codec.py and the C fast path) turn them into complete
IPv6 packets and back. Byte layouts are in docs/protocol.md; every field below maps to
exactly one field there. All integers are unsigned and travel big-endian.

Where the layout follows the MRC 1.0 / UET design and where it differs is documented in
docs/protocol.md, section "Differences from the MRC specification".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

MRC_VERSION = 1
MRC_UDP_PORT = 4791  # RoCEv2's port, which MRC keeps (mrc-protocol-notes.md)
IPV6_IN_IPV6 = 41  # next header of an encapsulated IPv6 packet (RFC 2473, RFC 8200 4)

# Header sizes in bytes (docs/protocol.md).
IPV6_HEADER_LEN = 40
UDP_HEADER_LEN = 8
COMMON_HEADER_LEN = 12
DATA_HEADER_LEN = COMMON_HEADER_LEN + 24  # psn, msn, msg_offset, msg_len, ts
SACK_HEADER_LEN = COMMON_HEADER_LEN + 56
NACK_HEADER_LEN = COMMON_HEADER_LEN + 20
PROBE_HEADER_LEN = COMMON_HEADER_LEN + 16
SETUP_HEADER_LEN = COMMON_HEADER_LEN + 20
CLOSE_HEADER_LEN = COMMON_HEADER_LEN + 4

SACK_BITMAP_BITS = 64
MAX_PENALTY = 127  # the SACK's window penalty is a 7-bit field (UEC)


class Opcode(enum.IntEnum):
    """The MRC header's opcode byte."""

    WRITE_FIRST = 0x00
    WRITE_MIDDLE = 0x01
    WRITE_LAST = 0x02
    WRITE_ONLY = 0x03
    ACK = 0x04
    SACK = 0x05
    NACK = 0x06
    PROBE = 0x07
    PROBE_REPLY = 0x08
    SETUP = 0x09
    SETUP_ACK = 0x0A
    CLOSE = 0x0B
    CLOSE_ACK = 0x0C


DATA_OPCODES = frozenset(
    {Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY}
)


class Flags(enum.IntFlag):
    """The MRC header's flags byte."""

    NONE = 0
    RTX = 0x01  # this data packet is a retransmission
    TS = 0x02  # the timestamp field is valid
    ECN_ECHO = 0x04  # (SACK/ACK/NACK) the acknowledged packet arrived with CE
    ACK_REQ = 0x08  # (data) the sender asks for an immediate SACK (last of a burst)
    RESTORE_WINDOW = 0x10  # (SACK) the receiver's window penalty is over: restore the window


KNOWN_FLAGS = int(Flags.RTX | Flags.TS | Flags.ECN_ECHO | Flags.ACK_REQ | Flags.RESTORE_WINDOW)
FLAGS_BY_VALUE: tuple[Flags, ...] = tuple(Flags(v) for v in range(KNOWN_FLAGS + 1))
"""Every combination of the known flag bits, indexed by its value. On per-packet paths a
lookup here replaces ``Flags(v)`` or an IntFlag ``|``, which go through the enum
machinery."""


class NackReason(enum.IntEnum):
    """Why a receiver NACKed a PSN (MRC NACK reason codes)."""

    TRIMMED = 1
    TRIMMED_LASTHOP = 2
    NO_BUFFER = 3
    PSN_OUT_OF_WINDOW = 4
    UNKNOWN_CONNECTION = 5
    SEQUENCE_ERROR = 6
    """Go-back-N only (Config.recovery): a packet came out of PSN order; the PSN named
    is the one expected, from which the sender resends all (RoCE's NAK code 0, PSN
    sequence error)."""


class Ecn(enum.IntEnum):
    """The two ECN bits of the IPv6 traffic class (RFC 3168)."""

    NOT_ECT = 0b00
    ECT1 = 0b01
    ECT0 = 0b10
    CE = 0b11


# DSCP classes: acknowledgements and probes travel above data, as MRC's control traffic.
# Data has three: new data and retransmissions in two trimmable classes, and a class a
# switch drops rather than trims, for a connection that asks not to be trimmed. OCP's MRC
# API once gave a QP a traffic class each for requests, retransmitted requests and control
# (mrc.h, February 2025); no values are published, so these are ours: AF3's three drop
# precedences (RFC 2597), one class and one queue at a switch.
DSCP_DATA = 26  # AF31
DSCP_RTX = 28  # AF32
DSCP_NO_TRIM = 30  # AF33
DSCP_CONTROL = 46  # EF
TRIMMABLE_DSCPS: Final = frozenset({DSCP_DATA, DSCP_RTX})
"""The classes a trimming switch port cuts to their headers above its threshold."""
# A data packet a switch trimmed to its headers (docs/protocol.md, "Trimmed data packets"):
# from RFC 2474's pool 2 (xxxx11, experimental or local use), one value for a trim on the
# way and one for a trim at the last hop (a T0 port facing the receiver).
DSCP_TRIMMED = 43  # 0b101011
DSCP_TRIMMED_LASTHOP = 47  # 0b101111
TRIM_REASONS: Final[dict[int, NackReason]] = {
    DSCP_TRIMMED: NackReason.TRIMMED,
    DSCP_TRIMMED_LASTHOP: NackReason.TRIMMED_LASTHOP,
}
"""The NACK reason a receiver answers a trimmed stub with, by the stub's DSCP."""


def data_dscp(rtx: bool, no_trim: bool) -> int:
    """The DSCP of a data packet: a no-trim connection's every packet in DSCP_NO_TRIM
    (its retransmissions too: it asked for drops), else a retransmission in DSCP_RTX and
    new data in DSCP_DATA."""
    if no_trim:
        return DSCP_NO_TRIM
    return DSCP_RTX if rtx else DSCP_DATA


@dataclass(frozen=True, slots=True)
class Common:
    """Fields every MRC header starts with."""

    opcode: Opcode
    """What kind of packet this is."""
    flags: Flags
    """RTX, TS, ECN_ECHO, ACK_REQ."""
    dst_conn: int
    """32-bit connection id chosen by the receiver of this packet."""
    src_conn: int
    """32-bit connection id chosen by the sender of this packet."""


@dataclass(frozen=True, slots=True)
class DataHeader:
    """A WRITE_* packet: one segment of one message."""

    common: Common
    psn: int
    """32-bit packet sequence number; one per data packet, retransmissions keep theirs."""
    msn: int
    """32-bit message sequence number; completions are delivered in MSN order."""
    msg_offset: int
    """Byte offset of this payload in its message, so the receiver places it out of order."""
    msg_len: int
    """Total length of the message in bytes (at most 2**32 - 1)."""
    ts: int
    """Sender's transmit time, 64-bit nanoseconds of its own clock; echoed in the SACK."""


@dataclass(frozen=True, slots=True)
class SackHeader:
    """A SACK (or ACK, the same layout with an empty bitmap)."""

    common: Common
    cum_psn: int
    """Every PSN below this one has arrived (the next PSN the receiver expects)."""
    sack_base: int
    """PSN of bit 0 of the bitmap."""
    bitmap: int
    """64 bits: bit i set means PSN sack_base + i has arrived."""
    ev: int
    """The 32-bit EV of the data packet that triggered this SACK (reflected)."""
    ts: int
    """The triggering data packet's ts (reflected), for RTT and queueing delay."""
    ooo_count: int
    """16-bit count of packets received out of order since the last cumulative advance."""
    rwnd_penalty: int
    """7-bit receiver window penalty, 0-127 (UEC): the sender takes penalty/128 of the
    bytes this SACK acknowledges off its window (0 = none)."""
    rwnd: int
    """Receive window in bytes beyond cum_psn that the sender may have in flight."""
    rcvd_bytes: int = 0
    """64-bit count of payload bytes the receiver took so far (htsim's recvd_bytes): what
    arrived between two SACKs even when SACKs are lost."""
    service_time: int = 0
    """Nanoseconds the receiver held the triggering packet before this SACK left (OCP's
    service time, UEC's): the sender takes it out of the RTT's queueing delay."""
    ports_down: int = 0
    """64-bit bitmap of the receiver's NIC ports that are down, bit p = the port of plane p
    (the paper's port status update, section 3): the sender stops using that plane."""


@dataclass(frozen=True, slots=True)
class NackHeader:
    """A NACK for one PSN."""

    common: Common
    psn: int
    """The PSN being NACKed."""
    reason: NackReason
    """Why."""
    ev: int
    """The EV the NACKed packet arrived on (reflected)."""
    ts: int
    """The NACKed packet's ts (reflected)."""


@dataclass(frozen=True, slots=True)
class ProbeHeader:
    """PROBE or PROBE_REPLY: tests one EV without consuming a PSN."""

    common: Common
    probe_id: int
    """32-bit id chosen by the prober, echoed in the reply."""
    ev: int
    """In a reply: the EV the probe arrived on. In a probe: 0."""
    ts: int
    """In a probe: send time. In a reply: the probe's ts, reflected."""


@dataclass(frozen=True, slots=True)
class SetupHeader:
    """SETUP or SETUP_ACK: opens a connection."""

    common: Common
    initial_psn: int
    """The first PSN this side will send."""
    rwnd: int
    """Initial receive window in bytes."""
    mtu: int
    """16-bit largest MRC payload this side accepts."""
    ev_count: int
    """16-bit number of EVs the sender intends to use (informational)."""
    ts: int
    """Send time (SETUP) or reflected SETUP ts (SETUP_ACK), for the first RTT sample."""


@dataclass(frozen=True, slots=True)
class CloseHeader:
    """CLOSE or CLOSE_ACK: ends a connection after all data is acknowledged."""

    common: Common
    final_psn: int
    """One past the last PSN the sender of the CLOSE sent."""


Header = DataHeader | SackHeader | NackHeader | ProbeHeader | SetupHeader | CloseHeader


@dataclass(frozen=True, slots=True)
class PathHeader:
    """Everything outside the MRC header: IPv6, an optional SRH or inner IPv6 header, UDP.

    On transmit the codec builds these; on receive it fills them from the packet as it
    arrived (dst is then the final destination after every uSID shift or SRH step).
    """

    src: bytes
    """16-byte IPv6 source address."""
    dst: bytes
    """16-byte IPv6 destination address as sent: a uSID container or the first SID.
    On receive: the destination as it arrived (the final one)."""
    final_dst: bytes | None = None
    """Transmit only: the address the packet arrives with, over which the UDP checksum is
    computed (RFC 8200 8.1). None means segments[-1] with an SRH, else dst itself. A uSID
    path must set it: the kernel does not fix the checksum when it shifts a uSID."""
    segments: tuple[bytes, ...] = ()
    """SRH segment list in path order (first hop first); empty means no SRH."""
    ev: int = 0
    """32-bit entropy value: low 20 bits in the flow label, high 16 bits in the UDP
    source port (docs/protocol.md, "Entropy value")."""
    dscp: int = DSCP_DATA
    """6-bit DSCP of the traffic class."""
    ecn: Ecn = Ecn.ECT0
    """2-bit ECN field of the traffic class."""
    dport: int = MRC_UDP_PORT
    """UDP destination port."""
    hop_limit: int = 64
    """IPv6 hop limit."""
    encap: bool = False
    """IPv6-in-IPv6 (RFC 2473; the paper encapsulates, section 2): the outer header goes
    src -> dst (the uSID path) with next header 41, the inner one src -> final_dst (the
    NICs' own addresses) with next header UDP, whose checksum covers the inner addresses,
    which no switch changes. Not with segments. On receive: src and final_dst are the
    inner header's, the traffic class, flow label and hop limit the outer header's (the
    switches mark and count on that one; RFC 6040's decapsulation keeps its CE)."""


@dataclass(frozen=True, slots=True)
class Packet:
    """A parsed packet: what ``decode_untrusted`` returns."""

    path: PathHeader
    """IPv6/SRH/UDP fields as received."""
    header: Header
    """The MRC header."""
    payload: bytes
    """Data payload (empty for control packets)."""
