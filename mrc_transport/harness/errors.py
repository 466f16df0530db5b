"""The harness's one error type: anything a user can fix (a bad schedule file, a bad target,
a fabric an experiment cannot run on).

The CLI turns it into its UsageError (one line, exit 2); this package does not import the
CLI, which sits below it in the layering (STYLE.md)."""

from __future__ import annotations

from typing import Any


class HarnessError(Exception):
    """A bad schedule, target or records file; the message is one line."""


class Unavailable(HarnessError):
    """What was asked cannot run on this machine (a kernel without MPTCP, MPTCP off in a
    lab's namespace): the user's to change, as a bad flag is (exit 2)."""


def unwrap(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception a user should see from trio's (strict) exception group: Ctrl-C first,
    then a harness or lab error (one line), else the group itself."""
    from labs.errors import LabError

    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                walk(sub)
        else:
            leaves.append(e)

    walk(group)
    for kind in (KeyboardInterrupt, HarnessError, LabError):
        hit = next((e for e in leaves if isinstance(e, kind)), None)
        if hit is not None:
            return hit
    return group
