"""Flows on a running lab: receivers first, then senders, each a child in its namespace.

A ``Flow`` is data: which transport (MRC through `mrc perf`, or a baseline of
harness/baselines.py through harness/tcpflow.py: pinned TCP, TCP that rehashes, MPTCP),
between which hosts, on which port, for how long. ``Flows``
runs a set of them on one lab and keeps what they said:

- ``start_receivers`` starts every receiver and returns once each listens;
- ``start_senders`` starts senders (all at once, or a subset later) and, when asked, waits
  until each has started (the MRC client's ``start`` event, the TCP sender's connect);
- ``finish`` waits for every child and judges each flow: MRC by the client's exit code and
  its digests (xxh3 of every byte, both ends), a baseline by the receiver's pattern check
  and its byte count against the sender's;
- ``deliveries`` reads the receivers' records (harness/records.py), one per delivery.

The collisions demo and `mrc repro` run their flows through it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from labs.topology import Topology, namespace
from mrc_transport.harness.baselines import FlowKind, baseline
from mrc_transport.harness.procs import Child, Children, perf_argv, tcpflow_argv, warm_argv
from mrc_transport.harness.records import read_records
from mrc_transport.harness.timeline import Delivery
from mrc_transport.io import eventlog
from mrc_transport.perf.report import EndDoc

EXIT_SLACK_S = 120.0
"""A sender may run this much longer than its -t before it counts as hung."""


@dataclass(frozen=True, slots=True)
class Flow:
    """One transfer between two lab hosts."""

    name: str
    """Flow id in the delivery records, e.g. "mrc", "tcp" or "h4->h0"."""
    kind: FlowKind
    """mrc (`mrc perf`, sprayed over every path) or a baseline: tcp (one pinned ECMP path
    per stream), tcp-rehash (moved on RTO), mptcp (a subflow per plane)."""
    src: str
    """Sending host."""
    dst: str
    """Receiving host."""
    port: int
    """UDP (MRC) or TCP port of the receiver; flows into one host need different ports."""
    seconds: float
    """How long the sender sends (-t); with ``nbytes``, about how long that takes."""
    streams: int = 1
    """Parallel connections (-P): MRC connections, or TCP connections hashed one by one."""
    msg_len: str | None = None
    """MRC message size (-l; one delivery record per message); None: perf's default."""
    scheduler: str | None = None
    """MRC spraying scheduler (--scheduler); None: perf's default."""
    events: bool = False
    """MRC: keep both ends' recovery events (--events) for ``recovery_events``."""
    evs: int | None = None
    """MRC: active EVs (--evs); None: perf's default."""
    recovery: str | None = None
    """MRC: loss recovery (--recovery, both ends): "go-back-n" with ``evs`` 1 is the
    emulated RoCE reliable connection; None: MRC's own."""
    no_trim: bool = False
    """MRC: data in the no-trim class (--no-trim, both ends): dropped, not trimmed."""
    cc_scope: str | None = None
    """MRC: the sender's --cc-scope ("plane": a window per plane, ours); None: perf's
    default (one window per connection, as published)."""
    nbytes: int | None = None
    """Send this many bytes (-n) instead of for ``seconds``: an MRC sender stops taking
    data at -t but delivers what it queued (up to 4 MiB, perf/session.py UNACKED_LIMIT), which
    at a few Mbit/s is seconds more."""


def _stem(tag: str, flow: Flow) -> str:
    return f"{tag}-{flow.src}-{flow.dst}"


