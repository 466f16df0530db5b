"""mrc_transport/perf against the code it replaced, on fixed inputs: the same start,
interval and end documents byte for byte, the same text lines, the same endpoint Config,
one-shot children that get the same options, and sizes and rates that parse as before.

tests/data/perf/old_code.json is what the old cli/perf.py and io/perf.py made of
tests/unit/perf_inputs.py's inputs (the script tests/data/perf/old_code.py of commit
ec03a31, which imports that code)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from labs import topology
from labs.units import UnitError, parse_rate, parse_size
from mrc_transport import wire
from mrc_transport.cli import perf as cli
from mrc_transport.cli.main import UsageError, build_parser
from mrc_transport.perf import config, oneshot, summary
from mrc_transport.perf.messages import PerfParams, ReceiverReport, SenderReport
from mrc_transport.perf.output import SEPARATOR, Output, end_lines
from mrc_transport.perf.report import EndDoc, Interval, PerfReport, ReportError, StartDoc
from mrc_transport.perf.reporter import Reporter
from mrc_transport.perf.session import StreamStats
from tests.unit import perf_inputs as inputs

OLD: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "perf" / "old_code.json").read_text()
)


def _opts(argv: list[str]) -> Any:
    args = build_parser().parse_args(argv)
    cli.check_args(args)
    return cli.options(args)


def _stats(sending: bool, verified: bool | None, local: Any, peer: Any) -> StreamStats:
    """A stream of a case: its E and R messages read as they arrive from a peer, a failed
    one's error in its own field."""
    s = StreamStats(None, sending=sending)  # type: ignore[arg-type]
    s.verified, s.error = verified, local.pop("error", None)
    mine, theirs = (SenderReport, ReceiverReport) if sending else (ReceiverReport, SenderReport)
    reports = {mine: local, theirs: peer}
    if reports[SenderReport]:
        s.sender_report = SenderReport.from_json_untrusted(reports[SenderReport])
    if reports[ReceiverReport]:
        s.receiver_report = ReceiverReport.from_json_untrusted(reports[ReceiverReport])
    return s


@pytest.mark.parametrize("case", sorted(inputs.STREAMS))
@pytest.mark.parametrize("k", range(len(inputs.CPU)))
def test_end_document_and_lines_as_before(case: str, k: int) -> None:
    cpu0, cpu1, wall = inputs.CPU[k]
    streams = inputs.streams(_stats, case)
    end = summary.end_doc(streams, cpu0, cpu1, wall, dict(inputs.ENDPOINT))
    old = OLD["end"][f"{case}/{k}"]
    assert json.dumps(end.to_json()) == old["json"]
    for reverse in (False, True):
        lines = end_lines(end, reverse)
        assert "".join(x + "\n" for x in _sum_only(lines)) == old["text"][str(reverse)]
        assert len(lines) - len(_sum_only(lines)) == (2 * len(streams) if len(streams) > 1 else 0)
    assert EndDoc.from_json(json.loads(old["json"])) == end


def _sum_only(lines: list[str]) -> list[str]:
    """The lines the old code printed: without the per-connection lines that -P 2 or more
    adds now (iperf3's "[  5] ...")."""
    return [ln for ln in lines if not STREAM_LINE.match(ln)]


STREAM_LINE = re.compile(r"^\[ *\d+\] ")


@pytest.mark.parametrize("sending", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2])
def test_interval_lines_as_before(sending: bool, n: int) -> None:
    old = OLD["interval"][f"{sending}/{n}"]
    for mode in ("text", "stream"):
        streams = inputs.reporter_streams(StreamStats, sending, n)
        out = Output(io.StringIO(), mode, False)  # type: ignore[arg-type]
        reporter = Reporter(out, streams, 0.5)
        reporter.line(0.0, 0.5)
        inputs.advance(streams)
        reporter.line(0.5, 1.0)
        assert isinstance(out.stream, io.StringIO)
        got = out.stream.getvalue().splitlines()
        if mode == "text":
            assert "\n".join(_interval_sums(got)) + "\n" == old[mode]
            assert len(got) - len(_interval_sums(got)) == (2 * n + 1 if n > 1 else 0)
        else:
            sums = [_without_streams(json.loads(line), n) for line in got]
            assert sums == [json.loads(line) for line in old[mode].splitlines()]
    for line in old["stream"].splitlines():
        data = json.loads(line)["data"]
        assert Interval.from_json(data).to_json() == data


def _interval_sums(lines: list[str]) -> list[str]:
    """Interval text as the old code printed it: the [SUM] lines only."""
    return [ln for ln in lines if not STREAM_LINE.match(ln) and ln != SEPARATOR]


def _without_streams(event: dict[str, Any], n: int) -> dict[str, Any]:
    """A --json-stream interval event as the old code wrote it: its per-connection part,
    there with -P 2 or more, taken out."""
    streams = event["data"].pop("streams", [])
    assert len(streams) == (n if n > 1 else 0)
    return event


