"""A collective's run-time failure: one line, exit 1 (bad input is harness's HarnessError,
exit 2)."""

from __future__ import annotations


class RunFailed(Exception):
    """A connection lost, a step that never ended, a peer that sent what it should not."""
