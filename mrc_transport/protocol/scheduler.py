"""Spraying schedulers: which EV the next data packet takes.

A scheduler sees the EV set and picks one EV per packet, leaving out the planes whose
congestion window is full for that packet (the sender says which); it may weigh planes by
their share of ECN-marked SACKs and learn from clean SACKs. Add one by subclassing
``Scheduler`` and listing it in ``SCHEDULERS``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection
from typing import ClassVar

from mypy_extensions import mypyc_attr

from .ev import Ev, EvSet, EvState


@mypyc_attr(allow_interpreted_subclasses=True)  # a plug-in needs no compiler
class Scheduler:
    """Base class: pick an EV for a data packet."""

    name: ClassVar[str] = ""

    def __init__(
        self, rng: random.Random, marked: dict[int, float] | None = None, equal: bool = True
    ) -> None:
        self.rng = rng
        self.marked: dict[int, float] = {} if marked is None else marked
        """Per plane: the moving average of the ECN echoes among its SACKs (the sender's
        windows keep it, cc/planes.py; read only here)."""
        self.equal = equal
        """Load every plane with a usable EV equally (paper section 4); else weigh the
        planes by their usable EVs and ECN marks (ours, with a window per plane)."""

    def pick(self, evs: EvSet, avoid: Ev | None = None, full: Collection[int] = ()) -> Ev:
        """An EV for the next packet, on none of the planes ``full`` if possible
        (``EvSet.skip_planes``); not ``avoid`` (a retransmission's old EV) if possible."""
        raise NotImplementedError

    def pick_in(
        self, evs: EvSet, plane: int, avoid: Ev | None = None, full: Collection[int] = ()
    ) -> Ev:
        """A random usable EV of ``plane`` (a resend's choice of plane is the sender's),
        not ``avoid`` if possible; any EV by ``pick`` if the plane has none."""
        mine = evs.usable_in(plane)
        n = len(mine)
        if n == 0:
            return self.pick(evs, avoid, full)
        i = self.rng.randrange(n)
        ev = mine[i]
        if ev is avoid and n > 1:
            ev = mine[(i + 1) % n]
        return ev

    def on_clean_ack(self, ev: Ev) -> None:
        """A SACK reflected ``ev`` without ECN."""


class Credit:
    """A plane's credit in the smooth weighted round robin, with the plane and its list of
    usable EVs (EvSet.usable_by_plane keeps one list per plane and changes it in place):
    compiled, a float attribute is a C double, where a dict of floats allocates one per
    update (three per packet), and the list costs no dict lookup per packet."""

    def __init__(self, plane: int, usable: list[Ev]) -> None:
        self.plane = plane
        self.usable = usable
        self.value = 0.0


class RandomScheduler(Scheduler):
    """Pseudo-random over the usable EVs of a plane (paper: every packet a different random
    EV), the planes in smooth weighted round robin: equal weights (paper section 4), or
    with a window per plane their usable EVs (ours).

    Picking the plane at random as well would give each plane the same share on average,
    but at full load each NIC port is then a queue whose arrivals are a random walk around
    its drain rate: the queue wanders deep, and the packets behind it arrive so late that
    they are declared lost; planes in turn keep every port's queue short
    (docs/measurements.md, "The sender's design figures"). With weights by usable EVs a
    plane with retired EVs gets less traffic (the per-plane option).
    """

    name = "random"

    def __init__(
        self, rng: random.Random, marked: dict[int, float] | None = None, equal: bool = True
    ) -> None:
        super().__init__(rng, marked, equal)
        self._credit: list[Credit] = []  # one per plane, in the order of EvSet.planes
        self._of: EvSet | None = None  # the EV set they are for
        self._random = rng.random  # compiled, a bound method kept saves a lookup a packet

    def pick(self, evs: EvSet, avoid: Ev | None = None, full: Collection[int] = ()) -> Ev:
        mine = self._plane(evs, full)
        n = len(mine)
        if n == 0:
            return evs.fallback()
        # random() is one C call; randrange runs ~3k instructions of Python per packet.
        # floor(U * n) with a 53-bit U is uniform to within n / 2**53.
        i = int(self._random() * n)
        ev = mine[i]
        if ev is avoid and n > 1:
            ev = mine[(i + 1) % n]
        return ev

    def _plane(self, evs: EvSet, full: Collection[int]) -> list[Ev]:
        """The usable EVs of the next plane (smooth weighted round robin, as nginx),
        leaving out ``EvSet.skip_planes`` (full window, busy local port)."""
        if self._of is not evs:  # a connection's planes are fixed: once per EV set
            self._of = evs
            self._credit = [Credit(p, evs.usable_by_plane[p]) for p in evs.planes]
        top: Credit | None = None
        total = 0.0
        marked, skip = self.marked, evs.skip_planes(full)
        for c in self._credit:
            n = len(c.usable)
            if not n or (skip and c.plane in skip):  # most picks skip none: no hashing
                continue
            # equal planes (paper section 4: unequal load makes false incast); or, with
            # a window per plane, a plane whose SACKs are mostly marked has no clean EV
            # left to skip to: its weight falls with the marked fraction (ours)
            m = 0.0 if self.equal else marked.get(c.plane, 0.0)
            weight = 1.0 if self.equal else n * (1.0 - m)
            total += weight
            c.value += weight
            if top is None or c.value > top.value:
                top = c
        if top is None:
            return []
        top.value -= total
        return top.usable


class RoundRobinScheduler(Scheduler):
    """The usable EVs in turn."""

    name = "rr"

    def __init__(
        self, rng: random.Random, marked: dict[int, float] | None = None, equal: bool = True
    ) -> None:
        super().__init__(rng, marked, equal)
        self._i = 0

    def pick(self, evs: EvSet, avoid: Ev | None = None, full: Collection[int] = ()) -> Ev:
        n = len(evs.usable)
        if n == 0:
            return evs.fallback()
        planes = evs.usable_planes(full) if evs.ports_busy or full else None
        for _ in range(n):
            self._i = (self._i + 1) % n
            ev = evs.usable[self._i]
            if (ev is not avoid or n == 1) and (planes is None or ev.plane in planes):
                return ev
        return evs.usable[self._i]


class RepsScheduler(RandomScheduler):
    """Recycle EVs that came back clean, else explore at random (UET REPS)."""

    name = "reps"

    def __init__(
        self, rng: random.Random, marked: dict[int, float] | None = None, equal: bool = True
    ) -> None:
        super().__init__(rng, marked, equal)
        self._clean: deque[Ev] = deque(maxlen=256)

    def pick(self, evs: EvSet, avoid: Ev | None = None, full: Collection[int] = ()) -> Ev:
        planes = evs.usable_planes(full)
        while self._clean:
            ev = self._clean.popleft()
            usable = ev.state is EvState.GOOD and ev.value in evs.usable_values()
            if usable and ev is not avoid and ev.plane in planes:
                return ev
        return super().pick(evs, avoid, full)

    def on_clean_ack(self, ev: Ev) -> None:
        self._clean.append(ev)


SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (RandomScheduler, RoundRobinScheduler, RepsScheduler)
}


def make_scheduler(
    name: str, rng: random.Random, marked: dict[int, float] | None = None, equal: bool = True
) -> Scheduler:
    """The scheduler registered under ``name``: planes loaded ``equal``ly, or weighed by
    their usable EVs and ``marked``."""
    try:
        return SCHEDULERS[name](rng, marked, equal)
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {sorted(SCHEDULERS)}") from None
