"""`mrc repro NAME --quick` end to end (root): each experiment's shortened run on a lab of its
own, judged from its JSON (the report's fields, every byte of every flow verified), its PNG
and Markdown, and the lab gone afterwards; also after an error and after Ctrl-C.

The quick runs check that the pipeline measures what it says, not the paper's claims:
seconds-long runs on a busy machine do not settle those (docs/repro.md has full runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from labs.state import state_path
from mrc_transport.cli.main import main
from mrc_transport.repro.experiments import NAMES
from tests.conftest import CliError

pytestmark = pytest.mark.lab

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MEASURED = {
    "loss": {"fraction_of_lossless", "goodput_bps", "line_rate_bps"},
    "permutation": {"ecmp", "mrc", "line_rate_bps"},
    "incast": {"tcp", "mrc", "senders"},
    "port-loss": {"stall_s", "settle_s", "down_fraction", "plane_down_after_s"},
    "flapping": {"flapping_fraction", "back_to_full_s", "links"},
    "cascade": {"per_cut", "lowest_bin_fraction", "links_cut"},
    "t1-blackhole": {"hit", "packets_resent", "dip_depth", "connections"},
    "training-step": {"mrc", "tcp", "mptcp"},
}
"""Figures each report must carry."""


def _repro(name: str, lab: str, out: Path) -> tuple[int, dict[str, Any]]:
    rc = main(["repro", name, "--quick", "--preset", "tiny", "--name", lab, "--out", str(out)])
    return rc, json.loads((out / name / f"{name}.json").read_text())


def _gone(lab: str) -> bool:
    return not state_path(lab).exists() and not Path(f"/run/netns/mrc-{lab}-h0").exists()


@pytest.mark.parametrize("name", NAMES)
def test_quick_run_reports_and_verifies_every_byte(
    name: str, lab_name: str, tmp_path: Path
) -> None:
    rc, doc = _repro(name, lab_name, tmp_path)
    assert rc == 0
    assert (doc["experiment"], doc["lab"], doc["quick"]) == (name, lab_name, True)
    assert doc["verified"] is True
    assert doc["runs"]
    for run in doc["runs"]:
        assert run["verified"] is True
        assert run["flows"] or run["loop"]["steps"]
        for flow in run["flows"]:
            assert flow["verified"] is True, (run["name"], flow)
            assert flow["bytes"] > 0, (run["name"], flow)
        if run["loop"]:  # a step loop steps on until its last step ends
            assert run["observed_s"] >= run["duration_s"]
        else:
            assert 0 < run["observed_s"] <= run["duration_s"]
        assert run["cpu"] is not None
        if run["steps"]:
            assert run["faults"], "the lab's log has the faults the schedule played"
    assert doc["rows"]
    for row in doc["rows"]:
        for key in ("claim", "lab", "verdict"):
            assert row[key], row
        assert row["agrees"] in (True, False, None)
    assert MEASURED[name] <= set(doc["measured"])
    assert {"date", "kernel", "cpus", "busy", "cpu_bound_runs"} <= set(doc["machine"])
    folder = tmp_path / name
    assert (folder / f"{name}.png").read_bytes()[:8] == PNG_SIGNATURE
    assert "| paper | lab | verdict |" in (folder / f"{name}.md").read_text()
    assert _gone(lab_name)
    if name == "port-loss":
        port_loss_found_its_port(doc)
    if name == "training-step":
        training_steps_went_through_both_faults(doc)
        assert (folder / f"{name}-cdf.png").read_bytes()[:8] == PNG_SIGNATURE


def port_loss_found_its_port(doc: dict[str, Any]) -> None:
    """port-loss's report names the port it failed and measures around that fault, for
    MRC and for MPTCP."""
    run, mptcp = doc["runs"]
    assert (run["name"], mptcp["name"]) == ("mrc", "mptcp")
    (fault,) = run["faults"]
    dst = run["flows"][0]["dst"]
    assert (fault["kind"], fault["target"], fault["restored"]) == ("fail", f"{dst}:p1", True)
    n = doc["measured"]
    assert n["surviving_share"] == 0.5  # tiny: 2 planes
    assert n["fault_s"] == pytest.approx([fault["t_start"], fault["t_end"]], abs=1e-3)
    # measured, whatever MRC did (with the pure-Python core on a busy machine it once
    # stalled for the whole outage, 3 s, the sender never taking the plane out of use)
    assert n["down_fraction"] is not None
    assert n["stall_s"] is not None
    assert n["mptcp"]["stall_s"] is not None  # a figure, whatever it was
    assert [r["agrees"] for r in doc["rows"]][-1] is None  # MPTCP's row: in words


def training_steps_went_through_both_faults(doc: dict[str, Any]) -> None:
    """training-step's loops: every transport's steps, each checked, the cut of its own
    busiest link and the dead T1 above it in its log, steps timed through both."""
    for run in doc["runs"]:
        loop = run["loop"]
        assert loop["transport"] == run["name"]
        assert loop["hosts"] == ["h0", "h1", "h2", "h3"]
        link, t1 = loop["bindings"]["@tcp-link"], loop["bindings"]["@tcp-t1"]
        assert link.endswith(f":{t1}")
        kinds = [(f["kind"], f["target"], f["restored"]) for f in run["faults"]]
        assert kinds == [("cut", link, True), ("fail", t1, True)]
        assert all(s["wrong"] == 0 and s["seconds"] > 0 for s in loop["steps"])
        last = loop["steps"][-1]
        assert last["t_start"] + last["seconds"] > run["faults"][-1]["t_end"]  # the tail too
        numbers = doc["measured"][run["name"]]
        assert numbers["cut"]["steps"] >= 1
        assert numbers["fault_free_p50_s"] > 0


def test_the_lab_is_torn_down_after_an_error(
    lab_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mrc_transport.harness.errors import HarnessError

    seen: list[bool] = []

    def broken(*_args: object) -> None:
        seen.append(Path(f"/run/netns/mrc-{lab_name}-h0").exists())
        raise HarnessError("a child failed")

    monkeypatch.setattr("mrc_transport.repro.engine.play", broken)
    rc = main(
        [
            "repro",
            "cascade",
            "--quick",
            "--preset",
            "tiny",
            "--name",
            lab_name,
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 1
    assert seen == [True]  # the lab was up when the run failed
    assert capsys.readouterr().err.strip() == "mrc repro cascade: error: a child failed"
    assert _gone(lab_name)


def test_the_lab_is_torn_down_after_ctrl_c(
    lab_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("mrc_transport.repro.engine.play", interrupted)
    rc = main(
        ["repro", "loss", "--quick", "--preset", "tiny", "--name", lab_name, "--out", str(tmp_path)]
    )
    assert rc == 130
    assert _gone(lab_name)


def test_a_lab_of_that_name_is_left_alone(
    tiny_lab: str, tmp_path: Path, cli_error: CliError
) -> None:
    line = cli_error(["repro", "port-loss", "--quick", "--name", tiny_lab, "--out", str(tmp_path)])
    assert line == (
        f"mrc repro: error: port-loss: lab {tiny_lab!r} exists: pick another --name or "
        f"`mrc lab down --name {tiny_lab}`"
    )
    assert not _gone(tiny_lab)
