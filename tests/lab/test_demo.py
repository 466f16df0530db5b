"""The demos end to end on the tiny lab (root): `mrc demo failover` with one gray cut of the
TCP flow's T0-T1 link beside every baseline, with MPTCP off in a namespace (one line, exit
2, and the demo still runs with --baselines tcp), and `mrc demo collisions`, each judged
from its JSON report. The baselines' other figures (MPTCP's, TCP rehash's) are printed,
not bounded: how long they stall is what the demo measures.

Bounds, from measurement (docs/workshop.md quotes them):
- MRC's longest delivery stall in the fault's window (the cut plus 0.5 s after the restore):
  measured 64, 68 and 104 ms on tiny on this 2-core machine with other work running; the
  gap at the cut itself was 22-26 ms, the longer ones come after the restore, when the TCP
  flow resumes and fills the shared plane's 256 KB tbf queue (21 ms at 100 Mbit/s). The
  bound, MRC_STALL_BOUND_MS, is about twice the worst measured, and still a fifth of the
  cut that stalls TCP.
- The pinned TCP flow cannot deliver during the cut and resumes at its next retransmission
  after it (RTO doubling from 200 ms, RFC 6298 5.5): about the cut, at most about twice
  the cut plus 0.4 s (tests/lab/test_tcpflow.py measured the same). The fault window runs
  from when the cut was logged to when the restore was logged; the restore is logged after
  re-applying the link's config (~0.1-0.2 s), and TCP may resume inside that, so the lower
  bound is the window less RESTORE_LAG_MS. The cut, CUT_S, ends well between TCP's
  retransmissions 0.6 and 1.4 s after it: after a 1.5 s cut TCP resumed at its retry
  3.0 s after the cut, which the run's 2 s tail did not always cover (an open stall)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrc_transport.cli.main import main

pytestmark = pytest.mark.lab

MRC_STALL_BOUND_MS = 200.0
RESTORE_LAG_MS = 300.0
CUT_AT_S, CUT_S = 2.0, 1.0
APPLY_LAG_S = 1.0  # longest a fault step may take effect after its time
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _gray_cut(tmp_path: Path) -> Path:
    schedule = tmp_path / "gray.yaml"
    schedule.write_text(
        f"- {{at: {CUT_AT_S}, action: cut, target: '@tcp-link', mode: gray}}\n"
        f"- {{at: {CUT_AT_S + CUT_S}, action: restore, target: '@tcp-link'}}\n"
    )
    return schedule


def _failover(lab: str, tmp_path: Path, *extra: str) -> int:
    return main(
        ["demo", "failover", "--preset", "tiny", "--name", lab, "--no-live",
         "--schedule", str(_gray_cut(tmp_path)), "--out", str(tmp_path / "out"), *extra]
    )  # fmt: skip


def test_failover_gray_cut_mrc_rides_it_out_tcp_stalls(lab_name: str, tmp_path: Path) -> None:
    rc = _failover(lab_name, tmp_path)
    out = tmp_path / "out"
    doc = json.loads((out / "report.json").read_text())
    assert rc == 0
    assert doc["verified"] is True
    flows = {f["flow"]: f for f in doc["flows"]}
    assert set(flows) == {"mrc", "tcp", "tcp-rehash", "mptcp"}
    for flow in flows.values():
        assert flow["verified"] is True, flow
        assert flow["bytes"] > 0, flow
    # MPTCP had a subflow from each plane of the sender
    subflows = doc["meta"]["baselines"]["mptcp"]["subflows"]
    assert sorted(local.split(":")[1] for local, _ in subflows) == ["bb00", "bb01"]
    assert doc["meta"]["mptcp"][doc["meta"]["src"]]["net.mptcp.path_manager"] == "kernel"
    # the delivery jitter with nothing broken, reported to read stalls against
    assert 0 < flows["mrc"]["healthy_max_gap_ms"] < MRC_STALL_BOUND_MS
    assert flows["tcp"]["bytes"] > 0
    (fault,) = doc["faults"]
    assert (fault["kind"], fault["action"]) == ("cut", "gray")
    # Each step takes effect when its `nft`/`ip` command returns, some time after the
    # step's time (70-230 ms here; 315 ms with two CPU hogs beside the demo, and a cut
    # run 228 ms late and restored 168 ms late lasted 940 ms of the 1000 scheduled).
    assert CUT_AT_S <= fault["t_start"] <= CUT_AT_S + APPLY_LAG_S, fault
    assert CUT_AT_S + CUT_S <= fault["t_end"] <= CUT_AT_S + CUT_S + APPLY_LAG_S, fault
    cut_ms = (fault["t_end"] - fault["t_start"]) * 1000
    assert fault["mrc_stall_ms"] is not None
    assert fault["mrc_stall_ms"] < MRC_STALL_BOUND_MS, fault
    tcp = fault["baselines"]["tcp"]
    assert tcp["on_path"] is True  # @tcp-link: the link TCP was on when the cut struck
    assert fault["target"] in tcp["path"]
    assert not tcp["stall_open"]
    assert cut_ms - RESTORE_LAG_MS <= tcp["stall_ms"] <= 2 * cut_ms + 400, fault
    for kind in ("tcp-rehash", "mptcp"):
        b = fault["baselines"][kind]
        assert isinstance(b["on_path"], bool), b
        assert (b["stall_ms"] is None) == (not b["on_path"]), b
        print(f"{kind}: on its path {b['on_path']}, stall {b['stall_ms']} ms, {b['path']}")
    assert (out / "timeline.png").read_bytes()[:8] == PNG_SIGNATURE
    # The lab is gone: nothing left of it to tear down.
    assert not Path(f"/run/netns/mrc-{lab_name}-h0").exists()


def test_mptcp_off_in_a_namespace_is_one_line_and_tcp_alone_still_runs(
    lab_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from labs import apply, netns
    from labs.topology import namespace

    real_up = apply.up

    def up_with_mptcp_off(topo: object, lab: str, **kw: object) -> float:
        took = real_up(topo, lab, **kw)  # type: ignore[arg-type]
        with netns.entered(namespace(lab, "h0")):  # the receiver's; never the root's
            netns.write_sysctl("net.mptcp.enabled", "0")
        return took

    monkeypatch.setattr("labs.apply.up", up_with_mptcp_off)
    assert _failover(lab_name, tmp_path) == 2
    err = capsys.readouterr().err
    assert err == (
        "mrc demo: error: MPTCP is off in h0's namespace (net.mptcp.enabled=0): leave mptcp "
        "out of --baselines, e.g. --baselines tcp\n"
    )
    assert not Path(f"/run/netns/mrc-{lab_name}-h0").exists()
    assert _failover(lab_name, tmp_path, "--baselines", "tcp") == 0
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [f["flow"] for f in doc["flows"]] == ["mrc", "tcp"]
    assert set(doc["faults"][0]["baselines"]) == {"tcp"}


def test_collisions_writes_png_and_sane_json(lab_name: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(
        [
            "demo",
            "collisions",
            "--preset",
            "tiny",
            "--name",
            lab_name,
            "--duration",
            "4",
            "--out",
            str(out),
        ]
    )
    doc = json.loads((out / "collisions.json").read_text())
    assert rc == 0
    assert doc["verified"] is True
    assert all(doc["meta"]["ecmp_verified"].values())
    assert all(doc["meta"]["mptcp_verified"].values())
    line = doc["line_rate_bps"]
    pairs = doc["meta"]["pairs"]
    assert len(pairs) == 4
    for run in ("ecmp", "mptcp", "mrc"):
        rates = doc[run]["flows"]
        assert sorted(rates) == sorted(pairs)
        # Every flow moved data, none faster than the one-port line rate (+ tbf burst slack).
        assert all(0 < r <= 1.1 * line for r in rates.values()), (run, rates)
        assert 0.25 <= doc[run]["jain"] <= 1.0
        assert doc[run]["min_over_max"] == pytest.approx(min(rates.values()) / max(rates.values()))
    assert (out / "collisions.png").read_bytes()[:8] == PNG_SIGNATURE
