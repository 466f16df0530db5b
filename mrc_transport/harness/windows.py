"""Per-flow throughput over a window in which every flow was running. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.timeline import Delivery

WARMUP_S = 1.0
"""Skipped after the LAST flow's first delivery (slow start, NSCC's first RTTs)."""
TAIL_S = 0.5
"""Skipped before the FIRST flow's last delivery (senders stop at different times)."""


def common_window(
    deliveries: Sequence[Delivery], flows: Sequence[str], t_start: float, t_end: float
) -> tuple[float, float]:
    """The span in which every flow that delivered anything was running: from the last
    flow's first delivery + WARMUP_S to the first flow's last delivery - TAIL_S.

    Why not [t_start + WARMUP_S, t_end - TAIL_S]: each MRC end is a Python process that
    imports, loads the lab's paths and does a SETUP handshake, 8-16 of them at once on a
    few cores, so the MRC flows' first bytes arrive seconds after the launch, and a window
    anchored at the launch would count not-yet-started flows as zero throughput. A flow
    that delivered nothing still reports 0; with no deliveries at all the launch times are used."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    wanted = set(flows)
    for d in deliveries:
        if d.flow in wanted:
            first[d.flow] = min(first.get(d.flow, d.t_mono), d.t_mono)
            last[d.flow] = max(last.get(d.flow, d.t_mono), d.t_mono)
    if not first:
        return t_start + WARMUP_S, t_end - TAIL_S
    return max(first.values()) + WARMUP_S, min(last.values()) - TAIL_S


def window_rates(
    deliveries: Sequence[Delivery], flows: Sequence[str], t0: float, t1: float
) -> dict[str, float]:
    """Bits per second of each flow between t0 and t1 (0 for a flow that delivered none)."""
    span = t1 - t0
    if span <= 0:
        raise HarnessError(f"measurement window is empty ({span:.2f} s): use a longer --duration")
    rates = dict.fromkeys(flows, 0.0)
    for d in deliveries:
        if d.flow in rates and t0 <= d.t_mono < t1:
            rates[d.flow] += d.nbytes * 8 / span
    return rates
