"""An exported fabric brought up from the exported file alone, this test playing containerlab's
part, then every path probed and a verified `mrc perf` transfer between two of its hosts.

What containerlab does with the file, in its order (core/clab.go, nodes/linux): a node is
created with its ``sysctls``; each link becomes a veth pair, named as the file names its
endpoints, at the link's MTU, with TX checksum offload off (containerlab's own setting),
and up; then each node's ``exec`` entries run, split into words as a shell splits them.
Here a node is a namespace of a unique name, removed by the fixture whatever happens. A
host's script writes its paths file where ``MRC_PATHS_FILE`` says, here a file of the test
(a container's own /etc/mrc/paths.yaml otherwise); `mrc` and `python3` are the venv's.
Nothing of a lab's state is used: no state file, the probes and the transfer take their
paths from the topology and the paths files the hosts wrote.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import kernel, netns
from labs.check import run_check
from labs.topology import Topology, namespace, preset
from mrc_transport.io.endpoint import default_mss
from tests.lab.conftest import require_root_netns, unique_lab

pytestmark = pytest.mark.lab

PY = [sys.executable, "-m", "mrc_transport.cli.main"]
SRC, DST = "h3", "h0"  # different racks: two paths per plane, through the T1s
CASES: dict[str, tuple[str, str, int | None, str | None]] = {
    "tiny": ("tiny", "containerlab", None, None),
    "tiny-clabernetes-mtu1400": ("tiny", "clabernetes", 1400, None),
    "tiny-trim-bpf": ("tiny-trim", "containerlab", None, "bpf"),
}
"""Fabric name -> (preset, format, --mtu, switches): the containerlab export at the default
MTU and the containerlab topology inside the clabernetes resource at --mtu 1400 (its
switch ports renamed for the tunnels), with the switches this kernel runs (None: seg6local
where it has it, as `lab up` picks); and the BPF switch with trimming, its programs loaded
in the nodes."""


@dataclass(frozen=True)
class Fabric:
    """An exported fabric, up in namespaces ``mrc-<lab>-<node>``."""

    lab: str
    """The unique name in the namespaces' names."""
    topo: Topology
    """The fabric as exported (for the probes' plan)."""
    paths: Path
    """Folder of the hosts' paths files, HOST.yaml, as their scripts wrote them."""


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    assert res.returncode == 0, f"{shlex.join(argv)[:200]}: {res.stderr}"
    return res


def create_nodes(lab: str, nodes: dict[str, Any]) -> None:
    """Each node with its sysctls, as docker sets them when it creates the container."""
    run(["ip", "-b", "-"], input="".join(f"netns add {namespace(lab, n)}\n" for n in nodes))
    for node, cfg in nodes.items():
        with netns.entered(namespace(lab, node)):
            for key, value in cfg["sysctls"].items():
                netns.write_sysctl(key, str(value))


def create_links(lab: str, links: list[dict[str, Any]]) -> None:
    for link in links:
        (a, a_dev), (b, b_dev) = (end.split(":") for end in link["endpoints"])
        ns_a, ns_b = namespace(lab, a), namespace(lab, b)
        run(["ip", "-n", ns_a, "link", "add", a_dev, "mtu", str(link["mtu"]), "type", "veth",
             "peer", "name", b_dev, "mtu", str(link["mtu"]), "netns", ns_b])  # fmt: skip
        for ns, dev in ((ns_a, a_dev), (ns_b, b_dev)):
            run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"])
            run(["ip", "-n", ns, "link", "set", dev, "up"])


def run_execs(lab: str, nodes: dict[str, Any], paths: Path) -> None:
    venv = str(Path(sys.executable).parent)
    for node, cfg in nodes.items():
        env = os.environ | {
            "PATH": f"{venv}:{os.environ['PATH']}",
            "MRC_PATHS_FILE": str(paths / f"{node}.yaml"),
        }
        for command in cfg["exec"]:
            run(["ip", "netns", "exec", namespace(lab, node), *shlex.split(command)], env=env)


@pytest.fixture(scope="module", params=sorted(CASES))
def fabric(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fabric]:
    require_root_netns()
    from labs.export import export

    name, fmt, mtu, dataplane = CASES[request.param]
    topo = replace(preset(name), srv6=dataplane or kernel.srv6_dataplane())
    done = export(topo, fmt, "mrc", mtu=mtu)
    text = done.text
    if fmt == "clabernetes":
        text = yaml.safe_load(text)["spec"]["definition"]["containerlab"]
    doc = yaml.safe_load(text)["topology"]
    lab = unique_lab()
    paths = tmp_path_factory.mktemp("paths")
    try:
        create_nodes(lab, doc["nodes"])
        create_links(lab, doc["links"])
        run_execs(lab, doc["nodes"], paths)
        yield Fabric(lab, done.topo, paths)
    finally:
        for node in doc["nodes"]:
            if netns.exists(namespace(lab, node)):
                subprocess.run(["ip", "netns", "del", namespace(lab, node)], check=False)


def test_every_path_answers(fabric: Fabric) -> None:
    results = run_check(fabric.lab, fabric.topo)
    failed = [f"{r.src}->{r.dst} {r.encoding} via {' '.join(r.hops)}" for r in results if not r.ok]
    # 8 ordered pairs across racks x 4 paths, 4 within a rack x 2; three encodings
    assert len(results) == (8 * 4 + 4 * 2) * 3
    assert not failed


def test_links_and_mtu_as_exported(fabric: Fabric) -> None:
    mtu = fabric.topo.host_link.mtu
    for dev in ("p0", "p1"):
        out = run(["ip", "-n", namespace(fabric.lab, SRC), "-j", "link", "show", dev]).stdout
        assert json.loads(out)[0]["mtu"] == mtu


@pytest.mark.parametrize("encoding", ["usid", "srh"])
def test_perf_between_hosts_verified(fabric: Fabric, encoding: str) -> None:
    server = subprocess.Popen(
        ["ip", "netns", "exec", namespace(fabric.lab, DST), *PY, "perf", "-s", "-1",
         "--paths-file", str(fabric.paths / f"{DST}.yaml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith("Server listening")
        client = run(
            ["ip", "netns", "exec", namespace(fabric.lab, SRC), *PY, "perf", "-c", DST,
             "-n", "1M", "-i", "0", "-J", "--encoding", encoding,
             "--paths-file", str(fabric.paths / f"{SRC}.yaml")],
            timeout=60,
        )  # fmt: skip
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    end = json.loads(client.stdout)["end"]
    assert end["verified"] is True
    assert end["sum_received"]["bytes"] == 1 << 20
    # the MSS mrc perf planned from the node's ports, which the export set to the MTU
    mss = default_mss(encoding, {"port": fabric.topo.host_link.mtu})
    assert json.loads(client.stdout)["start"]["test_start"]["mss"] == mss
