"""io/eventlog.py: what `mrc perf --events` writes."""

from __future__ import annotations

from pathlib import Path

from mrc_transport.io import eventlog
from mrc_transport.protocol import events


def test_records_are_flat_and_named_in_snake_case() -> None:
    ev = events.RtoFired(time=12.5, conn=3, rto=0.004, count=2)
    assert eventlog.as_record(ev) == {
        "t_mono": 12.5,
        "event": "rto_fired",
        "conn": 3,
        "rto": 0.004,
        "count": 2,
    }
    assert eventlog.event_name(events.PathRetired(1.0, 1, 5, 0, "loss")) == "path_retired"


def test_data_events_are_left_out_and_the_log_is_bounded(tmp_path: Path) -> None:
    log = eventlog.EventLog(limit=2)
    log.add(events.MessageReceived(1.0, 1, 0, bytearray(b"x")))
    log.add(events.MessageAcked(1.0, 1, 0, 1))
    for psn in range(3):
        log.add(events.Retransmit(2.0 + psn, 1, psn, 7, 9))
    path = tmp_path / "ev.jsonl"
    log.write(str(path))
    records = eventlog.read(str(path))
    assert [r["event"] for r in records] == ["retransmit", "retransmit", "log_full"]
    assert [r.get("psn") for r in records[:2]] == [0, 1]
    assert records[-1]["dropped"] == 1
    assert not (tmp_path / "ev.jsonl.tmp").exists()


def test_a_log_cut_short_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "ev.jsonl"
    path.write_text('{"t_mono": 1.0, "event": "plane_down", "conn": 1, "plane": 2}\n{"t_mo')
    assert eventlog.read(str(path)) == [
        {"t_mono": 1.0, "event": "plane_down", "conn": 1, "plane": 2}
    ]
