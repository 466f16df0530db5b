"""Trimming and RED marking in the pure layers: the topology keys and their one-line errors,
the plan's ops (a lab without trim: exactly the old plan), and the packed map entry."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from labs import plan as P
from labs.errors import TopologyError
from labs.topology import TRIM_AT, Topology, from_dict, load_yaml, preset
from labs.trim import STUB_L4, port_key, port_value
from mrc_transport.wire.frames import (
    DSCP_CONTROL,
    DSCP_DATA,
    DSCP_NO_TRIM,
    DSCP_RTX,
    DSCP_TRIMMED,
    DSCP_TRIMMED_LASTHOP,
)
from tests.conftest import CliError


def _bpf(topo: Topology) -> Topology:
    return replace(topo, srv6="bpf")


def test_trim_and_red_keys_parse_and_round_trip_through_the_state_file(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "preset: tiny\nlinks:\n"
        "  host_t0: {trim: {threshold: 64kb}}\n"
        "  t0_t1: {limit: 512kb, trim: {threshold: 96kb, limit: 256kb},"
        " ecn: {mode: red, min: 16kb, max: 128kb, probability: 0.5}}\n"
    )
    topo = load_yaml(f)
    assert (topo.host_link.trim_at, topo.host_link.hard_limit) == (64 * 1024, 256 * 1024)
    fab = topo.fabric_link
    assert (fab.trim_at, fab.hard_limit, fab.limit) == (96 * 1024, 256 * 1024, 512 * 1024)
    assert (fab.ecn, fab.ecn_min, fab.ecn_max, fab.ecn_probability) == (
        "red",
        16 * 1024,
        128 * 1024,
        0.5,
    )
    assert from_dict(topo.to_dict()) == topo
    assert from_dict(preset("tiny").to_dict()) == preset("tiny")
    assert "trim" not in preset("tiny").to_dict()["links"]["host_t0"]  # off: as before


def test_red_probability_defaults_to_one_and_trim_off_turns_a_preset_off() -> None:
    topo = from_dict({"links": {"t0_t1": {"ecn": {"mode": "red", "min": 1000, "max": 9000}}}})
    assert topo.fabric_link.ecn_probability == 1.0
    off = from_dict({"preset": "tiny-trim", "links": {"host_t0": {"trim": False}}})
    assert (off.host_link.trim_at, off.fabric_link.trim_at) == (0, TRIM_AT)


@pytest.mark.parametrize(
    ("trim", "needle"),
    [
        ({"threshold": "256kb"}, "threshold (262144) must be below the port's limit (262144)"),
        ({"threshold": "64kb", "limit": "512kb"}, "trim.limit (524288) does not fit the port's"),
        ({"threshold": "128kb", "limit": "64kb"}, "must be below the port's trim limit (65536)"),
        ({"limit": "64kb"}, "trim.threshold is missing"),
        ({"threshold": "64kb", "depth": 1}, "unknown key 'depth'"),
        ("yes", "must be a mapping like {threshold: 64kb} or off"),
        ({"threshold": "lots"}, "bad size 'lots'"),
    ],
)
def test_a_trim_that_does_not_fit_the_port_is_one_line_and_exit_2(
    tmp_path: Path, trim: object, needle: str, cli_error: CliError
) -> None:
    with pytest.raises(TopologyError, match=r"links\.host_t0") as err:
        from_dict({"links": {"host_t0": {"trim": trim}}})
    assert needle in str(err.value)
    assert "\n" not in str(err.value)
    f = tmp_path / "t.yaml"
    f.write_text(f"links:\n  host_t0: {{trim: {trim if isinstance(trim, str) else dict(trim)}}}\n")
    cli_error(["lab", "up", "--name", "x", "--topology", str(f)], needle)


@pytest.mark.parametrize(
    ("ecn", "needle"),
    [
        ({"mode": "red", "min": 9000, "max": 1000}, "red needs 0 <= min < max"),
        ({"mode": "red", "min": 0, "max": "1mb"}, "red needs 0 <= min < max <= the port's limit"),
        ({"mode": "probability", "min": 1000}, "min and max are for mode red"),
        ({"mode": "codel"}, "mode must be one of none, probability, rate, red"),
    ],
)
def test_bad_red_settings_are_one_line(ecn: dict[str, object], needle: str) -> None:
    with pytest.raises(TopologyError, match=r"links\.t0_t1\.ecn") as err:
        from_dict({"links": {"t0_t1": {"ecn": ecn}}})
    assert needle in str(err.value)


@pytest.mark.parametrize("name", ["tiny", "default", "large"])
@pytest.mark.parametrize("srv6", ["seg6local", "bpf"])
def test_a_lab_without_trim_plans_exactly_as_before(name: str, srv6: str) -> None:
    topo = replace(preset(name), srv6=srv6)
    ops = P.build(topo)
    assert not [op for op in ops if isinstance(op, P.PrioQdisc | P.PortMap)]
    assert not [op for op in ops if isinstance(op, P.TcBpf) and op.program == P.PORT_PROGRAM]
    assert len([op for op in ops if isinstance(op, P.Qdisc)]) == 2 * len(topo.links)
    # trim off in a file is the same lab as no trim key at all, op for op
    off = from_dict({"preset": name, "srv6": srv6, "links": {"t0_t1": {"trim": "off"}}})
    assert P.build(off) == ops


def test_trimming_switch_ports_get_htb_the_program_and_a_map_entry() -> None:
    topo = _bpf(preset("tiny-trim"))
    ops = P.build(topo)
    switch_ports = {(s, dev) for s in topo.switches for dev, _, _ in topo.ports(s)}
    for kind in (P.PrioQdisc, P.PortMap):
        assert {(op.node, op.dev) for op in ops if isinstance(op, kind)} == switch_ports
    egress = {(op.node, op.dev) for op in ops if isinstance(op, P.TcBpf) and op.hook == "egress"}
    assert egress == switch_ports
    host_qdiscs = {(op.node, op.dev) for op in ops if isinstance(op, P.Qdisc)}
    assert host_qdiscs == {(h, dev) for h in topo.hosts for dev, _, _ in topo.ports(h)}
    entries = {(op.node, op.dev): op for op in ops if isinstance(op, P.PortMap)}
    assert entries[("t0-p0-0", "h0")].faces_host
    assert not entries[("t0-p0-0", "t1-p0-0")].faces_host
    macs = {(op.node, op.dev): op.mac for op in ops if isinstance(op, P.LinkUp) and op.mac}
    assert all(op.mac == macs[key] for key, op in entries.items())  # keyed by its own MAC
    assert len({op.mac for op in entries.values()}) == len(entries)
    q = next(op for op in ops if isinstance(op, P.PrioQdisc))
    lines = P.tc_lines(q)
    assert lines[0] == f"qdisc replace dev {q.dev} root handle 1: htb default 20"
    assert "classid 1:10 htb rate 100000000bit ceil 100000000bit" in lines[2]
    assert lines[2].endswith("prio 0")
    assert lines[3].endswith("prio 1")
    assert P.op_devs(entries[("t0-p0-0", "h0")]) == ()  # a restore keeps its counters


def test_red_alone_marks_on_tbf_and_never_at_the_last_hop() -> None:
    red = {"mode": "red", "min": 16384, "max": 65536}
    topo = _bpf(from_dict({"preset": "tiny", "links": {"host_t0": {"ecn": red}, "t0_t1": {}}}))
    ops = P.build(topo)
    assert not [op for op in ops if isinstance(op, P.PrioQdisc | P.PortMap)]  # only last hops
    topo = _bpf(from_dict({"preset": "tiny", "links": {"t0_t1": {"ecn": red}}}))
    ops = P.build(topo)
    entries = [op for op in ops if isinstance(op, P.PortMap)]
    assert entries
    assert all(not op.faces_host and not op.trim_at and op.mark_max == 65536 for op in entries)
    assert not [op for op in ops if isinstance(op, P.PrioQdisc)]  # no trim: tbf stays
    nft = "\n".join(op.text for op in ops if isinstance(op, P.Nft))
    assert "numgen" not in nft  # red replaces the nft marking of that class


def test_the_map_entry_packs_the_wire_constants() -> None:
    op = P.PortMap("t0-p0-0", "h0", "02:6d:00:00:00:02", 100_000_000, 32768, 65536, 262144,
                   0, 0, 0.0, True)  # fmt: skip
    value = port_value(op)
    assert len(value) == 200  # sizeof(struct port) in labs/bpf/mrc_port.c
    flags, rate = struct.unpack_from("=4xIQ", value)
    assert (flags, rate) == (0x1 | 0x4, 12_500_000)  # trim, faces a host; bytes per second
    udp_port, keep, opcodes, version, rtx, trimmed = struct.unpack_from("=3H3B", value, 40)
    assert (udp_port, keep, opcodes, version) == (4791, STUB_L4, 0b1111, 1)
    assert (rtx, trimmed) == (DSCP_RTX, DSCP_TRIMMED_LASTHOP)
    assert struct.unpack_from("=H", value, 50)[0] == 256  # ports 4791-5046 are MRC's
    prio_dscps = struct.unpack_from("=Q", value, 64)[0]
    assert prio_dscps == (1 << DSCP_TRIMMED) | (1 << DSCP_TRIMMED_LASTHOP)
    assert not prio_dscps & (1 << DSCP_CONTROL)  # control stays with data, as without trim
    # both trimmable classes are cut, the no-trim class dropped, at the threshold
    trim_dscps, no_trim_dscps = struct.unpack_from("=QQ", value, 72)
    assert trim_dscps == (1 << DSCP_DATA) | (1 << DSCP_RTX)
    assert no_trim_dscps == 1 << DSCP_NO_TRIM
    assert port_key(op.mac) == bytes.fromhex("026d00000002") + b"\0\0"


def test_without_clang_the_port_program_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labs import bpf
    from labs.errors import LabError

    monkeypatch.setenv("MRC_LAB_STATE_DIR", str(tmp_path))  # no cached object
    monkeypatch.setattr(bpf.shutil, "which", lambda _cmd: None)
    with pytest.raises(LabError, match="need clang") as err:
        bpf.object_path(P.PORT_PROGRAM)
    assert "\n" not in str(err.value)


def test_a_port_program_older_than_the_counters_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lab brought up by an older version keeps its older map layout: status says to
    recreate the lab instead of failing on a counter the old program never had."""
    from labs import bpf, trim
    from labs.errors import LabError

    topo = _bpf(preset("tiny-trim"))
    op = next(op for op in P.build(topo) if isinstance(op, P.PortMap))
    key = {"mac": list(bytes.fromhex(op.mac.replace(":", "")))}
    full = dict.fromkeys(trim.COUNTERS, 0)
    old = {name: 0 for name in trim.COUNTERS if name != "trimmed_rtx"}
    for value, ok in ((full, True), (old, False)):
        monkeypatch.setattr(bpf, "dump_map", lambda _pin, v=value: [{"key": key, "value": v}])
        if ok:
            assert trim.port_counters("x", topo)[0]["node"] == op.node
            continue
        with pytest.raises(LabError, match=r"older port program .*mrc lab down") as err:
            trim.port_counters("x", topo)
        assert "\n" not in str(err.value)
