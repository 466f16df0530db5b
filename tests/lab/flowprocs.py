"""The baseline flow (harness/tcpflow.py) as a child in a namespace, for the lab tests that
run it by hand: start it, read its stdout to the event that says it is ready, wait for
both ends' summaries, and never leave one running."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


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


def ends(
    rx: subprocess.Popen[str], tx: subprocess.Popen[str], timeout: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both ends run to their exit (0): the sender's end event and the receiver's."""
    tx_out, tx_err = tx.communicate(timeout=timeout)
    rx_out, rx_err = rx.communicate(timeout=60)
    assert tx.returncode == 0, tx_err
    assert rx.returncode == 0, rx_err
    sent: dict[str, Any] = json.loads(tx_out.strip().splitlines()[-1])
    received: dict[str, Any] = json.loads(rx_out.strip().splitlines()[-1])
    return sent, received


def stop(*procs: subprocess.Popen[str] | None) -> None:
    """Kill whichever is still running (a finally's: an assertion left it behind)."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
