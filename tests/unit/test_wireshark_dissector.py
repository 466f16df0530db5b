"""The shipped Wireshark dissector (mrc_transport/wireshark/mrc.lua) run by the real tshark
on pcaps written here: every opcode and field as the project's decoder and the scapy layer
see them, malformed packets marked malformed (never a Lua error), retransmissions linked
to their first EV, the port preference, and the win over RoCEv2 on UDP 4791.

Needs tshark with Lua: skipped without it, failed under MRC_REQUIRE_LAB=1 (CI)."""

from __future__ import annotations

import struct
import subprocess
import tempfile
from dataclasses import replace
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from mrc_transport.wire import (
    DSCP_NO_TRIM,
    DSCP_RTX,
    MRC_UDP_PORT,
    BadPacket,
    CloseHeader,
    Common,
    DataHeader,
    Flags,
    Header,
    NackHeader,
    NackReason,
    Opcode,
    PathHeader,
    ProbeHeader,
    SackHeader,
    SetupHeader,
    decode_datagram_untrusted,
    decode_untrusted,
    encode,
)
from mrc_transport.wireshark import install, personal_plugin_dir
from srv6 import usid
from tests.tshark import (
    assert_frame_matches,
    expected_fields,
    fields,
    require_tshark,
    scapy_fields,
    tshark,
)
from tests.unit.mrc_strategies import deliver, packets

SRC = IPv6Address("fcbb:bb00:a003::").packed
DST = IPv6Address("fcbb:bb00:a000::").packed
EV, OTHER_EV = 0x8A3B2C1D, 0x9000BEEF


@pytest.fixture(autouse=True)
def _tshark() -> None:
    require_tshark()


def frame(packet: bytes) -> Ether:
    return Ether(src="02:6d:00:00:00:02", dst="02:6d:00:00:00:01", type=0x86DD) / Raw(packet)


def write(pcap: Path, wire: list[bytes]) -> Path:
    wrpcap(str(pcap), [frame(p) for p in wire])
    return pcap


def common(opcode: Opcode, flags: int = 0) -> Common:
    return Common(opcode, Flags(flags), 0x11223344, 0x55667788)


def every_opcode() -> list[tuple[Header, bytes]]:
    """One packet per opcode, flags and SACK bitmap bits at both ends."""
    return [
        (DataHeader(common(Opcode.WRITE_FIRST, 0x2), 100, 1, 0, 2500, 123456789), b"a" * 1000),
        (DataHeader(common(Opcode.WRITE_MIDDLE, 0xA), 101, 1, 1000, 2500, 5), b"b" * 1000),
        (DataHeader(common(Opcode.WRITE_LAST, 0x3), 102, 1, 2000, 2500, 6), b"c" * 500),
        (DataHeader(common(Opcode.WRITE_ONLY), 2**32 - 1, 2, 0, 0, 2**64 - 1), b""),
        (SackHeader(common(Opcode.ACK, 0x4), 103, 103, 0, EV, 7, 0, 0, 1 << 20), b""),
        (
            SackHeader(
                common(Opcode.SACK),
                2**32 - 2,
                2**32 - 2,
                1 | 0b1101 << 60,
                EV,
                7,
                3,
                9,
                5,
                1 << 33,
                4567,
                0b10,
            ),
            b"",
        ),
        (NackHeader(common(Opcode.NACK), 77, NackReason.TRIMMED, EV, 8), b""),
        (NackHeader(common(Opcode.NACK), 78, NackReason.UNKNOWN_CONNECTION, EV, 8), b""),
        (ProbeHeader(common(Opcode.PROBE, 0x8), 9, 0, 10), b""),
        (ProbeHeader(common(Opcode.PROBE_REPLY), 9, EV, 10), b""),
        (SetupHeader(common(Opcode.SETUP), 1000, 8 << 20, 8916, 128, 11), b""),
        (SetupHeader(common(Opcode.SETUP_ACK), 2000, 8 << 20, 8916, 128, 11), b""),
        (CloseHeader(common(Opcode.CLOSE), 103), b""),
        (CloseHeader(common(Opcode.CLOSE_ACK), 0), b""),
    ]


def paths_of_each_kind() -> list[PathHeader]:
    container = usid.pack(0xFCBBBB00, [0x1000, 0x2001, 0x1001, 0xA000])
    final = usid.final_destination(container).packed
    hop = IPv6Address("fcbb:bb00:1000:ffff::").packed
    return [
        PathHeader(SRC, DST, ev=EV),
        PathHeader(SRC, container.packed, final, ev=EV),
        PathHeader(SRC, hop, None, (hop, DST), ev=EV),
        PathHeader(SRC, container.packed, final, ev=EV, encap=True),
    ]


