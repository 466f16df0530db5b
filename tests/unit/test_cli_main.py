"""The `mrc` dispatcher: --version, --help, no command, unknown command, bad flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrc_transport import __version__
from mrc_transport.cli.main import main
from tests.conftest import CliError


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"mrc {__version__}"


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mrc")
    assert "--version" in out
    assert "plan" in out  # a subcommand that is always built


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().out.startswith("usage: mrc")


def test_unknown_subcommand_is_one_line(cli_error: CliError) -> None:
    line = cli_error(["no-such-command"], "no-such-command")
    assert line.startswith("mrc: error:")


@pytest.mark.parametrize(
    "argv",
    [["--bogus"], ["plan", "--bogus"], ["plan", "--planes", "eight"], ["plan", "--radix"]],
)
def test_bad_flag_is_one_line(argv: list[str], cli_error: CliError) -> None:
    cli_error(argv, "error:")


@pytest.mark.parametrize(
    "argv",
    [
        ["perf", "-c", "h0", "-P", "0"],
        ["perf", "-s", "--events", "/no/such/dir/ev.jsonl"],
        ["perf", "-c", "h0", "--records", "/no/such/dir/r.jsonl"],
    ],
)
def test_bad_perf_flag_is_one_line(argv: list[str], cli_error: CliError) -> None:
    cli_error(argv, "error:")


def test_cpu_line_is_iperf3s() -> None:
    from mrc_transport.perf.output import cpu_line

    cpu = {"host_total": 99.25, "host_user": 80.0, "host_system": 19.25}
    assert cpu_line(cpu, reverse=False) == "CPU Utilization: local/sender 99.2% (80.0%u/19.2%s)"
    cpu |= {"remote_total": 50.0, "remote_user": 40.0, "remote_system": 10.0}
    assert cpu_line(cpu, reverse=True) == (
        "CPU Utilization: local/receiver 99.2% (80.0%u/19.2%s), remote/sender 50.0% (40.0%u/10.0%s)"
    )


def test_bad_top_level_flag_names_the_commands(cli_error: CliError) -> None:
    cli_error(["--bogus"], "unrecognized arguments: --bogus", "commands: lab, perf, demo")


def test_perf_on_a_lab_that_is_not_up_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_error: CliError
) -> None:
    from labs.state import STATE_DIR_ENV

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    argv = ["perf", "--lab", "nolab", "--from", "h4", "--to", "h0", "-t", "1"]
    cli_error(argv, "no lab 'nolab' is up")
