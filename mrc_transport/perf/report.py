"""`mrc perf`'s documents: iperf3's -J ``start``, ``intervals`` and ``end``, with MRC's
additions (planes, EVs, ECN marks, sRTT), as frozen dataclasses.

``to_json()`` gives the object json.dumps writes, key for key in iperf3's order;
``from_json()`` reads one back (a -J document, a --json-stream event's ``data``) and
raises ``ReportError`` when a key is missing or a part is not an object (the values are
taken as they are: these documents come from our own processes). Most records' fields are
their JSON keys in order (``jsonobj.Record``). Building them from a run is summary.py's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Self, TypeVar

from mrc_transport.perf.jsonobj import JsonObject, Record, fields_json, from_fields
from mrc_transport.perf.messages import EvReport


class ReportError(ValueError):
    """A document that is not one of these (one line: the key or value at fault)."""


def _object(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ReportError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    return raw


T = TypeVar("T")


def _parse(where: str, build: Callable[[Mapping[str, Any]], T], raw: object) -> T:
    """build(raw as a mapping); a missing key or a part that is not an object as one
    ReportError."""
    try:
        return build(_object(raw, where))
    except ReportError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{where}: {type(exc).__name__}: {exc}") from None


# ------------------------------------------------------------------ start


@dataclass(frozen=True, slots=True)
class TestStart(Record):
    """iperf3's ``test_start`` keys, both ends'."""

    protocol: ClassVar[str] = "MRC"
    num_streams: int
    """Connections (-P)."""
    blksize: int
    """Message size (-l)."""
    duration: float
    """Seconds to send (-t), 0 when by bytes."""
    bytes: int
    """Bytes to send (-n), 0 when by time."""
    reverse: bool
    """The server sends (-R); an integer in JSON, as iperf3's."""
    target_bitrate: float
    """Target bits per second per connection (-b), 0 = unlimited (a float in JSON, as
    iperf3 writes it)."""

    def to_json(self) -> JsonObject:
        return {"protocol": self.protocol, **fields_json(self), "reverse": int(self.reverse)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Self:
        test = from_fields(cls, raw)
        return replace(test, reverse=bool(test.reverse))


@dataclass(frozen=True, slots=True)
class ClientSetup(Record):
    """What the client adds to ``test_start``: how its endpoint is set up."""

    evs: int
    """Active EVs per connection."""
    planes: tuple[int, ...]
    """Planes its paths use."""
    paths: int
    """Paths to the server."""
    encoding: str
    """usid or srh."""
    cc: str
    cc_scope: str
    scheduler: str
    mss: int
    codec: str
    """The wire codec's backend: "c" or "python"."""


@dataclass(frozen=True, slots=True)
class ServerSetup(Record):
    """What the server adds to ``test_start``."""

    planes: tuple[int, ...]
    """Planes the client asked the sender to use (--planes); empty: all."""
    encoding: str
    port: int


@dataclass(frozen=True, slots=True)
class ConnectingTo(Record):
    """The client's peer: iperf3's ``connecting_to``."""

    KEY: ClassVar[str] = "connecting_to"
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class AcceptedConnection(Record):
    """The server's peer: iperf3's ``accepted_connection``, here the connection ids."""

    KEY: ClassVar[str] = "accepted_connection"
    conn: int
    """The server's connection id."""
    peer_conn: int
    """The client's."""


@dataclass(frozen=True, slots=True)
class StartDoc:
    """iperf3's ``start`` object, the client's or the server's: who, when, and the test."""

    version: str
    system_info: str
    """os.uname().sysname."""
    timesecs: int
    """time.time() when the test started, whole seconds."""
    peer: ConnectingTo | AcceptedConnection
    cookie: str
    """The session id shared by the connections of one client run."""
    test: TestStart
    setup: ClientSetup | ServerSetup

    def to_json(self) -> JsonObject:
        return {
            "version": self.version,
            "system_info": self.system_info,
            "timestamp": {"timesecs": self.timesecs},
            self.peer.KEY: self.peer.to_json(),
            "cookie": self.cookie,
            "test_start": self.test.to_json() | self.setup.to_json(),
        }

    @classmethod
    def from_json(cls, raw: object) -> StartDoc:
        return _parse("start", cls._build, raw)

    @classmethod
    def _build(cls, raw: Mapping[str, Any]) -> StartDoc:
        peer: ConnectingTo | AcceptedConnection
        if ConnectingTo.KEY in raw:
            peer = ConnectingTo.from_json(raw[ConnectingTo.KEY])
        else:
            peer = AcceptedConnection.from_json(raw[AcceptedConnection.KEY])
        test = raw["test_start"]
        setup = ClientSetup.from_json(test) if "codec" in test else ServerSetup.from_json(test)
        return cls(
            raw["version"], raw["system_info"], raw["timestamp"]["timesecs"], peer,
            raw["cookie"], TestStart.from_json(test), setup,
        )  # fmt: skip


# ------------------------------------------------------------------ intervals


@dataclass(frozen=True, slots=True)
class StreamInterval(Record):
    """One connection's part of an interval, as iperf3's ``intervals[].streams[]`` (with
    -P 2 or more)."""

    id: int
    """The connection's index in the run (the [ID] of its lines)."""
    start: float
    end: float
    seconds: float
    bytes: int
    bits_per_second: float
    retransmits: int


@dataclass(frozen=True, slots=True)
class Interval:
    """One interval as JSON: iperf3's ``{"streams": [...], "sum": {...}}``; the streams
    only with two or more connections."""

    start: float
    """Seconds since the run started."""
    end: float
    seconds: float
    bytes: int
    """Acknowledged (sender) or delivered (receiver) in the interval."""
    bits_per_second: float
    retransmits: int
    ecn_marks: int
    """ECN echoes received plus CE marks seen."""
    active_evs: int
    """Usable EVs, all planes and connections, at the end of the interval."""
    retired_evs: int
    srtt_us: float | None
    """Mean smoothed RTT of the connections that have one."""
    sender: bool
    """This end sends the data."""
    streams: tuple[StreamInterval, ...] = ()
    """Each connection's part (empty with one connection, whose part is the sum)."""

    def to_json(self) -> JsonObject:
        total = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "streams"}
        if not self.streams:
            return {"sum": total}
        return {"streams": [s.to_json() for s in self.streams], "sum": total}

    @classmethod
    def from_json(cls, raw: object) -> Interval:
        return _parse("interval", cls._build, raw)

    @classmethod
    def _build(cls, raw: Mapping[str, Any]) -> Interval:
        s = _object(raw["sum"], "interval.sum")
        streams = tuple(StreamInterval.from_json(x) for x in raw.get("streams", ()))
        total = {f.name: s[f.name] for f in fields(cls) if f.name != "streams"}
        return cls(**total, streams=streams)


