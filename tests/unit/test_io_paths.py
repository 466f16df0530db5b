"""Path providers and the datagram decoder: pure, no root."""

from __future__ import annotations

import socket
from ipaddress import IPv6Address
from pathlib import Path

import pytest

from mrc_transport import wire
from mrc_transport.io.endpoint import default_mss, path_header
from mrc_transport.io.paths import PathError, load_static, parse_path_spec
from mrc_transport.io.sockets import IPV6_FLOWINFO, IPV6_PKTINFO, IPV6_TCLASS, parse_cmsgs
from mrc_transport.wire.frames import Common, Ecn, Flags, Opcode, PathHeader, ProbeHeader

A, B, S1 = "2001:db8::a", "2001:db8::b", "2001:db8:ff::1"


def test_path_spec_round_trip() -> None:
    p = parse_path_spec(f"plane=1,src={A},dst={B},usid=fcbb:bb00:1::,segments={S1},port=eth1")
    assert p.plane == 1
    assert p.segments == (IPv6Address(S1), IPv6Address(B))  # dst appended as last segment
    assert p.usid_dst == IPv6Address("fcbb:bb00:1::")
    assert p.port == "eth1"


@pytest.mark.parametrize(
    "spec",
    [
        "plane=x,src=a",
        f"src={A},dst={B},port=e",
        "nonsense",
        f"plane=0,src={A},dst=zz,segments={S1},port=e",
    ],
)
def test_bad_path_spec(spec: str) -> None:
    with pytest.raises(PathError):
        parse_path_spec(spec)


def test_static_paths_for_maps_source_back(tmp_path: Path) -> None:
    f = tmp_path / "paths.yaml"
    f.write_text(
        f"peers:\n  b:\n    addresses: ['{B}']\n    paths:\n"
        f"      - {{plane: 0, src: '{A}', dst: '{B}', segments: ['{S1}'], port: e0}}\n"
    )
    sp = load_static(f)
    assert [p.dst for p in sp.paths_to("b")] == [IPv6Address(B)]
    assert sp.paths_to(B) == sp.paths_to("b")
    ph = PathHeader(src=IPv6Address(B).packed, dst=IPv6Address(A).packed)
    assert list(sp.paths_for(ph)) == sp.paths_to("b")
    assert list(sp.paths_for(PathHeader(src=IPv6Address(S1).packed, dst=ph.dst))) == []
    with pytest.raises(PathError):
        sp.paths_to("nobody")


def test_static_file_errors(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("peers: {b: {paths: [{plane: 0}]}}\n")
    with pytest.raises(PathError, match="missing"):
        load_static(f)
    with pytest.raises(PathError):
        load_static(tmp_path / "absent.yaml")


def test_lab_paths_resolve_and_paths_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from labs import addressing
    from labs.state import new_state, save_state
    from labs.topology import preset

    monkeypatch.setenv("MRC_LAB_STATE_DIR", str(tmp_path))
    topo = preset("tiny")
    save_state(new_state("unit", topo, 0.0))
    from mrc_transport.io.paths import LabPaths

    lp = LabPaths("unit", host="h3")
    assert {p.plane for p in lp.paths_to("h0")} == {0, 1}
    assert lp.resolve(str(addressing.host_address(topo, 1, "h0"))) == "h0"
    setup_from_h0 = PathHeader(
        src=addressing.host_address(topo, 1, "h0").packed,
        dst=addressing.host_address(topo, 1, "h3").packed,
    )
    assert list(lp.paths_for(setup_from_h0)) == lp.paths_to("h0")
    with pytest.raises(PathError):
        lp.paths_to("h3")
    with pytest.raises(PathError):
        lp.resolve("h9")


def test_path_header_encodings_end_at_same_destination() -> None:
    from labs.paths import paths
    from labs.topology import preset

    path = paths(preset("tiny"), "h3", "h0")[0]
    u = path_header(path, 0x8000_1234, 26, "usid", 4791)
    s = path_header(path, 0x8000_1234, 26, "srh", 4791)
    assert u.dst == path.usid_dst.packed
    assert u.final_dst == path.dst.packed
    assert s.dst == path.segments[0].packed
    assert s.segments[-1] == path.dst.packed
    assert default_mss("srh", {"p0": 9000}) < default_mss("usid", {"p0": 9000}) < 9000


def test_cmsgs_and_datagram_decode() -> None:
    flowinfo = (0b01101011 << 20 | 0x54567).to_bytes(4, "big")
    dst = IPv6Address(B).packed
    anc = [
        (socket.IPPROTO_IPV6, IPV6_PKTINFO, dst + (3).to_bytes(4, "little")),
        (socket.IPPROTO_IPV6, IPV6_TCLASS, (0x6B).to_bytes(4, "little")),
        (socket.IPPROTO_IPV6, IPV6_FLOWINFO, flowinfo),
    ]
    got_dst, tclass, flow = parse_cmsgs(anc)
    assert (got_dst, tclass, flow) == (dst, 0x6B, 0x54567)
    header = ProbeHeader(Common(Opcode.PROBE, Flags.TS, 1, 2), 7, 0, 99)
    ph = PathHeader(src=IPv6Address(A).packed, dst=dst, ev=0x8123_4567)
    udp_payload = wire.encode(ph, header)[48:]
    pkt = wire.decode_datagram_untrusted(
        udp_payload,
        src=ph.src,
        dst=dst,
        sport=0x8123,
        dport=4791,
        tclass=tclass,
        flow_label=0x34567,
    )
    assert pkt.header == header
    assert pkt.path.ev == 0x8123_4567
    assert pkt.path.ecn is Ecn.CE
    for junk in (b"", b"\x02" + bytes(20), b"\x01\xff" + bytes(30)):
        with pytest.raises(wire.BadPacket):
            wire.decode_datagram_untrusted(
                junk, src=ph.src, dst=dst, sport=1, dport=4791, tclass=0, flow_label=0
            )
