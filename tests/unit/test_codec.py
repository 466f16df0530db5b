"""The MRC codec through the live backend (``mrc_transport.wire``): round trips for every
opcode, the final-destination checksum rule, every rejection reason, and fuzzing that
proves decode_untrusted raises BadPacket and nothing else.

The suite runs twice in CI (C fast path, then MRC_PUREPYTHON=1), so these tests hold both
backends to docs/protocol.md.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from ipaddress import IPv6Address

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrc_transport import wire
from mrc_transport.wire import (
    BadPacket,
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
    decode_untrusted,
    encode,
    encode_data_batch,
)
from mrc_transport.wire.errors import REASONS
from mrc_transport.wire.frames import DSCP_DATA, DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP
from srv6 import usid
from srv6.checksum import udp6_checksum
from srv6.srh import Srh
from tests.unit.mrc_strategies import data_headers, deliver, packets, paths, received_path

SRC = IPv6Address("2001:db8:0:1::10").packed
PLAIN_DST = IPv6Address("2001:db8:0:2::20").packed
USID_DST = usid.pack(0xFCBBBBBB, [0x100, 0x201, 0x300, 0x400])
SEGMENTS = tuple(IPv6Address(f"fc00:{i}::1").packed for i in (1, 2, 3))


def common(opcode: Opcode, flags: Flags = Flags.NONE) -> Common:
    return Common(opcode, flags, 0x1111_2222, 0x3333_4444)


ONE_OF_EACH: list[tuple[Header, bytes]] = [
    (DataHeader(common(Opcode.WRITE_FIRST, Flags.TS), 7, 1, 0, 100, 10**18), b"a" * 40),
    (DataHeader(common(Opcode.WRITE_MIDDLE, Flags.RTX), 8, 1, 40, 100, 5), b"b" * 40),
    (DataHeader(common(Opcode.WRITE_LAST, Flags.ACK_REQ), 9, 1, 80, 100, 6), b"c" * 20),
    (DataHeader(common(Opcode.WRITE_ONLY), 10, 2, 0, 3, 2**64 - 1), b"xyz"),
    (SackHeader(common(Opcode.ACK), 11, 11, 0, 0x8000_0001, 99, 0, 0, 65536), b""),
    (
        SackHeader(
            common(Opcode.SACK, Flags.ECN_ECHO | Flags.RESTORE_WINDOW),
            11,
            12,
            2**64 - 1,
            7,
            8,
            3,
            127,
            1 << 20,
            2**64 - 1,
            2**32 - 1,
            2**64 - 1,
        ),
        b"",
    ),
    (NackHeader(common(Opcode.NACK), 12, NackReason.NO_BUFFER, 0x8000_0002, 77), b""),
    (ProbeHeader(common(Opcode.PROBE, Flags.TS), 1, 0, 123), b""),
    (ProbeHeader(common(Opcode.PROBE_REPLY), 1, 0x8000_0003, 123), b""),
    (SetupHeader(Common(Opcode.SETUP, Flags.TS, 0, 5), 1000, 1 << 20, 1400, 128, 4), b""),
    (SetupHeader(common(Opcode.SETUP_ACK), 2000, 1 << 20, 9000, 256, 4), b""),
    (CloseHeader(common(Opcode.CLOSE), 13), b""),
    (CloseHeader(common(Opcode.CLOSE_ACK), 0), b""),
]


def plain_path(**kwargs: object) -> PathHeader:
    return PathHeader(SRC, PLAIN_DST, ev=0x8765_4321, **kwargs)  # type: ignore[arg-type]


def usid_path() -> PathHeader:
    final = usid.final_destination(USID_DST).packed
    return PathHeader(SRC, USID_DST.packed, final, ev=0x8000_ABCD)


def srh_path() -> PathHeader:
    return PathHeader(SRC, SEGMENTS[0], None, SEGMENTS, ev=0xFFFF_FFFF, ecn=Ecn.CE)


def reason_of(buf: bytes, **kwargs: int) -> str:
    with pytest.raises(BadPacket) as info:
        decode_untrusted(buf, **kwargs)
    assert info.value.reason in REASONS
    return info.value.reason


@pytest.mark.parametrize(("header", "payload"), ONE_OF_EACH, ids=lambda v: getattr(v, "common", v))
@pytest.mark.parametrize("make_path", [plain_path, usid_path, srh_path])
def test_round_trip_every_opcode(
    make_path: Callable[[], PathHeader], header: Header, payload: bytes
) -> None:
    path = make_path()
    packet = deliver(path, encode(path, header, payload))
    parsed = decode_untrusted(packet)
    assert parsed.header == header
    assert parsed.payload == payload
    assert parsed.path == received_path(path, packet)


def test_ipv6_and_udp_fields_on_the_wire() -> None:
    path = plain_path(dscp=46, ecn=Ecn.ECT1, hop_limit=7, dport=5000)
    header, payload = ONE_OF_EACH[3]
    packet = encode(path, header, payload)
    first, ip_len, next_header, hop_limit = struct.unpack_from("!IHBB", packet)
    assert first >> 28 == 6
    assert (first >> 20) & 0xFF == 46 << 2 | 0b01
    assert first & 0xFFFFF == 0x54321  # flow label = EV's low 20 bits
    assert (ip_len, next_header, hop_limit) == (len(packet) - 40, 17, 7)
    assert packet[8:24] == SRC
    assert packet[24:40] == PLAIN_DST
    sport, dport, udp_len, checksum = struct.unpack_from("!HHHH", packet, 40)
    assert (sport, dport, udp_len) == (0x8765, 5000, len(packet) - 40)
    assert checksum == udp6_checksum(SRC, PLAIN_DST, packet[40:])
    assert packet[48:60] == bytes([1, 3, 0, 0]) + bytes.fromhex("1111222233334444")
    assert packet[-3:] == b"xyz"


def test_srh_layout_and_checksum_over_last_segment() -> None:
    path = srh_path()
    packet = encode(path, *ONE_OF_EACH[4])
    assert packet[6] == 43
    assert packet[24:40] == SEGMENTS[0]
    srh = Srh.decode_untrusted(packet[40:])
    assert srh.path == SEGMENTS
    assert srh.segments_left == srh.last_entry == 2
    assert srh.next_header == 17
    udp = packet[40 + srh.wire_len :]
    assert struct.unpack_from("!H", udp, 6)[0] == udp6_checksum(SRC, SEGMENTS[-1], udp)


def test_usid_packet_verifies_only_after_the_network_shifts_it() -> None:
    path = usid_path()
    packet = encode(path, *ONE_OF_EACH[0])
    assert reason_of(packet) == "bad_checksum"  # checksum is over the final destination
    hops = [packet]
    for _ in range(3):
        hops.append(usid.shift_packet(hops[-1]))
    assert [IPv6Address(p[24:40]) for p in hops] == [
        USID_DST,
        IPv6Address("fcbb:bbbb:201:300:400::"),
        IPv6Address("fcbb:bbbb:300:400::"),
        IPv6Address("fcbb:bbbb:400::"),
    ]
    assert [reason_of(p) for p in hops[1:3]] == ["bad_checksum"] * 2
    parsed = decode_untrusted(hops[3])
    assert parsed.header == ONE_OF_EACH[0][0]
    assert parsed.path.dst == IPv6Address("fcbb:bbbb:400::").packed


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(packets())
def test_round_trip_property(case: tuple[PathHeader, Header, bytes]) -> None:
    path, header, payload = case
    packet = deliver(path, encode(path, header, payload))
    assert decode_untrusted(packet, dport=path.dport) == wire.Packet(
        received_path(path, packet), header, payload
    )


@given(st.binary(max_size=200), st.sampled_from([None, 4791]))
def test_arbitrary_bytes_raise_only_bad_packet(data: bytes, dport: int | None) -> None:
    try:
        decode_untrusted(data, dport=dport)
    except BadPacket as exc:
        reason = exc.reason
        assert reason in REASONS


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    path, header, payload = draw(packets())
    packet = bytearray(deliver(path, encode(path, header, payload)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "set", "cut", "extend"]))
        if action == "cut":
            del packet[draw(st.integers(0, len(packet))) :]
        elif action == "extend":
            packet += draw(st.binary(min_size=1, max_size=20))
        elif packet:
            index = draw(st.integers(0, len(packet) - 1))
            if action == "flip":
                packet[index] ^= 1 << draw(st.integers(0, 7))
            else:
                packet[index] = draw(st.integers(0, 255))
    return bytes(packet)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_packets_raise_only_bad_packet(packet: bytes) -> None:
    try:
        parsed = decode_untrusted(packet)
    except BadPacket as exc:
        reason = exc.reason
        assert reason in REASONS
        return
    # Whatever survives is what the encoder builds from the parse, except for the bits
    # the parser ignores: flow label bits 16-19 (not part of the EV) and the reserved byte,
    # and an encapsulated packet's outer source and inner class, label and hop limit (the
    # inner source and the outer class, label and hop limit are the ones read).
    path = parsed.path
    final = path.final_dst if path.encap else path.dst
    rebuilt = encode(replace(path, final_dst=final), parsed.header, parsed.payload)
    if not path.segments:
        encap = path.encap
        assert _ignored_bits_cleared(rebuilt, encap) == _ignored_bits_cleared(packet, encap)


def _ignored_bits_cleared(packet: bytes, encap: bool = False) -> bytes:
    out = bytearray(packet)
    out[1] &= 0xF0
    if encap:
        out[8:24] = bytes(16)
        out[40:44] = b"\x60\0\0\0"
        out[47] = 0
    out[51 + 40 * encap] = 0
    return bytes(out)


def test_decode_accepts_bytearray_and_memoryview() -> None:
    packet = encode(plain_path(), *ONE_OF_EACH[0])
    expected = decode_untrusted(packet)
    assert decode_untrusted(bytearray(packet)) == expected
    assert decode_untrusted(memoryview(packet)) == expected
    assert type(decode_untrusted(memoryview(packet)).payload) is bytes


def _with(packet: bytes, offset: int, value: bytes, *, fix_checksum: bool = True) -> bytes:
    """packet with value written at offset; the UDP checksum recomputed (plain path)."""
    out = bytearray(packet)
    out[offset : offset + len(value)] = value
    if fix_checksum and len(out) >= 48:
        out[46:48] = b"\0\0"
        out[46:48] = udp6_checksum(bytes(out[8:24]), bytes(out[24:40]), out[40:]).to_bytes(2)
    return bytes(out)


def _data(opcode: Opcode, offset: int, msg_len: int, payload: bytes) -> bytes:
    header = DataHeader(common(opcode), 1, 1, offset, msg_len, 0)
    return encode(plain_path(), header, payload)


def _ip_len_fixed(packet: bytes) -> bytes:
    out = bytearray(packet)
    out[4:6] = (len(out) - 40).to_bytes(2)
    out[44:46] = (len(out) - 40).to_bytes(2)
    return _with(bytes(out), 0, b"")


DATA = encode(plain_path(), *ONE_OF_EACH[0])
SACK = encode(plain_path(), *ONE_OF_EACH[5])
NACK = encode(plain_path(), *ONE_OF_EACH[6])


@pytest.mark.parametrize(
    ("packet", "reason"),
    [
        pytest.param(DATA[:39], "truncated", id="ipv6-truncated"),
        pytest.param(DATA[:-1], "truncated", id="payload-length-past-end"),
        pytest.param(DATA + b"\0", "bad_length", id="trailing-after-ipv6-payload"),
        pytest.param(_with(DATA, 0, b"\x40"), "not_ipv6", id="ipv4-version"),
        pytest.param(_with(DATA, 6, b"\x3a"), "not_udp", id="icmpv6"),
        pytest.param(_with(DATA, 6, b"\x00"), "not_udp", id="hop-by-hop"),
        pytest.param(_with(DATA, 44, b"\x00\x09"), "bad_length", id="udp-length-short"),
        pytest.param(_with(DATA, 46, b"\x00\x00", fix_checksum=False), "bad_checksum", id="zero"),
        pytest.param(_with(DATA, 100, b"!", fix_checksum=False), "bad_checksum", id="corrupt"),
        pytest.param(_with(DATA, 48, b"\x02"), "bad_version", id="mrc-version"),
        pytest.param(_with(DATA, 49, b"\x0d"), "unknown_opcode", id="opcode-0x0d"),
        pytest.param(_with(DATA, 49, b"\xff"), "unknown_opcode", id="opcode-0xff"),
        pytest.param(_with(DATA, 50, b"\x20"), "bad_field", id="unknown-flag"),
        pytest.param(_with(SACK, 49, b"\x04"), "bad_field", id="ack-with-bitmap"),
        pytest.param(_with(NACK, 64, b"\x00"), "bad_field", id="nack-reason-0"),
        pytest.param(_with(NACK, 64, b"\x07"), "bad_field", id="nack-reason-7"),
        pytest.param(_ip_len_fixed(SACK[:-1]), "truncated", id="sack-body-short"),
        pytest.param(_ip_len_fixed(SACK + b"\0\0"), "bad_length", id="sack-trailing"),
        pytest.param(_ip_len_fixed(DATA[:56]), "truncated", id="common-short"),
        pytest.param(_data(Opcode.WRITE_FIRST, 1, 100, b"x"), "bad_message", id="first-offset"),
        pytest.param(_data(Opcode.WRITE_ONLY, 0, 2, b"x"), "bad_message", id="only-short"),
        pytest.param(_data(Opcode.WRITE_LAST, 5, 7, b"x"), "bad_message", id="last-short"),
        pytest.param(_data(Opcode.WRITE_MIDDLE, 5, 5, b"x"), "bad_message", id="past-msg-len"),
    ],
)
def test_rejections(packet: bytes, reason: str) -> None:
    assert reason_of(packet) == reason


@pytest.mark.parametrize("opcode", [Opcode.WRITE_LAST, Opcode.WRITE_ONLY])
@pytest.mark.parametrize("dscp", [DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP])
def test_a_trimmed_stub_of_a_last_segment_is_not_malformed(opcode: Opcode, dscp: int) -> None:
    """A switch cut its payload (docs/protocol.md, "Trimmed data packets"), so it ends short
    of msg_len; the receiver must read it to NACK it. Untrimmed, the same is malformed."""
    offset = 0 if opcode is Opcode.WRITE_ONLY else 61440
    header = DataHeader(common(opcode, Flags.TS), 9, 1, offset, 65536, 5)
    stub = encode(plain_path(dscp=dscp), header, b"")
    parsed = decode_untrusted(stub)
    assert (parsed.header, parsed.path.dscp, parsed.payload) == (header, dscp, b"")
    meta = {"src": SRC, "dst": PLAIN_DST, "sport": 0x8765, "dport": 4791, "flow_label": 0x4321}
    got = wire.decode_datagram_untrusted(stub[48:], tclass=dscp << 2 | 2, **meta)
    assert (got.header, got.path.dscp, got.payload) == (header, dscp, b"")
    assert reason_of(encode(plain_path(dscp=DSCP_DATA), header, b"")) == "bad_message"
    with pytest.raises(BadPacket, match="bad_message"):
        wire.decode_datagram_untrusted(stub[48:], tclass=DSCP_DATA << 2 | 2, **meta)


def test_reserved_byte_is_ignored() -> None:
    assert decode_untrusted(_with(DATA, 51, b"\xaa")) == decode_untrusted(DATA)


def test_bad_srh_and_srh_next_header() -> None:
    packet = encode(srh_path(), *ONE_OF_EACH[4])
    assert reason_of(_with(packet, 42, b"\x02", fix_checksum=False)) == "bad_srh"
    assert reason_of(_with(packet, 43, b"\x07", fix_checksum=False)) == "bad_srh"
    assert reason_of(_with(packet, 40, b"\x3a", fix_checksum=False)) == "not_udp"


def test_checksum_over_active_srh_segment_is_rejected() -> None:
    # A sender that checksums over the first hop instead of segments[0] must fail.
    path = replace(srh_path(), final_dst=SEGMENTS[0])
    assert reason_of(encode(path, *ONE_OF_EACH[4])) == "bad_checksum"


def test_dport_filter() -> None:
    packet = encode(plain_path(dport=5000), *ONE_OF_EACH[4])
    assert decode_untrusted(packet, dport=5000).path.dport == 5000
    assert reason_of(packet, dport=4791) == "bad_port"


def test_ev_rebuilt_from_sport_and_flow_label() -> None:
    packet = bytearray(encode(plain_path(), *ONE_OF_EACH[7]))
    packet[1] = (packet[1] & 0xF0) | 0x0F  # flow label bits 16-19 are not part of the EV
    parsed = decode_untrusted(_with(bytes(packet), 0, b""))
    assert parsed.path.ev == 0x8765_4321


@given(st.lists(st.tuples(paths(), st.binary(max_size=40)), max_size=8), st.data())
def test_encode_data_batch_is_encode_back_to_back(
    cases: list[tuple[PathHeader, bytes]], data: st.DataObject
) -> None:
    headers = [data.draw(data_headers(len(payload))) for _, payload in cases]
    path_list = [path for path, _ in cases]
    payloads = [payload for _, payload in cases]
    buf, offsets = encode_data_batch(path_list, headers, payloads)
    assert len(offsets) == len(cases) + 1
    assert offsets[0] == 0
    assert offsets[-1] == len(buf)
    for i, (path, header, payload) in enumerate(zip(path_list, headers, payloads, strict=True)):
        assert bytes(buf[offsets[i] : offsets[i + 1]]) == encode(path, header, payload)


def test_encode_data_batch_rejects_mismatched_lengths() -> None:
    header, payload = ONE_OF_EACH[0]
    with pytest.raises(ValueError, match="lengths"):
        encode_data_batch([plain_path()], [header, header], [payload])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("path", "header", "payload"),
    [
        (plain_path(), DataHeader(common(Opcode.SACK), 1, 1, 0, 1, 0), b"x"),
        (plain_path(), ONE_OF_EACH[4][0], b"payload"),
        (plain_path(), DataHeader(common(Opcode.WRITE_ONLY), 2**32, 1, 0, 1, 0), b"x"),
        (plain_path(), CloseHeader(Common(Opcode.CLOSE, Flags.NONE, -1, 0), 0), b""),
        (replace(plain_path(), ev=2**32), ONE_OF_EACH[4][0], b""),
        (replace(plain_path(), dscp=64), ONE_OF_EACH[4][0], b""),
        (replace(plain_path(), src=b"short"), ONE_OF_EACH[4][0], b""),
        (plain_path(), DataHeader(common(Opcode.WRITE_ONLY), 1, 1, 0, 70000, 0), bytes(70000)),
    ],
)
def test_encode_rejects_what_does_not_fit(path: PathHeader, header: Header, payload: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        encode(path, header, payload)


_BACKEND_OF = """
import mrc_transport.wire as w
from mrc_transport.wire import codec
functions = ("encode", "decode_untrusted", "encode_data_batch")
print(w.BACKEND, w._impl is codec, all(callable(getattr(w._impl, f)) for f in functions))
"""


@pytest.mark.parametrize("purepython", ["1", None])
def test_backend_switch(purepython: str | None) -> None:
    """The switch is read once, at import: each setting in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "MRC_PUREPYTHON"}
    env.update({} if purepython is None else {"MRC_PUREPYTHON": purepython})
    out = subprocess.run(
        [sys.executable, "-c", _BACKEND_OF], env=env, capture_output=True, text=True, check=True
    )
    name, is_codec, callables = out.stdout.split()
    if purepython == "1":
        assert (name, is_codec) == ("python", "True")
    assert (name, is_codec) in {("python", "True"), ("c", "False")}
    assert callables == "True"


