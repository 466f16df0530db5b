"""The congestion control interface: a window in bytes, moved by SACKs, losses and NACKs."""

from __future__ import annotations

from typing import ClassVar

from mypy_extensions import mypyc_attr

from ..config import Config


@mypyc_attr(allow_interpreted_subclasses=True)  # a plug-in needs no compiler
class CongestionControl:
    """Base class (model: aioquic quic/congestion/base.py)."""

    name: ClassVar[str] = ""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.window = cfg.fixed_window
        """Bytes the sender may have in flight."""
        self.flight = 0
        """Bytes in flight under this window, as the windows last set it before a call
        (NSCC's quick adapt ignores the feedback of the bytes then in flight)."""

    def max_window(self) -> int:
        """The largest window the algorithm would open to, bytes."""
        return self.window

    def on_ack(self, acked: int, rtt: float | None, ecn: bool, now: float) -> None:
        """``acked`` bytes newly acknowledged; ``rtt`` of the reflected packet, if known."""

    def on_rtt_sample(self, rtt: float) -> None:
        """An RTT measured outside SACKs (the SETUP handshake)."""

    def on_loss(self, lost: int, now: float) -> None:
        """``lost`` bytes declared lost (untrimmed loss or timeout)."""

    def on_nack(self, nacked: int, now: float) -> None:
        """``nacked`` bytes were trimmed and NACKed."""

    def on_penalty(self, acked: int, penalty: int, restore: bool) -> None:
        """The receiver's SACK carried a window penalty (0-127) for ``acked`` bytes, or
        ``restore``: its penalty is over (RESTORE_WINDOW)."""

    def on_plane_marked(self, alpha: float, now: float) -> None:
        """ECN echoes keep coming for a fraction ``alpha`` of the SACKs on this window's
        plane, so switching EVs inside the plane finds no clean path (cc/planes.py)."""

    def can_send(self, in_flight: int, size: int) -> bool:
        """Whether ``size`` more bytes fit in the window."""
        return size <= self.headroom(in_flight)

    def headroom(self, in_flight: int) -> int:
        """The most bytes that may go out on top of ``in_flight`` (negative: none); the
        window is at least one MSS, so a packet always goes when nothing is in flight."""
        return max(self.window, self.cfg.mss) - in_flight
