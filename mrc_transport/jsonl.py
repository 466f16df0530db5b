"""JSON files: the delivery records and the MRC event log (one object per line), the
demos' reports (one document).

Every file is written whole through ``write_atomic``, so a reader (the demo, a test)
never sees half a file and a crash leaves the old one; JSON lines are read back skipping
lines that are not JSON objects, so a file cut short by a killed writer still reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def write_atomic(path: str | Path, chunks: Iterable[str]) -> None:
    """Write the text ``chunks`` to ``path`` whole or not at all: into a temporary file
    beside it (same file system, so the rename is atomic), flushed to the disk (fsync),
    then renamed over ``path``."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            f.writelines(chunks)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write ``records`` to ``path`` as JSON lines (atomically); returns how many."""
    n = 0

    def lines() -> Iterable[str]:
        nonlocal n
        for record in records:
            yield json.dumps(record, separators=(",", ":")) + "\n"
            n += 1

    write_atomic(path, lines())
    return n


def write_json(path: str | Path, doc: Mapping[str, Any], indent: int | None = 2) -> None:
    """Write one JSON document to ``path`` (atomically), strict JSON: NaN is an error."""
    write_atomic(path, [json.dumps(doc, indent=indent, allow_nan=False) + "\n"])


def read(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one per line; other lines are skipped."""
    out: list[dict[str, Any]] = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
    return out
