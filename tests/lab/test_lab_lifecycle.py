"""down leaves nothing behind: namespaces, veths, nft tables; also after SIGKILL or SIGINT
in the middle of `up`; `down --all` removes every lab."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs import netns
from labs.apply import down, up
from labs.errors import LabError
from labs.state import STATE_DIR_ENV, list_labs, load_state, state_path
from labs.topology import preset
from mrc_transport.cli.main import main
from tests.lab.conftest import require_root_netns, unique_lab

pytestmark = pytest.mark.lab


def _root_links() -> str:
    return subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout


def _root_nft() -> str:
    return subprocess.run(
        ["nft", "list", "tables"], capture_output=True, text=True, check=True
    ).stdout


def _leftovers(name: str) -> list[str]:
    return [p.name for p in Path("/run/netns").glob(f"mrc-{name}-*")]


def test_down_leaves_nothing_and_is_idempotent(lab_name: str) -> None:
    links_before, nft_before = _root_links(), _root_nft()
    up(preset("tiny"), lab_name)
    ns = load_state(lab_name).namespaces
    assert all(netns.exists(n) for n in ns)
    assert _root_links() == links_before  # nothing created in the root namespace
    assert down(lab_name) == len(ns)
    assert _leftovers(lab_name) == []
    assert not state_path(lab_name).exists()
    assert _root_links() == links_before
    assert _root_nft() == nft_before
    assert down(lab_name) == 0


def test_up_refuses_to_overwrite_without_force(lab_name: str) -> None:
    up(preset("tiny"), lab_name)
    with pytest.raises(LabError, match="exists"):
        up(preset("tiny"), lab_name)
    up(preset("tiny"), lab_name, force=True)
    assert load_state(lab_name).complete


def _sigint_as_in_a_terminal() -> None:
    """Give the child SIGINT's default disposition, as a shell in a terminal does. A
    command started with ``&`` from a script (a CI runner's, say) inherits SIGINT ignored
    (POSIX), and Python then keeps ignoring it, so Ctrl-C would not be what was tested."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_large_up(lab_name: str) -> subprocess.Popen[str]:
    """`mrc lab up --preset large` in its own session (so a signal to its group reaches
    its `ip -b` children too, like Ctrl-C in a terminal), once its first namespace exists."""
    argv = [sys.executable, "-m", "mrc_transport", "lab", "up", "--name", lab_name]
    proc = subprocess.Popen(
        [*argv, "--preset", "large"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_as_in_a_terminal,
    )
    deadline = time.monotonic() + 20
    while not _leftovers(lab_name) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)  # polling for the first namespace to appear, then signal at once
    return proc


def test_down_after_sigkill_in_the_middle_of_up(lab_name: str) -> None:
    links_before = _root_links()
    proc = _start_large_up(lab_name)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert state_path(lab_name).exists()
    assert not load_state(lab_name).complete
    assert _leftovers(lab_name)  # it really was killed mid-way, with namespaces made
    down(lab_name)
    assert _leftovers(lab_name) == []
    assert _root_links() == links_before
    assert down(lab_name) == 0


@pytest.mark.parametrize("target", ["process", "group"])
def test_down_after_sigint_in_the_middle_of_up(lab_name: str, target: str) -> None:
    links_before = _root_links()
    proc = _start_large_up(lab_name)
    if target == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert f"interrupted; `mrc lab down --name {lab_name}`" in err
    assert not load_state(lab_name).complete
    assert _leftovers(lab_name)  # interrupted mid-way, with namespaces made
    assert main(["lab", "down", "--name", lab_name]) == 0
    assert _leftovers(lab_name) == []
    assert not state_path(lab_name).exists()
    assert _root_links() == links_before


@pytest.fixture
def private_labs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Labs in a state directory of their own, so `down --all` sees only them (other labs
    on this machine are not ours to remove); every one is removed even on failure."""
    require_root_netns()
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    names = [unique_lab() for _ in range(2)]
    try:
        yield names
    finally:
        for name in names:
            down(name)


def test_down_all_removes_every_lab(
    private_labs: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for name in private_labs:
        up(preset("tiny"), name)
    assert list_labs() == sorted(private_labs)
    assert main(["lab", "down", "--all"]) == 0
    assert list_labs() == []
    assert [n for name in private_labs for n in _leftovers(name)] == []
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(f"lab {n} down: 12 namespaces removed" for n in private_labs)
    assert main(["lab", "down", "--all"]) == 0  # nothing left: still fine, and it says so
    assert capsys.readouterr().out == "no labs up: nothing to remove\n"
