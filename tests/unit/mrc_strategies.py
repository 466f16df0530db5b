"""Hypothesis strategies for MRC frames and paths, shared by the codec tests (both backends).

``packets()`` draws (path, header, payload) that a correct decoder must accept once the
network has done its work (``deliver``): every data placement rule holds, ACK bitmaps are
zero, uSID paths carry their final destination.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from mrc_transport.wire.frames import (
    MAX_PENALTY,
    CloseHeader,
    Common,
    DataHeader,
    Ecn,
    Flags,
    Header,
    NackHeader,
    NackReason,
    Opcode,
    PathHeader,
    ProbeHeader,
    SackHeader,
    SetupHeader,
)
from srv6 import usid

U16 = st.integers(0, 0xFFFF)
U32 = st.integers(0, 0xFFFF_FFFF)
U64 = st.integers(0, 0xFFFF_FFFF_FFFF_FFFF)
ADDRESSES = st.binary(min_size=16, max_size=16)
FLAGS = st.integers(0, 0x0F).map(Flags)
BLOCK = 0xFCBBBBBB


def commons(opcodes: list[Opcode]) -> st.SearchStrategy[Common]:
    return st.builds(Common, st.sampled_from(opcodes), FLAGS, U32, U32)


@st.composite
def data_headers(draw: st.DrawFn, payload_len: int) -> DataHeader:
    """A WRITE_* header whose placement rules hold for a payload of payload_len bytes."""
    common = draw(
        commons([Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY])
    )
    top = 0xFFFF_FFFF
    if common.opcode == Opcode.WRITE_ONLY:
        offset, msg_len = 0, payload_len
    elif common.opcode == Opcode.WRITE_FIRST:
        offset, msg_len = 0, draw(st.integers(payload_len, top))
    elif common.opcode == Opcode.WRITE_LAST:
        offset = draw(st.integers(0, top - payload_len))
        msg_len = offset + payload_len
    else:
        offset = draw(st.integers(0, top - payload_len))
        msg_len = draw(st.integers(offset + payload_len, top))
    return DataHeader(common, draw(U32), draw(U32), offset, msg_len, draw(U64))


def control_headers() -> st.SearchStrategy[Header]:
    penalty = st.integers(0, MAX_PENALTY)  # 7 bits
    sack = st.builds(
        SackHeader, commons([Opcode.SACK]), U32, U32, U64, U32, U64, U16, penalty, U32, U64,
        U32, U64,
    )  # fmt: skip
    ack = st.builds(
        SackHeader, commons([Opcode.ACK]), U32, U32, st.just(0), U32, U64, U16, penalty, U32,
        U64, U32, U64,
    )  # fmt: skip
    nack = st.builds(
        NackHeader, commons([Opcode.NACK]), U32, st.sampled_from(list(NackReason)), U32, U64
    )
    probe = st.builds(ProbeHeader, commons([Opcode.PROBE, Opcode.PROBE_REPLY]), U32, U32, U64)
    setup = st.builds(
        SetupHeader, commons([Opcode.SETUP, Opcode.SETUP_ACK]), U32, U32, U16, U16, U64
    )
    close = st.builds(CloseHeader, commons([Opcode.CLOSE, Opcode.CLOSE_ACK]), U32)
    return st.one_of(sack, ack, nack, probe, setup, close)


def _path_fields() -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {
            "ev": U32,
            "dscp": st.integers(0, 63),
            "ecn": st.sampled_from(list(Ecn)),
            "dport": st.integers(1, 0xFFFF),
            "hop_limit": st.integers(0, 255),
        }
    )


@st.composite
def paths(draw: st.DrawFn, kind: str | None = None) -> PathHeader:
    """A transmit PathHeader: "plain", "usid" (2-6 uSIDs), "encap" (the same on an outer
    header, an inner one to the final destination) or "srh" (1-6 segments)."""
    kind = kind or draw(st.sampled_from(["plain", "usid", "encap", "srh"]))
    src = draw(ADDRESSES)
    fields = draw(_path_fields())
    if kind in ("usid", "encap"):
        usids = draw(st.lists(st.integers(1, 0xFFFF), min_size=2, max_size=usid.MAX_USIDS))
        container = usid.pack(BLOCK, usids)
        final = usid.final_destination(container)
        encap = kind == "encap"
        return PathHeader(src, container.packed, final.packed, encap=encap, **fields)  # type: ignore[arg-type]
    if kind == "srh":
        segments = tuple(draw(st.lists(ADDRESSES, min_size=1, max_size=6)))
        return PathHeader(src, segments[0], None, segments, **fields)  # type: ignore[arg-type]
    return PathHeader(src, draw(ADDRESSES), None, **fields)  # type: ignore[arg-type]


@st.composite
def packets(
    draw: st.DrawFn, kind: str | None = None, max_payload: int = 64
) -> tuple[PathHeader, Header, bytes]:
    """(path, header, payload): data packets with a payload, control packets without."""
    path = draw(paths(kind))
    if draw(st.booleans()):
        payload = draw(st.binary(max_size=max_payload))
        return path, draw(data_headers(len(payload))), payload
    return path, draw(control_headers()), b""


def deliver(path: PathHeader, packet: bytes) -> bytes:
    """The packet as the last host receives it: every uSID shift done, an SRH left as sent.

    An SRH packet arrives with segments_left = 0 and the destination set to segments[0];
    the checksum covers segments[0] either way and the codec does not require
    segments_left == 0, so leaving it as sent is enough here.
    """
    if path.segments or path.final_dst is None:
        return packet
    while packet[24:40] != path.final_dst:
        packet = usid.shift_packet(packet)
    return packet


def received_path(path: PathHeader, packet: bytes) -> PathHeader:
    """What decode_untrusted should report for ``path`` given the delivered ``packet``
    (encapsulated: the inner destination too)."""
    return replace(path, dst=packet[24:40], final_dst=path.final_dst if path.encap else None)
