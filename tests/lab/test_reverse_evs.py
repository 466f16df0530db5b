"""The reverse EV set in a real tiny lab (protocol/reverse.py): a link that only the
acknowledgements of a one-way transfer cross dies in that direction, and they move off it.

h3 sends to h0 (different racks: two paths a plane, one through each T1). The cut drops
whatever enters h3's plane-0 T0 from the T1 t1-p0-0: the acknowledgements h0 sends on
that path and nothing of the transfer's data, which leaves that T0 through the same link
the other way. The data sender sees no loss, so only the receiver can find the dead path:
its reverse EV set holds two EVs a plane (``--reverse-evs 2``), spread over the plane's
two paths, so one of them crosses the cut; the idle receiver probes its reverse EVs, the
probe on that one goes unanswered, the EV is retired and the acknowledgements leave the
path. The drop rule counts the control class (acknowledgements and probe replies) apart
from the rest (the retired EV's own probes, which stay on it).

It can fail: before the reverse EV set, acknowledgements went on every usable EV of the
plane in turn and kept crossing the cut until the end (and ``reverse_retired`` did not
exist). With the idle probing disabled (``ReverseEvs.due`` returning None) it failed, run
once while it was written: no probe, nothing retired, and the cut dropped 50 of the 244
acknowledgements, the last of them at the transfer's end; with the probing, 1-4, none
after the retirement (30-120 ms after the cut).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mrc_transport.wire.frames import DSCP_CONTROL
from tests.lab.test_perf import finish, ns_cmd, start_stream, wait_intervals

pytestmark = pytest.mark.lab

T0, T1 = "t0-p0-1", "t1-p0-0"  # h3's plane-0 T0, one of plane 0's two T1s
TABLE, CHAIN = "mrcrevtest", "acks"


def _drop_rules(dev: str) -> str:
    """Everything entering ``dev`` is dropped, the control class and the rest counted."""
    return (
        f"table netdev {TABLE} {{\n  chain {CHAIN} {{\n"
        f'    type filter hook ingress device "{dev}" priority -500; policy drop;\n'
        f"    ip6 dscp {DSCP_CONTROL} counter drop\n    counter drop\n  }}\n}}\n"
    )


def _drops(lab: str) -> tuple[int, int]:
    """The packets dropped so far: (control class, the rest)."""
    out = subprocess.run(
        [*ns_cmd(lab, T0), "nft", "-j", "list", "chain", "netdev", TABLE, CHAIN],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rules = [x["rule"] for x in json.loads(out)["nftables"] if "rule" in x]
    control, rest = (
        int(next(e["counter"]["packets"] for e in r["expr"] if "counter" in e)) for r in rules
    )
    return control, rest


def _sample(lab: str, stop: threading.Event, out: list[tuple[float, tuple[int, int]]]) -> None:
    """(time before the read, the drops) every 50 ms until ``stop``."""
    while not stop.is_set():
        t = time.monotonic()
        out.append((t, _drops(lab)))
        stop.wait(0.05)


def test_acks_leave_a_return_path_cut_one_way(tiny_lab: str, tmp_path: Path) -> None:
    from labs.state import load_state

    link = load_state(tiny_lab).topology.link(f"{T0}:{T1}")
    assert link.a == T0  # the T0 is a T0-T1 link's lower end
    log = tmp_path / "events.jsonl"
    proc = start_stream(
        tiny_lab, "-n", "8M", "-b", "40M", "--reverse-evs", "2", "--events", str(log)
    )
    stop, samples = threading.Event(), list[tuple[float, tuple[int, int]]]()
    sampler = threading.Thread(target=_sample, args=(tiny_lab, stop, samples), daemon=True)
    rules = _drop_rules(link.a_dev)
    try:
        wait_intervals(proc, 2)
        t_cut = time.monotonic()
        subprocess.run(
            [*ns_cmd(tiny_lab, T0), "nft", "-f", "-"], input=rules, text=True, check=True
        )
        sampler.start()
        rc, end = finish(proc)
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join()
        if proc.poll() is None:
            proc.kill()
        subprocess.run([*ns_cmd(tiny_lab, T0), "nft", "delete", "table", "netdev", TABLE])
    assert rc == 0
    assert end["verified"] is True
    assert end["sum_received"]["bytes"] == 8 << 20
    counters = end["streams"][0]["receiver_counters"]
    assert counters["reverse_probes"] > 0
    assert counters["reverse_retired"] > 0
    # the receiver's log: EVs of plane 0 retired for their return path after the cut, and
    # as many chosen in their place
    events = [json.loads(x) for x in (tmp_path / "events.server.jsonl").read_text().splitlines()]
    retired = [e for e in events if e["event"] == "path_retired" and e["reason"] == "return path"]
    assert retired
    assert all(e["t_mono"] > t_cut and e["plane"] == 0 for e in retired)
    chosen = [e for e in events if e["event"] == "reverse_ev_chosen" and e["t_mono"] > t_cut]
    assert len(chosen) >= len(retired)
    # the receiver's packets met the cut (at least the probe that found it; acknowledgements
    # too unless the probe came first), and no acknowledgement after the last retirement
    t_fix = retired[-1]["t_mono"]
    assert sum(samples[-1][1]) > 0, "nothing met the cut: the test proves nothing"
    at_fix = next((n for t, (n, _) in samples if t >= t_fix), samples[-1][1][0])
    assert samples[-1][1][0] == at_fix, (t_fix, samples)