def assert_dissected_like_ours(pcap: Path) -> int:
    """Every frame: tshark's fields == the decoder's, exactly; == the scapy layer's."""
    shown = fields(pcap)
    frames = rdpcap(str(pcap))
    assert len(shown) == len(frames)
    for number, (row, captured) in enumerate(zip(shown, frames, strict=True), start=1):
        ours = decode_untrusted(bytes(captured)[14:])  # after the Ethernet header
        assert_frame_matches(row, expected_fields(ours), f"frame {number}", exact=True)
        assert_frame_matches(row, scapy_fields(captured), f"frame {number} (scapy)")
    return len(shown)


def test_every_opcode_and_field_as_our_decoder_and_scapy_see_it(tmp_path: Path) -> None:
    wire = [
        deliver(path, encode(path, header, payload))
        for path in paths_of_each_kind()
        for header, payload in every_opcode()
    ]
    assert assert_dissected_like_ours(write(tmp_path / "every.pcap", wire)) == 4 * 14


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(packets(), min_size=1, max_size=40))
def test_random_packets_as_our_decoder_sees_them(
    cases: list[tuple[PathHeader, Header, bytes]],
) -> None:
    wire = []
    for path, header, payload in cases:
        # The dissector's port, and an EV with bit 31 set as the core allocates them: the
        # EV's high half is the source port, and Wireshark tries the lower of the two UDP
        # ports first, so a random EV under 4791 << 16 can hand the packet to, say, DNS.
        path = replace(path, dport=MRC_UDP_PORT, ev=path.ev | 0x8000_0000)
        wire.append(deliver(path, encode(path, header, payload)))
    with tempfile.TemporaryDirectory() as folder:
        assert_dissected_like_ours(write(Path(folder) / "random.pcap", wire))


# -- malformed ---------------------------------------------------------------------------

_COMMON = struct.Struct("!BBBxII")


def _mrc(opcode: int, body: bytes, *, flags: int = 0, version: int = 1) -> bytes:
    return _COMMON.pack(version, opcode, flags, 1, 2) + body


_DATA = struct.pack("!IIIIQ", 5, 0, 0, 10, 0) + b"0123456789"
MALFORMED = {
    "short common header": b"\x01\x03\x00",
    "short data body": _mrc(3, _DATA[:10]),
    "short SACK body": _mrc(5, bytes(30)),
    "version 2": _mrc(3, _DATA, version=2),
    "version 0": _mrc(3, _DATA, version=0),
    "opcode 0x0d": _mrc(0x0D, _DATA),
    "opcode 0xff": _mrc(0xFF, bytes(36)),
    "unknown flag bit": _mrc(3, _DATA, flags=0x20),
    "CLOSE with 2 more bytes": _mrc(0x0B, struct.pack("!I", 5) + b"zz"),
    "NACK reason 9": _mrc(6, struct.pack("!IB3xIQ", 5, 9, 1, 2)),
    "ACK with a bitmap": _mrc(4, struct.pack("!IIQIQHHI", 1, 1, 5, 1, 1, 0, 0, 1)),
    "WRITE_ONLY short of msg_len": _mrc(3, struct.pack("!IIIIQ", 5, 0, 0, 11, 0) + bytes(10)),
    "WRITE_FIRST at an offset": _mrc(0, struct.pack("!IIIIQ", 5, 0, 4, 99, 0) + bytes(10)),
}
REASONS = ("truncated", "bad_version", "unknown_opcode", "bad_field", "bad_length", "bad_message")


def _reason(mrc: bytes) -> str:
    try:
        decode_datagram_untrusted(
            mrc, src=SRC, dst=DST, sport=0x8A3B, dport=MRC_UDP_PORT, tclass=0, flow_label=0
        )
    except BadPacket as exc:
        return exc.reason
    raise AssertionError("our decoder accepted a packet this test calls malformed")


def _udp(mrc: bytes) -> bytes:
    ip = IPv6(src=str(IPv6Address(SRC)), dst=str(IPv6Address(DST)), fl=0x12C1D)
    return bytes(ip / UDP(sport=0x8A3B, dport=MRC_UDP_PORT) / Raw(mrc))


def test_malformed_packets_are_marked_malformed_with_our_decoders_reason(tmp_path: Path) -> None:
    pcap = write(tmp_path / "bad.pcap", [_udp(mrc) for mrc in MALFORMED.values()])
    experts = tuple(f"mrc.malformed.{reason}" for reason in REASONS)
    rows = fields(pcap, ("_ws.malformed", "frame.protocols", *experts))  # no Lua error
    assert len(rows) == len(MALFORMED)
    for (case, mrc), row in zip(MALFORMED.items(), rows, strict=True):
        assert row["frame.protocols"].endswith((":mrc", ":mrc:data")), case
        assert row["_ws.malformed"], case
        shown = [reason for reason in REASONS if row[f"mrc.malformed.{reason}"]]
        assert shown[:1] == [_reason(mrc)], case


