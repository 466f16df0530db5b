"""Bursts paced at the NIC rate (``Config.nic_rate_bps``), as a NIC would send them.

The rate is shared by the ports that are not busy (``Backlog``): while one port drains,
the others carry the connection at their own rate, not the whole NIC's. A burst may run
ahead by ``PACE_BURST`` packets per port or one ``TIMER_TICK``, whichever is more, since
the loop cannot wait less than a tick (ours).
"""

from __future__ import annotations

import math

from mrc_transport.io.tuning import PACE_BURST, TIMER_TICK


class Pacer:
    """When the next burst may leave, and whether the core has one waiting."""

    def __init__(self, nic_rate_bps: float, mss: int) -> None:
        self.byte_time = 8 / nic_rate_bps
        """Seconds per byte at the NIC rate."""
        self.next_at = -math.inf
        """Monotonic time the next burst may leave."""
        self.pending = False
        """The last pump left the core with more to send (held back or a full burst):
        the loop wakes at ``next_at`` for it."""
        self._mss = mss

    def sent(self, now: float, nbytes: int, ports: int, busy: int) -> None:
        """A burst of ``nbytes`` left at ``now`` over ``ports`` ports, ``busy`` of them
        full: the next one waits its time at their free share of the rate."""
        free = max(ports - busy, 1)
        byte_time = self.byte_time * max(ports, 1) / free
        slack = max(PACE_BURST * ports * self._mss * self.byte_time, TIMER_TICK)
        self.next_at = max(self.next_at, now - slack) + nbytes * byte_time
