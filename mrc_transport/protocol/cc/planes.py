"""Congestion windows per plane (ours), or one for the whole connection (UET NSCC).

UET runs one NSCC window per connection, over every path it sprays on. With multi-plane
NICs each plane is a separate network that shares nothing with the others but the two
hosts, and each leaves the NIC through a port of its own: a queue on one plane (another
flow on the same port, an incast at one last hop) says nothing about the others. With
one window, that plane's delay and losses shrank the window of the whole connection (in
the failover demo, a TCP flow on one plane of four held MRC well below a fixed window;
docs/measurements.md). So by default every plane
runs its own instance of the algorithm, sized for its port (the NIC rate over the
planes), fed with the bytes acked on it and the RTT and ECN echo of packets sent on it.
``cc_scope = "connection"`` keeps UET's single window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Final

from ..config import Config
from . import make_cc
from .base import CongestionControl
from .nscc import Nscc

SCOPES = ("plane", "connection")
ALPHA_GAIN = 1 / 16  # DCTCP's g (RFC 8257 section 4.2)
ALPHA_PERSISTENT = 0.5  # marked SACKs on a plane above which no EV of it is clean (ours)
NONE_FULL: Final[frozenset[int]] = frozenset()  # ``full`` when every plane has room


class PlaneWindows:
    """The sender's windows: bytes in flight and the algorithm's window, per plane."""

    def __init__(self, cfg: Config, planes: Sequence[int]) -> None:
        if cfg.cc_scope not in SCOPES:
            raise ValueError(f"cc_scope must be one of {SCOPES}, not {cfg.cc_scope!r}")
        self.per_plane = cfg.cc_scope == "plane" and len(planes) > 1
        if self.per_plane:
            share = _share(cfg, len(planes))
            self.cc: dict[int, CongestionControl] = {p: make_cc(share) for p in planes}
        else:
            one = make_cc(cfg)
            self.cc = dict.fromkeys(planes, one)
        self._flight = {p: _Flight() for p in planes}
        """Bytes in flight per plane, each a counter object: compiled, its attribute is a C
        integer, where a dict of ints boxes every update (two per packet)."""
        self.total = 0
        """Bytes in flight over all planes."""
        self._base_rtt = math.inf
        self.alpha = dict.fromkeys(planes, 0.0)
        """Per plane: moving average of the fraction of its SACKs that echoed ECN."""

    @property
    def in_flight(self) -> dict[int, int]:
        """Bytes in flight per plane."""
        return {p: f.bytes for p, f in self._flight.items()}

    @property
    def window(self) -> int:
        """The connection's window: the sum over planes (or the one window)."""
        total = 0
        for cc in self._distinct():
            total += cc.window
        return total

    def max_window(self) -> int:
        """The largest the connection's window would open to."""
        total = 0
        for cc in self._distinct():
            total += cc.max_window()
        return total

    def _distinct(self) -> Sequence[CongestionControl]:
        return list(self.cc.values()) if self.per_plane else [next(iter(self.cc.values()))]

    # -- the window test ------------------------------------------------------------------
    def room(self, plane: int, size: int) -> bool:
        """Whether ``size`` more bytes may go out on ``plane``."""
        if self.per_plane:
            return self.cc[plane].can_send(self._flight[plane].bytes, size)
        return self.cc[plane].can_send(self.total, size)

    def full(self, planes: Sequence[int], size: int) -> AbstractSet[int]:
        """The planes of ``planes`` that have no room for ``size`` more bytes: a resend's
        window test (a burst of new data keeps one ``headroom`` for all its packets)."""
        return self.headroom(planes).full(size)

    def headroom(self, planes: Sequence[int]) -> Headroom:
        """The windows' headroom on ``planes`` for one burst (``Headroom``)."""
        if self.per_plane:
            cc, flight = self.cc, self._flight
            return Headroom(self, planes, [cc[p].headroom(flight[p].bytes) for p in planes])
        return Headroom(self, planes, [self.cc[planes[0]].headroom(self.total)])

    def sent(self, plane: int, n: int) -> None:
        """``n`` bytes went out on ``plane``."""
        self._flight[plane].bytes += n
        self.total += n

    def gone(self, plane: int, n: int) -> None:
        """``n`` bytes that went out on ``plane`` left the flight (acked or lost)."""
        self._flight[plane].bytes -= n
        self.total -= n

    def delivered(self, plane: int, n: int, in_flight: bool) -> None:
        """A packet of ``n`` bytes sent on ``plane`` was acknowledged; it left the flight
        now if ``in_flight`` (not if declared lost before). Its bytes (at least 1) count
        for the SACK being read, until ``take_acked``."""
        f = self._flight[plane]
        if in_flight:
            f.bytes -= n
            self.total -= n
        f.acked += n or 1

    def take_acked(self) -> dict[int, int]:
        """The bytes ``delivered`` per plane since the last call, for ``on_sack``: summed
        in counter objects rather than in a dict per packet (compiled, a dict boxes
        every update)."""
        acked = {}
        for p, f in self._flight.items():
            if f.acked:
                acked[p] = f.acked
                f.acked = 0
        return acked

    # -- feedback -------------------------------------------------------------------------
    def on_sack(
        self,
        acked: Mapping[int, int],
        plane: int | None,
        rtt: float | None,
        ecn: bool,
        now: float,
    ) -> None:
        """One SACK: ``acked`` bytes per plane; ``rtt`` and ``ecn`` are those of the packet
        that triggered it, sent on ``plane`` (None: unknown EV)."""
        if not self.per_plane:
            total = sum(acked.values())
            if total or ecn:
                one = next(iter(self.cc.values()))
                one.flight = self.total
                one.on_ack(total, rtt, ecn, now)
            return
        for p, cc in self.cc.items():
            n = acked.get(p, 0)
            mine = p == plane
            if n or (mine and ecn):
                cc.flight = self._flight[p].bytes
                cc.on_ack(n, rtt if mine else None, ecn and mine, now)
        if plane is not None:
            self._marks(plane, ecn, now)
        if rtt is not None and plane is not None:
            self._share_base_rtt(self.cc[plane])

    def _marks(self, plane: int, ecn: bool, now: float) -> None:
        """NSCC answers a mark below the delay target by switching EVs only; when most of
        a plane's SACKs echo ECN, every path of the plane is marked and the switch finds
        none clean, so that plane's window decreases (ours: a mark means "busier than
        the others", and the other planes are the others)."""
        a = self.alpha[plane] = (1 - ALPHA_GAIN) * self.alpha[plane] + ALPHA_GAIN * ecn
        if ecn and a > ALPHA_PERSISTENT:
            self.cc[plane].on_plane_marked(a, now)

    def _share_base_rtt(self, sampled: CongestionControl | None = None) -> None:
        """One base RTT for every plane: the least any plane saw.

        The planes are copies of one topology, so their base RTTs are equal (htsim takes
        it from the topology); measured per plane, a plane whose port already had a
        standing queue when the connection started (the demo's TCP flow) would count that
        queue as base and never see it as delay (ours). ``sampled`` just took an RTT
        sample: only it can differ from the shared value (O(1) per SACK); None: all."""
        if isinstance(sampled, Nscc):
            if sampled.base_rtt == self._base_rtt:
                return
            if sampled.base_rtt > self._base_rtt:  # its first sample replaced the shared one
                sampled.base_rtt = self._base_rtt
                return
        nscc = [cc for cc in self.cc.values() if isinstance(cc, Nscc)]
        if nscc:
            base = self._base_rtt = min(cc.base_rtt for cc in nscc)
            for cc in nscc:
                cc.base_rtt = base

    def on_rtt_sample(self, rtt: float) -> None:
        """The handshake's RTT, for every plane."""
        for cc in self._distinct():
            cc.on_rtt_sample(rtt)
        self._share_base_rtt()

    def on_loss(self, plane: int, lost: int, now: float) -> None:
        """``lost`` bytes sent on ``plane`` were declared lost."""
        self.cc[plane].on_loss(lost, now)

    def on_nack(self, plane: int, nacked: int, now: float) -> None:
        """``nacked`` bytes sent on ``plane`` were trimmed."""
        cc = self.cc[plane]
        cc.flight = self._flight[plane].bytes if self.per_plane else self.total
        cc.on_nack(nacked, now)

    def on_penalty(self, acked: Mapping[int, int], penalty: int, restore: bool) -> None:
        """The receiver's window penalty for the bytes ``acked`` per plane (each plane's
        window takes its own share), or its end (``restore``)."""
        if not self.per_plane:
            next(iter(self.cc.values())).on_penalty(sum(acked.values()), penalty, restore)
            return
        for p, cc in self.cc.items():
            cc.on_penalty(acked.get(p, 0), penalty, restore)

    def windows(self) -> dict[int, int]:
        """Each plane's window, bytes (the same one on every plane with one window)."""
        return {p: cc.window for p, cc in self.cc.items()}


