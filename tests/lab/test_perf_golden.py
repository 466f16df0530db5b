"""`mrc perf`'s output now against real runs recorded before perf/ left cli/perf.py.

tests/data/perf/ holds the output of each case below, recorded with
``MRC_RECORD_GOLDEN=1`` from the code before the split (the commit that added them; the
-P 2 cases again when the per-connection lines came, iperf3's ``[  0] ...``):
both ends of `mrc perf -s` / `-c` between two namespaces joined by two shaped veth pairs
(two planes, plain IPv6 paths from --paths-file), and the one-shot mode (--from, --to) on
the tiny lab. A run's numbers vary, so a run now is compared with its recording by form,
not by value:

- JSON (-J, --json-stream): the same keys in the same order at every level, the same kind
  of value under each (bool, string, number: null counts as a number, as sRTT is null
  until its first sample, and 0 and 0.0 are one number), and equal deterministic values
  (the test's parameters, the stream ids and planes, the verdict, the bytes of a -n run);
- text: line by line, each recorded line made a pattern in which the numbers (with the
  blanks that pad them) and the byte and bit-rate units may change (interval and plane
  lines may repeat), but the headers and the set-up lines must be equal.

The exact columns and values, on fixed inputs, are tests/unit/test_perf_report.py's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.lab.conftest import require_root_netns
from tests.unit.perf_inputs import NEWER_COUNTERS

pytestmark = pytest.mark.lab

DATA = Path(__file__).resolve().parent.parent / "data" / "perf"
RECORD = os.environ.get("MRC_RECORD_GOLDEN") == "1"
PY = [sys.executable, "-m", "mrc_transport.cli.main", "perf"]
RUN = ("-t", "1", "-i", "0.25")  # a second, four interval lines
RATE = "200mbit"  # per plane: two Python ends keep up on a shared machine


@dataclass(frozen=True)
class Case:
    """One recorded run: the client's flags, the server's (both get --paths-file)."""

    client: tuple[str, ...]
    server: tuple[str, ...]
    ext: str
    """Output kind: txt, json or jsonl."""
    bytes: int | None = None
    """The bytes a -n run moves (exact in the end document)."""
    lab: bool = False
    """One-shot on the tiny lab: the client's flags only, its output only."""


CASES: dict[str, Case] = {
    "text": Case(RUN, ("-i", "0.25"), "txt"),
    "json": Case((*RUN, "-J"), ("-i", "0.25", "-J"), "json"),
    "bytes": Case(("-n", "3M", "-l", "64K", "-i", "0", "-J"), ("-i", "0", "-J"), "json", 3 << 20),
    "reverse": Case((*RUN, "-R"), ("-i", "0.25"), "txt"),
    "reverse-json": Case((*RUN, "-R", "-J"), ("-i", "0.25", "-J"), "json"),
    "parallel": Case((*RUN, "-P", "2"), ("-i", "0.25"), "txt"),
    "parallel-json": Case((*RUN, "-P", "2", "-J"), ("-i", "0.25", "-J"), "json"),
    "stream": Case((*RUN, "--json-stream"), ("-i", "0.25", "--json-stream"), "jsonl"),
    "oneshot": Case(RUN, (), "txt", lab=True),
    "oneshot-json": Case((*RUN, "-R", "-P", "2", "-J"), (), "json", lab=True),
}
FILES = [
    (name, end)
    for name, case in sorted(CASES.items())
    for end in (("client",) if case.lab else ("client", "server"))
]


