"""Delivery records: one JSON object per line, {"t_mono", "nbytes", "flow"}, written by an
`mrc perf` receiver (``--records``) and by the demo's TCP baseline, read by the demos
(harness/records.py) to join deliveries with the lab's event log."""

from __future__ import annotations

import json
from typing import Any


def record(t_mono: float, nbytes: int, flow: str) -> dict[str, Any]:
    return {"t_mono": t_mono, "nbytes": nbytes, "flow": flow}


def record_line(t_mono: float, nbytes: int, flow: str) -> str:
    return json.dumps(record(t_mono, nbytes, flow), separators=(",", ":"))
