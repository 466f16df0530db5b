"""Fixed inputs for `mrc perf`'s documents and lines, and fakes that stand in for a run.

tests/unit/test_perf_report.py runs them through mrc_transport/perf and compares with
tests/data/perf/old_code.json, which a script (tests/data/perf/old_code.py in commit
ec03a31) wrote by running the same inputs through the code before perf/ left cli/perf.py.
Only data and fakes here: no import of the code under test, which moved.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

from mrc_transport.protocol.counters import ConnCounters
from mrc_transport.protocol.ev import Role

T_WALL = 1_796_000_000.5
"""time.time() while a start document is made."""


NEWER_COUNTERS = (
    "trimmed_received",
    "trimmed_ignored",
    "rtx_nack",
    "illegal_transitions",
    "rtx_go_back",
    "go_back_dropped",
    "reverse_probes",
    "reverse_retired",
)
"""Counters added after the recording: an E or R message of the old code had none of them,
so the fixed inputs leave them out."""


def counters(**kw: int) -> dict[str, int]:
    """The counters of an E or R message as the old code sent them."""
    every = asdict(ConnCounters(**kw))
    return {k: v for k, v in every.items() if k not in NEWER_COUNTERS}


def plane(p: int, sent: int, marked: float, **kw: Any) -> dict[str, Any]:
    """A plane as conn_report writes it into an E or R message."""
    row = {
        "plane": p,
        "up": True,
        "active_evs": 64,
        "usable_evs": 60 + p,
        "retired_evs": 4 - p,
        "sent": sent,
        "acked": sent // 3,
        "ecn": 7 * p,
        "lost": p,
        "window": 65536 + 1000 * p,
        "marked": marked,
    }
    return row | kw


def ev(value: int, p: int, retired: int = 0) -> dict[str, Any]:
    return {
        "ev": value,
        "plane": p,
        "hops": [f"t0-p{p}-1", f"t1-p{p}-0", f"t0-p{p}-0"],
        "state": "good",
        "role": "active",
        "sent": 100 + value,
        "acked": 90 + value,
        "ecn": value % 3,
        "lost": value % 2,
        "retired": retired,
        "readmitted": 0,
    }


def sender_report(nbytes: int, seconds: float, marked: float = 0.0, **kw: Any) -> dict[str, Any]:
    """An E message: what the sender says at the end of its data."""
    return {
        "bytes": nbytes,
        "digest": "0123456789abcdef0123456789abcdef",
        "seconds": seconds,
        "cpu": {"user_s": 0.4125, "system_s": 0.1031},
        "counters": counters(packets_sent=400, data_sent=380, retransmits=3, lost=2),
        "planes": [plane(0, 200, marked), plane(1, 180, 0.0)],
        "evs": [ev(1, 0), ev(2, 1, retired=1)],
        "srtt_us": 1234.5,
    } | kw


def receiver_report(nbytes: int, seconds: float, **kw: Any) -> dict[str, Any]:
    """An R message: the receiver's verdict and counters."""
    return {
        "bytes": nbytes,
        "digest": "0123456789abcdef0123456789abcdef",
        "seconds": seconds,
        "verified": True,
        "cpu": {"user_s": 0.3333, "system_s": 0.0667},
        "counters": counters(packets_received=390, data_received=380, sacks_sent=95),
        "planes": [plane(0, 0, 0.0), plane(1, 0, 0.0)],
        "evs": [],
        "srtt_us": None,
    } | kw


# (sending, verified, local, peer) of each stream, per case
STREAMS: dict[str, list[tuple[bool, bool | None, dict[str, Any], dict[str, Any]]]] = {
    "one": [
        (True, True, sender_report(3 << 20, 1.25), receiver_report(3 << 20, 1.2625)),
    ],
    "reverse": [
        (False, True, receiver_report(1 << 20, 0.75), sender_report(1 << 20, 0.7, marked=0.25)),
    ],
    "parallel": [
        (True, True, sender_report(2 << 20, 1.0), receiver_report(2 << 20, 1.03)),
        (True, True, sender_report(2 << 20, 1.1, marked=0.125), receiver_report(2 << 20, 1.09)),
    ],
    "marked-zero": [
        (True, True, sender_report(1000, 0.1), receiver_report(1000, 0.1)),
        (True, True, sender_report(1000, 0.2), receiver_report(1000, 0.3)),
    ],
    "failed": [
        (True, True, sender_report(5000, 0.5), receiver_report(5000, 0.5)),
        (True, None, {"error": "connection 1: ConnectionLost: no SACK for 5 s"}, {}),
    ],
    "not-verified": [
        (False, False, receiver_report(4000, 0.4, verified=False), sender_report(4096, 0.4)),
    ],
    # the first peer did not say its CPU (the old code's input was a malformed one, which
    # is now refused when the R message arrives); the second's seconds are 0
    "bad-peer-cpu": [
        (True, True, sender_report(100, 0.1), receiver_report(100, 0.1, cpu=None)),
        (True, True, sender_report(100, 0.1), receiver_report(100, 0.0)),
    ],
    "empty": [],
}

ENDPOINT = {
    "datagrams_received": 1200,
    "receive_bursts": 40,
    "packets_sent": 800,
    "bad_packets": {"bad_version": 2},
    "send_errors": {},
    "backlog_drops": 0,
    "link_events": 1,
    "unknown_connection": 3,
    "setup_refused": 0,
}