@dataclass(frozen=True)
class Pair:
    """Two namespaces, ``a`` (the client) and ``b``, with a veth pair per plane."""

    a: str
    b: str
    files: Path


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _paths_file(path: Path, peer: str, me: int, other: int) -> None:
    rows = [
        f'      - {{plane: {p}, src: "fd00:7d{p}::{me}", dst: "fd00:7d{p}::{other}", '
        f'port: p{p}, segments: ["fd00:7d{p}::{other}"]}}'
        for p in (0, 1)
    ]
    path.write_text("\n".join(["peers:", f"  {peer}:", "    paths:", *rows]) + "\n")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_root_netns()
    tag = "mrcperf" + uuid.uuid4().hex[:8]
    p = Pair(f"{tag}-a", f"{tag}-b", tmp_path_factory.mktemp("paths"))
    try:
        _ip("netns", "add", p.a)
        _ip("netns", "add", p.b)
        for plane in (0, 1):
            dev = f"p{plane}"
            # Peer created directly in its namespace: a crash cannot leave an orphan in root.
            _ip("-n", p.a, "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", p.b)
            for ns, host in ((p.a, 1), (p.b, 2)):
                _ip("-n", ns, "addr", "add", f"fd00:7d{plane}::{host}/64", "dev", dev, "nodad")
                _ip("-n", ns, "link", "set", dev, "mtu", "9000", "up")
                tc = ["qdisc", "add", "dev", dev, "root", "tbf", "rate", RATE]
                subprocess.run(["tc", "-n", ns, *tc, "burst", "64kb", "limit", "512kb"], check=True)
        _paths_file(p.files / "a.yaml", "b", 1, 2)
        _paths_file(p.files / "b.yaml", "a", 2, 1)
        yield p
    finally:
        for ns in (p.a, p.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@pytest.fixture(scope="module")
def lab(module_tiny_lab: str) -> str:
    return module_tiny_lab


def run_one_shot(lab: str, case: Case) -> tuple[str, str]:
    """(the one-shot run's output, which is its client's, "")."""
    argv = [*PY, "--lab", lab, "--from", "h3", "--to", "h0", *case.client]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout, ""


def run_case(pair: Pair, case: Case) -> tuple[str, str]:
    """(the client's output, the server's)."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", pair.b, *PY, "-s", "-1", "--paths-file",
         str(pair.files / "b.yaml"), *case.server],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith("Server listening")
        client = subprocess.run(
            ["ip", "netns", "exec", pair.a, *PY, "-c", "b", "--paths-file",
             str(pair.files / "a.yaml"), *case.client],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert client.returncode == 0, client.stderr
        out, _ = server.communicate(timeout=30)
        assert server.returncode == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return client.stdout, out


# ------------------------------------------------------------------ JSON


COUNTS = ("bad_packets", "send_errors")
"""The endpoint's counts by reason (errno, fault): which reasons occur varies by run."""


def shape(value: Any) -> Any:
    """Keys in order and the kind of every value; a list is the set of its items' shapes.
    Counters added since the recording (perf_inputs.NEWER_COUNTERS) are left out."""
    if isinstance(value, dict):
        return tuple(
            (k, "counts" if k in COUNTS else shape(v))
            for k, v in value.items()
            if k not in NEWER_COUNTERS
        )
    if isinstance(value, list):
        return ("list", *sorted({repr(shape(v)) for v in value}))
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "str"
    assert value is None or isinstance(value, int | float), value
    return "number"


def difference(now: Any, recorded: Any, where: str = "") -> str:
    """Where the shapes of two documents first differ, for the assertion message."""
    if isinstance(now, dict) and isinstance(recorded, dict):
        now = {k: v for k, v in now.items() if k not in NEWER_COUNTERS}
        if list(now) != list(recorded):
            return f"{where}: keys {list(now)} != {list(recorded)}"
        for key in (k for k in now if k not in COUNTS):
            found = difference(now[key], recorded[key], f"{where}.{key}")
            if found:
                return found
        return ""
    if isinstance(now, list) and isinstance(recorded, list) and now and recorded:
        return difference(now[0], recorded[0], f"{where}[0]") or (
            "" if shape(now) == shape(recorded) else f"{where}: items differ"
        )
    return "" if shape(now) == shape(recorded) else f"{where}: {now!r} != {recorded!r}"


def fixed(doc: dict[str, Any], case: Case) -> dict[str, Any]:
    """What must be equal in a -J document of the case however fast it ran."""
    start, end = doc["start"], doc["end"]
    test = {k: v for k, v in start["test_start"].items() if k != "codec"}  # the backend's
    out = {
        "version": start["version"],
        "system_info": start["system_info"],
        "peer": start.get("connecting_to") or sorted(start["accepted_connection"]),
        "test_start": test,
        "interval_sender": sorted({i["sum"]["sender"] for i in doc["intervals"]}),
        "verified": end["verified"],
        "streams": [(s["id"], s["verified"], s["error"]) for s in end["streams"]],
        "planes": [p["plane"] for p in end["planes"]],
        "sum_start": (end["sum_sent"]["start"], end["sum_received"]["start"]),
        "cpu": sorted(end["cpu_utilization_percent"]),
    }
    if case.bytes is not None:
        out["bytes"] = (end["sum_sent"]["bytes"], end["sum_received"]["bytes"])
        assert out["bytes"] == (case.bytes, case.bytes)
    return out


def check_json(now: dict[str, Any], recorded: dict[str, Any], case: Case) -> None:
    assert shape(now) == shape(recorded), difference(now, recorded)
    assert fixed(now, case) == fixed(recorded, case)
    assert now["start"]["test_start"].get("codec", "c") in ("c", "python")  # client only


def stream_doc(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """--json-stream's events as the -J document they make (and the event names in order,
    a run of intervals as one)."""
    doc: dict[str, Any] = {"start": {}, "intervals": [], "end": {}, "events": []}
    for line in lines:
        name = line["event"]
        if not doc["events"] or doc["events"][-1] != name or name != "interval":
            doc["events"].append(name)
        if name == "interval":
            doc["intervals"].append(line["data"])
        elif name in ("start", "end"):
            doc[name] = line["data"]
        else:
            doc[name] = line["data"]
    return doc


def check_stream(now: str, recorded: str, case: Case) -> None:
    a = stream_doc([json.loads(x) for x in now.splitlines()])
    b = stream_doc([json.loads(x) for x in recorded.splitlines()])
    assert a["events"] == b["events"]
    assert shape(a) == shape(b), difference(a, b)
    assert fixed(a, case) == fixed(b, case)


# ------------------------------------------------------------------ text

FIXED_LINES = re.compile(r"^(Connecting to host|Server listening|\[ ID\]|- - |Per plane| plane )")
_TOKEN = re.compile(
    r"(?P<rtt>(?:\d+\.\d+ms|-)$)|(?P<num>(?<![A-Za-z])\d+(?:\.\d+)?)|(?P<unit>[KMG]?(?:Bytes|bits/sec))"
)
_PATTERN = {
    "rtt": r" *(?:\d+\.\d+ms|-)",  # an interval's sRTT, "-" before the first sample
    "num": r" *\d+(?:\.\d+)? *",
    "unit": r" *[KMG]?(?:Bytes|bits/sec) *",
}


def line_pattern(line: str) -> str:
    """A recorded line as a regular expression: fixed lines as they are; in others every
    number (with the blanks that pad it) and every byte or bit-rate unit may change."""
    if FIXED_LINES.match(line):
        return re.escape(line)
    out, pos = [], 0
    for m in _TOKEN.finditer(line):
        out.append(re.escape(line[pos : m.start()].rstrip(" ")))
        out.append(_PATTERN[m.lastgroup or ""])
        pos = m.end()
        while pos < len(line) and line[pos] == " ":
            pos += 1
    out.append(re.escape(line[pos:]))
    return "".join(out)


def check_text(now: str, recorded: str) -> None:
    """The output now matches the recording's lines as patterns, where a block of recorded
    lines that repeats (an interval's [SUM] line; with -P, its per-connection lines, its
    [SUM] line and the separator; the plane lines) matches a run of any length. Matched
    line by line, greedily: one regex over the whole output backtracks for minutes when a
    line differs."""
    lines, i = now.splitlines(), 0
    for block in blocks(recorded):
        assert _block_at(lines, i, block), f"line {i + 1}: {lines[i : i + 2]!r} is not like {block}"
        while _block_at(lines, i, block):
            i += len(block)
    assert i == len(lines), f"more lines than recorded: {lines[i:]!r}"


def blocks(recorded: str) -> list[list[str]]:
    """The recorded lines' patterns, a repeated block of them (up to MAX_BLOCK lines) as
    one block."""
    pats = [line_pattern(line) for line in recorded.splitlines()]
    out, i = [], 0
    while i < len(pats):
        k = next((k for k in range(1, MAX_BLOCK + 1) if _repeats(pats, i, k)), 1)
        out.append(pats[i : i + k])
        i += k
        while pats[i : i + k] == out[-1]:
            i += k
    return out


def _block_at(lines: list[str], i: int, block: list[str]) -> bool:
    return len(lines) >= i + len(block) and all(
        re.fullmatch(p, line) for p, line in zip(block, lines[i : i + len(block)], strict=True)
    )


MAX_BLOCK = 8
"""The longest repeated block: -P connections' lines, the [SUM] line and the separator."""


def _repeats(pats: list[str], i: int, k: int) -> bool:
    return len(pats) >= i + 2 * k and pats[i : i + k] == pats[i + k : i + 2 * k]


def check(ext: str, now: str, recorded: str, case: Case) -> None:
    if ext == "txt":
        check_text(now, recorded)
    elif ext == "jsonl":
        check_stream(now, recorded, case)
    else:
        check_json(json.loads(now), json.loads(recorded), case)


@pytest.fixture(scope="module")
def runs(pair: Pair, lab: str) -> dict[str, tuple[str, str]]:
    """Every case run once, both ends' output."""
    return {
        name: run_one_shot(lab, case) if case.lab else run_case(pair, case)
        for name, case in CASES.items()
    }


@pytest.mark.parametrize(("name", "end"), FILES)
def test_output_as_recorded(runs: dict[str, tuple[str, str]], name: str, end: str) -> None:
    case = CASES[name]
    now = runs[name][0 if end == "client" else 1]
    path = DATA / f"{name}.{end}.{case.ext}"
    if RECORD:
        path.write_text(now)
    check(case.ext, now, path.read_text(), case)


def test_the_comparison_sees_a_change() -> None:
    """The checks fail on a changed key, order, kind, fixed value or text line."""
    recorded = (DATA / "json.client.json").read_text()
    doc = json.loads(recorded)
    case = CASES["json"]
    renamed = json.loads(recorded.replace('"retransmits"', '"retransmitted"'))
    reordered = {**doc, "end": dict(reversed(list(doc["end"].items())))}
    retyped = json.loads(recorded.replace('"verified": true', '"verified": 1'))
    refixed = json.loads(recorded.replace('"blksize": 131072', '"blksize": 65536'))
    for bad in (renamed, reordered, retyped, refixed):
        with pytest.raises(AssertionError):
            check_json(bad, doc, case)
    text = (DATA / "text.client.txt").read_text()
    for old, new in (("Bitrate", "Rate"), ("sec  ", "s  "), ("2 paths", "3 paths")):
        assert old in text
        with pytest.raises(AssertionError):
            check_text(text.replace(old, new, 1), text)
    check_text(text, text)
