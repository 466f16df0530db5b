"""`mrc lab` without root: graph output, and bad input (malformed or invalid topology files,
bad names, unknown labs) gives one line on stderr and exit 2, never a traceback.

The state directory is a temporary one, and `labs.apply.up` is replaced by a function that
fails the test: a topology these tests expect refused can never build a lab."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labs.state import STATE_DIR_ENV, new_state, save_state
from labs.topology import preset
from mrc_transport.cli.main import main
from tests.conftest import CliError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LAB = "unitlab"


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(state))

    def must_not_build(*_args: object, **_kwargs: object) -> float:
        raise AssertionError("the CLI tried to build a lab from input it should refuse")

    monkeypatch.setattr("labs.apply.up", must_not_build)
    return state


def _saved_lab() -> None:
    """A state file (no namespaces): enough for `graph`, which only reads the topology."""
    save_state(new_state(LAB, preset("tiny"), 0.0))


# -- graph ----------------------------------------------------------------------------------


def test_graph_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _saved_lab()
    out = tmp_path / "fabric.png"
    assert main(["lab", "graph", str(out), "--name", LAB]) == 0
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000  # a drawn fabric, not an empty canvas
    assert capsys.readouterr().out.strip() == str(out)


def test_graph_svg_draws_every_link_and_node(tmp_path: Path) -> None:
    _saved_lab()
    out = tmp_path / "fabric.svg"
    assert main(["lab", "graph", str(out), "--name", LAB]) == 0
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    topo = preset("tiny")
    drawn = [el for el in root.iter() if el.tag.rsplit("}", 1)[-1] in ("path", "use")]
    assert len(drawn) >= len(topo.links) + len(topo.nodes)


def test_graph_svg_has_a_plane_legend_and_racks(tmp_path: Path) -> None:
    _saved_lab()
    out = tmp_path / "fabric.svg"
    assert main(["lab", "graph", str(out), "--name", LAB]) == 0
    text = out.read_text()
    for label in ("plane 0", "plane 1", "rack 0", "rack 1"):
        assert f"<!-- {label} -->" in text


def test_graph_groups_hosts_by_rack() -> None:
    from labs.graph import positions

    topo = preset("default")
    xs = sorted(positions(topo)[h][0] for h in topo.hosts)
    gaps = sorted(b - a for a, b in itertools.pairwise(xs))
    assert gaps[-1] > 1.5 * gaps[0]  # the step between racks is wider than inside one


@pytest.mark.parametrize("name", ["fabric.jpg", "fabric", "fabric.png.txt"])
def test_graph_bad_extension(tmp_path: Path, cli_error: CliError, name: str) -> None:
    _saved_lab()
    cli_error(["lab", "graph", str(tmp_path / name), "--name", LAB], ".png or .svg")
    assert not (tmp_path / name).exists()


def test_graph_into_a_missing_directory(tmp_path: Path, cli_error: CliError) -> None:
    _saved_lab()
    cli_error(["lab", "graph", str(tmp_path / "no" / "f.svg"), "--name", LAB], "no/f.svg")


def test_graph_of_an_unknown_lab(tmp_path: Path, cli_error: CliError) -> None:
    cli_error(["lab", "graph", str(tmp_path / "f.svg"), "--name", "nosuch"], "no lab 'nosuch'")


# -- topology files -------------------------------------------------------------------------

BAD_TOPOLOGIES = {
    "unclosed": ("planes: [1, 2\n", "invalid YAML"),
    "tabs": ("planes: 2\n\tracks: 2\n", "invalid YAML"),
    "list": ("- planes\n- racks\n", "top level must be a mapping"),
    "zero planes": ("planes: 0\n", "planes must be an integer in 1..64, got 0"),
    "too many planes": ("planes: 65\n", "planes must be an integer in 1..64"),
    "string count": ("racks: two\n", "racks must be an integer"),
    "bool count": ("racks: true\n", "racks must be an integer"),
    "negative rate": ("links: {host_t0: {rate: -100mbit}}\n", "bad rate"),
    "negative int rate": ("links: {t0_t1: {rate: -5}}\n", "rate must be at least 8kbit"),
    "rate unit": ("links: {t0_t1: {rate: 1gbps}}\n", "bad rate"),
    "small mtu": ("links: {host_t0: {mtu: 1000}}\n", "mtu must be in 1280..65535"),
    "probability": ("links: {t0_t1: {ecn: {probability: 1.5}}}\n", "probability must be in 0..1"),
    "ecn mode": (
        "links: {t0_t1: {ecn: codel}}\n",
        "mode must be one of none, probability, rate, red",
    ),
    "unknown key": ("planes: 2\nspines: 4\n", "unknown key 'spines'"),
    "unknown link class": ("links: {t1_t2: {}}\n", "unknown key 't1_t2'"),
    "unknown preset": ("preset: huge\n", "unknown preset 'huge'"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOPOLOGIES))
def test_up_refuses_a_bad_topology_file(tmp_path: Path, cli_error: CliError, case: str) -> None:
    text, expected = BAD_TOPOLOGIES[case]
    path = tmp_path / "topo.yaml"
    path.write_text(text)
    line = cli_error(["lab", "up", "--name", LAB, "--topology", str(path)], expected)
    assert line.startswith("mrc lab: error: ")


def test_up_with_a_missing_topology_file(tmp_path: Path, cli_error: CliError) -> None:
    path = tmp_path / "absent.yaml"
    cli_error(["lab", "up", "--name", LAB, "--topology", str(path)], "No such file")


@pytest.mark.parametrize("name", ["Upper", "a-b", "1lab", "x" * 13, "../etc", ""])
@pytest.mark.parametrize("action", ["up", "down", "status", "check", "events"])
def test_bad_lab_name(cli_error: CliError, action: str, name: str) -> None:
    cli_error(["lab", action, "--name", name], "lab name")


def test_unknown_lab(cli_error: CliError) -> None:
    cli_error(["lab", "status", "--name", "nosuch"], "no lab 'nosuch'")


def test_missing_action(cli_error: CliError) -> None:
    cli_error(["lab"], "missing ACTION")


@pytest.mark.parametrize(
    "argv",
    [
        ["lab", "flap", "h0:t0-p0-0", "--count", "many"],
        ["lab", "flap", "h0:t0-p0-0", "--period", "soon"],
        ["lab", "cut", "h0:t0-p0-0", "--mode", "soft"],
        ["lab", "up", "--preset", "huge"],
        ["lab", "degrade", "h0:t0-p0-0"],
    ],
)
def test_bad_flags(cli_error: CliError, argv: list[str]) -> None:
    cli_error(argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cut", "t1-p0-0"], "cut takes a link (a:b), not the switch 't1-p0-0'"),
        (["flap", "h0:t0-p0-0", "--period", "0"], "period must be > 0 seconds"),
        (["degrade", "@links", "--loss", "101"], "loss must be a percentage in 0..100"),
        (["unfail", "h0:t0-p0-0"], "unfail takes a switch or HOST:PORT, not the link"),
        (["restore", "@nope"], "unknown placeholder or group '@nope'"),
    ],
)
def test_bad_fault_words_are_refused_before_any_lab(
    cli_error: CliError, argv: list[str], message: str
) -> None:
    """The registry's parser reads the words first: no lab, no root needed to refuse them."""
    cli_error(["lab", *argv, "--name", "nosuch"], message)


@pytest.mark.parametrize("text", ["{not json", "{}", '{"lab": "unitlab"}', "[]"])
def test_corrupt_state_file(private_state: Path, cli_error: CliError, text: str) -> None:
    private_state.mkdir(parents=True)
    (private_state / f"{LAB}.json").write_text(text)
    cli_error(["lab", "status", "--name", LAB], "unreadable state file")