# (cpu0, cpu1, wall) of the end documents
CPU = [((1.0, 0.5), (1.75, 0.625), 2.5), ((0.0, 0.0), (0.25, 0.0), 0.0)]


def streams(
    make: Callable[[bool, bool | None, dict[str, Any], dict[str, Any]], Any], case: str
) -> list[Any]:
    """The case's streams, each as ``make(sending, verified, local, peer)`` makes it (the
    StreamStats class moved, and its messages became typed)."""
    return [make(*(copy.deepcopy(x) for x in row)) for row in STREAMS[case]]


# ------------------------------------------------------------------ fake connections


def fake_handle(k: int, sending: bool) -> Any:
    """A ConnHandle as the interval reporter reads it: counters, planes, EVs, sRTT."""
    planes = {
        p: SimpleNamespace(
            plane=p,
            up=True,
            evs=list(range(60 + p)),
            usable=58 + p + k,
            retired=2 - p,
            sent=100 * (p + 1) + k,
            acked=90 * (p + 1),
            ecn=p,
            lost=k,
            window=50000 + p,
            marked=0.1234567 * p,
        )
        for p in (0, 1)
    }
    evs = {
        v: SimpleNamespace(
            value=v,
            plane=v % 2,
            path=SimpleNamespace(hops=("a", "b")),
            state=SimpleNamespace(value="good"),
            role=Role.BACKUP if v == 3 else Role.ACTIVE,
            sent=0 if v == 3 else 10 * v,
            acked=v,
            ecn=0,
            lost=0,
            retired=0,
            readmitted=0,
        )
        for v in (1, 2, 3)
    }
    conn = SimpleNamespace(
        counters=ConnCounters(retransmits=2 + k, ecn_echoes=3, ce_received=k),
        plane_counters=lambda: planes,
        evs=SimpleNamespace(by_value=evs),
        sender=SimpleNamespace(srtt=None if (k == 1 and not sending) else 0.0012345 * (k + 1)),
        conn=7 + k,
        peer_conn=70 + k,
    )
    return SimpleNamespace(conn=conn, acked_bytes=1_000_000 * (k + 1))


def reporter_streams(stats_class: Any, sending: bool, n: int) -> list[Any]:
    """n streams mid-run for the interval reporter."""
    out = []
    for k in range(n):
        s = stats_class(fake_handle(k, sending), sending=sending)
        s.data_bytes, s.acked_base, s.length = 3_000_000 + k, 1000, 131072
        out.append(s)
    return out


def advance(streams: list[Any]) -> None:
    """One interval later: more bytes, more retransmits and marks."""
    for s in streams:
        s.data_bytes += 500_000
        s.handle.acked_bytes += 400_000
        c = s.handle.conn.counters
        c.retransmits, c.ecn_echoes = c.retransmits + 1, c.ecn_echoes + 2


# ------------------------------------------------------------------ flags

CLIENT_ARGV: dict[str, list[str]] = {
    "default": ["perf", "-c", "h0", "--mss", "8916"],
    "bytes": ["perf", "-c", "h0", "-n", "1.5M", "-l", "64K", "-b", "100M", "--mss", "4000",
              "-P", "3", "--planes", "1,0", "--encoding", "srh", "--evs", "32", "--cc", "fixed",
              "--cc-scope", "connection", "--scheduler", "rr", "-p", "5000"],
    "reverse": ["perf", "-c", "fd00::1", "-t", "2.5", "-R", "--mss", "1200", "-l", "1"],
}  # fmt: skip

ONE_SHOT_ARGV: dict[str, list[str]] = {
    "plain": ["perf", "--lab", "lab1", "--from", "h3", "--to", "h0"],
    "all": ["perf", "--lab", "lab1", "--from", "h3", "--to", "h0", "-t", "3", "-i", "0.5",
            "-P", "2", "-b", "10M", "-l", "64K", "--mss", "2000", "--planes", "0",
            "-J", "--logfile", "/tmp/perf.log", "--seed", "7", "--events", "/tmp/ev.jsonl",
            "--records", "/tmp/rec.jsonl", "--flow", "f1", "-p", "4800", "--encoding", "srh",
            "--evs", "16", "--cc", "fixed", "--cc-scope", "connection", "--scheduler", "reps"],
    "reverse": ["perf", "--lab", "lab1", "--from", "h1", "--to", "h2", "-n", "10M", "-R",
                "--json-stream", "--records", "/tmp/rec.jsonl"],
}  # fmt: skip

SIZES = [
    "0",
    "1",
    "9000",
    "64k",
    "64K",
    "1M",
    "1m",
    "1.5M",
    "2G",
    "1T",
    " 12 k ",
    "128K",
    "64kb",
    "32KB",
    "1mb",
    "9000b",
    "0.5k",
    "1e3",
    "",
    "k",
    "-1",
    "1x",
    "1 kib",
    "1kbit",
]
RATES = [
    "0",
    "100",
    "100M",
    "100m",
    "10G",
    "2.5g",
    "1k",
    "1T",
    "100mbit",
    "2.5Gbit",
    "1gbit",
    "8000bit",
    "100mbps",
    "1gbps",
    "100 mbit",
    "fast",
    "",
    "-100mbit",
    "1e9",
    "100Mb",
]
