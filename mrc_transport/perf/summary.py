"""The start and end documents (report.py) of a run, from its options, its endpoint and
its connections' ``StreamStats``: each connection's E and R messages (messages.py) summed
as iperf3 sums its streams."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mrc_transport.perf.report import (
    PLANE_COUNTS,
    AcceptedConnection,
    ClientSetup,
    ConnectingTo,
    CpuUtilization,
    EndDoc,
    EvEnd,
    PlaneEnd,
    ReceivedSum,
    ReceiverEnd,
    SenderEnd,
    SentSum,
    ServerSetup,
    StartDoc,
    StreamEnd,
    TestStart,
)

if TYPE_CHECKING:
    from mrc_transport.io.endpoint import ConnHandle
    from mrc_transport.perf.messages import PerfParams
    from mrc_transport.perf.options import PerfOptions
    from mrc_transport.perf.session import StreamStats
    from mrc_transport.protocol import Config
    from srv6.path import SrPath


def rate(nbytes: float, seconds: float) -> float:
    """Bits per second; 0 over no time."""
    return nbytes * 8 / seconds if seconds > 0 else 0.0


# ------------------------------------------------------------------ start


def client_start(opts: PerfOptions, paths: Sequence[SrPath], cfg: Config, session: str) -> StartDoc:
    """The client's ``start``: the test it asks for and how its endpoint is set up."""
    from mrc_transport import wire

    test = TestStart(
        opts.parallel,
        opts.length,
        opts.seconds,
        opts.nbytes,
        opts.reverse,
        float(opts.rate_bps),
    )
    setup = ClientSetup(
        evs=cfg.ev_count,
        planes=tuple(sorted({p.plane for p in paths})),
        paths=len(paths),
        encoding=opts.encoding,
        cc=cfg.cc,
        cc_scope=cfg.cc_scope,
        scheduler=cfg.scheduler,
        mss=cfg.mss,
        codec=wire.BACKEND,
    )
    assert opts.host is not None
    return _start(session, ConnectingTo(opts.host, opts.port), test, setup)


def server_start(opts: PerfOptions, params: PerfParams, handle: ConnHandle) -> StartDoc:
    """The server's ``start`` of a test: what the client asked for in its P message."""
    test = TestStart(
        params.parallel, params.length, params.duration, params.nbytes * params.parallel,
        params.reverse, float(params.rate_bps),
    )  # fmt: skip
    setup = ServerSetup(params.planes, opts.encoding, opts.port)
    peer = AcceptedConnection(handle.conn.conn, handle.conn.peer_conn)
    return _start(params.session, peer, test, setup)


def _start(
    session: str,
    peer: ConnectingTo | AcceptedConnection,
    test: TestStart,
    setup: ClientSetup | ServerSetup,
) -> StartDoc:
    from mrc_transport import __version__

    return StartDoc(
        f"mrc {__version__}", os.uname().sysname, int(time.time()), peer, session, test, setup
    )


# ------------------------------------------------------------------ end


def end_doc(
    streams: Sequence[StreamStats],
    cpu0: tuple[float, float],
    cpu1: tuple[float, float],
    wall: float,
    endpoint: dict[str, object],
) -> EndDoc:
    """The ``end`` of a test: cpu0 and cpu1 are this process's (user, system) CPU seconds
    at its start and end, wall its seconds."""
    ends = tuple(_stream_end(i, s) for i, s in enumerate(streams))
    sent_s = max([0.0, *(e.sender.seconds for e in ends)])  # 0 with no connection
    recv_s = max([0.0, *(e.receiver.seconds for e in ends)])
    sent_b = sum(e.sender.bytes for e in ends)
    recv_b = sum(e.receiver.bytes for e in ends)
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return EndDoc(
        streams=ends,
        sum_sent=SentSum(
            sent_s, sent_b, rate(sent_b, sent_s), sum(e.sender.retransmits for e in ends)
        ),
        sum_received=ReceivedSum(recv_s, recv_b, rate(recv_b, recv_s)),
        verified=bool(streams) and all(s.verified for s in streams),
        planes=_planes(streams),
        evs=tuple(
            EvEnd.from_json({"stream": i, **e.to_json()})
            for i, s in enumerate(streams)
            if s.sender_report is not None
            for e in s.sender_report.conn.evs
        ),
        endpoint=endpoint,
        cpu_utilization_percent=CpuUtilization(
            *cpu_percent(user, system, wall), *_remote_cpu(streams)
        ),
        cpu_seconds=user + system,
    )


def _stream_end(i: int, s: StreamStats) -> StreamEnd:
    """One connection's sums; a report it did not get to counts zeros."""
    snd, rcv = s.sender_report, s.receiver_report
    sb, ss = (snd.bytes, snd.seconds) if snd else (0, 0.0)
    rb, rs = (rcv.bytes, rcv.seconds) if rcv else (0, 0.0)
    snd_counters = snd.conn.counters if snd else {}
    return StreamEnd(
        id=i,
        sender=SenderEnd(
            sb,
            ss,
            rate(sb, ss),
            snd_counters.get("retransmits", 0),
            snd.conn.srtt_us if snd else None,
        ),
        receiver=ReceiverEnd(rb, rs, rate(rb, rs)),
        verified=bool(s.verified),
        error=s.error,
        sender_counters=snd_counters,
        receiver_counters=rcv.conn.counters if rcv else {},
    )


def _planes(streams: Sequence[StreamStats]) -> tuple[PlaneEnd, ...]:
    """Each plane summed over the connections' sender reports; ``marked`` is the most
    marked connection's (a fraction), and stays the integer 0 until one has a mark."""
    counts: dict[int, dict[str, int]] = {}
    marked: dict[int, float] = {}
    for s in streams:
        for p in s.sender_report.conn.planes if s.sender_report else ():
            acc = counts.setdefault(p.plane, dict.fromkeys(_SUMMED, 0))
            for k in acc:
                acc[k] += getattr(p, k)
            marked[p.plane] = max(marked.get(p.plane, 0), p.marked)
    total_sent = sum(acc["sent"] for acc in counts.values()) or 1
    return tuple(
        PlaneEnd.from_json(
            {"plane": plane, "share": acc["sent"] / total_sent, **acc, "marked": marked[plane]}
        )
        for plane, acc in sorted(counts.items())
    )


_SUMMED = (*PLANE_COUNTS, "window")


def cpu_percent(user: float, system: float, wall: float) -> tuple[float, float, float]:
    """iperf3's total, user and system CPU percentages over ``wall`` seconds."""
    if wall <= 0:
        return 0.0, 0.0, 0.0
    return 100 * (user + system) / wall, 100 * user / wall, 100 * system / wall


def _remote_cpu(streams: Sequence[StreamStats]) -> tuple[float, float, float] | tuple[()]:
    """The peer's CPU percentages from its E or R message (its process's CPU over its
    data phase; the busiest connection's); () when no peer said (it failed first)."""
    best: tuple[float, float, float] | tuple[()] = ()
    for s in streams:
        peer = s.peer_report
        if peer is None or peer.cpu is None:
            continue
        wall = peer.seconds
        mine = cpu_percent(peer.cpu.user_s, peer.cpu.system_s, wall)
        if wall > 0 and mine[0] > (best[0] if best else -1.0):
            best = mine
    return best
