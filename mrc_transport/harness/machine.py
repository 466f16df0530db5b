"""The machine's state around a run: how busy the CPUs were, what the hypervisor stole.

Every MRC end in the lab is a Python process (about half a core per 100 Mbit/s), and the
machine's 2 cores are shared with other work. A figure measures the fabric only when the
CPUs had time to spare, so every run records the busy and stolen share of all CPUs from
/proc/stat, and a run in which they were busy or stolen at least CPU_BOUND of the time is
reported as CPU-bound; the share the experiment's own processes used (os.times() of the
engine and its children) says whose work that was.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

CPU_BOUND = 0.9
"""Busy + stolen share of all CPUs from which a run counts as CPU-bound."""
USER_HZ = 100  # /proc/stat's unit on Linux


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Seconds since boot, summed over CPUs (/proc/stat's first line)."""

    busy: float
    """user + nice + system + irq + softirq."""
    idle: float
    """idle + iowait."""
    steal: float
    """Time the hypervisor ran someone else while this guest wanted to run."""
    own: float = 0.0
    """This process and its waited-for children (the lab's flows, `ip`, `nft`): os.times()."""

    @property
    def total(self) -> float:
        return self.busy + self.idle + self.steal


def parse_cpu_line(line: str) -> CpuTimes:
    """``cpu  user nice system idle iowait irq softirq steal ...`` -> CpuTimes."""
    fields = line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        raise ValueError(f"not /proc/stat's cpu line: {line!r}")
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return CpuTimes(
        busy=(user + nice + system + irq + softirq) / USER_HZ,
        idle=(idle + iowait) / USER_HZ,
        steal=steal / USER_HZ,
    )


def cpu_times() -> CpuTimes | None:
    """Now; None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            times = parse_cpu_line(f.readline())
    except (OSError, ValueError):
        return None
    t = os.times()
    return replace(times, own=t.user + t.system + t.children_user + t.children_system)


@dataclass(frozen=True, slots=True)
class CpuUse:
    """The CPUs between two samples."""

    cpu_s: float
    """CPU seconds that passed (wall time x CPUs)."""
    busy: float
    """Share of them spent running something (this lab and everything else)."""
    steal: float
    """Share stolen by the hypervisor."""
    own: float = 0.0
    """Share this experiment's processes used (in ``busy``)."""
    busiest: float | None = None
    """Share the busiest of its worker processes used, when the work was split over
    several (collective/groups.py); None: one process did it."""

    @property
    def cpu_bound(self) -> bool:
        return self.busy + self.steal >= CPU_BOUND

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_s": round(self.cpu_s, 2),
            "busy": round(self.busy, 3),
            "steal": round(self.steal, 3),
            "own": round(self.own, 3),
            "busiest": None if self.busiest is None else round(self.busiest, 3),
            "cpu_bound": self.cpu_bound,
        }


def cpu_use(before: CpuTimes | None, after: CpuTimes | None) -> CpuUse | None:
    if before is None or after is None or after.total <= before.total:
        return None
    total = after.total - before.total
    return CpuUse(
        cpu_s=total,
        busy=(after.busy - before.busy) / total,
        steal=(after.steal - before.steal) / total,
        own=(after.own - before.own) / total,
    )


def with_workers(use: CpuUse | None, worker_cpu_s: Sequence[float]) -> CpuUse | None:
    """``use`` with the busiest worker's share, given each worker's CPU seconds (none: the
    work was done in this process)."""
    if use is None or not worker_cpu_s:
        return use
    return replace(use, busiest=max(worker_cpu_s) / use.cpu_s)


def machine_state() -> dict[str, Any]:
    """Date, kernel, CPUs and load, for the report's header."""
    try:
        load = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        load = []
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "load_before": load,
    }


def process_bound(use: CpuUse, cpus: int | None = None) -> bool:
    """This process (or the busiest of its workers) used CPU_BOUND of one core or more: a
    single-threaded loop (a trio loop serving ranks) can go no faster, however idle the
    other CPUs are."""
    share = use.own if use.busiest is None else use.busiest
    return share * (cpus or os.cpu_count() or 1) >= CPU_BOUND


def cpu_line(use: CpuUse | None, cpus: int | None = None) -> str:
    """One sentence on the CPUs over a run: how busy, how much this process took (of one
    core), how much was stolen, and whether the run was CPU-bound."""
    if use is None:
        return "CPU: not known (/proc/stat unreadable)"
    n = cpus or os.cpu_count() or 1
    bound = [
        why
        for why, hit in (
            ("the machine's CPUs were busy", use.cpu_bound),
            (f"{'a worker' if use.busiest else 'this process'} had a whole core",
             process_bound(use, n)),
        )
        if hit
    ]  # fmt: skip
    verdict = f"CPU-bound ({' and '.join(bound)})" if bound else "not CPU-bound"
    whose = f"this process {100 * use.own * n:.0f}% of one core"
    if use.busiest is not None:
        whose = (
            f"this process and its workers {100 * use.own * n:.0f}% of one core, "
            f"the busiest worker {100 * use.busiest * n:.0f}%"
        )
    steal = f"{100 * use.steal:.0f}% stolen"
    return f"CPU: {n} CPUs {100 * use.busy:.0f}% busy, {whose}, {steal}: {verdict}"
