"""Ctrl-C mid-transfer, as iperf3 takes it: the summary so far, "interrupt - the client
(server) has terminated", exit 1, no traceback, nothing left running in the lab.

Each process starts in a session of its own with SIGINT at its default (a shell's
background job would ignore it), and gets the Ctrl-C as a terminal would deliver it: to its
whole process group, once its interval lines show the transfer is under way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.lab

SRC, DST = "h3", "h0"
PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
WAIT_S = 60.0


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def _ns(lab: str, host: str) -> list[str]:
    return ["ip", "netns", "exec", f"mrc-{lab}-{host}"]


def _terminal_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def _started(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_terminal_sigint,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _until_line(proc: subprocess.Popen[str], prefix: str) -> list[str]:
    """Read proc's stdout until a line starts with prefix (the transfer is under way)."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no {prefix!r} line; got {seen}")


def _ctrl_c(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out, err


def _lab_pids(lab: str) -> list[str]:
    """Processes left in the lab's host namespaces."""
    pids: list[str] = []
    for host in (SRC, DST):
        got = subprocess.run(
            ["ip", "netns", "pids", f"mrc-{lab}-{host}"], capture_output=True, text=True
        )
        pids += got.stdout.split()
    return pids


def _assert_interrupted(rc: int, out: str, err: str, who: str) -> None:
    assert rc == 1, (out, err)
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" not in err
    assert f"mrc perf: interrupt - the {who} has terminated" in err
    assert "interrupted: the test did not finish" in out
    assert "sender" in out  # the summary's two sum lines
    assert "receiver" in out


def test_ctrl_c_one_shot(lab: str) -> None:
    argv = [*PY, "--lab", lab, "--from", SRC, "--to", DST, "-t", "20", "-b", "20M"]
    with _started(argv) as proc:
        _until_line(proc, "[SUM]")
        rc, out, err = _ctrl_c(proc)
    _assert_interrupted(rc, out, err, "client")
    assert _lab_pids(lab) == []


def test_ctrl_c_client_and_server_by_hand(lab: str) -> None:
    server = [*_ns(lab, DST), *PY, "-s", "--lab", lab, "-i", "0.5"]
    client = [*_ns(lab, SRC), *PY, "-c", DST, "--lab", lab, "-t", "20", "-b", "20M"]
    with _started(server) as srv:
        _until_line(srv, "Server listening")
        with _started(client) as cli:
            _until_line(cli, "[SUM]")
            _until_line(srv, "[SUM]")
            rc, out, err = _ctrl_c(srv)
            _assert_interrupted(rc, out, err, "server")
            # the client hears the server's close, not silence until its RTOs
            out, err = cli.communicate(timeout=WAIT_S)
            assert cli.returncode == 1
            assert "Traceback" not in err
            assert "peer closed" in err
    assert _lab_pids(lab) == []


def test_ctrl_c_client_by_hand_leaves_the_server_listening(lab: str) -> None:
    server = [*_ns(lab, DST), *PY, "-s", "--lab", lab, "-i", "0"]
    client = [*_ns(lab, SRC), *PY, "-c", DST, "--lab", lab, "-t", "20", "-b", "20M"]
    with _started(server) as srv:
        _until_line(srv, "Server listening")
        with _started(client) as cli:
            _until_line(cli, "[SUM]")
            _assert_interrupted(*_ctrl_c(cli), "client")
        # as iperf3's, the server reports the cut test and serves the next one
        lines = _until_line(srv, "NOT VERIFIED")
        assert any("receiver" in line for line in lines)
        assert srv.poll() is None
        rc, _, err = _ctrl_c(srv)  # idle: nothing to summarise, the same goodbye
        assert rc == 1
        assert "Traceback" not in err
        assert "mrc perf: interrupt - the server has terminated" in err
    assert _lab_pids(lab) == []
