"""down leaves nothing behind: namespaces, veths, nft tables; also after SIGKILL in `up`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labs import netns
from labs.apply import down, up
from labs.errors import LabError
from labs.state import load_state, state_path
from labs.topology import preset

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


def test_down_after_sigkill_in_the_middle_of_up(lab_name: str) -> None:
    links_before = _root_links()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mrc_transport",
            "lab",
            "up",
            "--name",
            lab_name,
            "--preset",
            "large",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not _leftovers(lab_name) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)  # polling for the first namespace to appear, then kill at once
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert state_path(lab_name).exists()
    assert not load_state(lab_name).complete
    assert _leftovers(lab_name)  # it really was killed mid-way, with namespaces made
    down(lab_name)
    assert _leftovers(lab_name) == []
    assert _root_links() == links_before
    assert down(lab_name) == 0
