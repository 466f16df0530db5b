"""`mrc lab capture` and `mrc wireshark` without a lab: target parsing against a topology,
the dumpcap/tshark command lines, which output a run picks, one-line exit-2 errors.

The state directory is a temporary one holding a saved tiny lab (no namespaces); where a
test goes as far as starting the recorder, `labs.capture.run` is replaced by a recorder
of its argv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from labs import capture
from labs.errors import LabError
from labs.state import STATE_DIR_ENV, new_state, save_state
from labs.topology import preset
from mrc_transport.cli.main import main
from mrc_transport.wireshark import LUA_NAME, lua_path, personal_plugin_dir
from tests.conftest import CliError

LAB = "unitcap"
TINY = preset("tiny")


@pytest.fixture(autouse=True)
def saved_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    save_state(new_state(LAB, TINY, 0.0))


@pytest.mark.parametrize(
    ("text", "node", "ports"),
    [
        ("h0", "h0", ()),
        ("h0:p1", "h0", ("p1",)),
        ("h0:p1,p0", "h0", ("p1", "p0")),
        ("t0-p0-0:t1-p0-1", "t0-p0-0", ("t1-p0-1",)),
    ],
)
def test_parse_target(text: str, node: str, ports: tuple[str, ...]) -> None:
    assert capture.parse_target(text) == (node, ports)


@pytest.mark.parametrize("text", ["", ":p0", "h0:", "h0:p0,", "h0:,p1"])
def test_parse_target_refuses(text: str) -> None:
    with pytest.raises(LabError, match="NODE:PORT"):
        capture.parse_target(text)


def test_resolve_takes_every_port_or_the_named_ones_in_the_topologys_order() -> None:
    assert capture.resolve(LAB, TINY, "h0").ports == ("p0", "p1")
    assert capture.resolve(LAB, TINY, "h3:p1,p0").ports == ("p0", "p1")
    assert capture.resolve(LAB, TINY, "h3:p1") == capture.Target(LAB, "h3", ("p1",))
    switch = capture.resolve(LAB, TINY, "t0-p1-0")
    assert switch.ports == ("h0", "h1", "t1-p1-0", "t1-p1-1")  # named after their peers
    assert switch.namespace == f"mrc-{LAB}-t0-p1-0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("h9", "no node 'h9'"),
        ("h0:p2", "h0 has no port 'p2' (its ports: p0, p1)"),
        ("t1-p0-0:h0", "t1-p0-0 has no port 'h0'"),
    ],
)
def test_resolve_refuses_unknown_nodes_and_ports(text: str, message: str) -> None:
    with pytest.raises(LabError, match=message.replace("(", r"\(").replace(")", r"\)")):
        capture.resolve(LAB, TINY, text)


def test_command_lines() -> None:
    target = capture.Target(LAB, "h0", ("p0", "p1"))
    assert capture.dumpcap_argv(target, "out.pcapng", 5, 1.5) == [
        *("dumpcap", "-q", "-i", "p0", "-i", "p1", "-w", "out.pcapng"),
        *("--capture-comment", f"mrc lab capture: lab {LAB}, node h0"),
        *("-c", "5", "-a", "duration:1.5"),
    ]
    assert capture.dumpcap_argv(target, "-")[6:8] == ["-w", "-"]
    lua = Path("/x/mrc.lua")
    assert capture.tshark_argv(target, lua, None, 2.0) == [
        *("tshark", "-l", "-X", "lua_script:/x/mrc.lua", "-i", "p0", "-i", "p1"),
        *("-a", "duration:2"),
    ]


# -- the CLI --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["h9"], "no node 'h9'"),
        (["h0:p5"], "h0 has no port 'p5'"),
        (["h0:"], "bad capture target"),
        (["h0", "-c", "0"], "-c: must be a whole number of packets >= 1"),
        (["h0", "-c", "x"], "-c: must be a whole number"),
        (["h0", "--duration", "-1"], "--duration: must be a positive number of seconds"),
        (["h0", "--duration", "soon"], "--duration: not a number of seconds"),
        (["h0", "--name", "nolab"], "no lab 'nolab'"),
    ],
)
def test_bad_targets_and_flags_are_one_line_exit_2(
    cli_error: CliError, argv: list[str], message: str
) -> None:
    name = [] if "--name" in argv else ["--name", LAB]
    cli_error(["lab", "capture", *name, *argv], message)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Root, the tools and the recorder as if present; the argv of every run."""
    runs: list[list[str]] = []

    def run(_target: capture.Target, argv: list[str], stdout: object = None) -> int:
        runs.append(list(argv))
        return 0

    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(capture, "run", run)
    monkeypatch.setattr(capture, "require_tools", lambda *_tools: None)
    monkeypatch.setattr(capture, "sort_by_time", lambda _path: None)
    return runs


def capture_cli(*argv: str) -> int:
    return main(["lab", "capture", "--name", LAB, *argv])


def test_to_a_file(recorded: list[list[str]], tmp_path: Path) -> None:
    out = tmp_path / "h0.pcapng"
    assert capture_cli("h0", "-w", str(out), "-c", "10") == 0
    (argv,) = recorded
    assert argv[0] == "dumpcap"
    assert argv[argv.index("-w") + 1] == str(out)
    assert argv[-2:] == ["-c", "10"]


def test_to_stdout_when_it_is_a_pipe_or_asked(recorded: list[list[str]]) -> None:
    assert capture_cli("h1:p0") == 0  # capsys: stdout is not a terminal
    assert capture_cli("h1:p0", "-w", "-") == 0
    assert [argv[argv.index("-w") + 1] for argv in recorded] == ["-", "-"]


def test_on_a_terminal_decoded_lines_or_a_refusal(
    recorded: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    cli_error: CliError,
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert capture_cli("h0", "--duration", "3") == 0
    (argv,) = recorded
    assert argv[:4] == ["tshark", "-l", "-X", f"lua_script:{lua_path()}"]
    argv = ["lab", "capture", "--name", LAB, "h0", "-w", "-"]
    cli_error(argv, "stdout is a terminal")


def test_an_unwritable_file_is_refused_before_capturing(
    recorded: list[list[str]], cli_error: CliError, tmp_path: Path
) -> None:
    for bad in (tmp_path / "no" / "such.pcapng", tmp_path):
        argv = ["lab", "capture", "--name", LAB, "h0", "-w", str(bad)]
        cli_error(argv, "cannot write")
    assert recorded == []


# -- mrc wireshark ----------------------------------------------------------------------------


def test_wireshark_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wireshark", "--path"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == lua_path()
    assert path.name == LUA_NAME
    assert 'Proto("mrc"' in path.read_text()


def test_wireshark_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["wireshark", "--install"]) == 0
    installed = personal_plugin_dir(tmp_path) / LUA_NAME
    assert installed == tmp_path / ".local/lib/wireshark/plugins/mrc.lua"
    assert installed.read_bytes() == lua_path().read_bytes()
    assert str(installed) in capsys.readouterr().out
    assert main(["wireshark", "--install", "--dir", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / LUA_NAME).read_bytes() == lua_path().read_bytes()


def test_wireshark_bad_use(tmp_path: Path, cli_error: CliError) -> None:
    cli_error(["wireshark"], "give --path or --install")
    cli_error(["wireshark", "--dir", "x"], "--dir goes with --install")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = ["wireshark", "--install", "--dir", str(blocker / "plugins")]
    cli_error(argv, "cannot install into")
