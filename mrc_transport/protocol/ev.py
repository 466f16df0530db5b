"""The EV set of one connection: which entropy values (paths) data may be sprayed on.

Theory of operation
-------------------
A connection holds ``ev_count`` active EVs spread equally over the planes, each mapped at
random to one SRv6 path of its plane (senders do not coordinate; paper section "Paths and
entropy values"), plus ``ev_backup`` backup EVs. The random map is balanced (each path of
a plane gets the same number of EVs, +-1: ours), so spraying loads paths equally. Only
active EVs in state GOOD carry data ("usable"). Each EV moves through ``TRANSITIONS``
(state -> {input: next state}, as h11's ``_state.py``), which lists every input a state
may meet, the ones it ignores included (evidence about a path that arrives after its EV
was retired or denied): an input with no entry is a bug of the core, counted and raised
under the test suite (transitions.py).

- An ECN echo or a trimmed-packet NACK means "this path is busier than the others": the EV
  is skipped for one rotation of the active set (SKIP), then GOOD again.
- An untrimmed loss or a timeout means the path may be broken: the EV is retired at once
  (ASSUMED_BAD) and replaced by a GOOD backup EV of the same plane. Retired EVs are probed
  in the background (first after 3 RTTs, ours, counted in max(base RTT, smoothed RTT),
  see ``probe_rtt``; an unanswered probe retried after OCP's 2 ms probe timeout,
  ``probe_wait``) and readmitted after
  ``readmit_probes`` consecutive successes into the active set; if that set is full, an EV
  of the plane's most crowded path steps back to the backup set.
- ``path_fail_threshold`` retirements in a row on one SRv6 path retire every EV mapped to
  that path (ours: the core knows the map, so a dead link costs a few packets).
- A send the local stack refuses at once (ENETUNREACH: our NIC port is down) is certain
  evidence, unlike a loss: every EV leaving through that port (= plane) is retired at
  once (UNREACHABLE, reason "port") and probed like any retired EV (ours; the paper's
  "NIC port loss" recovery).
- While only ``ev_min_active`` EVs are usable, losses no longer retire EVs (the floor).
- A plane none of whose EVs is GOOD or SKIP is down (PlaneDown); its share of the traffic
  goes to the other planes because the scheduler only picks usable EVs. It is up again when
  one of its EVs is readmitted.
- DENIED is administrative: the EV is never used until allowed, then probed like a
  retired EV.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from srv6.path import SrPath

from . import events, transitions
from .config import GO_BACK_N, Config

EV_BIT = 0x8000_0000  # EVs have bit 31 set: the UDP source port is >= 32768 (protocol.md)
PLANE_SHIFT, PATH_SHIFT = 24, 16
"""An EV's bits name its path, as the paper's and OCP's generated EVs do (OCP
examples/mrc_ctl_gen_ev.md: a field per tier): bits 24-30 the plane (= the NIC port),
bits 16-23 the path's index among its plane's paths (the T0 uplink, which is the T1 in a
two-tier Clos), bits 0-15 entropy that tells the EVs of one path apart."""


def ev_value(plane: int, path: int, entropy: int) -> int:
    """The EV naming ``path`` (its index in its plane) of ``plane``, with ``entropy``."""
    return EV_BIT | (plane & 0x7F) << PLANE_SHIFT | (path & 0xFF) << PATH_SHIFT | entropy & 0xFFFF


def ev_fields(value: int) -> tuple[int, int, int]:
    """(plane, path index in the plane, entropy) that an EV's bits name."""
    return (value >> PLANE_SHIFT) & 0x7F, (value >> PATH_SHIFT) & 0xFF, value & 0xFFFF


class EvState(enum.Enum):
    """State of one EV."""

    GOOD = "good"
    SKIP = "skip"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"


class EvInput(enum.Enum):
    """What can happen to an EV."""

    ECN = "ecn"
    TRIMMED = "trimmed"
    LOSS = "loss"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    ROTATION = "rotation"
    PROBES_ENOUGH = "probes_enough"
    DENY = "deny"
    ALLOW = "allow"


