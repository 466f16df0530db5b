"""The reverse EV set: the few EVs a connection's acknowledgements travel on.

Theory of operation
-------------------
The paper keeps, on the receiving side, a small reverse EV set, at least one EV per
plane, for its acknowledgements, and probes a random one of them when idle
(mrc-protocol-notes.md, "Reliability"; paper sections 2.1-2.4). Here the set holds
``Config.reverse_evs`` usable EVs of each plane, drawn from the connection's own EV set
(its EVs name its paths toward the peer, the way acknowledgements go). Every SACK, NACK
and probe reply still goes back on the plane its trigger came over, now on that plane's
reverse EVs in turn (``pick``).

A return path can die while the connection only receives: no data of its own crosses it,
so no loss retires its EV. So while the connection has no data in flight of its own (idle)
and acknowledges something, one reverse EV, at random, is probed each ``probe_wait`` (OCP's
2 ms EV probe timeout, or two probe RTTs if longer). The probe goes out on that EV; the
peer's reply comes back on the peer's own EVs, so a reply proves the return path.

A probe is lost once a probe of the same plane sent at least half a round after it was
answered (RACK's rule, RFC 8985), or once it waited ``PATIENCE_ROUNDS`` rounds and twice
the time the latest reply took, whichever is longer (at most ``UNANSWERED_ROUNDS``
rounds). A reply late behind a queue is not a dead path: in an
incast every reply waits in its plane's last hop into this host, often longer than a
round, and judging each probe by the next round retired a healthy return path every
round. Its EV is then retired as a timeout would retire it (reason "return path",
ASSUMED_BAD in the EV set, probed in the background and readmitted by one
clean reply like any retired EV) and the set takes another usable EV of that plane,
preferring one on another SRv6 path. The interval, the rules and the sizes are ours: the
paper gives none. A connection that also sends data leaves its return paths to its data's
losses, which retire the same EVs.
"""

from __future__ import annotations

import math
import random

from . import events
from .counters import ConnCounters
from .ev import Emit, Ev, EvInput, EvSet

PATIENCE_ROUNDS = 3
"""Rounds an unanswered probe waits at least before it is taken for lost (ours)."""
UNANSWERED_ROUNDS = 25
"""Rounds after which an unanswered probe is lost however slow its plane's replies were
(ours: a quarter second at the default interval, past the deepest queue a lab port holds,
256 KB at 20 Mbit/s or ~105 ms)."""


