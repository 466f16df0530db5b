"""Times the machine itself stood still, so a stall is not blamed on the protocol.

On a shared VM every process of an experiment (both MRC ends, both TCP ends, the kernel's
forwarding in the namespaces) can stop for tens of milliseconds at once: the hypervisor
ran another guest (CPU steal): then MRC and TCP on another plane stall at the same
instant with nothing broken, and the MRC sender logs nothing (docs/measurements.md).

A thread that sleeps ``tick_s`` at a time and notes when it woke much later than asked
sees such a pause: a thread waking from sleep is the first the Linux scheduler runs, so
on a machine that is running at all it is late by a few ms at most. The steal counter of
/proc/stat says whether the hypervisor took the time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mrc_transport.harness.machine import cpu_times

TICK_S = 0.002
"""How long the watcher sleeps between looks."""
LATE_S = 0.020
"""Lateness that counts as a pause (the failover demo's stall target)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """The watcher asked to sleep TICK_S and woke ``late_s`` later than that."""

    t_mono: float
    """When the pause began (time.monotonic(), the records' clock)."""
    late_s: float
    """How long nothing ran, about."""

    @property
    def t_end(self) -> float:
        return self.t_mono + self.late_s


def steal_seconds() -> float | None:
    """CPU time the hypervisor gave to others since boot, summed over CPUs (/proc/stat);
    None where it cannot be read."""
    t = cpu_times()
    return None if t is None else t.steal


class PauseWatch:
    """``with PauseWatch() as watch: ...`` then ``watch.pauses`` and ``watch.steal_s``."""

    def __init__(self, tick_s: float = TICK_S, late_s: float = LATE_S) -> None:
        self.tick_s, self.late_s = tick_s, late_s
        self.pauses: list[Pause] = []
        self.steal_s: float | None = None
        self._stop = threading.Event()
        self._watching = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pause-watch", daemon=True)
        self._steal0: float | None = None

    def __enter__(self) -> PauseWatch:
        """Returns once the watcher runs: a started thread may first run much later on a
        loaded machine, and a pause before its first look would go unseen."""
        self._steal0 = steal_seconds()
        self._thread.start()
        self._watching.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        steal = steal_seconds()
        if steal is not None and self._steal0 is not None:
            self.steal_s = round(steal - self._steal0, 2)

    def _run(self) -> None:
        t = time.monotonic()
        self._watching.set()
        while True:
            stopped = self._stop.wait(self.tick_s)
            # also on the way out: a pause that ends as the watch is stopped still counts
            now = time.monotonic()
            late = now - t - self.tick_s
            if late >= self.late_s:
                self.pauses.append(Pause(t + self.tick_s, late))
            if stopped:
                return
            t = now


def longest_overlap(pauses: Sequence[Pause], t0: float, t1: float) -> float:
    """Seconds of the longest pause that overlaps [t0, t1] (0.0: none)."""
    return max((p.late_s for p in pauses if p.t_mono < t1 and p.t_end > t0), default=0.0)