class Role(enum.Enum):
    """Which set an EV belongs to."""

    ACTIVE = "active"
    BACKUP = "backup"
    RETIRED = "retired"


G, S, B, D = EvState.GOOD, EvState.SKIP, EvState.ASSUMED_BAD, EvState.DENIED
TRANSITIONS: dict[EvState, dict[EvInput, EvState]] = {
    G: {
        EvInput.ECN: S,
        EvInput.TRIMMED: S,
        EvInput.LOSS: B,
        EvInput.TIMEOUT: B,
        EvInput.UNREACHABLE: B,
        EvInput.DENY: D,
        EvInput.ALLOW: G,  # not denied: nothing to undo
    },
    S: {
        EvInput.ECN: S,  # skipped again: the rotation it waits for starts over
        EvInput.TRIMMED: S,
        EvInput.ROTATION: G,
        EvInput.LOSS: B,
        EvInput.TIMEOUT: B,
        EvInput.UNREACHABLE: B,
        EvInput.DENY: D,
        EvInput.ALLOW: S,
    },
    B: {  # retired: late evidence about the path changes nothing; probes readmit it
        EvInput.ECN: B,
        EvInput.TRIMMED: B,
        EvInput.LOSS: B,
        EvInput.TIMEOUT: B,
        EvInput.UNREACHABLE: B,
        EvInput.PROBES_ENOUGH: G,
        EvInput.DENY: D,
        EvInput.ALLOW: B,
    },
    D: {  # denied: nothing but ALLOW moves it, then it is probed like a retired EV
        EvInput.ECN: D,
        EvInput.TRIMMED: D,
        EvInput.LOSS: D,
        EvInput.TIMEOUT: D,
        EvInput.UNREACHABLE: D,
        EvInput.DENY: D,
        EvInput.ALLOW: B,
    },
}
"""The EV state table: each state's inputs and the state each leads to."""
RETIRING = frozenset({EvInput.LOSS, EvInput.TIMEOUT, EvInput.UNREACHABLE})


@dataclass(slots=True, eq=False)
class Ev:
    """One entropy value and its counters (mutable: the core updates it in place)."""

    value: int
    """The 32-bit EV."""
    plane: int
    """Plane of its path."""
    path: SrPath
    """The SRv6 path it maps to."""
    path_key: int
    """Index of ``path`` in the connection's path list."""
    state: EvState = EvState.GOOD
    """Current state."""
    role: Role = Role.ACTIVE
    """Active, backup or retired."""
    skip_until: int = 0
    """Rotation at which a SKIP ends."""
    probe_ok: int = 0
    """Consecutive successful probes while retired."""
    probe_id: int = 0
    """Outstanding probe (0: none)."""
    next_probe: float = math.inf
    """When to send (or give up on) the next probe."""
    probe_fails: int = 0
    """Unanswered probes in a row (they back off)."""
    sent: int = 0
    """Data packets sent on it."""
    acked: int = 0
    """SACKs reflecting it without ECN."""
    ecn: int = 0
    """SACKs reflecting it with ECN."""
    lost: int = 0
    """Packets sent on it declared lost."""
    retired: int = 0
    """Times retired."""
    readmitted: int = 0
    """Times readmitted."""
    skipped: int = 0
    """Times skipped."""
    probes_sent: int = 0
    """Probes sent on it."""
    probes_ok: int = 0
    """Probe replies received for it."""


@dataclass(slots=True)
class PlaneCounters:
    """Counters of one plane: the sums over its EVs plus how many are usable."""

    plane: int
    """The plane."""
    up: bool = True
    """False while the plane is down."""
    usable: int = 0
    """Active GOOD EVs."""
    retired: int = 0
    """EVs currently ASSUMED_BAD or DENIED."""
    sent: int = 0
    """Data packets sent."""
    acked: int = 0
    """Clean SACKs."""
    ecn: int = 0
    """ECN echoes."""
    lost: int = 0
    """Packets declared lost."""
    window: int = 0
    """Congestion window of the plane, bytes (the connection's with one window)."""
    marked: float = 0.0
    """Moving average of the ECN echoes among the SACKs its packets triggered."""
    evs: list[int] = field(default_factory=list)
    """Values of the plane's active EVs."""


