"""Delivery records on disk: one JSON object per line, {"t_mono", "nbytes", "flow"}.

The TCP baseline's receiver writes them (harness/tcpflow.py) and the MRC receiver will too,
so the timelines join both with the lab's event log (harness/timeline.py) in one format."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from mrc_transport import jsonl
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.timeline import Delivery
from mrc_transport.perf.records import record, record_line

__all__ = ["parse_record", "read_records", "record", "record_line", "write_records"]


def write_records(path: str | Path, deliveries: Iterable[Delivery]) -> int:
    """Write records (mrc_transport/jsonl.py: atomically); returns how many."""
    return jsonl.write(path, (record(d.t_mono, d.nbytes, d.flow) for d in deliveries))


def parse_record(line: str, where: str) -> Delivery:
    """One untrusted line -> Delivery; HarnessError naming the file and line otherwise."""
    try:
        raw = json.loads(line)
        t, n, flow = raw["t_mono"], raw["nbytes"], raw["flow"]
    except (ValueError, KeyError, TypeError):
        raise HarnessError(f"{where}: not a delivery record (t_mono, nbytes, flow)") from None
    if not isinstance(t, int | float) or isinstance(t, bool):
        raise HarnessError(f"{where}: t_mono must be a number")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise HarnessError(f"{where}: nbytes must be a non-negative integer")
    return Delivery(float(t), n, str(flow))


def read_records(path: str | Path) -> list[Delivery]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise HarnessError(f"{path}: {exc.strerror}") from None
    return [
        parse_record(line, f"{path}:{i + 1}")
        for i, line in enumerate(text.splitlines())
        if line.strip()
    ]
