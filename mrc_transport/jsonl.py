"""JSON lines files (one object per line): the delivery records, the MRC event log.

Written whole and at once through a temporary file, so a reader (the demo, a test) never
sees half a file; read back skipping lines that are not JSON objects, so a file cut short
by a killed writer still reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def write(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write ``records`` to ``path`` (atomically); returns how many."""
    tmp = f"{path}.tmp"
    n = 0
    with open(tmp, "w") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


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
