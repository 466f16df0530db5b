"""docs/workshop.md holds on the day: every command block marked runnable runs, in the
doc's order, on a lab of its own, and exits as the doc says (0 unless a line's comment says
"exits N").

A block is runnable when the line before its fence is ``<!-- runnable -->``; its commands
are its ``$ `` lines, each run as the reader's shell would: one ending in `` &`` runs in the
background while the next ones do (a capture during a transfer and a cut, step 5b), until a
line ``wait``, where it must have exited as the doc says. The doc's lab names are rewritten
to a unique one (``mrc lab VERB`` gets ``--name``, ``--lab mrc`` becomes ``--lab NAME``),
so the test never touches a lab of the reader's, and the fixture removes it whatever
happens. ``pytest -s`` prints each command's time: the doc's table of step times.

Left unmarked, so not run here: ``make demo`` and the two demos (``mrc demo failover``,
``mrc demo collisions``: half a minute each, too long for the suite; tests/lab/test_demo.py
runs both on ``tiny``), and the Wireshark GUI (a window, and ``mrc wireshark --install``
writes to the user's home).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.lab.conftest import require_root_netns, unique_lab

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "workshop.md"
MARK = "<!-- runnable -->"
_EXITS = re.compile(r"exits (\d+)")
_LAB_VERB = re.compile(r"(\.venv/bin/mrc lab \w+)")


def runnable_blocks(text: str) -> list[list[str]]:
    """The ``$ `` lines of every block whose fence follows the runnable mark."""
    lines, blocks = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip() != MARK or i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            continue
        block = []
        for body in lines[i + 2 :]:
            if body.startswith("```"):
                break
            if body.startswith("$ "):
                block.append(body[2:])
        blocks.append(block)
    return blocks


def for_lab(command: str, lab: str) -> str:
    """The doc's command on lab ``lab``: its own name wherever the doc uses the default."""
    command = command.replace("--lab mrc", f"--lab {lab}")
    if "--name" not in command:
        command = _LAB_VERB.sub(rf"\1 --name {lab}", command, count=1)
    return command.replace(".venv/bin/", f"{REPO}/.venv/bin/")


def expected_exit(command: str) -> int:
    comment = command.partition("#")[2]
    m = _EXITS.search(comment)
    return int(m.group(1)) if m else 0


def in_background(command: str) -> str | None:
    """The command a line ending in `` &`` starts in the background; None for any other."""
    code = command.partition("#")[0].rstrip()
    return code[:-1].rstrip() if code.endswith(" &") else None


def check(command: str, code: int, stderr: str, output: str) -> None:
    """The line exited as the doc says, without a traceback."""
    assert code == expected_exit(command), (command, output, stderr)
    assert "Traceback" not in stderr, (command, stderr)


@dataclass
class Shell:
    """The reader's shell in the folder ``cwd``, on the lab ``lab``."""

    lab: str
    cwd: Path
    jobs: list[tuple[str, subprocess.Popen[str], Path]] = field(default_factory=list)
    """What runs in the background: its line, its process, its output file."""

    def run(self, command: str) -> None:
        t0 = time.monotonic()
        background = in_background(command)
        if command.strip() == "wait":
            self.wait()
        elif background is not None:
            self.start(command, background)
        else:
            got = subprocess.run(
                ["bash", "-c", for_lab(command, self.lab)],
                cwd=self.cwd,
                capture_output=True,
                text=True,
                timeout=180,
            )
            check(command, got.returncode, got.stderr, got.stdout)
        print(f"{time.monotonic() - t0:6.1f} s  {command}")

    def start(self, command: str, background: str) -> None:
        log = self.cwd / f"job{len(self.jobs)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                ["bash", "-c", for_lab(background, self.lab)],
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group, for stop()
            )
        self.jobs.append((command, proc, log))

    def wait(self) -> None:
        for command, proc, log in self.jobs:
            code = proc.wait(timeout=180)
            output = log.read_text()
            check(command, code, output, output)
        self.jobs.clear()

    def stop(self) -> None:
        """Ends what a failed test left in the background (its own process groups)."""
        for _, proc, _ in self.jobs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)


def test_the_doc_marks_its_steps_runnable() -> None:
    blocks = runnable_blocks(DOC.read_text())
    assert len(blocks) >= 5
    assert all(blocks)
    assert for_lab(".venv/bin/mrc lab up --preset default", "t1").endswith(
        "--name t1 --preset default"
    )
    assert for_lab(".venv/bin/mrc perf --lab mrc --from h4 --to h0", "t1").count("--lab t1") == 1
    assert expected_exit(".venv/bin/mrc lab check  # exits 1: the cut's paths fail") == 1
    assert (
        in_background("sleep 1; .venv/bin/mrc perf -t 10 &") == "sleep 1; .venv/bin/mrc perf -t 10"
    )
    assert in_background(".venv/bin/mrc lab check && echo ok") is None
    commands = [c for block in blocks for c in block]
    started = sum(in_background(c) is not None for c in commands)
    assert started, "step 5b's capture runs in the background"
    assert commands.count("wait") >= 1, "step 5b waits for its background capture"


@pytest.fixture
def doc_lab(tmp_path: Path) -> Iterator[str]:
    require_root_netns()
    from labs.apply import down

    name = unique_lab()
    try:
        yield name
    finally:
        down(name)


def test_every_runnable_command_of_the_workshop_runs(doc_lab: str, tmp_path: Path) -> None:
    shell = Shell(doc_lab, tmp_path)
    try:
        for block in runnable_blocks(DOC.read_text()):
            for command in block:
                shell.run(command)
        assert not shell.jobs, "a block started a job in the background and never waited"
    finally:
        shell.stop()
