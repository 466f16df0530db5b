"""`mrc lab export` and `mrc paths export` as a user runs them, without root: what they write,
the paths files read back by `mrc perf`'s reader, and bad input: one line, exit 2, and
nothing written."""

from __future__ import annotations

from ipaddress import IPv6Address
from pathlib import Path

import pytest
import yaml

from labs import addressing as addr
from labs.paths import paths
from labs.state import STATE_DIR_ENV, new_state, save_state
from labs.topology import preset
from mrc_transport.cli.main import main
from mrc_transport.io.paths import load_static
from mrc_transport.wire.frames import PathHeader
from tests.conftest import CliError


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder of the test's; and no kernel probe (it makes a namespace as root)."""
    state = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(state))
    monkeypatch.setattr("mrc_transport.cli.export.kernel_has_seg6local", lambda: True)
    return state


def written(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_lab_export_writes_the_topology_and_the_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "lab").mkdir()
    out = tmp_path / "lab" / "tiny.clab.yml"
    argv = ["lab", "export", "--format", "containerlab", "--preset", "tiny", "-o", str(out)]
    assert main([*argv, "--name", "fab", "--mtu", "1400", "--srv6", "bpf"]) == 0
    assert written(out.parent) == ["mrc-node.Dockerfile", "tiny.clab.yml"]
    doc = yaml.safe_load(out.read_text())
    assert doc["name"] == "fab"
    assert "bpftool" in (out.parent / "mrc-node.Dockerfile").read_text()
    said = capsys.readouterr().out
    assert "12 nodes, 16 links, link MTU 1400, SRv6 by bpf" in said
    assert "--mss 1316 (uSID) or 1180 (SRH)" in said  # 1400 - IPv6, UDP, MRC (and an SRH)


def test_lab_export_says_when_this_kernel_lacks_seg6local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mrc_transport.cli.export.kernel_has_seg6local", lambda: False)
    argv = ["lab", "export", "--format", "containerlab", "--preset", "tiny"]
    assert main([*argv, "-o", str(tmp_path / "a.yml")]) == 0
    assert "need --srv6 bpf" in capsys.readouterr().err
    assert main([*argv, "--srv6", "bpf", "-o", str(tmp_path / "b.yml")]) == 0
    assert capsys.readouterr().err == ""


def test_lab_export_of_a_running_lab(tmp_path: Path) -> None:
    save_state(new_state("unitlab", preset("tiny-trim"), 0.0))
    out = tmp_path / "lab.yaml"
    argv = ["lab", "export", "--format", "clabernetes", "--name", "unitlab", "-o", str(out)]
    assert main(argv) == 0
    resource = yaml.safe_load(out.read_text())
    assert resource["metadata"]["name"] == "unitlab"
    assert "htb" in resource["spec"]["definition"]["containerlab"]  # the lab's trimming


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--format", "gns3", "--preset", "tiny"], "unknown format 'gns3'"),
        (["--format", "containerlab", "--preset", "huge"], "unknown preset 'huge'"),
        (["--format", "containerlab", "--preset", "tiny", "--mtu", "1200"], "--mtu 1200"),
        (["--format", "containerlab", "--preset", "tiny", "--mtu", "9k"], "--mtu: invalid int"),
        (["--format", "clabernetes", "--preset", "large-trim"], "1.5 MiB"),
        (["--format", "containerlab", "--name", "nolab"], "no lab 'nolab'"),
        (["--format", "containerlab", "--topology", "absent.yaml"], "absent.yaml"),
    ],
)
def test_lab_export_bad_input_writes_nothing(
    flags: list[str], said: str, tmp_path: Path, cli_error: CliError
) -> None:
    out = tmp_path / "out" / "fabric.yaml"
    out.parent.mkdir()
    cli_error(["lab", "export", *flags, "-o", str(out)], said)
    assert written(out.parent) == []


def test_lab_export_over_its_own_recipe(tmp_path: Path, cli_error: CliError) -> None:
    out = tmp_path / "mrc-node.Dockerfile"
    argv = ["lab", "export", "--format", "containerlab", "--preset", "tiny", "-o", str(out)]
    cli_error(argv, "the image's recipe")
    assert not out.exists()


def test_lab_export_to_a_missing_folder(tmp_path: Path, cli_error: CliError) -> None:
    out = tmp_path / "absent" / "fabric.yaml"
    argv = ["lab", "export", "--format", "containerlab", "--preset", "tiny", "-o", str(out)]
    cli_error(argv, "no folder")
    assert not out.parent.exists()


# -- mrc paths export ----------------------------------------------------------------------


def test_paths_files_read_back_as_the_labs_paths(tmp_path: Path) -> None:
    """Every host's file, read by `mrc perf`'s reader: the paths labs/paths.py gives, and a
    SETUP from a peer's plane address maps back to that peer."""
    topo = preset("default")
    assert main(["paths", "export", "--preset", "default", "-o", str(tmp_path / "p")]) == 0
    assert written(tmp_path / "p") == sorted(f"{h}.yaml" for h in topo.hosts)
    for host in topo.hosts:
        static = load_static(tmp_path / "p" / f"{host}.yaml")
        assert sorted(static.peers) == sorted(h for h in topo.hosts if h != host)
        for peer in static.peers:
            assert static.paths_to(peer) == paths(topo, host, peer)
            for plane in range(topo.planes):
                src = addr.host_address(topo, plane, peer).packed
                setup = PathHeader(src=src, dst=addr.host_address(topo, plane, host).packed)
                assert list(static.paths_for(setup)) == paths(topo, host, peer)


def test_paths_export_one_host_to_stdout_and_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_state(new_state("unitlab", preset("tiny"), 0.0))
    assert main(["paths", "export", "--lab", "unitlab", "--host", "h2", "-o", "-"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert sorted(doc["peers"]) == ["h0", "h1", "h3"]
    assert doc["peers"]["h3"]["addresses"] == ["fcbb:bb00:a003::", "fcbb:bb01:a003::"]
    out = tmp_path / "h2.yaml"
    assert main(["paths", "export", "--preset", "tiny", "--host", "h2", "-o", str(out)]) == 0
    first = load_static(out).paths_to("h0")[0]
    assert (first.plane, first.port, first.hops) == (0, "p0", ("t0-p0-1", "t1-p0-0", "t0-p0-0"))
    assert first.usid_dst == IPv6Address("fcbb:bb00:1001:2000:1000:a000::")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--preset", "tiny", "--host", "t1-p0-0"], "t1-p0-0 is a switch"),
        (["--preset", "tiny", "--host", "h7"], "no node 'h7'"),
        (["--lab", "nolab"], "no lab 'nolab'"),
        ([], "give --preset NAME, --topology FILE or --lab LAB"),
    ],
)
def test_paths_export_bad_input_writes_nothing(
    flags: list[str], said: str, tmp_path: Path, cli_error: CliError
) -> None:
    out = tmp_path / "p"
    cli_error(["paths", "export", *flags, "-o", str(out)], said)
    assert not out.exists()


def test_paths_export_of_a_fabric_of_one_host(tmp_path: Path, cli_error: CliError) -> None:
    topo = tmp_path / "one.yaml"
    topo.write_text("planes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    argv = ["paths", "export", "--topology", str(topo), "-o", str(tmp_path / "p")]
    cli_error(argv, "one host has no paths")
    assert not (tmp_path / "p").exists()
