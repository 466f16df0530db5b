"""Protocol core throughput: data packets per CPU second on each side of a connection.

The core is driven through the entry points the socket endpoint uses. The sender side is
``send_message`` + ``burst_to_send`` (segmentation, EV choice, new data as ``DataRun``s) +
SACK processing; the receiver side is ``receive_records`` of each burst's data packets
(placement, SACK decisions) + building its SACKs. Two cores are pumped in memory with
explicit times (no loss), and the CPU time of each side is measured separately.

Each mode runs side by side in one process: the core alone (each data packet's and SACK's
fields read from the objects into records, as the burst decoder would make them,
wire/records.py), then the core with every packet going through the endpoint's burst
encoder and burst receiver (io/batchio.py: ``add_run`` and ``add``, then ``records`` of the
UDP payloads as a socket would deliver them) in each implementation available (the
pure-Python twin, and C when ``batchio.BACKEND == "c"``), so the IO layer knows its
per-core packet budget. Moving the bytes from one side's encoder to the other's receive
slots (the kernel's work) is not counted. Ratios are printed against the core alone.

When the compiled core is live (csrc/build_core.py), the same modes run again in a child
process with the pure-Python reference everywhere (``MRC_PUREPYTHON=1``: the core from its
source and the Python codec), and the ratios of the two are printed: the core alone
against the core alone (what the compilation buys), each codec mode against the
reference's codec mode (what the native build buys end to end).

    python bench/core.py                 # about 40 s
    python bench/core.py --quick
    python bench/core.py --config perf   # as mrc perf runs the core: NSCC, 9 KB, 128 KB messages
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv6Address

from mrc_transport.io import batchio
from mrc_transport.io.receive import decode_one, hand_over
from mrc_transport.io.tuning import io_config
from mrc_transport.perf.session import MessagePool
from mrc_transport.protocol import COMPILED, Config, Endpoint, events
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.segments import DataRun, Outgoing
from mrc_transport.wire import frames
from mrc_transport.wire.records import OTHER_REC, RxMeta, RxRec, record_of
from srv6.path import SrPath


def sr_paths(src: int, dst: int, planes: int = 2, per_plane: int = 4) -> list[SrPath]:
    out = []
    for p in range(planes):
        a, b = IPv6Address(f"fd00:{p}::{src}"), IPv6Address(f"fd00:{p}::{dst}")
        for k in range(per_plane):
            out.append(SrPath(p, ("t0", f"t1-{k}", "t0"), a, b, b, (b,), f"p{p}"))
    return out


_PATHS: dict[tuple[SrPath, int, int], frames.PathHeader] = {}
_SRCS: dict[SrPath, bytes] = {}


def _path(path: SrPath, ev: int, dscp: int) -> frames.PathHeader:
    """One PathHeader per (path, EV, DSCP), as the endpoint keeps them: the C codec caches
    its header template per PathHeader object, and rebuilding it per packet costs more
    than the encode itself."""
    key = (path, ev, dscp)
    ph = _PATHS.get(key)
    if ph is None:
        ph = _PATHS[key] = frames.PathHeader(path.src.packed, path.dst.packed, ev=ev, dscp=dscp)
    return ph


def _data_path(ev: Ev) -> frames.PathHeader:
    return _path(ev.path, ev.value, frames.DSCP_DATA)


def _src(path: SrPath) -> bytes:
    src = _SRCS.get(path)
    if src is None:
        src = _SRCS[path] = path.src.packed
    return src


class Objects:
    """The core alone: a burst handed over as it is, its data packets and SACKs as the
    records the endpoint's burst decoder would make of them (each payload copied into one
    buffer in the untimed hand-over, the kernel's copy into a socket's slots), the other
    packets as objects; the receiving core takes them as the endpoint does (``hand_over``)."""

    name = "core alone"

    def __init__(self) -> None:
        self.others: dict[int, frames.Packet] = {}

    def send(self, items: list[Outgoing]) -> object:
        return items

    def carry(self, sent: object) -> object:
        assert isinstance(sent, list)
        recs: list[RxRec] = []
        buf = bytearray()
        self.others = {}
        for item in sent:
            if isinstance(item, DataRun):
                for i, ev in enumerate(item.evs):
                    payload = item.payload(i)
                    recs.append(record_of(
                        item.header(i), ev.value, 0, _src(ev.path), len(buf), len(payload)
                    ))  # fmt: skip
                    buf += payload
                continue
            rec = record_of(item.header, item.ev, 0, _src(item.path), 0, 0)
            if rec is OTHER_REC:
                self.others[len(recs)] = frames.Packet(
                    _path(item.path, item.ev, item.dscp), item.header, bytes(item.payload)
                )
            recs.append(rec)
        return recs, memoryview(buf)

    def deliver(self, carried: object, core: Endpoint, now: float) -> None:
        assert isinstance(carried, tuple)
        recs, view = carried
        others = self.others
        hand_over(core, recs, view, now, lambda i: core.receive(others[i], now), lambda: None)


class Codec:
    """The endpoint's encoding and decoding: a burst into one buffer by a burst encoder
    (``add_run``, ``add``), its UDP payloads into a burst receiver's slots as a
    socket delivers them (not counted), decoded by ``records``: data packets and SACKs to
    the core as fields, the rest one at a time (io/receive.py ``Receiving.receive_ready``)."""

    def __init__(
        self,
        name: str,
        encoder: Callable[[int, int], batchio.BurstEncoder],
        receiver: Callable[[int, int], batchio.BurstReceiver],
        max_pkts: int,
        mss: int,
    ) -> None:
        self.name = name
        self.enc = encoder(max_pkts, mss + 256)  # + IPv6, UDP and MRC headers
        self.rx = receiver(max_pkts, mss + 256)
        self.metas: list[RxMeta] = []

    def send(self, items: list[Outgoing]) -> object:
        enc = self.enc
        enc.clear()
        for item in items:
            if isinstance(item, DataRun):
                enc.add_run(item, _data_path)
            else:
                enc.add(_path(item.path, item.ev, item.dscp), item.header, item.payload)
        return enc

    def carry(self, sent: object) -> object:
        """What the kernel does: each packet's UDP payload into a slot, with the metadata
        a socket reports (IPv6 + UDP headers are 48 bytes on these paths)."""
        enc, rx = self.enc, self.rx
        self.metas = []
        for i in range(len(enc)):
            pkt = enc.packet(i)
            rx.view[i * rx.slot_size : i * rx.slot_size + len(pkt) - 48] = pkt[48:]
            first, sport = int.from_bytes(pkt[:4], "big"), int.from_bytes(pkt[40:42], "big")
            tclass, flow = (first >> 20) & 0xFF, first & 0xFFFFF
            self.metas.append((len(pkt) - 48, 0, tclass, sport, flow, pkt[8:24], pkt[24:40]))
        return self.metas

    def deliver(self, carried: object, core: Endpoint, now: float) -> None:
        rx = self.rx

        def other(i: int) -> None:
            core.receive(decode_one(rx, i, frames.MRC_UDP_PORT), now)

        hand_over(core, rx.records(self.metas), rx.view, now, other, lambda: None)


Link = Objects | Codec


@dataclass
class Result:
    data_packets: int
    sender_cpu: float
    receiver_cpu: float

    @property
    def sender_pps(self) -> float:
        return self.data_packets / self.sender_cpu

    @property
    def receiver_pps(self) -> float:
        return self.data_packets / self.receiver_cpu


@dataclass(frozen=True)
class Setup:
    """How the two cores are configured and stepped."""

    cfg: Config
    """The configuration of both ends."""
    per_plane: int
    """Paths per plane (2 planes)."""
    step: float
    """Simulated seconds per round trip of the loop."""
    msg_size: int | None = None
    """The transfer in messages of this size, each buffer recycled once delivered, as
    ``mrc perf`` sends and receives (None: one message)."""


def setup(name: str, mss: int) -> Setup:
    """ "bench": a fixed 512 KB window, bursts as large as the window allows (the core's own
    ceiling); "perf": as ``mrc perf`` runs it on the unshaped lab (io_config: bursts of 32,
    a SACK per 4 packets; NSCC per plane, 2 planes x 2 paths, a 9 KB MSS unless --mss; 128 KB
    messages, each buffer recycled, as ``mrc perf``'s default; one 28 MB message instead
    cost the receiver a page fault per 4 KB of fresh buffer: 2.7x fewer packets per CPU s)."""
    if name == "bench":
        cfg = Config(mss=mss, cc="fixed", fixed_window=512 * 1024, rcvbuf=1 << 30)
        return Setup(cfg, 4, 20e-6)
    cfg = io_config(Config(mss=mss, nic_rate_bps=8e9, rcvbuf=1 << 30))
    return Setup(cfg, 2, 200e-6, msg_size=128 * 1024)


def run(link: Link, nbytes: int, how: Setup) -> Result:
    """One transfer of ``nbytes``; CPU seconds spent on each side."""
    cfg = how.cfg
    client = Endpoint(cfg, random.Random(1))
    server = Endpoint(cfg, random.Random(2), lambda ph: sr_paths(2, 1, per_plane=how.per_plane))
    conn = client.connect(sr_paths(1, 2, per_plane=how.per_plane), 0.0)
    now, cpu_s, cpu_r, got = 0.0, 0.0, 0.0, 0
    messages = _messages(nbytes, how.msg_size)
    sent = False
    clock = time.process_time
    while got < len(messages):
        t0 = clock()
        if conn.state.value == "established" and not sent:
            for msg in messages:
                conn.send_message(msg, now)
            sent = True
        out = link.send(client.burst_to_send(now))
        t1 = clock()
        carried = link.carry(out)
        t2 = clock()
        link.deliver(carried, server, now)
        if (t := server.get_timer()) is not None and t <= now:
            server.handle_timer(now)
        back = link.send(list(server.datagrams_to_send(now)))
        while (event := server.next_event()) is not None:
            if isinstance(event, events.MessageReceived) and sent:
                got += 1
                server.connections[event.conn].recycle(event.data)
        t3 = clock()
        carried = link.carry(back)
        t4 = clock()
        link.deliver(carried, client, now)
        if (t := client.get_timer()) is not None and t <= now:
            client.handle_timer(now)
        while client.next_event() is not None:
            pass
        t5 = clock()
        cpu_s += (t1 - t0) + (t5 - t4)
        cpu_r += t3 - t2
        now += how.step
    return Result(conn.counters.data_sent, cpu_s, cpu_r)


def _messages(nbytes: int, size: int | None) -> list[memoryview]:
    """The transfer's messages as ``mrc perf`` sends them (perf/session.py
    ``MessagePool``: a kind byte and a body, cut in turn from a pool of written bytes).
    Not views of ``bytes(nbytes)``: its pages are mapped at the first read, a fault per
    4 KB that no live sender pays, which put the sender's C codec mode at ~2 us a packet
    more than its encoding costs."""
    size = size or nbytes
    pool = MessagePool(size)
    return [pool.take(min(size, nbytes - off))[0] for off in range(0, nbytes, size)]


def best(link: Link, nbytes: int, how: Setup, repeats: int) -> Result:
    runs = [run(link, nbytes, how) for _ in range(repeats)]
    return Result(
        runs[0].data_packets,
        min(r.sender_cpu for r in runs),
        min(r.receiver_cpu for r in runs),
    )


def measure(args: argparse.Namespace) -> tuple[int, list[tuple[str, Result]]]:
    """Every mode of this process's core: (MSS, [(mode, result)])."""
    mss = args.mss or (1200 if args.config == "bench" else 8916)
    how = setup(args.config, mss)
    nbytes = (4 if args.quick else 24) * 1_000_000 * (mss // 1200 if args.config == "perf" else 1)
    repeats = 1 if args.quick else 3
    burst = 2 * how.cfg.max_burst + 64  # the client's data and control, or the server's SACKs
    modes: list[Link] = [
        Objects(),
        Codec("core + python codec", batchio.PyBurstEncoder, batchio.PyBurstReceiver, burst, mss),
    ]
    if batchio.BACKEND == "c":
        c = Codec("core + C codec", batchio.CBurstEncoder, batchio.CBurstReceiver, burst, mss)
        modes.append(c)
    else:
        print("C fast path not built: pure-Python figures only")
    print(
        f"{nbytes / 1e6:.0f} MB, MSS {mss}, config {args.config}, best of {repeats}; "
        "data packets per CPU second"
    )
    return mss, [(link.name, best(link, nbytes, how, repeats)) for link in modes]


def interpreted(argv: list[str]) -> list[tuple[str, Result]]:
    """The same modes with the pure-Python reference, in a child process."""
    env = {**os.environ, "MRC_PUREPYTHON": "1"}
    out = subprocess.run(
        [sys.executable, __file__, *argv, "--child"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = json.loads(out.splitlines()[-1])
    return [(name, Result(*fields)) for name, fields in rows]


def _against_the_reference(
    rows: list[tuple[str, Result]], reference: list[tuple[str, Result]]
) -> None:
    """Each mode against the pure-Python reference's: the core alone against the core
    alone, a codec mode against the reference's Python codec mode."""
    ref = dict(reference)
    print(
        "baseline: the pure-Python reference (MRC_PUREPYTHON=1: the core from its source, "
        "the Python codec), in a child process; native / reference:"
    )
    print(f"{'mode':<22}{'against':<22}{'sender x':>10}{'receiver x':>12}")
    for name, r in rows:
        against = name if name in ref else "core + python codec"
        i = ref[against]
        print(
            f"{name:<22}{against:<22}{r.sender_pps / i.sender_pps:>10.2f}"
            f"{r.receiver_pps / i.receiver_pps:>12.2f}"
        )
    print(f"{'reference':<22}{'sender pps':>12}{'receiver pps':>14}")
    for name, i in reference:
        print(f"{name:<22}{i.sender_pps:>12,.0f}{i.receiver_pps:>14,.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller transfer, one repeat")
    parser.add_argument(
        "--config",
        choices=("bench", "perf"),
        default="bench",
        help="bench: fixed window, large bursts; perf: as mrc perf runs it",
    )
    parser.add_argument("--mss", type=int, help="default 1200 (bench) or 8916 (perf)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    mss, rows = measure(args)
    if args.child:  # the parent reads the last line
        print(
            json.dumps([(name, [r.data_packets, r.sender_cpu, r.receiver_cpu]) for name, r in rows])
        )
        return 0
    print(f"protocol core: {'compiled (mypyc)' if COMPILED else 'interpreted (its source)'}")
    print(f"{'mode':<22}{'sender pps':>12}{'receiver pps':>14}{'sender Gb/s':>13}{'vs alone':>10}")
    for name, r in rows:
        gbps = r.sender_pps * mss * 8 / 1e9
        print(
            f"{name:<22}{r.sender_pps:>12,.0f}{r.receiver_pps:>14,.0f}{gbps:>13.2f}"
            f"{r.sender_pps / rows[0][1].sender_pps:>10.2f}"
        )
    if COMPILED:
        _against_the_reference(rows, interpreted(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