# ------------------------------------------------------------------ end


@dataclass(frozen=True, slots=True)
class SenderEnd(Record):
    """One connection's sums from its sender's report (the E message or our own)."""

    bytes: int
    seconds: float
    bits_per_second: float
    retransmits: int
    srtt_us: float | None


@dataclass(frozen=True, slots=True)
class ReceiverEnd(Record):
    """One connection's sums from its receiver's report (the R message or our own)."""

    bytes: int
    seconds: float
    bits_per_second: float


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """One connection at the end: both ends' sums, the verdict, both ends' counters."""

    id: int
    sender: SenderEnd
    receiver: ReceiverEnd
    verified: bool
    error: str | None
    """Why the connection failed, if it did."""
    sender_counters: dict[str, int]
    """The sender's ConnCounters (protocol/counters.py), as in its report."""
    receiver_counters: dict[str, int]

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "sender": self.sender.to_json(),
            "receiver": self.receiver.to_json(),
            "verified": self.verified,
            "error": self.error,
            "sender_counters": self.sender_counters,
            "receiver_counters": self.receiver_counters,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> StreamEnd:
        return cls(
            raw["id"], SenderEnd.from_json(raw["sender"]), ReceiverEnd.from_json(raw["receiver"]),
            raw["verified"], raw["error"], dict(raw["sender_counters"]),
            dict(raw["receiver_counters"]),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Sum(Record):
    """iperf3's sums over the connections, from 0 to ``seconds`` (the longest one's)."""

    seconds: float
    bytes: int
    bits_per_second: float

    def to_json(self) -> JsonObject:
        return {"start": 0, "end": self.seconds, **fields_json(self)}


@dataclass(frozen=True, slots=True)
class ReceivedSum(_Sum):
    """iperf3's ``sum_received``: the receivers' sums."""


@dataclass(frozen=True, slots=True)
class SentSum(_Sum):
    """iperf3's ``sum_sent``: the senders' sums, and their retransmissions."""

    retransmits: int


PLANE_COUNTS = ("active_evs", "usable_evs", "retired_evs", "sent", "acked", "ecn", "lost")
"""A plane's counts in a sender's report, summed over its connections."""


@dataclass(frozen=True, slots=True)
class PlaneEnd(Record):
    """One plane, the sender's view, summed over the connections."""

    plane: int
    share: float
    """Its part of all data packets sent."""
    active_evs: int
    usable_evs: int
    retired_evs: int
    sent: int
    """Data packets sent."""
    acked: int
    ecn: int
    lost: int
    window: int
    """Congestion windows, bytes, summed."""
    marked: float
    """The most marked connection's moving average of ECN echoes (0 as an integer
    until a connection reports one, as json.dumps has always written it)."""


@dataclass(frozen=True, slots=True)
class EvEnd(EvReport):
    """One EV of one connection at the end: its sender's report of it (the E message or
    our own), and which connection; ``stream`` comes first in JSON."""

    stream: int
    """The connection's index in the run."""

    def to_json(self) -> JsonObject:
        # fields_json writes stream last again; a key written twice keeps its first place
        return {"stream": self.stream, **fields_json(self)}


@dataclass(frozen=True, slots=True)
class CpuUtilization:
    """iperf3's ``cpu_utilization_percent``: this process's, and the peer's when it said."""

    host_total: float
    host_user: float
    host_system: float
    remote_total: float | None = None
    """The peer's, from its E or R message (its busiest connection's); None: it did
    not say (it failed first)."""
    remote_user: float | None = None
    remote_system: float | None = None

    def to_json(self) -> dict[str, float]:
        out = {
            "host_total": self.host_total,
            "host_user": self.host_user,
            "host_system": self.host_system,
        }
        if self.remote_total is not None:
            assert self.remote_user is not None
            assert self.remote_system is not None
            out |= {
                "remote_total": self.remote_total,
                "remote_user": self.remote_user,
                "remote_system": self.remote_system,
            }
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> CpuUtilization:
        remote = [raw.get(k) for k in ("remote_total", "remote_user", "remote_system")]
        return cls(raw["host_total"], raw["host_user"], raw["host_system"], *remote)


@dataclass(frozen=True, slots=True)
class EndDoc:
    """iperf3's ``end`` object: per connection, the sums, planes, EVs, CPU, the verdict."""

    streams: tuple[StreamEnd, ...]
    sum_sent: SentSum
    sum_received: ReceivedSum
    verified: bool
    """Every connection's byte count and digest equal on both ends."""
    planes: tuple[PlaneEnd, ...]
    evs: tuple[EvEnd, ...]
    endpoint: dict[str, object]
    """The endpoint's counters (MrcEndpoint.counters)."""
    cpu_utilization_percent: CpuUtilization
    cpu_seconds: float
    """This process's CPU seconds over the test."""

    def to_json(self) -> JsonObject:
        return {
            "streams": [s.to_json() for s in self.streams],
            "sum_sent": self.sum_sent.to_json(),
            "sum_received": self.sum_received.to_json(),
            "verified": self.verified,
            "planes": [p.to_json() for p in self.planes],
            "evs": [e.to_json() for e in self.evs],
            "endpoint": self.endpoint,
            "cpu_utilization_percent": self.cpu_utilization_percent.to_json(),
            "cpu_seconds": self.cpu_seconds,
        }

    @classmethod
    def from_json(cls, raw: object) -> EndDoc:
        return _parse("end", cls._build, raw)

    @classmethod
    def _build(cls, raw: Mapping[str, Any]) -> EndDoc:
        return cls(
            tuple(StreamEnd.from_json(s) for s in raw["streams"]),
            SentSum.from_json(raw["sum_sent"]),
            ReceivedSum.from_json(raw["sum_received"]),
            raw["verified"],
            tuple(PlaneEnd.from_json(p) for p in raw["planes"]),
            tuple(EvEnd.from_json(e) for e in raw["evs"]),
            dict(raw["endpoint"]),
            CpuUtilization.from_json(raw["cpu_utilization_percent"]),
            raw["cpu_seconds"],
        )


# ------------------------------------------------------------------ the -J document


@dataclass(frozen=True, slots=True)
class PerfReport:
    """One -J document: the start, the intervals and the end of one test ({} for a part
    the run did not get to)."""

    start: StartDoc | None = None
    intervals: Sequence[Interval] = ()
    end: EndDoc | None = None
    error: str | None = None
    """Why the test ended early (Ctrl-C: "interrupt - the client has terminated"); iperf3
    writes the key only then."""

    def to_json(self) -> JsonObject:
        doc: JsonObject = {
            "start": {} if self.start is None else self.start.to_json(),
            "intervals": [i.to_json() for i in self.intervals],
            "end": {} if self.end is None else self.end.to_json(),
        }
        if self.error is not None:
            doc["error"] = self.error
        return doc

    @classmethod
    def from_json(cls, raw: object) -> PerfReport:
        return _parse("report", cls._build, raw)

    @classmethod
    def _build(cls, raw: Mapping[str, Any]) -> PerfReport:
        start, end = raw["start"], raw["end"]
        return cls(
            StartDoc.from_json(start) if start else None,
            tuple(Interval.from_json(i) for i in raw["intervals"]),
            EndDoc.from_json(end) if end else None,
            raw.get("error"),
        )
