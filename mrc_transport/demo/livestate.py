"""Where the failover demo's live view (demo/live.py) gets its numbers: the MRC client's
interval lines, each baseline receiver's progress lines, and the sender's ports.

A port carries MRC and the baselines at once; the per-flow counters on the sender
(harness/flowlinks.py) say how many of its bytes were each baseline's, so the plane bars
show MRC's own share, and MPTCP's subflows a panel of their own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrc_transport.demo.live import LiveSnapshot, format_fault
from mrc_transport.harness import flowlinks
from mrc_transport.harness.baselines import LABELS, baseline
from mrc_transport.harness.linkload import read_tx_counters
from mrc_transport.perf.report import Interval, ReportError


@dataclass
class LiveState:
    """What the children told us so far; the live view reads it (a LiveSource)."""

    t_origin: float
    lab: str
    planes: int
    flow_scale_bps: float
    plane_scale_bps: float
    baselines: Sequence[str] = ()
    """The baseline kinds that run, in the order they are shown."""
    mrc_bps: float = 0.0
    active_evs: int | None = None
    retired_evs: int | None = None
    baseline_bps: dict[str, float] = field(default_factory=dict)
    plane_bps: dict[int, float] = field(default_factory=dict)
    """MRC's rate per plane (the sender's port less the baselines' bytes on it)."""
    baseline_planes: dict[str, dict[int, float]] = field(default_factory=dict)
    """A baseline's rate per plane."""
    _progress: dict[str, tuple[float, int]] = field(default_factory=dict)

    def on_mrc(self, ev: Mapping[str, Any]) -> None:
        if ev.get("event") != "interval":
            return
        try:
            iv = Interval.from_json(ev.get("data"))
        except ReportError:
            return
        self.mrc_bps = iv.bits_per_second
        self.active_evs, self.retired_evs = iv.active_evs, iv.retired_evs

    def on_baseline(self, kind: str, ev: Mapping[str, Any]) -> None:
        """A baseline receiver's line: its rate since the last progress line."""
        if ev.get("event") != "progress":
            return
        t, n = float(ev["t_mono"]), int(ev["bytes"])
        last = self._progress.get(kind)
        if last is not None and t > last[0]:
            self.baseline_bps[kind] = (n - last[1]) * 8 / (t - last[0])
        self._progress[kind] = (t, n)

    def on_ports(
        self, ports: Mapping[int, float], flows: Mapping[str, Mapping[int, float]]
    ) -> None:
        """The sender's port rates per plane and each baseline's rate per plane on them."""
        self.baseline_planes = {k: dict(v) for k, v in flows.items()}
        self.plane_bps = {
            p: max(0.0, v - sum(per.get(p, 0.0) for per in flows.values()))
            for p, v in ports.items()
        }

    def snapshot(self) -> LiveSnapshot:
        from labs.faults import read_events

        faults = [
            format_fault(e, self.t_origin)
            for e in read_events(self.lab)
            if float(e["t_mono"]) >= self.t_origin
        ]
        total = None
        if self.active_evs is not None and self.retired_evs is not None:
            total = self.active_evs + self.retired_evs
        planes = range(self.planes)
        return LiveSnapshot(
            t=time.monotonic() - self.t_origin,
            flows=[
                ("mrc", "mrc", self.mrc_bps),
                *((k, k, self.baseline_bps.get(k, 0.0)) for k in self.baselines),
            ],
            planes=[(p, self.plane_bps.get(p, 0.0)) for p in planes],
            other_planes=[
                (LABELS[k], [(p, self.baseline_planes.get(k, {}).get(p, 0.0)) for p in planes])
                for k in self.baselines
                if not baseline(k).single_path
            ],
            flow_scale_bps=self.flow_scale_bps,
            plane_scale_bps=self.plane_scale_bps,
            active_evs=self.active_evs,
            total_evs=total,
            faults=faults,
        )


Snapshot = tuple[float, dict[tuple[str, str], int], dict[flowlinks.Key, int]]


def _sample(lab: str, host: str, counted: bool) -> Snapshot:
    ports = read_tx_counters(lab, [host])
    flows = flowlinks.read(lab, [host]) if counted else {}
    return time.monotonic(), ports, flows


def _delta(now: Mapping[Any, int], last: Mapping[Any, int], key: Any, dt: float) -> float:
    return max(0, now.get(key, 0) - last.get(key, 0)) * 8 / dt


def _rates(
    state: LiveState, host: str, ports: Mapping[str, int], last: Snapshot, now: Snapshot
) -> None:
    dt = now[0] - last[0]
    if dt <= 0:
        return
    planes = range(state.planes)
    port_bps = {p: _delta(now[1], last[1], (host, f"p{p}"), dt) for p in planes}
    flow_bps = {
        kind: {p: _delta(now[2], last[2], (host, f"p{p}", tcp_port, "data"), dt) for p in planes}
        for kind, tcp_port in ports.items()
    }
    state.on_ports(port_bps, flow_bps)


async def poll_ports(
    state: LiveState, lab: str, host: str, ports: Mapping[str, int], every: float
) -> None:
    """Sample the sender's port tx counters (port pN is plane N) and, when the baselines'
    flows are counted (``ports``: kind -> its TCP port), their bytes on each port."""
    import trio

    last: Snapshot | None = None
    while True:
        now = await trio.to_thread.run_sync(_sample, lab, host, bool(ports))
        if last is not None:
            _rates(state, host, ports, last, now)
        last = now
        await trio.sleep(every)
