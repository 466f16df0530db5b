"""mrc_transport/jsonl.py: files written whole or not at all, read back past a torn end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrc_transport import jsonl


def test_lines_and_documents_round_trip(tmp_path: Path) -> None:
    lines, doc = tmp_path / "r.jsonl", tmp_path / "d.json"
    assert jsonl.write(lines, [{"a": 1}, {"b": [2, 3]}]) == 2
    assert lines.read_text() == '{"a":1}\n{"b":[2,3]}\n'
    assert jsonl.read(lines) == [{"a": 1}, {"b": [2, 3]}]
    jsonl.write_json(doc, {"x": 1.5})
    assert doc.read_text() == '{\n  "x": 1.5\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json", "r.jsonl"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    jsonl.write(path, [{"old": True}])

    def records() -> Iterator[dict[str, object]]:
        yield {"new": 1}
        raise RuntimeError("the writer died")

    with pytest.raises(RuntimeError):
        jsonl.write(path, records())
    with pytest.raises(ValueError, match="Out of range float"):
        jsonl.write_json(path, {"nan": float("nan")})
    assert jsonl.read(path) == [{"old": True}]
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"a": 1}) + "\n" + '{"b": ')
    assert jsonl.read(path) == [{"a": 1}]
