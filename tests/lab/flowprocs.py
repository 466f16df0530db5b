"""The baseline flow (harness/tcpflow.py) as a child in a namespace, for the lab tests that
run it by hand: start it, and read its stdout to the event that says it is ready."""

from __future__ import annotations

import json
import subprocess
import sys


def tcpflow(ns: str, *args: str) -> subprocess.Popen[str]:
    """`python -m mrc_transport.harness.tcpflow ARGS` in namespace ns."""
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "mrc_transport.harness.tcpflow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def next_event(proc: subprocess.Popen[str], event: str) -> dict[str, object]:
    """Read the child's stdout until the named event line (a receiver's readiness signal)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        obj = json.loads(line)
        if obj.get("event") == event:
            return dict(obj)
    err = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"the flow exited before {event!r}: {err}")