@pytest.mark.parametrize("name", sorted(inputs.CLIENT_ARGV))
def test_start_documents_and_config_as_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: inputs.T_WALL)
    opts = _opts(inputs.CLIENT_ARGV[name])
    for topo_name in (None, "tiny", "default"):
        paths_from: Any = SimpleNamespace(topo=topology.preset(topo_name)) if topo_name else None
        cfg = config.endpoint_config(opts, paths_from)
        old = OLD["start"][f"config/{name}/{topo_name}"]
        assert {k: getattr(cfg, k) for k in old} == old
    cfg = config.endpoint_config(opts, None)  # type: ignore[arg-type]
    paths: Any = [SimpleNamespace(plane=p) for p in (1, 0, 1, 0, 2)]
    start = summary.client_start(opts, paths, cfg, "c00c1e")
    old_client = json.loads(OLD["start"][f"client/{name}"])
    old_client["test_start"]["codec"] = wire.BACKEND  # the backend this suite runs
    assert json.dumps(start.to_json()) == json.dumps(old_client)
    params = PerfParams(
        "5e55", 1, opts.parallel, opts.reverse, opts.seconds, opts.nbytes // opts.parallel,
        opts.length, opts.rate_bps, opts.planes,
    )  # fmt: skip
    server = summary.server_start(opts, params, inputs.fake_handle(1, True))
    assert json.dumps(server.to_json()) == OLD["start"][f"server/{name}"]
    for doc in (start, server):
        assert StartDoc.from_json(json.loads(json.dumps(doc.to_json()))) == doc


def test_documents_that_are_not_reports_raise_one_error() -> None:
    good = json.loads(OLD["end"]["one/0"]["json"])
    for bad in ([], {"streams": []}, {**good, "sum_sent": 3}, {**good, "planes": [{}]}):
        with pytest.raises(ReportError):
            EndDoc.from_json(bad)
    with pytest.raises(ReportError, match="interval"):
        Interval.from_json({"sum": {"start": 0}})
    assert PerfReport.from_json({"start": {}, "intervals": [], "end": {}}) == PerfReport()


# ------------------------------------------------------------------ one-shot


