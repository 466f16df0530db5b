"""What the core's state machines do with an input their table has no entry for.

The EV states (ev.py) and the connection states (connection.py) are tables of state ->
{input: next state}, as h11's ``_state.py`` spells its states, listing every input the
state may meet, those it ignores included (a late ECN echo of an EV already retired).
An input a state has no entry for is the core's own mistake, not a peer's (a peer's
packet that makes no sense in the state is checked before it becomes an input, and
counted as ``wrong_state``): the machine stays where it is and counts it, so a running
endpoint carries on, and under the test suite, which sets ``STRICT``, it raises.
"""

from __future__ import annotations

import enum

STRICT = False
"""Raise ``IllegalTransition`` on an illegal transition, not only count it
(tests/conftest.py sets it for the whole suite)."""


class IllegalTransition(RuntimeError):
    """An input that the current state's table has no entry for."""


def illegal(machine: str, state: enum.Enum, inp: enum.Enum) -> None:
    """Report an illegal transition of ``machine`` (counted by the caller): raises
    ``IllegalTransition`` under ``STRICT``."""
    if STRICT:
        raise IllegalTransition(f"{machine}: {state.name} has no transition on {inp.name}")
