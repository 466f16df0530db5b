"""Protocol core throughput: data packets per CPU second on each side of a connection.

The sender side is ``send_message`` + ``datagrams_to_send`` (segmentation, EV choice,
headers) + SACK processing; the receiver side is ``receive`` of data (placement, SACK
decisions) + building its SACKs. Two cores are pumped in memory with explicit times (no
loss, fixed window), and the CPU time of each side is measured separately.

Each mode runs side by side in one process: the core alone (frames handed over as
objects), then the core with every packet encoded and decoded through each codec backend
available (pure Python, and C when ``mrc_transport.wire.BACKEND == "c"``), so the IO layer
knows its per-core packet budget. Ratios are printed against the core alone.

When the compiled core is live (csrc/build_core.py), the same modes run again in a child
process with the core from its source (``MRC_CORE_SOURCE=1``, the C codec as built), and
the ratio of the two is printed: what the compilation buys, measured side by side.

    python bench/core.py                 # about 40 s
    python bench/core.py --quick
    python bench/core.py --config perf   # as mrc perf runs the core: NSCC, 9 KB, bursts of 32
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv6Address
from types import ModuleType

from mrc_transport import wire
from mrc_transport.io.endpoint import io_config
from mrc_transport.protocol import COMPILED, Config, Endpoint, Transmit
from mrc_transport.wire import codec, frames
from srv6.path import SrPath

Encode = Callable[[Transmit], object]
Decode = Callable[[object], frames.Packet]


def sr_paths(src: int, dst: int, planes: int = 2, per_plane: int = 4) -> list[SrPath]:
    out = []
    for p in range(planes):
        a, b = IPv6Address(f"fd00:{p}::{src}"), IPv6Address(f"fd00:{p}::{dst}")
        for k in range(per_plane):
            out.append(SrPath(p, ("t0", f"t1-{k}", "t0"), a, b, b, (b,), f"p{p}"))
    return out


_PATHS: dict[tuple[SrPath, int, int], frames.PathHeader] = {}


def _path(tx: Transmit) -> frames.PathHeader:
    """One PathHeader per (path, EV, DSCP), as an IO layer would keep them: the C codec
    caches its header template per PathHeader object, and rebuilding it per packet costs
    more than the encode itself."""
    key = (tx.path, tx.ev, tx.dscp)
    ph = _PATHS.get(key)
    if ph is None:
        ph = _PATHS[key] = frames.PathHeader(
            tx.path.src.packed, tx.path.dst.packed, ev=tx.ev, dscp=tx.dscp
        )
    return ph


def as_objects() -> tuple[Encode, Decode]:
    """Hand the frame over as it is (the core alone)."""

    def encode(tx: Transmit) -> object:
        return frames.Packet(_path(tx), tx.header, bytes(tx.payload))

    def decode(obj: object) -> frames.Packet:
        assert isinstance(obj, frames.Packet)
        return obj

    return encode, decode


def through(backend: ModuleType) -> tuple[Encode, Decode]:
    """Encode to bytes on the sending side, decode on the receiving side, with ``backend``."""

    def encode(tx: Transmit) -> object:
        return backend.encode(_path(tx), tx.header, tx.payload)

    def decode(obj: object) -> frames.Packet:
        packet: frames.Packet = backend.decode_untrusted(obj)
        return packet

    return encode, decode


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


def setup(name: str, mss: int) -> Setup:
    """ "bench": a fixed 512 KB window, bursts as large as the window allows (the core's own
    ceiling); "perf": as ``mrc perf`` runs it on the unshaped lab (io_config: bursts of 32,
    a SACK per 4 packets; NSCC per plane, 2 planes x 2 paths, a 9 KB MSS unless --mss)."""
    if name == "bench":
        cfg = Config(mss=mss, cc="fixed", fixed_window=512 * 1024, rcvbuf=1 << 30)
        return Setup(cfg, 4, 20e-6)
    return Setup(io_config(Config(mss=mss, nic_rate_bps=8e9, rcvbuf=1 << 30)), 2, 200e-6)


def run(trip: tuple[Encode, Decode], nbytes: int, how: Setup) -> Result:
    """One transfer of ``nbytes``; CPU seconds spent on each side."""
    encode, decode = trip
    cfg = how.cfg
    client = Endpoint(cfg, random.Random(1))
    server = Endpoint(cfg, random.Random(2), lambda ph: sr_paths(2, 1, per_plane=how.per_plane))
    conn = client.connect(sr_paths(1, 2, per_plane=how.per_plane), 0.0)
    now, cpu_s, cpu_r, got = 0.0, 0.0, 0.0, 0
    data = memoryview(bytes(nbytes))
    sent = False
    clock = time.process_time
    while got < 1:
        t0 = clock()
        if conn.state.value == "established" and not sent:
            conn.send_message(data, now)
            sent = True
        to_server = [encode(tx) for tx in client.datagrams_to_send(now)]
        t1 = clock()
        for p in to_server:
            server.receive(decode(p), now)
        if (t := server.get_timer()) is not None and t <= now:
            server.handle_timer(now)
        to_client = [encode(tx) for tx in server.datagrams_to_send(now)]
        while (event := server.next_event()) is not None:
            got += type(event).__name__ == "MessageReceived" and sent
        t2 = clock()
        for p in to_client:
            client.receive(decode(p), now)
        if (t := client.get_timer()) is not None and t <= now:
            client.handle_timer(now)
        while client.next_event() is not None:
            pass
        t3 = clock()
        cpu_s += (t1 - t0) + (t3 - t2)
        cpu_r += t2 - t1
        now += how.step
    return Result(conn.counters.data_sent, cpu_s, cpu_r)


def best(trip: tuple[Encode, Decode], nbytes: int, how: Setup, repeats: int) -> Result:
    runs = [run(trip, nbytes, how) for _ in range(repeats)]
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
    modes = [("core alone", as_objects()), ("core + python codec", through(codec))]
    if wire.BACKEND == "c":
        fast = importlib.import_module("mrc_transport.wire.fast")
        modes.append(("core + C codec", through(fast)))
    else:
        print("C fast path not built: pure-Python figures only")
    print(
        f"{nbytes / 1e6:.0f} MB, MSS {mss}, config {args.config}, best of {repeats}; "
        "data packets per CPU second"
    )
    return mss, [(name, best(trip, nbytes, how, repeats)) for name, trip in modes]


def interpreted(argv: list[str]) -> list[tuple[str, Result]]:
    """The same modes with the core from its source, in a child process."""
    env = {**os.environ, "MRC_CORE_SOURCE": "1"}
    out = subprocess.run(
        [sys.executable, __file__, *argv, "--child"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = json.loads(out.splitlines()[-1])
    return [(name, Result(*fields)) for name, fields in rows]


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
        print("the same with the core interpreted (MRC_CORE_SOURCE=1), and compiled / interpreted:")
        print(
            f"{'mode':<22}{'sender pps':>12}{'receiver pps':>14}{'sender x':>13}{'receiver x':>12}"
        )
        for (name, r), (_, i) in zip(rows, interpreted(argv), strict=True):
            print(
                f"{name:<22}{i.sender_pps:>12,.0f}{i.receiver_pps:>14,.0f}"
                f"{r.sender_pps / i.sender_pps:>13.2f}{r.receiver_pps / i.receiver_pps:>12.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
