"""nccl-tests' bandwidths (doc/PERFORMANCE.md there) and the fabric's ideal for them.

- algbw = S / t, S the collective's size in bytes (a rank's buffer for all-reduce and
  all-to-all, the gathered result for all-gather), t one iteration's time; GB/s = 1e9 B/s.
- busbw = algbw x the collective's factor: 2(n-1)/n for all-reduce, (n-1)/n for
  all-gather and all-to-all. It is the rate each rank's link to the fabric ran at, so it
  compares with the hardware whatever n is.
- ideal: the least time the schedule's bytes can take on the fabric, each resource (a
  host's ports out and in, a rack's T0-T1 links out and in) carrying at its rate the
  bytes the whole schedule puts on it, with the steps pipelined (a ring passes slices on
  as they arrive); the busbw of that time. For a ring on a fabric of full bisection it is
  a host's rate: all its ports (every plane's) at the lab's rate.

Rates are line rates (what tbf shapes), so headers are part of the gap to the ideal.
Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labs.topology import Topology
from mrc_transport.collective.algorithms import Algorithm, Step

GB = 1e9
"""nccl-tests' GB: 10^9 bytes."""


def algbw(size: int, seconds: float) -> float:
    """GB/s of S bytes in ``seconds`` (0 for a time of 0)."""
    return size / GB / seconds if seconds > 0 else 0.0


def busbw(alg: Algorithm, n: int, alg_bw: float) -> float:
    """The bus bandwidth of an algorithm bandwidth, for n ranks."""
    return alg_bw * alg.bus_factor(n)


def chunk_bytes(size: int, n: int) -> int:
    """One chunk of the schedule: the size split n ways."""
    return size // n


@dataclass(frozen=True, slots=True)
class Fabric:
    """What the ranks' bytes cross: each host's rate and each rack's uplink."""

    host_bps: float
    """A host's ports together, bits per second (every plane's)."""
    rack_uplink_bps: float
    """A rack's T0-T1 links together, each way."""
    racks: tuple[int, ...]
    """Each rank's rack."""

    @classmethod
    def of(cls, topo: Topology, hosts: Sequence[str]) -> Fabric:
        uplinks = topo.planes * topo.t1_per_plane * topo.fabric_link.rate_bps
        return cls(
            float(topo.planes * topo.host_link.rate_bps),
            float(uplinks),
            tuple(topo.rack_of(h) for h in hosts),
        )


def ideal_seconds(steps: Sequence[Step], chunk: int, fabric: Fabric) -> float:
    """The least time the steps' bytes take: the most loaded resource's bytes over its
    rate (module docstring)."""
    load: dict[tuple[str, int], int] = {}
    for step in steps:
        for t in step:
            for key in (("out", t.src), ("in", t.dst)):
                load[key] = load.get(key, 0) + chunk
            a, b = fabric.racks[t.src], fabric.racks[t.dst]
            if a != b:
                for key in (("up", a), ("down", b)):
                    load[key] = load.get(key, 0) + chunk
    worst = 0.0
    for (kind, _), nbytes in load.items():
        rate = fabric.host_bps if kind in ("out", "in") else fabric.rack_uplink_bps
        worst = max(worst, nbytes * 8 / rate)
    return worst


def ideal_busbw(alg: Algorithm, size: int, n: int, fabric: Fabric) -> float:
    """The busbw of the ideal time for S bytes on n ranks (GB/s)."""
    seconds = ideal_seconds(alg.schedule(n), chunk_bytes(size, n), fabric)
    return busbw(alg, n, algbw(size, seconds))
