"""`mrc plan` through main(): table, JSON, --hosts, and one-line usage errors (exit 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from labs.sizing import compare
from mrc_transport.cli.main import main
from tests.conftest import CliError


def _json(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["plan", "--json", *flags]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_table_shows_both_fabrics_and_paper_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    assert "131,072" in out
    assert "65,536" in out
    assert "2/3" in out  # optics
    assert "3/5" in out  # switches and longest path
    assert "0.391%" in out
    assert "3.125%" in out


def test_json_reproduces_paper_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys)
    mp, base, ratios = doc["multiplane"], doc["baseline"], doc["ratios"]
    assert mp["nics"] == 131_072
    assert mp["tiers"] == 2
    assert (mp["t0"], mp["t1"]) == (8 * 512, 8 * 256)
    assert base["tiers"] == 3
    assert base["radix"] == 64
    assert (mp["longest_path"], base["longest_path"]) == (3, 5)
    assert ratios["optics_per_nic"]["fraction"] == "2/3"
    assert ratios["switches_per_nic"]["fraction"] == "3/5"
    assert round(mp["uplink_loss"] * 100, 1) == 0.4
    assert round(base["uplink_loss"] * 100) == 3


def test_json_matches_library(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--radix", "64", "--planes", "4", "--nic-gbps", "400")
    expected = compare(64, 4, 400).as_dict()
    assert doc["multiplane"] == expected["multiplane"]
    assert doc["baseline"] == expected["baseline"]
    assert doc["inputs"] == {"radix": 64, "planes": 4, "nic_gbps": 400, "hosts": None}


def test_hosts_sizes_the_smallest_fabrics(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "--hosts", "131072")
    assert doc["multiplane"]["nics"] == doc["baseline"]["nics"] == 131_072
    assert doc["multiplane"]["tiers"] == 2
    assert doc["baseline"]["tiers"] == 4  # the paper's "5-7": 7 switches on the path
    assert doc["baseline"]["longest_path"] == 7


def test_hosts_table_shows_capacity_when_full(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--hosts", "1000"]) == 0
    out = capsys.readouterr().out
    assert "NICs when full" in out
    assert "1,000" in out


@pytest.mark.parametrize(
    "flags",
    [
        ["--radix", "511"],
        ["--radix", "abc"],
        ["--planes", "0"],
        ["--nic-gbps", "801"],
        ["--hosts", "0"],
        ["--hosts", "-5"],
        ["--hosts", "1" + "0" * 30],
        ["--radix", "16"],
        ["--bogus"],
    ],
)
def test_bad_flags_exit_2_with_one_line(flags: list[str], cli_error: CliError) -> None:
    cli_error(["plan", *flags], "error")