class _Server:
    """subprocess.Popen for the one-shot's children: the server says it listens, and both
    exit 0."""

    def __init__(self, argv: list[str], **_: object) -> None:
        CALLS.append(argv)
        self.stderr = io.StringIO("Server listening on 4791\n")

    def poll(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0


CALLS: list[list[str]] = []


def _child(argv: list[str]) -> tuple[list[str], Any, tuple[bool, bool, str | None]]:
    """A child's command: (ip netns exec NS python -m ... perf, its options, its mode)."""
    cut = argv.index("perf") + 1
    args = build_parser().parse_args(["perf", *argv[cut:]])
    cli.check_args(args)
    return argv[:cut], cli.options(args), (args.server, args.one_off, args.client)


@pytest.mark.parametrize("name", sorted(inputs.ONE_SHOT_ARGV))
def test_one_shot_children_get_the_same_options(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The children's flags may be written otherwise (-b 10M is now -b 10000000.0), but
    they must mean the same."""
    CALLS.clear()
    monkeypatch.setattr(subprocess, "Popen", _Server)
    monkeypatch.setattr(os.path, "exists", lambda path: True)
    args = build_parser().parse_args(inputs.ONE_SHOT_ARGV[name])
    cli.check_args(args)
    assert (
        oneshot.run_one_shot(cli.options(args), args.src, args.dst) == OLD["one_shot"][name]["rc"]
    )
    now = [["PYTHON" if a == sys.executable else a for a in argv] for argv in CALLS]
    old = OLD["one_shot"][name]["argv"]
    assert [_child(a) for a in now] == [_child(a) for a in old]


# ------------------------------------------------------------------ sizes and rates

NEWLY_PARSED: dict[str, dict[str, int]] = {
    # labs/units.py takes both tools' forms everywhere: a size may end in "b" for perf
    "perf_size": {"64kb": 65536, "32KB": 32768, "1mb": 1048576, "9000b": 9000},
    # and a rate in "bit"
    "perf_rate": {"100mbit": 10**8, "2.5Gbit": 25 * 10**8, "1gbit": 10**9, "8000bit": 8000,
                  "100 mbit": 10**8},
    # the lab takes decimals and terabytes in sizes
    "lab_size": {"1.5M": 1572864, "1T": 1 << 40, "0.5k": 512},
    # and terabits in rates
    "lab_rate": {"1T": 10**12},
}  # fmt: skip


def _answer(parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except UnitError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("kind", ["perf_size", "perf_rate", "lab_size", "lab_rate"])
def test_sizes_and_rates_parse_as_before(kind: str) -> None:
    """Every value that parsed before parses to the same number, a whole one for both
    now (labs/units.py: one Size, one Rate, one parser for the flags and the lab); the
    values that parse now and did not are listed above, and every error still names the
    flag or key and the value (the hint after them is one per kind now)."""
    where = {"perf_size": "-n", "perf_rate": "-b", "lab_size": "w", "lab_rate": "w"}[kind]
    parse = parse_size if kind.endswith("size") else parse_rate
    for text, old in OLD["units"][kind].items():
        now = _answer(lambda x: parse(x, where), text)
        if text in NEWLY_PARSED[kind]:
            assert str(old).startswith("error")
            assert (now, type(now)) == (NEWLY_PARSED[kind][text], int), text
        elif isinstance(old, str):
            assert now.startswith(old[: old.index(" (write")] + " (write"), text
        else:
            assert (now, type(now)) == (old, int), text


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("mode", "stream", "own", "says_twice"),
    [("text", _Tty(), False, False), ("text", io.StringIO(), False, True),
     ("json", _Tty(), False, True), ("text", _Tty(), True, True)],
)  # fmt: skip
def test_server_says_it_listens_on_stderr_only_for_scripts(
    mode: str, stream: io.StringIO, own: bool, says_twice: bool
) -> None:
    """A person at a terminal reads "Server listening" once (the text line); a script
    (output to a pipe, a file, -J) also gets it on stderr to wait for."""
    out = Output(stream, mode, own)  # type: ignore[arg-type]
    assert out.on_terminal is not says_twice


def test_a_timed_test_stops_queueing_what_it_cannot_deliver_by_its_end() -> None:
    from mrc_transport.perf.session import DRAIN_ESTIMATE_S, _drain_time

    handle = SimpleNamespace(acked_bytes=0)
    s = StreamStats(handle, sending=True)  # type: ignore[arg-type]
    s.t0, s.data_bytes, s.length = 10.0, 3_000_000, 1 << 30
    assert _drain_time(s, 11.0) == 0.0  # nothing acknowledged yet: no estimate
    handle.acked_bytes = 1_000_000
    assert _drain_time(s, 10.0 + DRAIN_ESTIMATE_S / 2) == 0.0  # too early to tell
    # 1 MB acknowledged in 1 s: the other 2 MB queued take 2 s more
    assert _drain_time(s, 11.0) == pytest.approx(2.0, rel=1e-3)


@pytest.mark.parametrize(("preset", "trimming"), [("tiny", False), ("tiny-trim", True)])
def test_a_trimming_lab_sets_nsccs_trimming(preset: str, trimming: bool) -> None:
    """NSCC's target is 0.75 base RTT and no delay quick-adapts where the fabric trims
    (htsim): mrc perf tells the core from the lab's topology."""
    opts = _opts(["perf", "-c", "h1"])
    cfg = config.endpoint_config(opts, SimpleNamespace(topo=topology.preset(preset)))  # type: ignore[arg-type]
    assert cfg.trimming is trimming


def test_no_trim_reaches_both_ends_and_leaves_nscc_as_without_trimming() -> None:
    """--no-trim: data in the class a trimming switch drops, so NSCC runs as on a fabric
    that drops; the one-shot's server and client both get the flag."""
    opts = _opts(["perf", "-c", "h1", "--no-trim", "--lab", "x"])
    cfg = config.endpoint_config(opts, SimpleNamespace(topo=topology.preset("tiny-trim")))  # type: ignore[arg-type]
    assert (cfg.no_trim, cfg.trimming) == (True, False)
    assert "--no-trim" in oneshot.server_argv(opts)
    assert "--no-trim" in oneshot.client_argv(opts, "h1")
    plain = _opts(["perf", "-c", "h1", "--lab", "x"])
    assert "--no-trim" not in oneshot.client_argv(plain, "h1")
    assert config.endpoint_config(plain, None).no_trim is False  # type: ignore[arg-type]


def test_reverse_evs_reach_the_core_and_a_bad_count_is_refused() -> None:
    """--reverse-evs sets Config.reverse_evs (protocol/reverse.py), the one-shot children
    get it, and 0 is refused with one message (main turns it into exit code 2)."""
    opts = _opts(["perf", "-c", "h1", "--reverse-evs", "3"])
    assert config.endpoint_config(opts, SimpleNamespace()).reverse_evs == 3  # type: ignore[arg-type]
    argv = oneshot.shared_argv(_opts(["perf", "-c", "h1", "--lab", "x", "--reverse-evs", "3"]))
    assert argv[argv.index("--reverse-evs") + 1] == "3"
    with pytest.raises(UsageError, match="--reverse-evs must be in"):
        _opts(["perf", "-c", "h1", "--reverse-evs", "0"])
