"""The pure topology model: presets, naming, YAML validation with one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.errors import LabError, TopologyError
from labs.topology import Topology, check_lab_name, from_dict, load_yaml, preset
from labs.units import UnitError, parse_rate


def test_tiny_counts_and_names() -> None:
    topo = preset("tiny")
    assert topo.hosts == ("h0", "h1", "h2", "h3")
    assert set(topo.switches) == {
        "t0-p0-0",
        "t0-p0-1",
        "t1-p0-0",
        "t1-p0-1",
        "t0-p1-0",
        "t0-p1-1",
        "t1-p1-0",
        "t1-p1-1",
    }
    # 4 hosts x 2 planes host links + 2 planes x 2 T0 x 2 T1 fabric links
    assert len(topo.links) == 8 + 8
    assert topo.link("h3:t0-p1-1").a_dev == "p1"
    assert topo.link("t0-p1-1:h3") == topo.link("h3:t0-p1-1")


def test_every_host_has_one_port_per_plane_to_its_rack_t0() -> None:
    topo = preset("default")
    for h in topo.hosts:
        ports = topo.ports(h)
        assert [dev for dev, _, _ in ports] == [f"p{p}" for p in range(topo.planes)]
        assert [peer for _, peer, _ in ports] == [
            topo.t0(p, topo.rack_of(h)) for p in range(topo.planes)
        ]


@pytest.mark.parametrize("name", ["tiny", "default", "large"])
def test_interface_names_fit_ifnamsiz(name: str) -> None:
    topo = preset(name)
    for ln in topo.links:
        assert len(ln.a_dev) <= 15
        assert len(ln.b_dev) <= 15


def test_default_is_full_bisection_with_4_planes_8_hosts_2_racks() -> None:
    topo = preset("default")
    assert topo.planes >= 4
    assert len(topo.hosts) >= 8
    assert topo.racks == 2
    down = topo.hosts_per_rack * topo.host_link.rate_bps
    up = topo.t1_per_plane * topo.fabric_link.rate_bps
    assert up == down


def test_large_has_at_least_100_namespaces() -> None:
    assert len(preset("large").nodes) >= 100


def test_yaml_overrides_and_link_classes(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "planes: 3\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"
        "links:\n  host_t0: {rate: 1gbit, mtu: 1500, burst: 16kb}\n"
        "  t0_t1: {rate: 250mbit, ecn: {mode: rate, rate_fraction: 0.8}}\n"
    )
    topo = load_yaml(f)
    assert topo.planes == 3
    assert topo.host_link.rate_bps == 1_000_000_000
    assert topo.host_link.mtu == 1500
    assert topo.host_link.burst == 16 * 1024
    assert topo.fabric_link.ecn == "rate"
    assert topo.fabric_link.ecn_rate_fraction == 0.8


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("planes: 0\n", "planes must be an integer"),
        ("planes: two\n", "planes must be an integer"),
        ("colour: red\n", "unknown key 'colour'"),
        ("links: {host_t0: {rate: fast}}\n", "bad rate 'fast'"),
        ("links: {host_t0: {mtu: 9000, burst: 4kb}}\n", "burst must hold one MTU"),
        (
            "links: {t0_t1: {ecn: {mode: codel}}}\n",
            "mode must be one of none, probability, rate, red",
        ),
        ("- a\n- b\n", "must be a mapping"),
        ("planes: [\n", "invalid YAML"),
    ],
)
def test_bad_yaml_gives_one_line_error(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(TopologyError) as info:
        load_yaml(f)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file_is_a_lab_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="No such file"):
        load_yaml(tmp_path / "nope.yaml")


def test_rates_and_lab_names() -> None:
    assert parse_rate("100mbit", "x") == 100_000_000
    assert parse_rate("2.5gbit", "x") == 2_500_000_000
    with pytest.raises(UnitError):
        parse_rate("100mbps", "x")
    with pytest.raises(
        TopologyError, match=r"^lab\.yaml\.links\.host_t0\.rate: bad rate '100mbps' "
    ):
        from_dict({"links": {"host_t0": {"rate": "100mbps"}}}, where="lab.yaml")
    assert check_lab_name("mrc") == "mrc"
    for bad in ("", "Mrc", "1abc", "a-b", "x" * 13):
        with pytest.raises(TopologyError):
            check_lab_name(bad)


def test_unknown_link_and_node() -> None:
    topo = Topology()
    with pytest.raises(TopologyError, match="no link"):
        topo.link("h0:t1-p0-0")
    with pytest.raises(TopologyError, match="no node"):
        topo.check_node("h99")


@pytest.mark.parametrize(
    ("text", "mode"), [("", "auto"), ("mptcp: off\n", "off"), ("mptcp: on\n", "on")]
)
def test_mptcp_key_takes_yaml_on_and_off(tmp_path: Path, text: str, mode: str) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("planes: 2\n" + text)
    topo = load_yaml(f)
    assert topo.mptcp == mode
    assert from_dict(topo.to_dict()).mptcp == mode


def test_bad_mptcp_mode_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("mptcp: sometimes\n")
    with pytest.raises(TopologyError) as info:
        load_yaml(f)
    assert str(info.value) == "mptcp must be one of auto, on, off, got 'sometimes'"
