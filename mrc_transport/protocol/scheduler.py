"""Spraying schedulers: which EV the next data packet takes.

A scheduler sees the EV set and picks one EV per packet; it may learn from clean SACKs.
Add one by subclassing ``Scheduler`` and listing it in ``SCHEDULERS``.
"""

from __future__ import annotations

import random
from collections import deque
from typing import ClassVar

from .ev import Ev, EvSet, EvState


class Scheduler:
    """Base class: pick an EV for a data packet."""

    name: ClassVar[str] = ""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, evs: EvSet, avoid: Ev | None = None) -> Ev:
        """An EV for the next packet; not ``avoid`` (a retransmission's old EV) if possible."""
        raise NotImplementedError

    def on_clean_ack(self, ev: Ev) -> None:
        """A SACK reflected ``ev`` without ECN."""


class RandomScheduler(Scheduler):
    """Pseudo-random over the usable EVs (paper: every packet a different random EV)."""

    name = "random"

    def pick(self, evs: EvSet, avoid: Ev | None = None) -> Ev:
        n = len(evs.usable)
        if n == 0:
            return evs.fallback()
        i = self.rng.randrange(n)
        ev = evs.usable[i]
        if ev is avoid and n > 1:
            ev = evs.usable[(i + 1) % n]
        return ev


class RoundRobinScheduler(Scheduler):
    """The usable EVs in turn."""

    name = "rr"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self._i = 0

    def pick(self, evs: EvSet, avoid: Ev | None = None) -> Ev:
        n = len(evs.usable)
        if n == 0:
            return evs.fallback()
        self._i = (self._i + 1) % n
        ev = evs.usable[self._i]
        if ev is avoid and n > 1:
            self._i = (self._i + 1) % n
            ev = evs.usable[self._i]
        return ev


class RepsScheduler(RandomScheduler):
    """Recycle EVs that came back clean, else explore at random (UET REPS)."""

    name = "reps"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self._clean: deque[Ev] = deque(maxlen=256)

    def pick(self, evs: EvSet, avoid: Ev | None = None) -> Ev:
        while self._clean:
            ev = self._clean.popleft()
            if ev.state is EvState.GOOD and ev.value in evs.usable_values() and ev is not avoid:
                return ev
        return super().pick(evs, avoid)

    def on_clean_ack(self, ev: Ev) -> None:
        self._clean.append(ev)


SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (RandomScheduler, RoundRobinScheduler, RepsScheduler)
}


def make_scheduler(name: str, rng: random.Random) -> Scheduler:
    """The scheduler registered under ``name``."""
    try:
        return SCHEDULERS[name](rng)
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {sorted(SCHEDULERS)}") from None