Emit = Callable[[events.Event], None]


class EvSet:
    """Active, backup and retired EVs of one connection, and the state table's effects."""

    def __init__(
        self,
        paths: Sequence[SrPath],
        cfg: Config,
        rng: random.Random,
        conn: int,
        emit: Emit,
        ports_busy: set[int] | None = None,
    ) -> None:
        if not paths:
            raise ValueError("an EV set needs at least one path")
        self.cfg, self.rng, self.conn, self._emit = cfg, rng, conn, emit
        self.pinned = cfg.recovery == GO_BACK_N
        """Go-back-N: one plane, as a hashed flow's one port, and the EVs' states never
        move (``apply``)."""
        self.paths = _one_plane(paths, rng) if self.pinned else list(paths)
        self.planes = sorted({p.plane for p in self.paths})
        self.by_value: dict[int, Ev] = {}
        self.usable: list[Ev] = []
        self._pos: dict[int, int] = {}
        self.usable_by_plane: dict[int, list[Ev]] = {p: [] for p in self.planes}
        """The usable EVs of each plane (read only: the set keeps them)."""
        self._plane_pos: dict[int, int] = {}
        self.skipped: list[Ev] = []
        self.retired: dict[int, Ev] = {}
        self.backup: dict[int, list[Ev]] = {p: [] for p in self.planes}
        self.active_count = dict.fromkeys(self.planes, 0)
        self.quota = _spread(cfg.ev_count, self.planes)
        self.down: set[int] = set()
        self.path_fail = [0] * len(self.paths)
        self.rotation = 0
        self._sent_in_rotation = 0
        self._ctl = 0
        self.floor_held = 0
        self.illegal_transitions = 0
        """Inputs an EV's state had no transition for (transitions.py)."""
        self.base_rtt = cfg.initial_rtt
        self.srtt = cfg.initial_rtt
        """Smoothed RTT (``on_rtt_sample`` keeps both up to date)."""
        self.ports_down: dict[int, float] = {}
        """Planes whose local port refused a send -> when to probe that port next."""
        self.ports_busy: set[int] = set() if ports_busy is None else ports_busy
        """Planes whose local port queue is full right now: the host's set, shared by
        every connection of the host and kept by the IO layer through
        ``Endpoint.port_busy`` (read only here). Spraying leaves them out while another
        plane is free, as a multi-port NIC serves each port's queue at that port's own
        rate (ours; see ``skip_planes``)."""
        self.peer_plane = {p.dst.packed: p.plane for p in self.paths}
        """The peer's address on each plane -> that plane: a packet's source names the
        plane it came over."""
        self._populate()

    # -- construction -------------------------------------------------------------------
    def _populate(self) -> None:
        by_plane = {p: [i for i, sp in enumerate(self.paths) if sp.plane == p] for p in self.planes}
        # a path's index among its plane's paths, in the provider's order (T1 by T1)
        index = {key: i for keys in by_plane.values() for i, key in enumerate(keys)}
        backup_quota = _spread(self.cfg.ev_backup, self.planes)
        for plane in self.planes:
            keys = list(by_plane[plane])
            for n in range(self.quota[plane] + backup_quota[plane]):
                if n % len(keys) == 0:
                    self.rng.shuffle(keys)
                key = keys[n % len(keys)]
                ev = Ev(self._new_value(plane, index[key]), plane, self.paths[key], key)
                self.by_value[ev.value] = ev
                if n < self.quota[plane]:
                    self.active_count[plane] += 1
                    self._add_usable(ev)
                else:
                    ev.role = Role.BACKUP
                    self.backup[plane].append(ev)

    def _new_value(self, plane: int, path: int) -> int:
        """A fresh EV whose bits name ``path`` of ``plane`` (``ev_value``)."""
        while True:
            value = ev_value(plane, path, self.rng.getrandbits(16))
            if value not in self.by_value:
                return value

    def _add_usable(self, ev: Ev) -> None:
        self._pos[ev.value] = len(self.usable)
        self.usable.append(ev)
        mine = self.usable_by_plane[ev.plane]
        self._plane_pos[ev.value] = len(mine)
        mine.append(ev)

    def _remove_usable(self, ev: Ev) -> None:
        i = self._pos.pop(ev.value, None)
        if i is None:
            return
        _swap_remove(self.usable, self._pos, i, ev)
        _swap_remove(
            self.usable_by_plane[ev.plane], self._plane_pos, self._plane_pos.pop(ev.value), ev
        )

    # -- the state table ----------------------------------------------------------------
    def apply(self, ev: Ev, inp: EvInput, now: float, reason: str = "") -> None:
        """Feed one input to one EV's state machine and carry out the effects. Under
        go-back-N (Config.recovery) only the administrative inputs count: RoCE's hashed
        flow keeps its path through marks, losses and timeouts."""
        if self.pinned and inp not in (EvInput.DENY, EvInput.ALLOW):
            return
        new = TRANSITIONS[ev.state].get(inp)
        if new is None:
            self.illegal_transitions += 1
            transitions.illegal("EV", ev.state, inp)
            return
        if new is ev.state:  # ignored, but ECN or a trim on a SKIP EV restarts its skip
            if new is EvState.SKIP and inp is not EvInput.ALLOW:
                ev.skip_until = self.rotation + self.cfg.skip_rotations
            return
        floor = self.cfg.ev_min_active
        if inp in RETIRING and ev.role is Role.ACTIVE and len(self.usable) <= floor:
            self.floor_held += 1
            return
        old, ev.state = ev.state, new
        self._leave(ev, old)
        self._enter(ev, old, now, reason or inp.value)

    def _leave(self, ev: Ev, old: EvState) -> None:
        if old is EvState.GOOD:
            self._remove_usable(ev)
        elif old is EvState.SKIP:
            self.skipped.remove(ev)
        elif old is EvState.ASSUMED_BAD:
            self.retired.pop(ev.value, None)

    def _enter(self, ev: Ev, old: EvState, now: float, reason: str) -> None:
        state = ev.state
        if state is EvState.SKIP:
            ev.skip_until = self.rotation + self.cfg.skip_rotations
            ev.skipped += 1
            self.skipped.append(ev)
            self._emit(events.PathSkipped(now, self.conn, ev.value, ev.plane))
        elif state is EvState.GOOD:
            if old is EvState.ASSUMED_BAD:
                self._readmit(ev, now)
            elif ev.role is Role.ACTIVE:
                self._add_usable(ev)
        elif old is EvState.DENIED:
            ev.next_probe, ev.probe_ok, ev.probe_id = now, 0, 0
            self.retired[ev.value] = ev
        else:
            self._retire(ev, now, reason)

    def _retire(self, ev: Ev, now: float, reason: str) -> None:
        if ev.role is Role.ACTIVE:
            self.active_count[ev.plane] -= 1
            self._replace(ev.plane)
        elif ev.role is Role.BACKUP:
            self.backup[ev.plane].remove(ev)
        ev.role = Role.RETIRED
        ev.retired += 1
        if ev.state is EvState.ASSUMED_BAD:
            ev.probe_ok, ev.probe_id, ev.probe_fails = 0, 0, 0
            ev.next_probe = now + self.cfg.probe_after_rtts * self.probe_rtt
            self.retired[ev.value] = ev
        self._emit(events.PathRetired(now, self.conn, ev.value, ev.plane, reason))
        self._check_down(ev.plane, now)
        if reason in ("loss", "timeout", "return path"):
            self._path_failed(ev.path_key, now)

    def _replace(self, plane: int) -> None:
        spares = [e for e in self.backup[plane] if e.state is EvState.GOOD]
        fresh = [e for e in spares if self.path_fail[e.path_key] == 0]
        pool = fresh or spares
        if not pool:
            return
        ev = pool[0]
        self.backup[plane].remove(ev)
        ev.role = Role.ACTIVE
        self.active_count[plane] += 1
        self._add_usable(ev)

    def _readmit(self, ev: Ev, now: float) -> None:
        ev.readmitted += 1
        ev.next_probe, ev.probe_id = math.inf, 0
        self.path_fail[ev.path_key] = 0
        if self.active_count[ev.plane] >= self.quota[ev.plane]:
            self._demote_one(ev.plane)
        ev.role = Role.ACTIVE
        self.active_count[ev.plane] += 1
        self._add_usable(ev)
        self._emit(events.PathReadmitted(now, self.conn, ev.value, ev.plane))
        if ev.plane in self.down:
            self.down.discard(ev.plane)
            self._emit(events.PlaneUp(now, self.conn, ev.plane))

    def _demote_one(self, plane: int) -> None:
        """Make room in a full active set: the usable EV of the plane whose path holds the
        most active EVs goes back to the backup set, so a readmitted path gets its share
        back (ours)."""
        mine = [e for e in self.usable if e.plane == plane]
        if not mine:
            return
        per_path: dict[int, int] = {}
        for e in mine:
            per_path[e.path_key] = per_path.get(e.path_key, 0) + 1
        ev = max(mine, key=lambda e: per_path[e.path_key])
        self._remove_usable(ev)
        self.active_count[plane] -= 1
        ev.role = Role.BACKUP
        self.backup[plane].append(ev)

    def _path_failed(self, key: int, now: float) -> None:
        self.path_fail[key] += 1
        if self.path_fail[key] < self.cfg.path_fail_threshold:
            return
        for other in list(self.by_value.values()):
            if other.path_key == key and other.state in (EvState.GOOD, EvState.SKIP):
                self.apply(other, EvInput.TIMEOUT, now, "path")

    def _check_down(self, plane: int, now: float) -> None:
        if plane in self.down:
            return
        alive = any(
            e.plane == plane and e.role is not Role.RETIRED and e.state is not EvState.DENIED
            for e in self.by_value.values()
        )
        if not alive:
            self.down.add(plane)
            self._emit(events.PlaneDown(now, self.conn, plane))

    # -- inputs from the connection -----------------------------------------------------
    def usable_values(self) -> dict[int, int]:
        """Usable EV values (a mapping: ``in`` is O(1))."""
        return self._pos

    def on_sent(self, ev: Ev) -> None:
        """Count a data packet on ``ev``; end the rotation after one pass over the set."""
        ev.sent += 1
        self._sent_in_rotation += 1
        if self._sent_in_rotation >= len(self.usable) + len(self.skipped):
            self._sent_in_rotation = 0
            self.rotation += 1
            for e in [e for e in self.skipped if e.skip_until <= self.rotation]:
                self.apply(e, EvInput.ROTATION, 0.0)

    def on_clean_ack(self, ev: Ev) -> None:
        """A SACK reflected ``ev`` without ECN: its path works."""
        ev.acked += 1
        self.path_fail[ev.path_key] = 0

    def on_ecn_echo(self, ev: Ev, now: float) -> None:
        """A SACK reflected ``ev`` with an ECN echo: its path is busier than the others."""
        ev.ecn += 1
        self._emit(events.EcnMarked(now, self.conn, ev.value))
        self.apply(ev, EvInput.ECN, now)

    def on_lost(self, ev: Ev, why: EvInput, now: float) -> None:
        """A packet sent on ``ev`` was declared lost; ``why`` is the state table's input."""
        ev.lost += 1
        self.apply(ev, why, now)

    def on_rtt_sample(self, base_rtt: float, srtt: float) -> None:
        """The sender's least and smoothed RTTs after a new sample (rtt.py)."""
        self.base_rtt, self.srtt = base_rtt, srtt

    def port_down(self, plane: int, now: float, reason: str = "port") -> None:
        """The local port of ``plane`` is down (a NIC port is a plane, srv6/path.py), or
        the peer's (``reason`` "peer port", its SACK said so): retire every EV of the
        plane, backups first so none is promoted only to be retired."""
        if plane in self.ports_down:
            return
        self.ports_down[plane] = now + self.cfg.probe_after_rtts * self.probe_rtt
        mine = [
            e
            for e in self.by_value.values()
            if e.plane == plane and e.state in (EvState.GOOD, EvState.SKIP)
        ]
        mine.sort(key=lambda e: e.role is Role.ACTIVE)
        for ev in mine:
            self.apply(ev, EvInput.UNREACHABLE, now, reason)

    def port_up(self, plane: int, now: float) -> None:
        """The local port of ``plane`` is back (the host said so): probe it now rather
        than at its next retry."""
        if plane in self.ports_down:
            self.ports_down[plane] = now

    def deny(self, value: int, now: float) -> None:
        """Administratively stop using an EV."""
        ev = self.by_value.get(value)
        if ev is not None:
            self.apply(ev, EvInput.DENY, now, "denied")

    def allow(self, value: int, now: float) -> None:
        """Undo ``deny``: the EV is probed and readmitted like a retired one."""
        ev = self.by_value.get(value)
        if ev is not None:
            self.apply(ev, EvInput.ALLOW, now)

    # -- probes -------------------------------------------------------------------------
    @property
    def probe_rtt(self) -> float:
        """The RTT probe timers count in: htsim's base RTT, or the smoothed RTT if larger.

        A NIC's RTT hardly varies; a userspace stack's smoothed RTT is several times its
        minimum (scheduling, queues), so a reply due within a few *base* RTTs comes back
        after the next probe went out, counts as a failure, and 80 retired EVs then probe
        each other's replies into a queue: a probe storm that never readmits (seen after a
        port restore; docs/measurements.md; ours)."""
        return max(self.base_rtt, self.srtt)

    @property
    def probe_wait(self) -> float:
        """How long a probe's reply is waited for: OCP's EV probe timeout (2 ms), or two
        probe RTTs where a userspace RTT is longer (ours)."""
        return max(self.cfg.probe_timeout, 2 * self.probe_rtt)

    def next_probe_time(self) -> float:
        """Earliest probe deadline of a retired EV or a dead port (inf: none)."""
        down, t = self.ports_down, math.inf
        for e in self.retired.values():  # loops: asked at every timer decision
            if e.next_probe < t and e.plane not in down:
                t = e.next_probe
        for when in down.values():
            t = min(t, when)
        return t

    def due_probes(self, now: float) -> list[Ev]:
        """Retired EVs whose probe is due; an unanswered previous probe counts as failed.

        Behind a port that is down every EV fails alike, so that port gets one probe
        every ``probe_wait`` (on its EVs in turn) instead of one per EV:
        64 EVs probed into a dead port cost a refused send each (ours)."""
        down = self.ports_down
        due = [e for e in self.retired.values() if e.next_probe <= now and e.plane not in down]
        for plane, t in down.items():
            if t > now:
                continue
            down[plane] = now + self.probe_wait
            behind = [e for e in self.retired.values() if e.plane == plane]
            if behind:
                due.append(min(behind, key=lambda e: e.next_probe))
        for ev in due:
            if ev.probe_id:
                ev.probe_ok = 0
                ev.probe_fails += 1
            # retried after the probe timeout, doubled per unanswered probe (up to 8x,
            # ours) so a long-dead path costs less
            backoff = 1 << min(ev.probe_fails, 3)
            ev.next_probe = now + self.probe_wait * backoff
        return due

    def probe_ok(self, ev: Ev, now: float, clean: bool = True) -> None:
        """A probe reply came back for ``ev``; ``clean``: its probe arrived unmarked. A
        marked one shows the path works but is busy: it readmits nothing yet."""
        ev.probes_ok += 1
        ev.probe_id = 0
        ev.probe_fails = 0
        if self.ports_down.pop(ev.plane, None) is not None:
            # the port is back: probe every EV behind it now
            for e in self.retired.values():
                if e.plane == ev.plane and e is not ev:
                    e.next_probe, e.probe_id, e.probe_fails = now, 0, 0
        if ev.state is not EvState.ASSUMED_BAD:
            return
        ev.probe_ok = ev.probe_ok + 1 if clean else 0
        if ev.probe_ok >= self.cfg.readmit_probes:
            self.apply(ev, EvInput.PROBES_ENOUGH, now)
        else:
            ev.next_probe = now + self.cfg.probe_next_rtts * self.probe_rtt

    # -- picks and views ----------------------------------------------------------------
    def fallback(self) -> Ev:
        """An EV to use when none is usable: a skipped one, else any not denied."""
        if self.skipped:
            return self.skipped[self.rng.randrange(len(self.skipped))]
        pool = [e for e in self.by_value.values() if e.state is not EvState.DENIED]
        pool = pool or list(self.by_value.values())
        return pool[self.rng.randrange(len(pool))]

    def skip_planes(self, full: Collection[int] = ()) -> Collection[int]:
        """Planes a pick leaves out: ``full`` (those whose congestion window has no room
        for the packet: the sender's word, cc/planes.py) and those whose local port is
        busy, as long as another plane with usable EVs is neither (the IO layer queues per
        port, so nothing is lost by picking a busy one when all are). Cheap in the common
        case: no busy port, no allocation.

        Without this, a port shared with other traffic drains slower than the others, and
        spraying by EV count makes every port wait for it: the connection gets the number
        of ports times the shared port's leftover rate instead of the sum of the ports'
        leftover rates (ours; docs/measurements.md, "The sender's design figures")."""
        busy = self.ports_busy
        if not busy:
            return full
        usable = self.usable_by_plane
        if any(usable[p] and p not in full and p not in busy for p in self.planes):
            return busy.union(full)
        return full

    def usable_planes(self, full: Collection[int] = ()) -> list[int]:
        """Planes with usable EVs that a pick may take (``skip_planes``)."""
        usable, skip = self.usable_by_plane, self.skip_planes(full)
        return [p for p in self.planes if usable[p] and p not in skip]

    def usable_in(self, plane: int) -> list[Ev]:
        """The usable EVs of ``plane`` (the caller must not change the list)."""
        return self.usable_by_plane.get(plane, [])

    def control_ev(self) -> Ev:
        """EV for a control packet that answers nothing (a window probe) or goes again
        after a refused send: the usable ones in turn. Acknowledgements, replies and the
        handshake go on the reverse EV set (reverse.py)."""
        if not self.usable:
            return self.fallback()
        self._ctl = (self._ctl + 1) % len(self.usable)
        return self.usable[self._ctl]

    def plane_counters(self) -> dict[int, PlaneCounters]:
        """Per-plane sums, cheap enough for a live view."""
        out = {p: PlaneCounters(p, up=p not in self.down) for p in self.planes}
        for e in self.by_value.values():
            pc = out[e.plane]
            pc.sent += e.sent
            pc.acked += e.acked
            pc.ecn += e.ecn
            pc.lost += e.lost
            if e.role is Role.RETIRED:
                pc.retired += 1
            elif e.role is Role.ACTIVE:
                pc.evs.append(e.value)
        for e in self.usable:
            out[e.plane].usable += 1
        return out


def _swap_remove(items: list[Ev], pos: dict[int, int], i: int, ev: Ev) -> None:
    """Remove ``ev`` (at index ``i``) in O(1): the last item takes its place."""
    last = items.pop()
    if last is not ev:
        items[i] = last
        pos[last.value] = i


def _one_plane(paths: Sequence[SrPath], rng: random.Random) -> list[SrPath]:
    """The paths of one plane, picked at random: a RoCE flow hashed onto one NIC port."""
    plane = rng.choice(sorted({p.plane for p in paths}))
    return [p for p in paths if p.plane == plane]


def _spread(total: int, planes: Sequence[int]) -> dict[int, int]:
    """``total`` split as equally as possible over ``planes`` (at least one each if any)."""
    n = len(planes)
    least = 1 if total else 0
    return {p: max(least, total // n + (1 if i < total % n else 0)) for i, p in enumerate(planes)}
