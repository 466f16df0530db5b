"""demo.procs.Child.kill is safe in a ``finally`` after trio.run, also for a child that
exited and was never waited for (an error ended the run first)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

from mrc_transport.harness.procs import Child


def test_kill_outside_trio_of_an_exited_unreaped_child(tmp_path: Path) -> None:
    children: list[Child] = []

    async def run() -> None:
        proc = await trio.lowlevel.open_process(
            ["true"], stdout=subprocess.PIPE, start_new_session=True
        )
        child = Child("true", proc, tmp_path / "true.stderr")
        children.append(child)
        await child.read_stdout()  # EOF: the child has exited; nobody waits for it

    trio.run(run)
    (child,) = children
    assert child.eof
    child.kill()  # no RuntimeError from trio's pidfd outside its loop