def test_a_cut_short_capture_is_not_a_lua_error(tmp_path: Path) -> None:
    """A snapshot length that cuts the MRC header (after the 62 bytes of Ethernet, IPv6 and
    UDP): shown as cut short, not malformed, never a Lua error."""
    cases = every_opcode()
    wire = [encode(paths_of_each_kind()[0], h, p) for h, p in cases]
    full = write(tmp_path / "full.pcap", wire)
    headers = [len(p) - 48 - len(payload) for p, (_, payload) in zip(wire, cases, strict=True)]
    for snaplen in (66, 80, 90, 120):
        cut = tmp_path / f"cut{snaplen}.pcap"
        subprocess.run(["editcap", "-s", str(snaplen), str(full), str(cut)], check=True)
        rows = fields(cut, ("frame.protocols", "mrc.expert.snapshot", "_ws.malformed"))
        assert all("mrc" in row["frame.protocols"].split(":") for row in rows)
        assert not any(row["_ws.malformed"] for row in rows)
        # A header longer than what was kept is reported; a cut payload is only shorter.
        kept = snaplen - 62
        assert [bool(row["mrc.expert.snapshot"]) for row in rows] == [h > kept for h in headers]


def _stub(header: DataHeader, payload: bytes, dscp: int) -> bytes:
    """What a trimming switch forwards (docs/protocol.md, "Trimmed data packets"): the
    headers byte for byte, no payload, DSCP 43 or 47."""
    packet = encode(PathHeader(SRC, DST, ev=EV, dscp=dscp), header, payload)
    mrc = packet[48 : 48 + 36]
    ip = IPv6(src=str(IPv6Address(SRC)), dst=str(IPv6Address(DST)), tc=dscp << 2 | 2, fl=EV)
    return bytes(ip / UDP(sport=EV >> 16, dport=MRC_UDP_PORT) / Raw(mrc))


def test_a_trimmed_stub_is_trimmed_not_malformed(tmp_path: Path) -> None:
    middle = DataHeader(common(Opcode.WRITE_MIDDLE), 7, 1, 8916, 50000, 3)
    last = DataHeader(common(Opcode.WRITE_LAST), 8, 1, 17832, 18832, 3)
    wire = [
        _stub(middle, bytes(8916), 43),
        _stub(last, bytes(1000), 47),
        _stub(last, bytes(1000), 26),  # DSCP_DATA: not a stub, a short WRITE_LAST
    ]
    rows = fields(
        write(tmp_path / "stubs.pcap", wire),
        ("mrc.psn", "mrc.payload_len", "mrc.expert.trimmed", "_ws.malformed", "_ws.col.Info"),
    )
    shown = [(r["mrc.psn"], r["mrc.payload_len"]) for r in rows]
    assert shown == [("7", "0"), ("8", "0"), ("8", "0")]
    assert [bool(r["mrc.expert.trimmed"]) for r in rows] == [True, True, False]
    assert [bool(r["_ws.malformed"]) for r in rows] == [False, False, True]
    assert rows[0]["_ws.col.Info"].startswith("[TRIMMED] WRITE_MIDDLE PSN=7")
    assert rows[1]["_ws.col.Info"].startswith("[TRIMMED_LASTHOP] WRITE_LAST PSN=8")


def test_the_no_trim_class_is_tagged_and_the_retransmission_class_is_plain_data(
    tmp_path: Path,
) -> None:
    rtx = DataHeader(common(Opcode.WRITE_MIDDLE, 0x3), 7, 1, 1000, 5000, 3)
    wire = [
        encode(PathHeader(SRC, DST, ev=EV, dscp=dscp), header, bytes(1000))
        for dscp, header in ((DSCP_NO_TRIM, replace(rtx, psn=6)), (DSCP_RTX, rtx))
    ]
    rows = fields(write(tmp_path / "classes.pcap", wire), ("_ws.malformed", "_ws.col.Info"))
    assert [bool(r["_ws.malformed"]) for r in rows] == [False, False]
    assert rows[0]["_ws.col.Info"].startswith("[NO_TRIM] [RTX] WRITE_MIDDLE PSN=6")
    assert rows[1]["_ws.col.Info"].startswith("[RTX] WRITE_MIDDLE PSN=7")


