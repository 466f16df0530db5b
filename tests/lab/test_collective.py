"""`mrc collective` on a tiny lab (4 hosts, 2 racks, 2 planes): each collective's table with
every result checked, over MRC, TCP and MPTCP; a step loop through a cut, its JSON and
figures, the lab whole again after it; and the bad input a lab can show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labs.faults import read_events
from mrc_transport.cli.main import main
from tests.conftest import CliError

pytestmark = pytest.mark.lab

ROW = re.compile(
    r"^\s+(\d+)\s+(\d+)\s+(float|int32)\s+(sum|none)\s+-1\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+(\d+)$"
)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def rows(out: str) -> list[tuple[int, int, str, float, float, int]]:
    found = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            size, count, dtype, _op, alg, bus, wrong = m.groups()
            found.append((int(size), int(count), dtype, float(alg), float(bus), int(wrong)))
    return found


@pytest.mark.parametrize(
    ("name", "transport", "dtype"),
    [
        ("allreduce", "mrc", "float"),
        ("allgather", "mrc", "int32"),
        ("alltoall", "mrc", "float"),
        ("allreduce", "tcp", "int32"),
        ("alltoall", "mptcp", "float"),
    ],
)
def test_a_sweep_prints_nccl_tests_table_every_result_checked(
    lab: str, name: str, transport: str, dtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["collective", name, "--lab", lab, "-b", "64K", "-e", "256K", "-f", "4", "-n", "2"]
    rc = main([*argv, "-w", "1", "-d", dtype, "--transport", transport, "--procs", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"over {transport}, lab {lab}: 4 ranks, 2 processes" in out
    found = rows(out)
    assert [r[0] for r in found] == [65536, 262144]
    divisor = 1 if name == "allreduce" else 4  # a rank's part for all-gather, all-to-all
    assert [r[1] for r in found] == [65536 // 4 // divisor, 262144 // 4 // divisor]
    assert all(r[2] == dtype and r[5] == 0 and r[3] > 0 for r in found)
    factor = 1.5 if name == "allreduce" else 0.75  # 2(n-1)/n and (n-1)/n for 4 ranks
    assert all(r[4] == pytest.approx(r[3] * factor, abs=2e-4) for r in found)
    assert "# Out of bounds values : 0 OK" in out
    assert "# Ideal bus bandwidth  : 0.0250" in out  # 2 ports x 100 Mbit/s a host
    assert "# CPU: " in out


def test_two_hosts_of_the_lab_are_a_ring_of_two(
    lab: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "collective",
            "allreduce",
            "--lab",
            lab,
            "--hosts",
            "h3,h0",
            "-b",
            "8K",
            "-e",
            "8K",
            "-n",
            "1",
            "--procs",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert ": 2 ranks, one process" in out  # every rank in this process's loop
    assert "#  Rank  0 on   h3 (rack 1)" in out
    assert [r[0] for r in rows(out)] == [8192]


def test_a_step_loop_through_a_cut(
    lab: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule = tmp_path / "cut.yaml"
    schedule.write_text(
        '- {at: 0.3, action: cut, target: "@tcp-link", mode: gray}\n'
        '- {at: 0.8, action: restore, target: "@tcp-link"}\n'
    )
    out_dir = tmp_path / "out"
    argv = ["collective", "allreduce", "--lab", lab, "-e", "256K", "--steps", "3"]
    rc = main([*argv, "--schedule", str(schedule), "--out", str(out_dir)])
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads((out_dir / "steps.json").read_text())
    assert doc["verified"] is True
    assert (doc["collective"], doc["size"], doc["transport"]) == ("allreduce", 262144, "mrc")
    link = doc["bindings"]["@tcp-link"]
    assert [(f["kind"], f["target"], f["restored"]) for f in doc["faults"]] == [("cut", link, True)]
    steps = doc["steps"]
    assert len(steps) >= 3
    assert steps[-1]["t_start"] + steps[-1]["seconds"] >= 0.8 + 2.0  # the schedule and its tail
    assert any(s["faults"] == [f"cut {link}"] for s in steps)
    assert doc["summary"]["wrong"] == 0
    assert doc["summary"]["fault_free"]["steps"] >= 1
    assert doc["schedule"]["not_played"] == []
    for name in ("steps-timeline.png", "steps-cdf.png"):
        assert (out_dir / name).read_bytes()[:8] == PNG
    assert "slowdown: p99" in out
    last = read_events(lab)[-1]
    assert (last["kind"], last["target"]) == ("restore", link)  # the lab is whole again


def test_collide_makes_new_connections_every_step(lab: str, tmp_path: Path) -> None:
    argv = ["collective", "alltoall", "--lab", lab, "-e", "64K", "--steps", "3", "--collide"]
    assert main([*argv, "--transport", "tcp", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "steps.json").read_text())
    assert doc["collide"] is True
    assert doc["faults"] == []
    assert len(doc["steps"]) == 3
    assert doc["verified"] is True


def test_an_unfinished_fault_is_undone_when_the_loop_ends(lab: str, tmp_path: Path) -> None:
    schedule = tmp_path / "fail.yaml"
    schedule.write_text("- {at: 0.1, action: fail, target: t1-p0-0}\n")
    argv = ["collective", "allreduce", "--lab", lab, "-e", "64K", "--steps", "2"]
    assert main([*argv, "--schedule", str(schedule), "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "steps.json").read_text())
    assert doc["schedule"]["undone_at_end"] == ["fail t1-p0-0"]
    last = read_events(lab)[-1]
    assert (last["kind"], last["target"]) == ("restore", "t1-p0-0")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--hosts", "h0,h9"], ["'h9' is not a host of lab"]),
        (["--hosts", "h1"], ["2 or more hosts"]),
        (["--hosts", "h1,h1"], ["named twice"]),
        (["-b", "1000", "-e", "1000"], ["1000 is not a multiple of 16 bytes"]),
        (["--steps", "2", "--schedule", "nope.yaml"], ["nope.yaml"]),
        (["--steps", "2", "--hosts", "h0,h1"], ["every host is in rack 0"]),
        (["--steps", "2", "-w", "0"], ["-w 1 or more"]),
        (["--procs", "5"], ["--procs must be 1 to 4"]),
        (["--procs", "0"], ["--procs must be 1 to 4"]),
    ],
)
def test_bad_input_on_a_lab_is_one_line(
    lab: str, cli_error: CliError, extra: list[str], words: list[str]
) -> None:
    cli_error(["collective", "allreduce", "--lab", lab, *extra], "mrc collective: error:", *words)


def test_mptcp_missing_from_the_kernel_is_one_line(
    lab: str, cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("labs.kernel.has_mptcp", lambda: False)
    line = cli_error(["collective", "allreduce", "--lab", lab, "--transport", "mptcp"])
    assert line.startswith("mrc collective: error: --transport mptcp: this kernel has no MPTCP")


def test_ctrl_c_mid_loop_leaves_the_lab_whole(lab: str, tmp_path: Path) -> None:
    """Ctrl-C while a cut is in effect: the cut is undone, exit 130, no traceback (the
    fault worker leaves the signal to the loop)."""
    import signal
    import subprocess
    import sys

    schedule = tmp_path / "cut.yaml"
    schedule.write_text('- {at: 0.2, action: cut, target: "t0-p0-0:t1-p0-0", mode: gray}\n')
    argv = [sys.executable, "-m", "mrc_transport.cli.main", "collective", "allreduce"]
    argv += ["--lab", lab, "-e", "64K", "--steps", "1000", "--schedule", str(schedule)]
    child = subprocess.Popen(
        [*argv, "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    for line in child.stdout:  # a step in the cut: it was applied
        if "(cut t0-p0-0:t1-p0-0 (gray))" in line:
            break
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "Traceback" not in err, err
    last = read_events(lab)[-1]
    assert (last["kind"], last["target"]) == ("restore", "t0-p0-0:t1-p0-0")


@pytest.mark.parametrize("procs", ["1", "2"])
def test_a_port_in_use_at_a_rank_is_one_line(
    lab: str, procs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rank's endpoint cannot bind (its port taken in its host): exit 1, one line, whether
    this process serves the rank or a worker does."""
    import socket

    from labs.netns import entered
    from labs.topology import namespace
    from mrc_transport.collective.links import MRC_PORT

    with entered(namespace(lab, "h2")):
        taken = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with taken:
        taken.bind(("::", MRC_PORT))
        capsys.readouterr()
        rc = main(
            ["collective", "allreduce", "--lab", lab, "-b", "8K", "-e", "8K", "--procs", procs]
        )
        err = capsys.readouterr().err
    assert rc == 1, err
    assert err.count("\n") == 1, err
    assert err.startswith("mrc collective: error: "), err
    assert "Address already in use" in err, err
