"""docs/workshop.md holds on the day: every command block marked runnable runs, in the
doc's order, on a lab of its own, and exits as the doc says (0 unless a line's comment says
"exits N").

A block is runnable when the line before its fence is ``<!-- runnable -->``; its commands
are its ``$ `` lines. The doc's lab names are rewritten to a unique one (``mrc lab VERB``
gets ``--name``, ``--lab mrc`` becomes ``--lab NAME``), so the test never touches a lab of
the reader's, and the fixture removes it whatever happens.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
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


def test_the_doc_marks_its_steps_runnable() -> None:
    blocks = runnable_blocks(DOC.read_text())
    assert len(blocks) >= 5
    assert all(blocks)
    assert for_lab(".venv/bin/mrc lab up --preset default", "t1").endswith(
        "--name t1 --preset default"
    )
    assert for_lab(".venv/bin/mrc perf --lab mrc --from h4 --to h0", "t1").count("--lab t1") == 1
    assert expected_exit(".venv/bin/mrc lab check  # exits 1: the cut's paths fail") == 1


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
    for block in runnable_blocks(DOC.read_text()):
        for command in block:
            t0 = time.monotonic()
            got = subprocess.run(
                ["bash", "-c", for_lab(command, doc_lab)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=180,
            )
            print(f"{time.monotonic() - t0:6.1f} s  {command}")
            assert got.returncode == expected_exit(command), (command, got.stdout, got.stderr)
            assert "Traceback" not in got.stderr, (command, got.stderr)