def test_an_encapsulated_stub_is_read_from_its_outer_header(tmp_path: Path) -> None:
    """The encap encoding: the switches trim and mark the outer header only; the inner
    one keeps the data class. The outer DSCP decides, and the EV is still the EV."""
    last = DataHeader(common(Opcode.WRITE_LAST), 7, 1, 17832, 18832, 3)
    mrc = encode(PathHeader(SRC, DST, ev=EV), last, bytes(1000))[48 : 48 + 36]

    def stub(outer_dscp: int) -> bytes:
        def ip(dscp: int) -> IPv6:
            return IPv6(
                src=str(IPv6Address(SRC)), dst=str(IPv6Address(DST)), tc=dscp << 2 | 2, fl=EV
            )

        return bytes(ip(outer_dscp) / ip(26) / UDP(sport=EV >> 16, dport=MRC_UDP_PORT) / Raw(mrc))

    rows = fields(
        write(tmp_path / "encap-stubs.pcap", [stub(43), stub(26)]),
        ("mrc.psn", "mrc.ev", "mrc.expert.trimmed", "_ws.malformed"),
    )
    assert [r["mrc.psn"] for r in rows] == ["7", "7"]
    assert {r["mrc.ev"] for r in rows} == {f"{EV:#010x}"}
    assert [bool(r["mrc.expert.trimmed"]) for r in rows] == [True, False]
    assert [bool(r["_ws.malformed"]) for r in rows] == [False, True]


# -- retransmissions, port, RoCE ----------------------------------------------------------


def test_a_retransmission_names_its_first_frame_and_ev(tmp_path: Path) -> None:
    first = DataHeader(common(Opcode.WRITE_MIDDLE, 0x2), 101, 1, 1000, 20000, 5)
    again = replace(first, common=common(Opcode.WRITE_MIDDLE, 0x3))
    other = DataHeader(common(Opcode.WRITE_MIDDLE, 0x2), 102, 1, 2000, 20000, 5)
    wire = [
        encode(PathHeader(SRC, DST, ev=EV), first, bytes(1000)),
        encode(PathHeader(SRC, DST, ev=EV), other, bytes(1000)),
        encode(PathHeader(SRC, DST, ev=OTHER_EV), again, bytes(1000)),
    ]
    pcap = write(tmp_path / "rtx.pcap", wire)
    wanted = ("frame.number", "mrc.rtx.first_frame", "mrc.rtx.first_ev", "mrc.expert.rtx")
    # The workshop's filter: retransmissions that went out on another EV than the first.
    rows = fields(pcap, wanted, "-Y", "mrc.flags.rtx == 1 && mrc.rtx.first_ev != mrc.ev")
    assert rows == [
        {
            "frame.number": "3",
            "mrc.rtx.first_frame": "1",
            "mrc.rtx.first_ev": f"{EV:#010x}",
            "mrc.expert.rtx": "1",
        }
    ]


def _protocols(pcap: Path, *args: str, lua: bool = True) -> list[str]:
    out = tshark("-r", str(pcap), "-T", "fields", "-e", "frame.protocols", *args, lua=lua)
    return out.split()


def test_mrc_wins_over_roce_on_4791_and_the_port_is_a_preference(tmp_path: Path) -> None:
    header, payload = every_opcode()[0]
    wire = [
        encode(PathHeader(SRC, DST, ev=EV, dport=port), header, payload) for port in (4791, 5000)
    ]
    pcap = write(tmp_path / "ports.pcap", wire)
    roce, other = _protocols(pcap, lua=False)
    assert "infiniband" in roce  # what Wireshark shows without the dissector
    assert not other.endswith("mrc")
    ours, other = _protocols(pcap)
    assert ours.endswith(":udp:mrc:data")
    assert "infiniband" not in ours
    assert not other.endswith(":mrc:data")
    # Moved to 5000, MRC gives 4791 back to RoCEv2.
    roce, moved = _protocols(pcap, "-o", "mrc.udp_port:5000")
    assert "infiniband" in roce
    assert moved.endswith(":udp:mrc:data")


def test_install_goes_where_wireshark_looks(tmp_path: Path) -> None:
    """`tshark -G folders` names the personal Lua plugin folder; a file installed there is
    loaded without -X."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    folders = tshark("-G", "folders", lua=False, env=env)
    (line,) = [x for x in folders.splitlines() if x.startswith("Personal Lua Plugins:")]
    assert Path(line.split(":", 1)[1].strip()) == personal_plugin_dir(home)
    header, payload = every_opcode()[0]
    pcap = write(tmp_path / "one.pcap", [encode(PathHeader(SRC, DST, ev=EV), header, payload)])
    out = tshark("-r", str(pcap), "-T", "fields", "-e", "frame.protocols", lua=False, env=env)
    assert "infiniband" in out
    install(personal_plugin_dir(home))
    out = tshark("-r", str(pcap), "-T", "fields", "-e", "frame.protocols", lua=False, env=env)
    assert out.strip().endswith(":mrc:data")
