"""The compiled protocol core and its source are twins: the same seeded run over a terrible
network, event for event and counter for counter (csrc/build_core.py compiles exactly the
source; mypyc's ints and floats must behave as CPython's for this to hold). The native
build runs against the pure-Python reference (MRC_PUREPYTHON=1), each in a child."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from mrc_transport import backend

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE_BUILT = backend.core_missing() is None

# Run in a child process, so each side imports the core its environment asks for.
TRACE = """
import dataclasses, hashlib, json, random
from mrc_transport.protocol import COMPILED
from tests.sim.fabric import Link
from tests.sim.scenarios import blob, start

def plain(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return hashlib.sha256(value).hexdigest()
    return value if isinstance(value, (int, str, type(None))) else repr(value)

def event(e):
    return [type(e).__name__, *(plain(getattr(e, f.name)) for f in dataclasses.fields(e))]

def counters(conn):
    return {f.name: getattr(conn.counters, f.name) for f in dataclasses.fields(conn.counters)}

rng = random.Random(7)
terrible = Link(rate_bps=1e9, drop=0.03, dup=0.02, jitter=80e-6, mark=0.03)
run = start(7, planes=2, paths=3, link=terrible)
msgs = [blob(rng.randrange(200_000), i) for i in range(8)]
for m in msgs:
    run.conn.send_message(m, run.fabric.now)
run.fabric.run(5.0, lambda: len(run.b.messages) == len(msgs))
run.conn.close(run.fabric.now)
run.fabric.run(run.fabric.now + 2.0, lambda: run.conn.state.value == "closed")
print(json.dumps({
    "compiled": COMPILED,
    "now": repr(run.fabric.now),
    "events": [[event(e) for e in host.events] for host in (run.a, run.b)],
    "counters": [counters(run.conn), counters(run.server)],
}))
"""


def trace(reference: bool) -> dict[str, object]:
    """The run's trace by the pure-Python reference, or by the build as installed."""
    env = {k: v for k, v in os.environ.items() if k != "MRC_PUREPYTHON"}
    if reference:
        env["MRC_PUREPYTHON"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", TRACE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_compiled_core_and_source_agree_event_for_event() -> None:
    if not CORE_BUILT:
        if backend.MODE == "native":
            pytest.fail("the compiled core is not built (make)")
        pytest.skip("the compiled core is not built (make)")
    compiled, source = trace(False), trace(True)
    assert compiled.pop("compiled") is True
    assert source.pop("compiled") is False
    events = compiled["events"]
    assert isinstance(events, list)
    assert len(events[0]) > 50  # a real run: retransmissions, ECN, retired EVs, probes
    assert compiled["counters"] == source["counters"]
    assert compiled == source
