"""A collective's run-time failure: one line, exit 1 (bad input is harness's HarnessError,
exit 2)."""

from __future__ import annotations

from typing import Any


class RunFailed(Exception):
    """A connection lost, a step that never ended, a peer that sent what it should not."""


def first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """A trio exception group's first exception that is not a group (the failure a user
    sees, in one line)."""
    first = group.exceptions[0]
    return first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
