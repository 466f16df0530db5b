"""A log of the protocol core's recovery events, for `mrc perf --events FILE`.

What a stall needs to be explained: when an RTO fired, which PSNs were sent again on
which EVs, which paths were retired, skipped or readmitted, which planes went down. The
data events (MessageReceived, MessageAcked) are left out: they are the records'
business (``--records``) and there is one per message.

Events are kept in memory and written at the end as JSON lines, like the records: the
transfer's loop must not wait on a file. ``t_mono`` is the core's ``now``
(``time.monotonic()``, the clock of the lab's fault log and of the records), so the
three line up.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

from mrc_transport import jsonl
from mrc_transport.protocol import events

SKIPPED: tuple[type[events.Event], ...] = (events.MessageReceived, events.MessageAcked)
"""Data events: one per message, already in the records."""

LIMIT = 1_000_000
"""Events kept at most (a long run with a bad path retransmits without end), about 100 MB
of them; the count of those dropped is written as the last line."""

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def event_name(ev: events.Event) -> str:
    """``RtoFired`` -> ``rto_fired``."""
    return _CAMEL.sub("_", type(ev).__name__).lower()


def as_record(ev: events.Event) -> dict[str, Any]:
    """One event as a flat JSON object: ``t_mono``, ``event``, then its own fields."""
    fields = dataclasses.asdict(ev)
    record: dict[str, Any] = {"t_mono": fields.pop("time"), "event": event_name(ev)}
    record.update(fields)
    return record


class EventLog:
    """Collects events (``endpoint.on_event = log.add``) and writes them out once."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.events: list[events.Event] = []
        """Kept as they are (slotted, frozen: ~100 bytes each), made JSON only at the end."""
        self.dropped = 0
        self.limit = limit

    def add(self, ev: events.Event) -> None:
        if isinstance(ev, SKIPPED):
            return
        if len(self.events) >= self.limit:
            self.dropped += 1
            return
        self.events.append(ev)

    def write(self, path: str) -> None:
        """All events as JSON lines (mrc_transport/jsonl.py: atomically)."""
        full = [{"event": "log_full", "dropped": self.dropped}] if self.dropped else []
        jsonl.write(path, itertools.chain(map(as_record, self.events), full))


def read(path: str) -> list[dict[str, Any]]:
    """The records of a log ``write`` made (a log cut short by a killed process still
    reads: jsonl.read skips its broken last line)."""
    return jsonl.read(path)
