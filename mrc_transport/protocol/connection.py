"""One MRC connection: a sans-IO state machine in the style of aioquic's QuicConnection.

It does no IO and reads no clock. The owner feeds it packets with ``receive(packet, now)``,
asks for packets with ``datagrams_to_send(now)``, runs ``handle_timer(now)`` when
``get_timer()`` says, and drains ``next_event()``. ``receive`` is the one way in: the
endpoint hands it the bulk of its traffic, a burst's data packets and SACKs, as the
burst decoder's records (``receive_records``, without an object per packet), which is
also where ``receive`` sends a data packet or SACK, as a burst of one.

Theory of operation (connection states)
---------------------------------------
The client sends SETUP (dst_conn 0, its id in src_conn, its initial PSN and window) and
retransmits it with exponential backoff; the server answers every SETUP with SETUP_ACK and
is established at once; the client is established on SETUP_ACK. ``close()`` waits until
every message sent is acknowledged, then sends CLOSE with the final PSN (retransmitted with
backoff) and ends on CLOSE_ACK. A CLOSE is acknowledged only once every PSN below its
final PSN arrived, so no data is lost by a clean close. CLOSE ends both directions.
``CONN_TRANSITIONS`` spells this out, state by state; an input a state has no entry for
is counted, and raised under the test suite (transitions.py).

A CLOSED connection (closed, peer closed or failed) drains for ``drain_rtos`` x max(RTO,
setup_timeout), like QUIC's draining period (RFC 9000 section 10.2): it sends nothing but
answers a late retransmitted CLOSE (our CLOSE_ACK was lost) and restarts the drain,
doubled. Then ``drained`` is set and the endpoint forgets it.
"""

from __future__ import annotations

import enum
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from mrc_transport.wire import frames
from mrc_transport.wire.frames import DATA_OPCODES, TRIM_REASONS, Common, Flags, Opcode
from mrc_transport.wire.records import RX_DATA, RX_SACK, DataField, RxRec, SackField, record_of
from srv6.path import SrPath

from . import events, rxplace, transitions
from .cc.planes import PlaneWindows
from .commons import Commons
from .config import GO_BACK_N, Config
from .counters import ConnCounters
from .ev import EvSet, PlaneCounters
from .receiver import Receiver
from .reverse import ReverseEvs
from .scheduler import make_scheduler
from .segments import Outgoing, expand_runs
from .sender import Sender
from .serial import MASK32, expand
from .transmit import Transmit, new_transmit


class ConnState(enum.Enum):
    """Connection states."""

    SETUP_SENT = "setup_sent"
    ESTABLISHED = "established"
    CLOSING = "closing"
    CLOSE_SENT = "close_sent"
    CLOSED = "closed"


class ConnInput(enum.Enum):
    """What moves a connection."""

    SETUP = "setup"
    SETUP_ACK = "setup_ack"
    CLOSE = "close"
    DRAINED = "drained"
    CLOSE_ACK = "close_ack"
    PEER_CLOSE = "peer_close"
    GIVE_UP = "give_up"


_S, _E, _C, _CS, _X = (
    ConnState.SETUP_SENT,
    ConnState.ESTABLISHED,
    ConnState.CLOSING,
    ConnState.CLOSE_SENT,
    ConnState.CLOSED,
)
CONN_TRANSITIONS: dict[ConnState, dict[ConnInput, ConnState]] = {
    _S: {
        ConnInput.SETUP: _E,  # a server's connection, made from the client's SETUP
        ConnInput.SETUP_ACK: _E,
        ConnInput.CLOSE: _S,  # closes once established (_close_after_setup)
        ConnInput.GIVE_UP: _X,
    },
    _E: {
        ConnInput.CLOSE: _C,
        ConnInput.PEER_CLOSE: _X,
        ConnInput.GIVE_UP: _X,
    },
    _C: {
        ConnInput.CLOSE: _C,
        ConnInput.DRAINED: _CS,
        ConnInput.PEER_CLOSE: _X,
        ConnInput.GIVE_UP: _X,
    },
    _CS: {
        ConnInput.CLOSE: _CS,
        ConnInput.CLOSE_ACK: _X,
        ConnInput.PEER_CLOSE: _X,
        ConnInput.GIVE_UP: _X,
    },
    _X: {
        ConnInput.CLOSE: _X,
    },
}
"""The connection state table: each state's inputs and the state each leads to (the
theory of operation above). A peer's packet is an input only where its state has an
entry (``_allows``); elsewhere it is counted as ``wrong_state``."""