class Flows:
    """The flows of one run on one lab; files go to ``out`` named ``TAG-SRC-DST.*``."""

    def __init__(self, lab: str, topo: Topology, out: Path, tag: str, children: Children) -> None:
        self.lab, self.topo, self.out, self.tag, self.children = lab, topo, out, tag, children
        self.flows: dict[str, Flow] = {}
        self.receivers: dict[str, Child] = {}
        self.senders: dict[str, Child] = {}
        self.started: dict[str, float] = {}
        """time.monotonic() each sender started sending (its ``start`` event: the TCP
        sender's own stamp, else when the event arrived)."""

    def records_path(self, flow: Flow) -> Path:
        return self.out / f"{_stem(self.tag, flow)}.jsonl"

    def events_path(self, flow: Flow) -> Path:
        return self.out / f"{_stem(self.tag, flow)}.events.jsonl"

    def receiver_events_path(self, flow: Flow) -> Path:
        return self.out / f"{_stem(self.tag, flow)}.events.recv.jsonl"

    # -- argv ---------------------------------------------------------------------------

    def receiver_argv(self, flow: Flow) -> list[str]:
        records = str(self.records_path(flow))
        if flow.kind != "mrc":
            argv = [*baseline(flow.kind).recv_args(flow.port, flow.name), "--records", records]
            if flow.streams > 1:
                argv += ["--streams", str(flow.streams)]
            return tcpflow_argv(*argv)
        events = ["--events", str(self.receiver_events_path(flow))] if flow.events else []
        recovery = ["--recovery", flow.recovery] if flow.recovery else []
        no_trim = ["--no-trim"] if flow.no_trim else []
        return perf_argv(
            "-s", "-1", "--lab", self.lab, "-p", str(flow.port), "--json-stream", "-i", "0",
            "--records", records, "--flow", flow.name, *events, *recovery, *no_trim,
        )  # fmt: skip

    def sender_argv(self, flow: Flow) -> list[str]:
        limit = ["-n", str(flow.nbytes)] if flow.nbytes else ["-t", f"{flow.seconds:.3f}"]
        if flow.kind != "mrc":
            b = baseline(flow.kind)
            argv = [*b.send_args(self.topo, flow.src, flow.dst, flow.port), *limit]
            if flow.streams > 1:
                argv += ["-P", str(flow.streams)]
            return tcpflow_argv(*argv)
        argv = ["-c", flow.dst, "--lab", self.lab, "-p", str(flow.port), *limit]
        if flow.streams > 1:
            argv += ["-P", str(flow.streams)]
        if flow.msg_len is not None:
            argv += ["-l", flow.msg_len]
        if flow.scheduler is not None:
            argv += ["--scheduler", flow.scheduler]
        if flow.events:
            argv += ["--events", str(self.events_path(flow))]
        if flow.evs is not None:
            argv += ["--evs", str(flow.evs)]
        if flow.recovery is not None:
            argv += ["--recovery", flow.recovery]
        if flow.no_trim:
            argv.append("--no-trim")
        if flow.cc_scope is not None:
            argv += ["--cc-scope", flow.cc_scope]
        return perf_argv(*argv, "--json-stream", "-i", "0")

    # -- running ------------------------------------------------------------------------

    async def start_receivers(self, nursery: Any, flows: Sequence[Flow]) -> None:
        """Every receiver started and listening (a HarnessError names one that is not)."""
        for flow in flows:
            self.flows[flow.name] = flow
            for path in (self.records_path(flow), self.events_path(flow)):
                path.unlink(missing_ok=True)
            self.receivers[flow.name] = await self.children.start(
                nursery,
                f"{_stem(self.tag, flow)}-recv",
                namespace(self.lab, flow.dst),
                self.receiver_argv(flow),
            )
        for flow in flows:
            await self.receivers[flow.name].wait_event("listening", 30)

    async def start_senders(
        self,
        nursery: Any,
        flows: Sequence[Flow],
        wait_start: bool = False,
        together: bool = False,
    ) -> None:
        """Start the senders of ``flows`` (their receivers must listen). ``together``:
        each imports first (harness/launch.py) and all are let go at once, so they start
        sending within a fraction of a second rather than one import apart.
        ``wait_start``: return once each has started sending."""
        for flow in flows:
            argv = self.sender_argv(flow)
            child = await self.children.start(
                nursery,
                f"{_stem(self.tag, flow)}-send",
                namespace(self.lab, flow.src),
                warm_argv(argv) if together else argv,
                stdin=together,
            )
            # set before the next checkpoint: the child's reader has not run yet
            child.on_event = partial(self._on_sender_event, flow.name)
            self.senders[flow.name] = child
        if together:
            for flow in flows:
                await self.senders[flow.name].wait_event("ready", 60)
            for flow in flows:
                await self.senders[flow.name].go()
        if wait_start:
            for flow in flows:
                await self.senders[flow.name].wait_event("start", 30)

    def _on_sender_event(self, name: str, ev: Mapping[str, Any]) -> None:
        if ev.get("event") == "start" and name not in self.started:
            stamp = ev.get("t_mono")
            self.started[name] = float(stamp) if isinstance(stamp, float) else time.monotonic()

    async def finish(self) -> dict[str, bool]:
        """Wait for every sender, then its receiver; per flow, was every byte verified."""
        verified: dict[str, bool] = {}
        for name, flow in self.flows.items():
            tx, rx = self.senders[name], self.receivers[name]
            rc = await tx.wait_exit(flow.seconds + EXIT_SLACK_S)
            await rx.wait_exit(60)
            verified[name] = _verified(flow, rc, tx, rx)
        return verified

    def mrc_end(self, name: str) -> EndDoc | None:
        """The MRC client's end document (`mrc perf --json-stream`), None if it gave none."""
        child = self.senders.get(name)
        return child.perf_end() if child is not None else None

    def deliveries(self) -> list[Delivery]:
        out: list[Delivery] = []
        for flow in self.flows.values():
            path = self.records_path(flow)
            if path.exists():
                out += read_records(path)
        return out

    def recovery_events(self, name: str, receiver: bool = False) -> list[dict[str, Any]]:
        """The MRC sender's (or receiver's) recovery events (io/eventlog.py records), []
        without a log."""
        flow = self.flows[name]
        path = self.receiver_events_path(flow) if receiver else self.events_path(flow)
        return eventlog.read(str(path)) if path.exists() else []


def _verified(flow: Flow, rc: int, tx: Child, rx: Child) -> bool:
    if flow.kind == "mrc":
        end = tx.perf_end()
        return rc == 0 and end is not None and end.verified
    return tcp_verified(rx.find("end") or {}, tx.find("end") or {})


def tcp_verified(rx_end: Mapping[str, Any], tx_end: Mapping[str, Any]) -> bool:
    """Every byte matched the pattern and as many arrived as were sent."""
    return bool(rx_end.get("verified")) and rx_end.get("bytes") == tx_end.get("bytes_sent")


def mrc_counters(end: EndDoc | None) -> dict[str, int]:
    """Recovery counters of an MRC client's end document: packets sent again, packets the
    sender found lost (per plane, summed), EVs retired and readmitted (zeros without one)."""
    if end is None:
        return {"retransmits": 0, "lost": 0, "evs_retired": 0, "evs_readmitted": 0}
    return {
        "retransmits": end.sum_sent.retransmits,
        "lost": sum(p.lost for p in end.planes),
        "evs_retired": sum(e.retired for e in end.evs),
        "evs_readmitted": sum(e.readmitted for e in end.evs),
    }


def flow_names(flows: Iterable[Flow]) -> list[str]:
    return [f.name for f in flows]