class Headroom:
    """The bytes each plane's window still takes, read once for a burst of new data and
    then kept here: within a burst nothing but its own packets changes the windows (no
    SACK is read meanwhile), so ``full`` answers ``PlaneWindows.full`` without asking
    each plane's algorithm before every packet. ``book`` hands the burst's bytes to the
    windows at its end (issue 20: the core works per burst, not per packet)."""

    def __init__(self, windows: PlaneWindows, planes: Sequence[int], left: list[int]) -> None:
        self._windows = windows
        rooms = [_Room(n) for n in left]  # one: a window for the whole connection
        self._planes = [_PlaneSent(p, rooms[i % len(rooms)]) for i, p in enumerate(planes)]
        self._by_plane = {ps.plane: ps for ps in self._planes}

    def full(self, size: int) -> AbstractSet[int]:
        """The planes without room for ``size`` more bytes (``PlaneWindows.full``)."""
        full: set[int] | None = None
        for ps in self._planes:
            if size > ps.room.left:
                if full is None:
                    full = set()
                full.add(ps.plane)
        return NONE_FULL if full is None else full

    def take(self, plane: int, size: int) -> None:
        """``size`` bytes of the burst go out on ``plane``."""
        ps = self._by_plane[plane]
        ps.sent += size
        ps.room.left -= size

    def book(self) -> None:
        """Count the burst's bytes as in flight (``PlaneWindows.sent``)."""
        for ps in self._planes:
            if ps.sent:
                self._windows.sent(ps.plane, ps.sent)


class _Flight:
    """A plane's bytes in flight, and those acknowledged by the SACK being read."""

    def __init__(self) -> None:
        self.bytes = 0
        self.acked = 0


class _Room:
    """Bytes a window still takes in a burst. Counters in objects rather than lists of
    ints: compiled, an attribute is a C integer, where a list boxes every update."""

    def __init__(self, left: int) -> None:
        self.left = left


class _PlaneSent:
    """A plane's bytes sent in a burst, and its window's room (shared by every plane
    when the connection has one window)."""

    def __init__(self, plane: int, room: _Room) -> None:
        self.plane = plane
        self.room = room
        self.sent = 0


def _share(cfg: Config, planes: int) -> Config:
    """``cfg`` for one plane of ``planes``: its port's rate and its part of the windows."""
    return replace(
        cfg,
        nic_rate_bps=cfg.nic_rate_bps / planes,
        fixed_window=max(cfg.fixed_window // planes, cfg.mss),
        initial_window=max(cfg.initial_window // planes, cfg.mss),
    )
