"""`mrc lab export` without root: every export validates against containerlab's and
clabernetes' published schemas (tests/data/containerlab), and its nodes' commands, read
back, are what a namespace of `mrc lab up` gets. The round trip that runs them is
tests/lab/test_export_roundtrip.py."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from labs import addressing as addr
from labs.export import CLABERNETES_MTU, ExportError, export, headers_needed
from labs.plan import PORT_PROGRAM, SID_DEV, SWITCH_PROGRAM
from labs.topology import PRESETS, Topology, from_dict, load_yaml, preset

DATA = Path(__file__).resolve().parents[1] / "data" / "containerlab"
ODD = """
planes: 3
racks: 3
hosts_per_rack: 1
t1_per_plane: 3
links:
  host_t0: {rate: 50mbit, mtu: 4000, ecn: none}
  t0_t1: {rate: 200mbit, ecn: {mode: red, min: 16kb, max: 128kb}, trim: {threshold: 32kb}}
srv6: bpf
"""
"""Three planes of three racks of one host, three T1 each; RED and trimming on the fabric
links only, the BPF switch."""
ODD_PLAIN = ODD.replace(", trim: {threshold: 32kb}", "").replace(
    "mode: red, min: 16kb, max: 128kb", "mode: rate"
)
"""The same fabric without trimming (or RED: the kernel's switch, nft marking by rate)."""


@cache
def clab_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((DATA / "clab.schema.json").read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def without_extensions(schema: Any) -> Any:
    """An OpenAPI v3 schema as JSON Schema (draft 4, close to OpenAPI's): Kubernetes'
    ``x-kubernetes-*`` keys say how the API server merges and checks with CEL; dropped."""
    if isinstance(schema, dict):
        return {
            k: without_extensions(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")
        }
    if isinstance(schema, list):
        return [without_extensions(v) for v in schema]
    return schema


@cache
def topology_validator() -> jsonschema.Draft4Validator:
    crd = yaml.safe_load((DATA / "clabernetes.topologies.crd.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return jsonschema.Draft4Validator(without_extensions(version["schema"]["openAPIV3Schema"]))


def errors(validator: Any, doc: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in validator.iter_errors(doc)
    ]


def load(text: str) -> Any:
    """PyYAML's C loader where it has one: a large export is a megabyte."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def valid_containerlab(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = load(text)
    assert errors(clab_validator(), doc) == []
    return doc


def valid_clabernetes(text: str) -> dict[str, Any]:
    """The resource valid against the CRD, and its containerlab topology against clab's."""
    resource = load(text)
    assert errors(topology_validator(), resource) == []
    assert (resource["apiVersion"], resource["kind"]) == (
        "clabernetes.containerlab.dev/v1alpha1",
        "Topology",
    )
    return valid_containerlab(resource["spec"]["definition"]["containerlab"])


def fabric(name: str, tmp_path: Path) -> Topology:
    if name.startswith("odd"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(ODD if name == "odd" else ODD_PLAIN)
        return load_yaml(path)
    return preset(name)


FABRICS = [*PRESETS, "odd", "odd-plain"]
TOO_BIG = {("large-trim", "clabernetes")}
"""Exports over Kubernetes' 1.5 MiB per object (test_too_big_for_kubernetes)."""
EXPORTS = [
    (name, fmt)
    for name in FABRICS
    for fmt in ("containerlab", "clabernetes")
    if (name, fmt) not in TOO_BIG
]


@pytest.mark.parametrize(("name", "fmt"), EXPORTS)
def test_export_validates_against_the_schemas(name: str, fmt: str, tmp_path: Path) -> None:
    topo = fabric(name, tmp_path)
    done = export(topo, fmt, "mrc")
    doc = valid_clabernetes(done.text) if fmt == "clabernetes" else valid_containerlab(done.text)
    nodes = doc["topology"]["nodes"]
    assert list(nodes) == list(topo.nodes)
    assert {n["kind"] for n in nodes.values()} == {"linux"}
    assert len(doc["topology"]["links"]) == len(topo.links)
    if fmt == "clabernetes":
        planned = [CLABERNETES_MTU] * len(topo.links)
    else:
        planned = [topo.link_class(ln).mtu for ln in topo.links]
    assert [link["mtu"] for link in doc["topology"]["links"]] == planned


def test_an_invalid_document_fails_the_schemas() -> None:
    """The validators catch what they should, so a pass above means something."""
    doc = valid_containerlab(export(preset("tiny"), "containerlab", "mrc").text)
    doc["topology"]["nodes"]["h0"]["exec"] = "ip link"  # a string, not a list
    assert errors(clab_validator(), doc)
    resource = yaml.safe_load(export(preset("tiny"), "clabernetes", "mrc").text)
    resource["spec"]["expose"]["disableExpose"] = "yes"
    assert errors(topology_validator(), resource)
    del resource["spec"]["definition"]
    assert any("definition" in e for e in errors(topology_validator(), resource))


def test_too_big_for_kubernetes() -> None:
    with pytest.raises(ExportError, match=r"1\.5 MiB"):
        export(preset("large-trim"), "clabernetes", "mrc")


# -- the nodes' commands, read back -----------------------------------------------------------


def script_of(node: dict[str, Any]) -> str:
    """The node's one exec entry, split as containerlab splits it: ``sh -c SCRIPT``."""
    (command,) = node["exec"]
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"]
    assert len(argv) == 3
    return argv[2]


def batches(script: str) -> dict[str, list[str]]:
    """Each here-document's lines, by its command (``ip -6 -b -``, ``tc -b -``, ``nft -f -``)."""
    out: dict[str, list[str]] = {}
    lines = iter(script.splitlines())
    for line in lines:
        if line.endswith("<<EOF"):
            command = line[: -len("<<EOF")].strip()
            out[command.split(" --host")[0]] = list(iter(lambda: next(lines), "EOF"))
    return out


def exported(topo: Topology, **kwargs: Any) -> dict[str, Any]:
    nodes: dict[str, Any] = yaml.safe_load(export(topo, "containerlab", "mrc", **kwargs).text)[
        "topology"
    ]
    return nodes


def kernel_switch(name: str = "tiny") -> Topology:
    return replace(preset(name), srv6="seg6local")


def test_every_script_is_shell() -> None:
    for node in exported(preset("tiny-trim"))["nodes"].values():
        res = subprocess.run(
            ["sh", "-n", "-c", script_of(node)], capture_output=True, text=True, check=False
        )
        assert res.returncode == 0, res.stderr


def test_links_are_the_lab_ports_and_every_port_is_configured() -> None:
    topo = kernel_switch()
    doc = exported(topo)
    ends = {tuple(link["endpoints"]) for link in doc["links"]}
    assert ends == {(f"{ln.a}:{ln.a_dev}", f"{ln.b}:{ln.b_dev}") for ln in topo.links}
    for node, cfg in doc["nodes"].items():
        ip = batches(script_of(cfg))["ip -6 -b -"]
        for dev, _peer, _link in topo.ports(node):
            assert any(
                re.fullmatch(rf"link set dev {dev} mtu 9000 address [0-9a-f:]{{17}} up", ln)
                for ln in ip
            )


def test_scripts_leave_the_management_interface_alone() -> None:
    """containerlab's eth0 (and docker's default route) are the node's way in: no command
    names a device but the node's fabric ports, lo and the SID veth, or a default route."""
    topo = kernel_switch("tiny-trim")
    doc = exported(topo)
    for node, cfg in doc["nodes"].items():
        mine = {dev for dev, _p, _l in topo.ports(node)} | {"lo", "sid0", "sid1"}
        for command, lines in batches(script_of(cfg)).items():
            for line in lines:
                devs = set(re.findall(r"\bdev (\S+)", line)) | set(
                    re.findall(r'oifname "(\S+)"', line)
                )
                assert devs <= mine, (node, command, line)
                assert not re.search(r"route \w+ default|\bflush\b|^(link|route|addr) del", line)
        assert "eth0" not in script_of(cfg)


def test_switches_install_their_sids_on_the_sid_veth() -> None:
    topo = kernel_switch()
    doc = exported(topo)
    for sw in topo.switches:
        ip = batches(script_of(doc["nodes"][sw]))["ip -6 -b -"]
        un = addr.node_prefix(topo, topo.plane_of(sw), sw)
        assert ip.index(f"link add {SID_DEV} type veth peer name sid1") < ip.index(
            f"link set dev {SID_DEV} up"
        )
        behaviour = "End flavors next-csid lblen 32 nflen 16"
        assert f"route replace {un} encap seg6local action {behaviour} dev {SID_DEV}" in ip
        classic = addr.classic_sid(topo, topo.plane_of(sw), sw)
        assert f"route replace {classic}/128 encap seg6local action End dev {SID_DEV}" in ip
        assert doc["nodes"][sw]["sysctls"]["net.ipv6.conf.all.forwarding"] == "1"


def test_hosts_take_srh_packets_and_write_their_paths() -> None:
    topo = kernel_switch()
    doc = exported(topo)
    for host in topo.hosts:
        cfg = doc["nodes"][host]
        assert cfg["sysctls"]["net.ipv6.conf.default.seg6_enabled"] == "1"
        assert cfg["sysctls"]["net.ipv6.conf.default.disable_ipv6"] == "0"
        script = script_of(cfg)
        assert f"mrc paths export --topology /dev/stdin --host {host} -o" in script
        (embedded,) = batches(script)["mrc paths export --topology /dev/stdin"]
        assert from_dict(json.loads(embedded)) == topo  # the same fabric the paths come from
        ip = batches(script)["ip -6 -b -"]
        for plane in range(topo.planes):
            assert f"route replace local {addr.node_prefix(topo, plane, host)} dev lo" in ip


def test_bpf_switch_loads_its_programs_in_the_node() -> None:
    topo = replace(preset("tiny-trim"), srv6="bpf")
    doc = exported(topo)
    for sw in topo.switches:
        script = script_of(doc["nodes"][sw])
        lines = script.splitlines()
        assert "mount -t bpf bpf /run/mrc-bpf" in lines
        load = next(ln for ln in lines if "from labs.bpf import pinned" in ln)
        assert load.split()[-3:] == ["mrc", PORT_PROGRAM, SWITCH_PROGRAM]
        tc = batches(script)["tc -b -"]
        ports = [dev for dev, _p, _l in topo.ports(sw)]
        for dev in ports:
            for hook, program in (("ingress", SWITCH_PROGRAM), ("egress", PORT_PROGRAM)):
                pin = f"/run/mrc-bpf/mrc/{program}"
                assert (
                    f"filter replace dev {dev} {hook} pref 1 handle 1 bpf da object-pinned {pin}"
                    in tc
                )
            assert f"qdisc replace dev {dev} root handle 1: htb default 20" in tc
        entries = batches(script)["bpftool batch file -"]
        assert len(entries) == len(ports)
        assert all(
            e.startswith("map update pinned /run/mrc-bpf/mrc/mrc_port_maps/ports key hex 02 6d")
            for e in entries
        )
        assert lines.index("mount -t bpf bpf /run/mrc-bpf") < lines.index("tc -b - <<EOF")


def test_nft_marking_where_the_topology_asks() -> None:
    doc = exported(kernel_switch())
    t0 = batches(script_of(doc["nodes"]["t0-p0-0"]))
    assert "nft -f -" in t0
    assert (
        'oifname "t1-p0-0" ip6 ecn { ect0, ect1 } numgen random mod 1000000 < 10000 ip6 ecn set ce'
        in "\n".join(t0["nft -f -"])
    )
    assert "nft -f -" not in batches(script_of(doc["nodes"]["h0"]))
    plain = exported(
        replace(kernel_switch(), fabric_link=replace(preset("tiny").fabric_link, ecn="none"))
    )
    assert "nft -f -" not in batches(script_of(plain["nodes"]["t0-p0-0"]))


def test_mtu_plans_every_link_and_port() -> None:
    doc = exported(kernel_switch("default"), mtu=1400)
    assert {link["mtu"] for link in doc["links"]} == {1400}
    for cfg in doc["nodes"].values():
        ups = [
            ln
            for ln in batches(script_of(cfg))["ip -6 -b -"]
            if re.match(r"link set dev \S+ mtu", ln)
        ]
        assert ups
        assert all(" mtu 1400 " in ln for ln in ups)
    # a trimming port's htb serves one frame per round
    trim = exported(kernel_switch("tiny-trim"), mtu=1400)
    tc = batches(script_of(trim["nodes"]["t1-p0-0"]))["tc -b -"]
    assert all("quantum 1464" in ln for ln in tc if " htb rate " in ln)


@pytest.mark.parametrize("mtu", [1279, 100, 65536])
def test_mtu_outside_what_ipv6_and_the_headers_allow(mtu: int) -> None:
    with pytest.raises(ExportError, match=f"--mtu {mtu}: must be in 1280..65535"):
        export(preset("tiny"), "containerlab", "mrc", mtu=mtu)
    assert headers_needed(preset("tiny")) == 40 + 8 + 16 * 4 + 8 + 36  # IPv6, SRH of 4, UDP, MRC


def test_mtu_the_link_classes_cannot_take() -> None:
    with pytest.raises(ExportError, match=r"--mtu 40000: links\.host_t0\.burst"):
        export(preset("tiny"), "containerlab", "mrc", mtu=40000)


def test_clabernetes_plans_for_vxlan_unless_told() -> None:
    resource = yaml.safe_load(export(preset("tiny"), "clabernetes", "mrc", mtu=1450).text)
    inner = yaml.safe_load(resource["spec"]["definition"]["containerlab"])
    assert {link["mtu"] for link in inner["topology"]["links"]} == {1450}
    assert resource["spec"]["naming"] == "prefixed"
    assert resource["metadata"]["name"] == "mrc"


def test_unknown_format() -> None:
    with pytest.raises(ExportError, match="unknown format 'gns3'"):
        export(preset("tiny"), "gns3", "mrc")


def test_auto_exports_the_kernels_seg6local_and_bpf_when_asked() -> None:
    assert export(preset("tiny"), "containerlab", "x").topo.srv6 == "seg6local"
    bpf = export(replace(preset("tiny"), srv6="bpf"), "containerlab", "x")
    assert bpf.topo.srv6 == "bpf"
    assert "bpftool" in bpf.dockerfile
    assert "bpftool" not in export(preset("tiny"), "containerlab", "x").dockerfile


def test_dockerfile_builds_what_the_nodes_run() -> None:
    recipe = export(replace(preset("tiny-trim"), srv6="bpf"), "containerlab", "mrc").dockerfile
    root = Path(__file__).resolve().parents[2]
    for line in recipe.splitlines():
        if line.startswith("COPY "):
            for name in line.split()[1:-1]:
                assert (root / name).exists(), line
    packages = re.search(r"install -y --no-install-recommends \\\n\s+(.*) \\", recipe)
    assert packages is not None
    assert {"iproute2", "nftables", "procps", "clang", "libbpf-dev", "bpftool"} <= set(
        packages.group(1).split()
    )
    assert "RUN make venv fastpath core" in recipe
    assert "object_path(p) for p in ('mrc_port', 'srv6_switch',)" in recipe


def test_header_says_each_link_class_mtu(tmp_path: Path) -> None:
    text = export(fabric("odd", tmp_path), "containerlab", "mrc").text
    assert text.startswith("# mrc lab export: a 3-plane fabric of 3 hosts and 18 switches")
    assert "link MTU 4000 to hosts, 9000 between switches, SRv6 by the BPF switch" in text


# -- clabernetes: port names its tunnels can carry ---------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_clabernetes_tunnel_names_fit_linux(name: str) -> None:
    """clabernetes names a link's devices in a pod ``<node>-<port>`` and ``vx-<node>-<port>``;
    the lab's switch port names (its peers') are too long for that, the export's are not."""
    if (name, "clabernetes") in TOO_BIG:
        return
    topo = kernel_switch(name)
    resource = load(export(topo, "clabernetes", "mrc").text)
    doc = load(resource["spec"]["definition"]["containerlab"])["topology"]
    ends = [end.split(":") for link in doc["links"] for end in link["endpoints"]]
    assert max(len(f"vx-{node}-{port}") for node, port in ends) <= 15
    for node, cfg in doc["nodes"].items():
        ports = {port for n, port in ends if n == node}
        script = script_of(cfg)
        assert set(re.findall(r"link set dev (\S+) mtu", script)) == ports
        for dev, peer, _link in topo.ports(node):
            if topo.kind_of(peer) != "host" and topo.kind_of(node) != "host":
                assert f"dev {dev} " not in script, (node, dev)  # every use renamed


def test_renamed_ports_keep_the_plan() -> None:
    """Renaming changes names only: the T0's uplinks to T1 j are u<j>, the T1's downlinks to
    the T0 of rack r are d<r>, and routes, queues and nft follow them."""
    doc = load(
        load(export(kernel_switch("tiny"), "clabernetes", "mrc").text)["spec"]["definition"][
            "containerlab"
        ]
    )
    t0 = batches(script_of(doc["topology"]["nodes"]["t0-p1-1"]))
    assert (
        "route replace fcbb:bb01::/32 nexthop via fe80::2000 dev u0 nexthop via fe80::2001 dev u1"
        in t0["ip -6 -b -"]
    )
    assert any('oifname "u1" ip6 ecn' in ln for ln in t0["nft -f -"])
    assert (
        "qdisc replace dev u1 root tbf rate 100000000bit burst 32768 limit 262144" in t0["tc -b -"]
    )
    t1 = batches(script_of(doc["topology"]["nodes"]["t1-p1-0"]))
    assert "route replace fcbb:bb01:a002::/48 via fe80::1001 dev d1" in t1["ip -6 -b -"]
    assert ["t0-p1-1:u0", "t1-p1-0:d1"] in [link["endpoints"] for link in doc["topology"]["links"]]


def test_a_fabric_whose_tunnels_linux_cannot_name() -> None:
    wide = Topology(planes=1, racks=101, hosts_per_rack=1, t1_per_plane=1)
    with pytest.raises(ExportError, match="vx-t0-p0-100-h100, longer than Linux's 15"):
        export(wide, "clabernetes", "mrc")
