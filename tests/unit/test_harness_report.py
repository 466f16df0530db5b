"""harness.report, harness.summary and harness.plot on a synthetic failover run with known
stalls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from mrc_transport.harness.pauses import Pause, PauseWatch, longest_overlap
from mrc_transport.harness.plot import collisions_png, timeline_png
from mrc_transport.harness.report import (
    BaselineFault,
    FaultRow,
    FlowReport,
    all_mrc_verified,
    collisions_report,
    explain_stalls,
    failover_report,
    fault_rows,
    flow_reports,
    write_json,
)
from mrc_transport.harness.summary import WIDTH, print_summary, stall_cell
from mrc_transport.harness.timeline import (
    Delivery,
    FaultWindow,
    analyse,
    flow_totals,
    goodput_per_flow,
    pair_events,
)

T0 = 1000.0  # transfers start at this monotonic time
MS = 0.001


def _flow(
    name: str,
    rate_bps: float,
    end: float,
    gaps: list[tuple[float, float]],
    dips: list[tuple[float, float, float]] = (),
) -> list[Delivery]:  # type: ignore[assignment]
    """A delivery every ms (times relative to T0), nothing inside gaps, rate scaled in dips."""
    out = []
    for k in range(int(end / MS)):
        t = (k + 0.5) * MS
        if any(a <= t < b for a, b in gaps):
            continue
        scale = next((s for a, b, s in dips if a <= t < b), 1.0)
        out.append(Delivery(T0 + t, int(rate_bps * scale * MS / 8), name))
    return out


EVENTS = [
    {"t_mono": T0 + 2.0, "kind": "cut", "target": "t0-p1-0:t1-p1-1", "action": "gray"},
    {"t_mono": T0 + 4.0, "kind": "restore", "target": "t0-p1-0:t1-p1-1", "action": "up"},
    {"t_mono": T0 + 6.0, "kind": "fail", "target": "t1-p1-1", "action": "stop forwarding"},
    {"t_mono": T0 + 8.0, "kind": "restore", "target": "t1-p1-1", "action": "forwarding"},
]
# MRC: 8 ms and 12 ms stalls, then 3/4 of its paths for the fault; TCP: the whole gray cut
# plus an RTO, and the whole switch failure.
MRC = _flow(
    "mrc", 400e6, 10.0, [(2.0, 2.008), (6.0, 6.012)], [(2.008, 4.0, 0.75), (6.012, 8.0, 0.75)]
)
TCP = _flow("tcp", 100e6, 10.0, [(2.0, 4.4), (6.0, 8.6)])
KINDS = {"mrc": "mrc", "tcp": "tcp"}


def _analysis() -> tuple[list[FaultWindow], list[object]]:
    faults = pair_events(EVENTS, t_stop=T0 + 10.0)
    results = analyse(
        MRC + TCP,
        faults,
        t_begin=T0,
        t_stop=T0 + 10.0,
        surviving=lambda f, flow: 0.75 if flow == "mrc" else 1.0,
    )
    return faults, results  # type: ignore[return-value]


def test_fault_rows_carry_the_issue_fields() -> None:
    _, results = _analysis()
    rows = fault_rows(results, KINDS, T0)  # type: ignore[arg-type]
    assert [(r.kind, r.target, r.t_start, r.t_end) for r in rows] == [
        ("cut", "t0-p1-0:t1-p1-1", 2.0, 4.0),
        ("fail", "t1-p1-1", 6.0, 8.0),
    ]
    cut, fail = rows
    assert cut.mrc_stall_ms == pytest.approx(9.0)  # 1.9995 -> 2.0085
    assert fail.mrc_stall_ms == pytest.approx(13.0)
    tcp_cut, tcp_fail = cut.baselines["tcp"], fail.baselines["tcp"]
    assert tcp_cut.stall_ms == pytest.approx(2401.0)
    assert tcp_fail.stall_ms == pytest.approx(2601.0)
    assert tcp_cut.on_path is None  # no path measured: every stall is reported
    assert cut.mrc_recovery_ms is not None
    assert cut.mrc_recovery_ms <= 20.0  # bins of 10 ms: back in the bin after the stall
    assert tcp_cut.recovery_ms == pytest.approx(2400.0, abs=10.0)
    assert not cut.mrc_stall_open
    assert cut.t_start_mono == T0 + 2.0
    assert set(cut.baselines) == {"tcp"}


def test_a_fault_off_a_baselines_path_is_not_charged_to_it() -> None:
    _, results = _analysis()

    def judge(fault: FaultWindow, kind: str) -> tuple[bool, tuple[str, ...]]:
        return fault.kind == "cut", ("t0-p1-0:t1-p1-1",)

    cut, fail = fault_rows(results, KINDS, T0, judge)  # type: ignore[arg-type]
    assert cut.baselines["tcp"].on_path is True
    assert cut.baselines["tcp"].stall_ms == pytest.approx(2401.0)
    # TCP did stall 2.6 s then, but the failed T1 was not on its path: no figure to blame
    assert fail.baselines["tcp"] == BaselineFault(False, None, None, False, ("t0-p1-0:t1-p1-1",))
    console = Console(record=True, width=WIDTH, force_terminal=False)
    print_summary([cut, fail], verified=True, console=console)
    text = console.export_text()
    assert "off path" in text
    assert "2.40 s" in text
    doc = failover_report([], [cut, fail], t_origin=T0, duration_s=10.0, bin_s=0.01)
    assert doc["faults"][1]["baselines"]["tcp"]["on_path"] is False
    assert doc["faults"][1]["baselines"]["tcp"]["stall_ms"] is None


def test_rtos_are_counted_inside_the_worst_mrc_stall_only() -> None:
    _, results = _analysis()
    rows = fault_rows(results, KINDS, T0)  # type: ignore[arg-type]
    assert rows[1].mrc_stall_start_mono == pytest.approx(T0 + 5.9995)
    log = [
        {"t_mono": T0 + 2.004, "event": "rto_fired", "conn": 1, "rto": 0.004, "count": 1},
        {"t_mono": T0 + 2.005, "event": "retransmit", "conn": 1, "psn": 7, "old_ev": 1},
        {"t_mono": T0 + 2.5, "event": "rto_fired", "conn": 1, "rto": 0.004, "count": 1},
        {"t_mono": T0 + 6.001, "event": "rto_fired", "conn": 1, "rto": 0.004, "count": 1},
        {"t_mono": T0 + 6.002, "event": "rto_fired", "conn": 1, "rto": 0.008, "count": 2},
    ]
    cut, fail = explain_stalls(rows, log)
    assert (cut.mrc_stall_rtos, fail.mrc_stall_rtos) == (1, 2)  # not the one at 2.5 s
    assert cut.host_pause_ms is None  # not watched
    assert explain_stalls(rows, [])[0].mrc_stall_rtos == 0
    console = Console(record=True, width=120, force_terminal=False)
    print_summary([cut, fail], verified=True, console=console)
    text = console.export_text()
    assert "9.0 ms (1 RTO)" in text
    assert "13 ms (2 RTOs)" in text
    assert "stood still" not in text


def test_a_stall_during_a_host_pause_says_so() -> None:
    _, results = _analysis()
    rows = fault_rows(results, KINDS, T0)  # type: ignore[arg-type]
    pauses = [Pause(T0 + 6.002, 0.0105), Pause(T0 + 3.0, 0.05)]  # in the fail's stall; not
    cut, fail = explain_stalls(rows, None, pauses)
    assert cut.mrc_stall_rtos is None  # no event log
    assert (cut.host_pause_ms, fail.host_pause_ms) == (0.0, pytest.approx(10.5))
    console = Console(record=True, width=140, force_terminal=False)
    print_summary([cut, fail], True, console, pauses=pauses, t_origin=T0, steal_s=1.5)
    text = console.export_text()
    assert "13 ms (host paused 10 ms)" in text or "13 ms (host paused 11 ms)" in text
    assert "stood still 2 times (longest 50 ms at 3.00 s; CPU steal 1.50 s during" in text


def test_failover_report_json(tmp_path: Path) -> None:
    _, results = _analysis()
    rows = fault_rows(results, KINDS, T0)  # type: ignore[arg-type]
    totals = flow_totals(MRC + TCP, T0, T0 + 10.0)
    flows = flow_reports(
        totals,
        KINDS,
        {"mrc": True, "tcp": True},  # type: ignore[arg-type]
        {"mrc": {"retransmits": 12, "evs_retired": 3, "evs_readmitted": 3}},
    )
    doc = failover_report(
        flows, rows, t_origin=T0, duration_s=10.0, bin_s=0.01, meta={"preset": "tiny"}
    )
    path = tmp_path / "out" / "report.json"
    write_json(path, doc)
    back = json.loads(path.read_text())
    assert back["verified"] is True
    for f in back["faults"]:
        assert {
            "kind",
            "target",
            "t_start",
            "t_end",
            "mrc_stall_ms",
            "mrc_recovery_ms",
            "baselines",
        } <= set(f)
        assert {"on_path", "stall_ms", "recovery_ms", "stall_open", "path"} <= set(
            f["baselines"]["tcp"]
        )
    mrc = next(f for f in back["flows"] if f["flow"] == "mrc")
    assert mrc["evs_retired"] == 3
    assert mrc["retransmits"] == 12
    assert mrc["bytes"] == totals["mrc"].nbytes
    assert back["meta"] == {"preset": "tiny"}


def test_verified_needs_every_mrc_flow() -> None:
    def fr(kind: str, ok: bool | None) -> FlowReport:
        return FlowReport("f", kind, 1, 1.0, ok)  # type: ignore[arg-type]

    assert all_mrc_verified([fr("mrc", True), fr("tcp", False)])
    assert not all_mrc_verified([fr("mrc", True), fr("mrc", False)])
    assert not all_mrc_verified([fr("mrc", None)])
    assert not all_mrc_verified([fr("tcp", True)])  # no MRC flow: nothing was verified


def test_a_flow_that_delivered_nothing_is_reported() -> None:
    flows = flow_reports({}, {"mrc": "mrc"}, {"mrc": False})
    assert flows[0].bytes == 0
    assert flows[0].verified is False


def test_summary_table_renders_without_a_tty() -> None:
    _, results = _analysis()
    rows = fault_rows(results, KINDS, T0)  # type: ignore[arg-type]
    console = Console(record=True, width=110, force_terminal=False)
    print_summary(rows, verified=True, console=console)
    text = console.export_text()
    assert "MRC stall" in text
    assert "TCP" in text
    assert "9.0 ms" in text
    assert "2.40 s" in text
    assert "t1-p1-1" in text
    assert "verified" in text


def test_collisions_report() -> None:
    doc = collisions_report(
        {"h0->h2": 100e6, "h1->h3": 50e6}, {"h0->h2": 95e6, "h1->h3": 94e6}, 100e6, verified=True
    )
    assert doc["ecmp"]["min_over_max"] == 0.5
    assert doc["ecmp"]["jain"] == pytest.approx(0.9)
    assert doc["mrc"]["jain"] > 0.99
    assert doc["mrc"]["flows"]["h1->h3"] == 94e6


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_png(tmp_path: Path) -> None:
    faults, _ = _analysis()
    series = goodput_per_flow(MRC + TCP, T0, T0 + 10.0, 0.01)
    path = tmp_path / "timeline.png"
    timeline_png(path, series, KINDS, faults, T0)
    assert _is_png(path)
    assert path.stat().st_size > 20_000


def test_collisions_png(tmp_path: Path) -> None:
    ecmp = {f"h{i}->h{i + 4}": r for i, r in enumerate((100e6, 50e6, 50e6, 33e6))}
    mrc = {f"h{i}->h{i + 4}": r for i, r in enumerate((96e6, 95e6, 97e6, 94e6))}
    path = tmp_path / "collisions.png"
    collisions_png(path, ecmp, mrc, 100e6)
    assert _is_png(path)
    assert path.stat().st_size > 10_000


def _proc_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (T: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_pause_watch_sees_a_stopped_process() -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    # A child that watches itself; SIGSTOP/SIGCONT stand in for the hypervisor.
    code = (
        "import json, time\n"
        "from mrc_transport.harness.pauses import PauseWatch\n"
        "with PauseWatch() as w:\n"
        "    print('up', flush=True)\n"
        "    input()\n"
        "print(json.dumps([p.late_s for p in w.pauses]))\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "up"
        os.kill(child.pid, signal.SIGSTOP)
        # Wait until it is stopped: a SIGCONT sent while the stop is still pending (the
        # child not yet scheduled, on a loaded machine) cancels it (POSIX).
        deadline = time.monotonic() + 10
        while _proc_state(child.pid) != "T":
            assert time.monotonic() < deadline, "the child never stopped"
            time.sleep(0.001)
        time.sleep(0.15)  # the pause under test: its length, not a wait for a condition
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate("\n", timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    late = json.loads(out)
    assert any(0.12 <= s <= 2.0 for s in late), late


def test_longest_overlap() -> None:
    pauses = [Pause(10.0, 0.05), Pause(11.0, 0.2)]
    assert longest_overlap(pauses, 10.04, 10.5) == 0.05
    assert longest_overlap(pauses, 10.06, 10.9) == 0.0
    assert longest_overlap(pauses, 9.0, 12.0) == 0.2
    with PauseWatch() as watch:
        pass
    assert watch.pauses == []


def test_a_healthy_gap_during_a_host_pause_says_so() -> None:
    from mrc_transport.harness.timeline import Stall

    totals = flow_totals(MRC + TCP, T0, T0 + 10.0)
    gaps = {"mrc": Stall(T0 + 5.0, T0 + 5.104, False), "tcp": Stall(T0 + 1.0, T0 + 1.2, False)}
    pauses = [Pause(T0 + 5.002, 0.1)]
    flows = flow_reports(totals, KINDS, {"mrc": True}, None, gaps, pauses)  # type: ignore[arg-type]
    by = {f.flow: f for f in flows}
    assert by["mrc"].healthy_max_gap_ms == pytest.approx(104.0)
    assert by["mrc"].healthy_gap_host_pause_ms == pytest.approx(100.0)
    assert by["tcp"].healthy_gap_host_pause_ms == 0.0
    console = Console(record=True, width=140, force_terminal=False)
    print_summary([], True, console, flows)
    text = console.export_text()
    assert "MRC 104 ms (host paused 100 ms), TCP 200 ms" in text
    no_watch = flow_reports(totals, KINDS, {"mrc": True}, None, gaps)  # type: ignore[arg-type]
    assert all(f.healthy_gap_host_pause_ms is None for f in no_watch)


def _row(at: float, kind: str, action: str, target: str, **cells: BaselineFault) -> FaultRow:
    return FaultRow(kind, target, action, at, at + 2, 12.3, 0.0, baselines=cells)


def test_the_table_fits_80_columns_with_three_baselines_and_cuts_no_target() -> None:
    on = BaselineFault(True, 3563.2, 3400.0)
    off = BaselineFault(False, None, None)
    still = BaselineFault(True, 7210.0, None, stall_open=True)
    rows = [
        _row(2.1, "cut", "gray", "t0-p2-1:t1-p2-3", tcp=on, **{"tcp-rehash": on}, mptcp=on),
        _row(10.0, "flap", "cycle 1/2", "t0-p2-1:t1-p2-3", tcp=on, **{"tcp-rehash": off}),
        _row(10.5, "flap", "cycle 2/2", "t0-p2-1:t1-p2-3", tcp=on, mptcp=off),
        _row(12.0, "fail", "stop forwarding", "t1-p2-0", tcp=still, mptcp=still),
        _row(16.0, "fail", "port down", "h4:p2", tcp=on),
    ]
    console = Console(record=True, width=WIDTH, force_terminal=False)
    print_summary(rows, True, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "…" not in text
    assert text.count("t0-p2-1:t1-p2-3") == 3  # whole, on one line each
    assert "flap 1/2" in text
    assert "flap 2/2" in text
    assert "blackhole" in text
    assert "port down" in text
    for header in ("MRC stall", "TCP rehash", "MPTCP"):
        assert header in " ".join(text.split()), header
    assert "still stalled" in text
    assert "3.56 s" in text
    assert "rec 3.40 s" in text  # a baseline's recovery under its stall
    assert "rec -" in text  # none within the window


def test_a_stall_that_outlasts_the_run_is_a_lower_bound_in_words() -> None:
    assert stall_cell(7210.0, open_ended=True) == "> 7.21 s (still stalled)"
    assert stall_cell(84.0, rtos=1) == "84 ms (1 RTO)"
    assert stall_cell(None) == "-"