class Connection:
    """One end of an MRC connection."""

    def __init__(
        self,
        cfg: Config,
        paths: Sequence[SrPath],
        rng: random.Random,
        conn: int,
        now: float,
        *,
        peer_setup: frames.SetupHeader | None = None,
        ports_busy: set[int] | None = None,
    ) -> None:
        self.cfg, self.rng, self.conn = cfg, rng, conn
        self.counters = ConnCounters()
        self._events: deque[events.Event] = deque()
        self.evs = EvSet(paths, cfg, rng, conn, self._events.append, ports_busy)
        self.reverse = self._reverse_evs(now)
        """The EVs our acknowledgements and replies go on, probed while idle (reverse.py)."""
        self.cc = PlaneWindows(cfg, self.evs.planes)
        self.scheduler = make_scheduler(
            cfg.scheduler, rng, self.cc.alpha, equal=cfg.cc_scope == "connection"
        )
        self.initial_psn = rng.getrandbits(32)
        self.commons = Commons(conn)
        self.sender = self._sender()
        self.receiver: Receiver | None = None
        self.state = ConnState.SETUP_SENT
        self._control: list[Transmit] = []
        self._sack_owed = False
        """A SACK of the state at the next ``control_to_send`` is owed (``_queue_sack``)."""
        self._go_back_nak = -1
        """Go-back-N: the cumulative PSN the last sequence-error NAK named (one a gap)."""
        self._retry_at = math.inf
        self._retry_count = 0
        self._retry_ts = 0
        self._persist_at = math.inf
        self._close_after_setup = False
        self._probes: dict[int, int] = {}
        self._probe_id = 0
        self._reply_plane: int | None = None
        self._local_down: set[int] = set()
        """Planes whose local NIC port is down: what our SACKs report (``ports_down``)."""
        self._peer_down = 0
        """The peer's ports down, as its latest SACK reported them (a bit per plane)."""
        self._drain_at = math.inf
        self._drain_len = 0.0
        self.drained = False
        """CLOSED and its drain period over: the endpoint may forget it."""
        if peer_setup is None:
            self._send_setup(now)
        else:
            self._accept(peer_setup, now)

    def _reverse_evs(self, now: float) -> ReverseEvs:
        """The reverse EV set, with a generator of its own: its draws leave the spraying's
        sequence as it was."""
        rev = ReverseEvs(
            self.evs, self.cfg.reverse_evs, random.Random(self.conn), self.counters,
            self._events.append,
        )  # fmt: skip
        rev.now = now
        return rev

    def _sender(self) -> Sender:
        return Sender(
            self.cfg, self.initial_psn, self.evs, self.scheduler, self.cc, self.counters,
            self._events.append, self.conn, self.commons,
        )  # fmt: skip

    # -- the state table ----------------------------------------------------------------
    @property
    def sending(self) -> bool:
        """ESTABLISHED or CLOSING. Two identity tests: membership of a set would hash the
        enum member, and enum.py's ``__hash__`` is a Python call even from compiled code
        (on the burst, timer and SACK paths)."""
        state = self.state
        return state is ConnState.ESTABLISHED or state is ConnState.CLOSING

    def _allows(self, inp: ConnInput) -> bool:
        """Whether the current state has a transition on ``inp``."""
        return inp in CONN_TRANSITIONS[self.state]

    def _move(self, inp: ConnInput, now: float, reason: str = "") -> None:
        """Feed ``inp`` to the state table and carry out the effects of the new state."""
        old = self.state
        new = CONN_TRANSITIONS[old].get(inp)
        if new is None:
            self.counters.illegal_transitions += 1
            transitions.illegal("connection", old, inp)
            return
        if new is old:
            return
        self.state = new
        if new is ConnState.CLOSED:
            self._retry_at = math.inf
            # the path's RTO, not the first-window floor: a receiving end samples no data RTT
            rto = self.sender.path_rto
            self._drain_len = self.cfg.drain_rtos * max(rto, self.cfg.setup_timeout)
            self._drain_at = now + self._drain_len
            self._events.append(events.ConnectionClosed(now, self.conn, reason or inp.value))

    # -- public API -----------------------------------------------------------------------
    def send_message(self, data: bytes | bytearray | memoryview, now: float) -> int:
        """Queue one message; returns its MSN. The buffer must stay unchanged until acked."""
        if self.state not in (ConnState.SETUP_SENT, ConnState.ESTABLISHED):
            raise RuntimeError(f"cannot send in state {self.state.value}")
        return self.sender.queue(data)

    def close(self, now: float) -> None:
        """Close once every queued message is acknowledged (after setup, if need be)."""
        if self.state is ConnState.SETUP_SENT:
            self._close_after_setup = True
        self._move(ConnInput.CLOSE, now, "closed")

    def receive(self, packet: frames.Packet, now: float) -> None:
        """The one way in for a packet of this connection (its PathHeader carries the EV
        and ECN as received). A data packet or SACK goes the way of a burst's records
        (``receive_records``), as a burst of one; any other packet to its handler."""
        self.reverse.now = now
        rec = _as_record(packet)
        if rec is not None:
            if not self.receive_records([rec], memoryview(packet.payload), 0, 1, now):
                self._arrived(packet.path.src)  # for another connection id: counted
                self.counters.wrong_state += 1
            return
        self._arrived(packet.path.src)
        handler = _HANDLERS.get(packet.header.common.opcode)
        if handler is None:
            self.counters.wrong_type += 1
            return
        handler(self, packet, now)

    def receive_records(
        self, recs: Sequence[RxRec], view: memoryview, start: int, stop: int, now: float
    ) -> int:
        """``receive`` of a burst's data packets and SACKs as records (wire/records.py;
        a payload as a view of its place in ``view``), from ``start`` up to ``stop`` or
        the first record that is not one of this connection's data packets or SACKs;
        returns its index. The endpoint's path for a burst: the records of a run of data
        packets go to the placement in one call, without a ``Packet`` per packet."""
        self.reverse.now = now
        i = start
        while i < stop:
            rec = recs[i]
            if rec[DataField.DST_CONN] != self.conn:
                return i
            kind = rec[DataField.KIND]
            if kind == RX_DATA:
                i = self._data_run(recs, view, i, stop, now)
            elif kind == RX_SACK:
                self._sack(rec, now)
                i += 1
            else:
                return i
        return i

    def _arrived(self, src: bytes) -> None:
        """Count a packet from the peer's address ``src``; the plane it came over works
        both ways for now: reply on it (on that plane's reverse EVs)."""
        self.counters.packets_received += 1
        self._reply_plane = self.evs.peer_plane.get(src, self._reply_plane)

    def datagrams_to_send(self, now: float) -> list[Transmit]:
        """Every packet to send now: control first, then data while the windows allow."""
        return expand_runs(self.burst_to_send(now))

    def burst_to_send(self, now: float) -> list[Outgoing]:
        """``datagrams_to_send`` with new data as ``DataRun``s, each several packets: what
        an endpoint encodes without a ``Transmit`` per packet."""
        out: list[Outgoing] = []
        self.fill_burst(now, out, self.cfg.max_burst)
        return out

    def fill_burst(
        self, now: float, out: list[Outgoing], limit: int, trimmed_only: bool = False
    ) -> int:
        """``burst_to_send`` into ``out`` with at most ``limit`` data packets; how many it
        added (an endpoint shares one burst among its connections). ``trimmed_only``: the
        resends of trimmed packets and nothing else (``Sender.fill``)."""
        out.extend(self.control_to_send(now))
        if not self.sending:
            return 0
        n = self.sender.fill(now, out, limit, trimmed_only)
        self.counters.packets_sent += n
        self._arm_persist(now)
        if self.state is ConnState.CLOSING and self.sender.idle():
            self._move(ConnInput.DRAINED, now)
            self._retry_count, self._retry_at = 0, now
            self._send_close(now)
            out.extend(self.control_to_send(now))
        return n

    def control_to_send(self, now: float | None = None) -> list[Transmit]:
        """Only the control packets queued so far (SACKs, probe replies, handshakes): what
        a receiver owes its peer now, without timers or new data. ``now`` (None: not
        known) dates the owed SACK, for its service time."""
        if self._sack_owed and self.receiver is not None:
            self._sack_owed = False
            self._control_tx(self.receiver.sack(False, now, self._ports_down_bits()))
        out, self._control = self._control, []
        self.counters.packets_sent += len(out)
        return out

    def send_failed(self, tx: Transmit, now: float) -> None:
        """The local stack refused ``tx`` at once: the NIC port it leaves through is down.

        Unlike a loss this is certain and immediate, so every EV on that port is retired
        now (probes readmit them when the port is back) and the packet goes again on
        another plane: data as a retransmission, control as it was; an unanswered probe
        is what probing is for (ours; the paper's NIC port loss)."""
        self.counters.send_failed += 1
        port = tx.path.plane  # a NIC port is a plane (srv6/path.py)
        if not self.port_event(port, False, now):
            return  # every port is down (or the floor held): the RTO and retries go on
        h = tx.header
        if isinstance(h, frames.DataHeader):
            self.sender.send_failed(h.psn, tx.ev)
        elif not isinstance(h, frames.ProbeHeader):
            ev = self.evs.control_ev()
            while ev.plane == port:
                ev = self.evs.control_ev()
            self._control.append(replace(tx, path=ev.path, ev=ev.value))

    def port_event(self, plane: int, up: bool, now: float, local: bool = True) -> bool:
        """The local port of ``plane`` (``local``; else the peer's, as its SACK said) went
        down or came back (a refused send, or the link state the host announced). Down:
        its EVs are retired and, the first time, every packet in flight on it is resent;
        up: probe it now rather than at the next retry. Returns whether another plane is
        usable."""
        if up:
            if local:
                self._local_down.discard(plane)
            self.evs.port_up(plane, now)
            return True
        if local:
            self._local_down.add(plane)
        first = plane not in self.evs.ports_down
        self.evs.port_down(plane, now, "port" if local else "peer port")
        if not any(e.plane != plane for e in self.evs.usable):
            return False
        if first:
            self.sender.port_down(plane)
        return True

    def trimmed_waiting(self) -> bool:
        """A trimmed packet waits for its resend (``Sender.trimmed_waiting``)."""
        return self.sending and self.sender.trimmed_waiting()

    def get_timer(self) -> float | None:
        """When ``handle_timer`` must run next (None: never)."""
        if self.state is ConnState.CLOSED:
            return None if self.drained else self._drain_at
        t = min(self._retry_at, self._persist_at)
        if self.sending:
            t = min(t, self.sender.timer(), self.evs.next_probe_time(), self.reverse.timer())
        if self.receiver is not None:
            t = min(t, self.receiver.ack_deadline)
        return None if t == math.inf else t

    def handle_timer(self, now: float) -> None:
        """Run every timer that expired at ``now``."""
        self.reverse.now = now
        if self.state is ConnState.CLOSED:
            self.drained = self._drain_at <= now
            return
        if self._retry_at <= now:
            self._retry(now)
        if self.receiver is not None and self.receiver.ack_deadline <= now:
            self._queue_sack(now)
        if not self.sending:
            return
        if self.sender.on_timer(now) and self.sender.rto_count > self.cfg.max_rto_count:
            self._move(ConnInput.GIVE_UP, now, "rto failed")
            return
        for ev in self.evs.due_probes(now):
            self._send_probe(ev.value, now)
        if self.reverse.timer() <= now:
            back = self.reverse.due(now, not len(self.sender.inflight))
            if back is not None:
                self._send_probe(back.value, now)
        if self._persist_at <= now:
            self._persist_at = math.inf
            self._send_probe(self.evs.control_ev().value, now, Flags.ACK_REQ)

    @property
    def peer_conn(self) -> int:
        """The peer's connection id (0 until its SETUP or SETUP_ACK names it)."""
        return self.commons.dst_conn

    def recycle(self, buf: bytearray) -> None:
        """Give back a delivered message's buffer for reuse; the caller must not touch it
        afterwards (``Receiver.recycle``)."""
        if self.receiver is not None:
            self.receiver.recycle(buf)

    def next_event(self) -> events.Event | None:
        """The oldest unread event; reading a MessageReceived frees receive window."""
        if not self._events:
            return None
        event = self._events.popleft()
        receiver = self.receiver
        if (
            isinstance(event, events.MessageReceived)
            and receiver is not None
            and receiver.consumed(len(event.data))
            and self.sending
        ):
            self._queue_sack(event.time)
        return event

    @property
    def has_events(self) -> bool:
        """Events not yet read with ``next_event``."""
        return bool(self._events)

    def plane_counters(self) -> dict[int, PlaneCounters]:
        """Per-plane counters, with each plane's window and marked fraction."""
        out = self.evs.plane_counters()
        windows = self.cc.windows()
        for plane, pc in out.items():
            pc.window = windows.get(plane, 0)
            pc.marked = self.cc.alpha.get(plane, 0.0)
        return out

    # -- setup and close ------------------------------------------------------------------
    def _common(self, opcode: Opcode, flags: Flags = Flags.NONE) -> Common:
        return self.commons.get(opcode, int(flags))

    def _control_tx(
        self, header: frames.Header, ev_value: int | None = None, dscp: int = frames.DSCP_CONTROL
    ) -> None:
        if ev_value is None:
            ev = self.reverse.pick(self._reply_plane)
            if header.common.opcode in _ACKS:
                self.reverse.note_ack()
        else:
            ev = self.evs.by_value[ev_value]
        self._control.append(new_transmit(ev.path, ev.value, header, b"", dscp))

    def _setup_header(self, opcode: Opcode, ts: int) -> frames.SetupHeader:
        return frames.SetupHeader(
            self._common(opcode, Flags.TS),
            self.initial_psn,
            self.cfg.rcvbuf,
            self.cfg.mss,
            self.cfg.ev_count,
            ts,
        )

    def _send_setup(self, now: float) -> None:
        self._retry_ts = int(now * 1e9)
        self._control_tx(self._setup_header(Opcode.SETUP, self._retry_ts))
        self._retry_at = now + self.cfg.setup_timeout * 2**self._retry_count
        self._retry_count += 1

    def _send_close(self, now: float) -> None:
        self._control_tx(
            frames.CloseHeader(self._common(Opcode.CLOSE), self.sender.snd_nxt & MASK32)
        )
        self._retry_at = now + self.cfg.setup_timeout * 2**self._retry_count
        self._retry_count += 1

    def _retry(self, now: float) -> None:
        if self._retry_count >= self.cfg.setup_retries:
            reason = "setup failed" if self.state is ConnState.SETUP_SENT else "close failed"
            self._move(ConnInput.GIVE_UP, now, reason)
        elif self.state is ConnState.SETUP_SENT:
            self._send_setup(now)
        elif self.state is ConnState.CLOSE_SENT:
            self._send_close(now)
        else:
            self._retry_at = math.inf

    def _accept(self, h: frames.SetupHeader, now: float) -> None:
        self._start(h, ConnInput.SETUP, now)
        self._control_tx(self._setup_header(Opcode.SETUP_ACK, h.ts))

    def _start(self, h: frames.SetupHeader, inp: ConnInput, now: float) -> None:
        """Established by the peer's SETUP (a server) or SETUP_ACK (a client) ``h``."""
        self.commons.peer(h.common.src_conn)
        self.sender.peer_rwnd = h.rwnd
        # both sides cut messages at min(our mss, peer's mtu): the same grid both ways
        self.sender.mss = max(1, min(self.cfg.mss, h.mtu))
        self.receiver = Receiver(
            self.cfg,
            h.initial_psn,
            self.counters,
            self._events.append,
            self.conn,
            self.commons,
            self.sender.mss,
        )
        self._move(inp, now)
        self._events.append(events.ConnectionEstablished(now, self.conn, self.peer_conn))
        if self._close_after_setup:
            self._move(ConnInput.CLOSE, now)

    # -- handlers -------------------------------------------------------------------------
    def _on_setup(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.SetupHeader) or h.common.src_conn != self.peer_conn:
            self.counters.wrong_state += 1
            return
        # our SETUP_ACK was lost: the client retransmitted its SETUP
        self._control_tx(self._setup_header(Opcode.SETUP_ACK, h.ts))

    def _on_setup_ack(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.SetupHeader) or not self._allows(ConnInput.SETUP_ACK):
            self.counters.wrong_state += 1
            return
        self._retry_at, self._retry_count = math.inf, 0
        self._start(h, ConnInput.SETUP_ACK, now)
        if h.common.flags & Flags.TS and h.ts == self._retry_ts:
            rtt = max(now - h.ts / 1e9, 0.0)
            self.sender.rtt_sample(rtt, data=False)
            self.cc.on_rtt_sample(rtt)

    def _on_data(self, packet: frames.Packet, now: float) -> None:
        """A data packet ``receive`` did not take as a record: its header is not a data
        header, or a switch trimmed it."""
        h = packet.header
        reason = TRIM_REASONS.get(packet.path.dscp)
        if not isinstance(h, frames.DataHeader) or reason is None:
            self.counters.wrong_state += 1
            return
        self._trimmed(h, reason, packet.path.ev, now)

    def _data_run(
        self, recs: Sequence[RxRec], view: memoryview, start: int, stop: int, now: float
    ) -> int:
        """The data records from ``start`` on, up to ``stop`` or the first record that is
        not one of this connection's data packets, in one placement call
        (Receiver.receive); returns where it stopped. Each packet is counted as arrived."""
        receiver = self.receiver
        if receiver is None or self.state is ConnState.CLOSED:
            self._arrived(recs[start][DataField.SRC])
            self.counters.wrong_state += 1
            return start + 1
        if self.cfg.recovery == GO_BACK_N:
            stop = self._in_order(recs, start, stop, receiver.cum)
            if stop == start:
                return start + 1
        i = receiver.receive(recs, view, start, stop, now)
        taken = receiver.take_packets()
        if taken:
            self.counters.packets_received += taken
            self._arrived_from(recs, start, i)
        sacks = receiver.take_sacks()
        if sacks:  # the first as a packet of its own; the rest only supersede it
            self._queue_sack(now)
            self.counters.sacks_superseded += sacks - 1
        why = receiver.why
        if why == rxplace.CE:  # the packet before i came with CE: its SACK echoes it now
            self._queue_sack(now, True)
        elif why == rxplace.OUT_OF_WINDOW:
            self._out_of_window(recs[i])
            i += 1
        return i

    def _in_order(self, recs: Sequence[RxRec], start: int, stop: int, cum: int) -> int:
        """Go-back-N's receiver (Config.recovery; RoCE's responder, InfiniBand spec
        9.7.5.2.8): where the run of records from ``start`` that the placement may take
        ends: a duplicate alone, or the PSNs expected, in order. A packet ahead of the one
        expected is dropped (``start`` comes back) and answers with one sequence-error NAK
        naming the PSN expected, until that one arrives."""
        rec = recs[start]
        psn = expand(rec[DataField.PSN], cum)
        if psn < cum:
            return start + 1
        if psn > cum:
            self._arrived(rec[DataField.SRC])
            self.counters.go_back_dropped += 1
            if self._go_back_nak != cum:
                self._go_back_nak = cum
                self._nack(cum & MASK32, frames.NackReason.SEQUENCE_ERROR,
                           rec[DataField.EV], rec[DataField.TS])  # fmt: skip
            return start
        k = start + 1
        while k < stop and _next_in_order(recs[k], self.conn, cum + k - start):
            k += 1
        return k

    def _out_of_window(self, rec: RxRec) -> None:
        """A data packet beyond the reorder window: counted as arrived, NACKed."""
        self._arrived(rec[DataField.SRC])
        self.counters.psn_out_of_window += 1
        self._nack(
            rec[DataField.PSN], frames.NackReason.PSN_OUT_OF_WINDOW, rec[DataField.EV],
            rec[DataField.TS],
        )  # fmt: skip

    def _arrived_from(self, recs: Sequence[RxRec], start: int, stop: int) -> None:
        """``_arrived`` of records ``start:stop``, counted already: the reply plane is
        that of the latest one whose source names a plane."""
        peer_plane = self.evs.peer_plane
        for k in range(stop - 1, start - 1, -1):
            plane = peer_plane.get(recs[k][DataField.SRC])
            if plane is not None:
                self._reply_plane = plane
                return

    def _trimmed(
        self, h: frames.DataHeader, reason: frames.NackReason, ev: int, now: float
    ) -> None:
        """A data packet a switch trimmed to its headers: NACK it with the EV it came on,
        the reason telling where it was cut (the trimmed DSCP, docs/protocol.md)."""
        receiver = self.receiver
        if receiver is None or self.state is ConnState.CLOSED:
            self.counters.wrong_state += 1
            return
        if receiver.on_trimmed(h.psn):
            self._nack(h.psn, reason, ev, h.ts)
            lasthop = reason is frames.NackReason.TRIMMED_LASTHOP
            self._events.append(events.TrimmedNacked(now, self.conn, h.psn, ev, lasthop))

    def _nack(self, psn32: int, reason: frames.NackReason, ev: int, ts: int) -> None:
        self.counters.nacks_sent += 1
        self._control_tx(frames.NackHeader(self._common(Opcode.NACK), psn32, reason, ev, ts))

    def _queue_sack(self, now: float, ce: bool = False) -> None:
        """Owe a SACK, built from the state of the moment it is sent. An endpoint sends
        what the core queued after a whole receive burst (or 32 packets of it), so the
        SACKs of one burst leave together and the newest says everything an older one
        does: cumulative PSN, bitmap and window. One SACK is built for them all, at
        ``control_to_send`` (ours: in the unshaped lab a burst of ~22 data packets owed ~6
        SACKs, each costing tens of microseconds on both ends; building each one only to
        replace it took ~8% of a receiver's CPU). A SACK echoing ECN is built at once
        and kept: it names the marked EV, which no later SACK reflects."""
        if self.receiver is None:
            return
        if self._sack_owed:
            self.counters.sacks_superseded += 1
        else:
            self.counters.sacks_sent += 1
        self._sack_owed = not ce
        if ce:
            self._control_tx(self.receiver.sack(ce, now, self._ports_down_bits()))
        else:
            self.receiver.owe_sack()

    def _sack(self, rec: RxRec, now: float) -> None:
        """A SACK or ACK record (``SackField``): the sender books it; the peer's ports down
        take their planes out of use."""
        self._arrived(rec[SackField.SRC])
        if not self.sending:
            self.counters.wrong_state += 1
            return
        self.sender.sack(
            rec[SackField.FLAGS], rec[SackField.CUM_PSN], rec[SackField.SACK_BASE],
            rec[SackField.BITMAP], rec[SackField.EV], rec[SackField.TS], rec[SackField.RWND],
            now, rec[SackField.SERVICE_TIME], rec[SackField.PENALTY],
        )  # fmt: skip
        down = rec[SackField.PORTS_DOWN]
        if down != self._peer_down:
            self._peer_ports(down, now)

    def _ports_down_bits(self) -> int:
        """Our NIC ports that are down, a bit per plane: the SACK's port status (paper
        section 3: the peer stops using that plane at once)."""
        bits = 0
        for plane in self._local_down:
            if 0 <= plane < 64:
                bits |= 1 << plane
        return bits

    def _peer_ports(self, down: int, now: float) -> None:
        """The peer's SACK reports its ports down as ``down``: a plane whose bit just went
        up is out of use at once, as for our own port (its EVs retired, what is in flight
        on it resent); one whose bit went clear is probed now (paper sections 3 and 5.2.2:
        peers learn a NIC port loss from the SACK's port bitmap, not from losses)."""
        was, self._peer_down = self._peer_down, down
        for plane in self.evs.planes:
            if not 0 <= plane < 64:
                continue
            bit = 1 << plane
            if down & bit and not was & bit:
                self.port_event(plane, False, now, local=False)
            elif was & bit and not down & bit:
                self.port_event(plane, True, now, local=False)

    def _on_sack(self, packet: frames.Packet, now: float) -> None:
        """A SACK or ACK ``receive`` did not take as a record: its header is not one."""
        self.counters.wrong_state += 1

    def _on_nack(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.NackHeader) or not self.sending:
            self.counters.wrong_state += 1
            return
        self.sender.on_nack(h, now)

    def _on_probe(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.ProbeHeader) or self.receiver is None:
            self.counters.wrong_state += 1
            return
        # the reply echoes a CE mark: a marked probe found the path busy (not clean)
        flags = Flags.ECN_ECHO if packet.path.ecn == frames.Ecn.CE else Flags.NONE
        self._control_tx(
            frames.ProbeHeader(
                self._common(Opcode.PROBE_REPLY, flags), h.probe_id, packet.path.ev, h.ts
            )
        )
        if h.common.flags & Flags.ACK_REQ:
            self._queue_sack(now)

    def _on_probe_reply(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.ProbeHeader):
            self.counters.wrong_type += 1
            return
        value = self._probes.pop(h.probe_id, None)
        if value is None or value != h.ev:
            self.counters.probe_unknown += 1
            return
        self.counters.probe_replies += 1
        self.reverse.probe_ok(value, now, h.ts * 1e-9)
        # a reply to an earlier probe of this EV, late because of a queue, still proves
        # the path works (ours): requiring the latest one starved readmission
        clean = not h.common.flags & Flags.ECN_ECHO
        self.evs.probe_ok(self.evs.by_value[value], now, clean)

    def _on_close(self, packet: frames.Packet, now: float) -> None:
        h = packet.header
        if not isinstance(h, frames.CloseHeader) or self.receiver is None:
            self.counters.wrong_state += 1
            return
        if h.final_psn != self.receiver.cum & MASK32:
            self.counters.close_early += 1
            return
        self._control_tx(frames.CloseHeader(self._common(Opcode.CLOSE_ACK), h.final_psn))
        if self.state is ConnState.CLOSED and not self.drained:
            # a retransmitted CLOSE: our CLOSE_ACK was lost; wait as long as its backoff
            longest = self.cfg.setup_timeout * 2**self.cfg.setup_retries
            self._drain_len = max(self._drain_len, min(2 * self._drain_len, longest))
            self._drain_at = now + self._drain_len
        elif self._allows(ConnInput.PEER_CLOSE):
            self._move(ConnInput.PEER_CLOSE, now, "peer closed")

    def _on_close_ack(self, packet: frames.Packet, now: float) -> None:
        if not isinstance(packet.header, frames.CloseHeader) or not self._allows(
            ConnInput.CLOSE_ACK
        ):
            self.counters.wrong_state += 1
            return
        self._move(ConnInput.CLOSE_ACK, now, "closed")

    # -- probes ---------------------------------------------------------------------------
    def _send_probe(self, ev_value: int, now: float, flags: Flags = Flags.NONE) -> None:
        self._probe_id = (self._probe_id % MASK32) + 1
        ev = self.evs.by_value[ev_value]
        if not flags & Flags.ACK_REQ:
            ev.probe_id = self._probe_id
            ev.probes_sent += 1
        self._probes[self._probe_id] = ev_value
        if len(self._probes) > 4 * (self.cfg.ev_count + self.cfg.ev_backup):
            self._probes.pop(next(iter(self._probes)))
        self.counters.probes_sent += 1
        header = frames.ProbeHeader(
            self._common(Opcode.PROBE, flags | Flags.TS), self._probe_id, 0, int(now * 1e9)
        )
        # in the data class (MRC): a probe tests the queues data meets, not the
        # priority class that acknowledgements skip them in
        self._control_tx(header, ev_value, frames.DSCP_DATA)

    def _arm_persist(self, now: float) -> None:
        """Zero-window probe: nothing in flight, data waiting, window closed."""
        s = self.sender
        blocked = s.pending and not len(s.inflight) and s.peer_rwnd < s.mss
        if not blocked:
            self._persist_at = math.inf
        elif self._persist_at == math.inf:
            self._persist_at = now + s.rto


