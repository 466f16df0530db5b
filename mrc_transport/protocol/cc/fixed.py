"""A fixed window: no congestion control, for comparison and for tests."""

from __future__ import annotations

from .base import CongestionControl


class FixedWindow(CongestionControl):
    """``Config.fixed_window`` bytes in flight, whatever happens."""

    name = "fixed"