def envelope(l4_body: bytes, srh: bytes = b"", *, sport: int = 0x8001) -> bytes:
    """Valid IPv6 [+ srh] + UDP around arbitrary bytes, checksum correct, so the fuzzer
    reaches the SRH and MRC parsers instead of stopping at the checksum."""
    udp_len = 8 + len(l4_body)
    udp = struct.pack("!HHHH", sport, 4791, udp_len & 0xFFFF, 0) + l4_body
    final = PLAIN_DST
    if len(srh) >= 24:
        final = srh[8:24]  # segments[0], if the bytes are a plausible SRH
    checksum = udp6_checksum(SRC, final, udp)
    udp = udp[:6] + checksum.to_bytes(2) + udp[8:]
    next_header = 43 if srh else 17
    ipv6 = struct.pack("!IHBB", 6 << 28, len(srh) + udp_len, next_header, 64)
    return ipv6 + SRC + PLAIN_DST + srh + udp


@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_arbitrary_mrc_bytes_in_a_valid_envelope(body: bytes) -> None:
    try:
        parsed = decode_untrusted(envelope(body))
    except BadPacket as exc:
        reason = exc.reason
        assert reason in REASONS
        return
    assert parsed.path.ev >> 16 == 0x8001


@settings(max_examples=300)
@given(st.binary(max_size=80), st.binary(max_size=60))
def test_arbitrary_srh_bytes_in_a_valid_envelope(srh: bytes, body: bytes) -> None:
    try:
        decode_untrusted(envelope(body, srh))
    except BadPacket as exc:
        reason = exc.reason
        assert reason in REASONS
