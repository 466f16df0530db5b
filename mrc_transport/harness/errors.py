"""The demo's one error type: anything a user can fix (a bad schedule file, a bad target).

The CLI turns it into its UsageError (one line, exit 2); this package does not import the
CLI, which sits below it in the layering (STYLE.md)."""

from __future__ import annotations


class DemoError(Exception):
    """A bad schedule, target or records file; the message is one line."""