class ReverseEvs:
    """The reverse EV set of one connection, and its idle probing."""

    def __init__(
        self,
        evs: EvSet,
        per_plane: int,
        rng: random.Random,
        counters: ConnCounters,
        emit: Emit,
    ) -> None:
        self.evs, self.per_plane, self.rng = evs, max(1, per_plane), rng
        self.counters, self._emit = counters, emit
        self.now = 0.0
        """The ``now`` of the connection's latest input (it sets it): a member's choice is
        dated by it, since ``pick`` is asked from deep inside one."""
        self.members: dict[int, list[Ev]] = {p: [] for p in evs.planes}
        """Each plane's reverse EVs (kept usable by ``members_of``)."""
        self._turn = dict.fromkeys(evs.planes, 0)
        self._any = 0
        self.next_round = 0.0
        """When the next round falls due (once something was acknowledged)."""
        self.quiet = True
        """Nothing was acknowledged in the last round: the next acknowledgement starts the
        rounds' clock again, and the first probe goes a round after it."""
        self.outstanding: list[tuple[Ev, float]] = []
        """The unanswered probes, oldest first: each one's EV and when it went."""
        self.reply_time = 0.0
        """How long the latest probe reply took (any probe of the connection's: the
        reflected timestamp dates it, so a reply to a probe already judged lost counts)."""
        self.acks = 0
        """Acknowledgements sent since the last round: a quiet connection probes nothing."""

    def members_of(self, plane: int) -> list[Ev]:
        """The reverse EVs of ``plane``: those no longer usable leave, and usable EVs of
        the plane fill the set again, on SRv6 paths no member holds and no recent
        retirement named where there are such (empty: the plane has no usable EV)."""
        usable = self.evs.usable_values()
        mine = [e for e in self.members.get(plane, []) if e.value in usable]
        if len(mine) < self.per_plane:
            mine += self._fresh(plane, mine, self.per_plane - len(mine))
        self.members[plane] = mine
        return mine

    def _fresh(self, plane: int, have: list[Ev], n: int) -> list[Ev]:
        """Up to ``n`` usable EVs of ``plane`` not in ``have``, at random, each on the
        least suspect path left: one no member holds and no recent retirement named."""
        fail = self.evs.path_fail
        taken = {e.path_key for e in have}
        pool = [e for e in self.evs.usable_in(plane) if e not in have]
        self.rng.shuffle(pool)
        out: list[Ev] = []
        while pool and len(out) < n:
            ev = min(pool, key=lambda e: (fail[e.path_key] > 0, e.path_key in taken))
            pool.remove(ev)
            out.append(ev)
            taken.add(ev.path_key)
            self._emit(events.ReverseEvChosen(self.now, self.evs.conn, ev.value, plane))
        return out

    def pick(self, plane: int | None) -> Ev:
        """The EV for an acknowledgement or reply that goes back on ``plane``: its
        reverse EVs in turn; without one (no plane known, or none usable in it) any
        plane's in turn, and the connection's fallback when nothing is usable."""
        if plane is not None:
            mine = self.members_of(plane)
            if mine:
                i = self._turn[plane] = (self._turn.get(plane, 0) + 1) % len(mine)
                return mine[i]
        every = [e for p in self.evs.planes for e in self.members_of(p)]
        if not every:
            return self.evs.fallback()
        self._any = (self._any + 1) % len(every)
        return every[self._any]

    def note_ack(self) -> None:
        """An acknowledgement (SACK or NACK) was sent: arm the idle probing."""
        self.acks += 1

    @property
    def interval(self) -> float:
        """Time between rounds: ``Config.reverse_probe_interval``, and at least the probe
        timeout, so a probe is judged a whole timeout after it went."""
        return max(self.evs.cfg.reverse_probe_interval, self.evs.probe_wait)

    def timer(self) -> float:
        """When ``due`` must run (inf: nothing acknowledged and no probe outstanding)."""
        return self.next_round if self.acks or self.outstanding else math.inf

    def due(self, now: float, idle: bool) -> Ev | None:
        """The round at ``now`` (if due): retire and replace the EV whose probe went
        unanswered, then, when ``idle`` (no data of our own in flight) and something was
        acknowledged since the last round, the reverse EV to probe now, at random."""
        if now < self.next_round:
            return None
        self.next_round = now + self.interval
        if self.quiet:  # acknowledging again after a quiet spell: probe a round from now
            self.quiet = False
            return None
        since = now - self.patience
        lost = [ev for ev, t in self.outstanding if t <= since]
        if lost:
            self.outstanding = [(ev, t) for ev, t in self.outstanding if ev not in lost]
            for ev in lost:
                self._unanswered(ev, now)
        acked, self.acks = self.acks, 0
        self.quiet = not acked
        if not idle or not acked or self.evs.pinned:
            return None
        waiting = {ev.value for ev, _ in self.outstanding}
        every = [e for p in self.evs.planes for e in self.members_of(p) if e.value not in waiting]
        if not every:
            return None
        probe = every[self.rng.randrange(len(every))]
        self.outstanding.append((probe, now))
        self.counters.reverse_probes += 1
        return probe

    def probe_ok(self, value: int, now: float, sent: float) -> None:
        """A probe reply came back for the EV ``value``: its return path works, and a probe
        of the same plane sent half a round or more before it and still unanswered was lost
        (RACK's rule). Only the same plane's: each plane's replies wait in that plane's last
        hop into this host, whose queues differ by more than a round in an incast. ``sent``:
        when the probe went, from the timestamp its reply reflects."""
        self.reply_time = now - sent
        hit = next(((ev, t) for ev, t in self.outstanding if ev.value == value), None)
        if hit is None:
            return
        plane, t_probe = hit[0].plane, hit[1]
        before = t_probe - self.interval / 2
        late = [ev for ev, t in self.outstanding if ev.plane == plane and t <= before]
        self.outstanding = [
            (ev, t) for ev, t in self.outstanding if ev.value != value and ev not in late
        ]
        for ev in late:
            self._unanswered(ev, now)

    @property
    def patience(self) -> float:
        """How long a probe may go unanswered before it is lost."""
        slowest = UNANSWERED_ROUNDS * self.interval
        return min(slowest, max(PATIENCE_ROUNDS * self.interval, 2 * self.reply_time))

    def _unanswered(self, ev: Ev, now: float) -> None:
        """``ev``'s probe was lost: its return path is taken for dead. It is retired as a
        timeout would (if the floor allows) and leaves the set; the next pick of its plane
        takes another EV."""
        self.counters.reverse_retired += 1
        self.evs.apply(ev, EvInput.TIMEOUT, now, "return path")
        members = self.members.get(ev.plane, [])
        if ev in members:
            members.remove(ev)
            members += self._fresh(ev.plane, [*members, ev], 1)
