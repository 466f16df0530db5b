"""Child processes of an experiment, each in a lab namespace, run under trio.

Every child is ``ip netns exec NS python -m ...`` started in a session of its own, so that
killing its process group (by the id we started) removes it and anything it spawned, and a
Ctrl-C in the terminal reaches only the experiment, which then kills its children itself before
tearing the lab down. Children speak JSON lines on stdout (tcpflow's events, `mrc perf
--json-stream`); stderr goes to a log file in the output folder for post-mortems.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from mrc_transport.harness.errors import HarnessError
from mrc_transport.perf.report import EndDoc, ReportError

Event = dict[str, Any]
PYTHON = sys.executable


def perf_argv(*args: str) -> list[str]:
    """`mrc perf ARGS` as a module run (the child need not find the `mrc` script)."""
    return [PYTHON, "-m", "mrc_transport.cli.main", "perf", *args]


def tcpflow_argv(*args: str) -> list[str]:
    return [PYTHON, "-m", "mrc_transport.harness.tcpflow", *args]


def warm_argv(argv: Sequence[str]) -> list[str]:
    """``python -m MODULE ARGS`` started through harness/launch.py: it imports, prints a
    ``ready`` event and runs only after ``Child.go`` (the child needs ``stdin=True``)."""
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"not a `python -m MODULE` command line: {argv!r}")
    return [argv[0], "-m", "mrc_transport.harness.launch", *argv[2:]]


def _event_of(line: str) -> Event | None:
    """A child's stdout line as a JSON object; `mrc perf --json-stream` wraps its payload
    as {"event": name, "data": {...}}, tcpflow writes {"event": name, ...} flat."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


class Child:
    """One child process and the JSON events it printed so far."""

    def __init__(self, name: str, proc: trio.Process, log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log
        self.events: list[Event] = []
        self.eof = False
        self.on_event: Callable[[Event], None] | None = None
        self.reaped = False
        """Its exit status was collected (``wait_exit``); until then, even when it has
        exited, it is a zombie whose process group a kill still reaches harmlessly."""
        self._changed = trio.Event()

    async def read_stdout(self) -> None:
        """Collect stdout's JSON lines until EOF (run in the caller's nursery)."""
        assert self.proc.stdout is not None
        buf = b""
        try:
            async for chunk in self.proc.stdout:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    ev = _event_of(raw.decode(errors="replace"))
                    if ev is not None:
                        self.events.append(ev)
                        if self.on_event is not None:
                            self.on_event(ev)
                self._notify()
        except trio.ClosedResourceError:
            pass
        finally:
            self.eof = True
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def find(self, name: str) -> Event | None:
        """The last event called name."""
        return next((e for e in reversed(self.events) if e.get("event") == name), None)

    def perf_end(self) -> EndDoc | None:
        """`mrc perf --json-stream`'s end document, None if it printed none (it failed
        first) or not one of that form."""
        ev = self.find("end")
        try:
            return None if ev is None else EndDoc.from_json(ev.get("data"))
        except ReportError:
            return None

    async def wait_event(self, name: str, limit_s: float) -> Event:
        """The first event called name; HarnessError (with the child's stderr) if the child
        ends or the timeout passes first."""
        with trio.move_on_after(limit_s):
            while True:
                ev = next((e for e in self.events if e.get("event") == name), None)
                if ev is not None:
                    return ev
                if self.eof:
                    await self._reap()
                    break
                await self._changed.wait()
        raise HarnessError(f"{self.name}: no {name!r} within {limit_s:g} s{self.stderr_tail()}")

    async def wait_exit(self, limit_s: float) -> int:
        with trio.move_on_after(limit_s):
            return await self._reap()
        raise HarnessError(f"{self.name}: still running after {limit_s:g} s{self.stderr_tail()}")

    async def _reap(self) -> int:
        code = await self.proc.wait()
        self.reaped = True
        return code

    def stderr_tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(errors="replace").strip()
        except OSError:
            return ""
        tail = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return f" ({' | '.join(tail)})" if tail else ""

    async def go(self) -> None:
        """The word a child started through ``warm_argv`` waits for."""
        assert self.proc.stdin is not None, "start the child with stdin=True"
        await self.proc.stdin.send_all(b"go\n")

    def terminate(self) -> None:
        """SIGTERM to the child's process group: a tcpflow receiver then ends with what
        arrived so far, its records written."""
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the child's process group (its own session: we started it). Safe
        outside trio (a ``finally`` after trio.run): it does not read ``proc.returncode``,
        which for a child that exited unreaped closes trio's pidfd and needs trio's loop
        (RuntimeError, hiding the error that ended the run)."""
        if self.reaped:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class Children:
    """Every child of one run; ``kill_all`` is safe to call from a finally."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.all: list[Child] = []

    async def start(
        self,
        nursery: trio.Nursery,
        name: str,
        netns: str,
        argv: Sequence[str],
        *,
        stdin: bool = False,
    ) -> Child:
        """Start argv in netns; with ``stdin``, a pipe to it (``Child.go``)."""
        self.logdir.mkdir(parents=True, exist_ok=True)
        log = self.logdir / f"{name}.stderr"
        err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            proc = await trio.lowlevel.open_process(
                ["ip", "netns", "exec", netns, *argv],
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        finally:
            os.close(err)  # the child holds its own copy
        child = Child(name, proc, log)
        self.all.append(child)
        nursery.start_soon(child.read_stdout)
        return child

    def kill_all(self) -> None:
        for child in self.all:
            child.kill()