def _as_record(packet: frames.Packet) -> RxRec | None:
    """The record of a data packet (not trimmed) or a SACK, as the burst decoder makes
    it, its payload at 0 of the packet's own; None for any other packet, and for a
    header that disagrees with its opcode (its handler counts it)."""
    h, path = packet.header, packet.path
    opcode = h.common.opcode
    if type(h) is frames.DataHeader:
        if opcode not in DATA_OPCODES or path.dscp in TRIM_REASONS:
            return None
    elif type(h) is not frames.SackHeader or opcode not in (Opcode.SACK, Opcode.ACK):
        return None
    ce = 1 if path.ecn == frames.Ecn.CE else 0
    return record_of(h, path.ev, ce, path.src, 0, len(packet.payload))


_ACKS = frozenset({Opcode.SACK, Opcode.ACK, Opcode.NACK})
"""What arms the reverse EV set's idle probing: the acknowledgements of received data."""

Handler = Callable[[Connection, frames.Packet, float], None]
_HANDLERS: dict[Opcode, Handler] = {
    Opcode.SETUP: Connection._on_setup,
    Opcode.SETUP_ACK: Connection._on_setup_ack,
    Opcode.WRITE_FIRST: Connection._on_data,
    Opcode.WRITE_MIDDLE: Connection._on_data,
    Opcode.WRITE_LAST: Connection._on_data,
    Opcode.WRITE_ONLY: Connection._on_data,
    Opcode.SACK: Connection._on_sack,
    Opcode.ACK: Connection._on_sack,
    Opcode.NACK: Connection._on_nack,
    Opcode.PROBE: Connection._on_probe,
    Opcode.PROBE_REPLY: Connection._on_probe_reply,
    Opcode.CLOSE: Connection._on_close,
    Opcode.CLOSE_ACK: Connection._on_close_ack,
}


def _next_in_order(rec: RxRec, conn: int, psn: int) -> bool:
    """Whether ``rec`` is this connection's data packet ``psn`` (go-back-N's runs)."""
    kind, dst = rec[DataField.KIND], rec[DataField.DST_CONN]
    return kind == RX_DATA and dst == conn and expand(rec[DataField.PSN], psn) == psn
