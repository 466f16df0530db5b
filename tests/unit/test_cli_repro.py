"""`mrc repro` without root: bad names, flags, topology files and fabrics that cannot host an
experiment give one line on stderr and exit 2, and never build a lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrc_transport.cli.main import main
from tests.conftest import CliError

pytestmark = pytest.mark.usefixtures("no_lab")  # no state outside tmp_path, no lab built


def _topology(tmp_path: Path, text: str) -> str:
    path = tmp_path / "fabric.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["repro"], ["the following arguments are required: NAME"]),
        (["repro", "nope"], ["invalid choice: 'nope'", "t1-blackhole"]),
        (["repro", "loss", "--preset", "huge"], ["invalid choice: 'huge'"]),
        (["repro", "loss", "--preset", "tiny", "--topology", "x.yaml"], ["not allowed"]),
        (["repro", "loss", "--name", "Bad Name!"], ["--name", "bad lab name"]),
        (["repro", "loss", "--bogus"], ["unrecognized arguments: --bogus"]),
        (["repro", "all", "--name", "abc"], ["--name names one lab"]),
        (["repro", "loss", "--topology", "/nonexistent.yaml"], ["/nonexistent.yaml"]),
        (["repro", "loss", "--baselines", "mptcp"], ["tcp (always) and mptcp"]),
        (["repro", "loss", "--baselines", "tcp,tcp-rehash"], ["tcp (always) and mptcp"]),
        (["repro", "loss", "--baselines", "tcp,sctp"], ["unknown baseline 'sctp'"]),
    ],
)
def test_bad_names_and_flags_are_one_line_exit_2(
    argv: list[str], words: list[str], cli_error: CliError
) -> None:
    cli_error(argv, *words)


@pytest.mark.parametrize(
    ("name", "fabric", "words"),
    [
        ("incast", "hosts_per_rack: 2\n", ["incast:", "8 hosts per rack"]),
        ("port-loss", "planes: 1\n", ["port-loss:", "2+ planes"]),
        ("flapping", "planes: 1\n", ["flapping:", "2+ planes"]),
        ("cascade", "t1_per_plane: 1\n", ["cascade:", "2+ T1 per plane"]),
        ("permutation", "racks: 1\n", ["permutation:", "2 racks"]),
        ("loss", "racks: 1\n", ["loss:", "2 racks"]),
        ("t1-blackhole", "racks: 1\n", ["t1-blackhole:", "2+ racks"]),
        ("loss", "planes: 0\n", ["planes must be"]),
        ("loss", "- not a mapping\n", ["top level must be a mapping"]),
    ],
)
def test_a_fabric_that_cannot_host_the_experiment_is_refused(
    name: str, fabric: str, words: list[str], tmp_path: Path, cli_error: CliError
) -> None:
    cli_error(["repro", name, "--topology", _topology(tmp_path, fabric)], *words)


def test_all_checks_every_experiment_before_building_anything(
    tmp_path: Path, cli_error: CliError
) -> None:
    # loss, permutation and incast fit this fabric; port-loss, later in the order, cannot
    fabric = "planes: 1\nhosts_per_rack: 8\n"
    cli_error(["repro", "all", "--topology", _topology(tmp_path, fabric)], "port-loss:")


def test_help_lists_the_experiments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repro", "--help"]) == 0
    out = capsys.readouterr().out
    for name in ("loss", "permutation", "incast", "port-loss", "flapping", "cascade"):
        assert name in out
    assert "--quick" in out


def test_a_kernel_without_mptcp_is_one_line_unless_left_out(
    cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("labs.kernel.has_mptcp", lambda: False)
    cli_error(["repro", "loss"], "this kernel has no MPTCP", "--baselines tcp")
    monkeypatch.setattr("os.geteuid", lambda: 1000)  # past the checks: stop before a lab
    cli_error(["repro", "loss", "--baselines", "tcp"], "needs root")
