"""Codec throughput: encode + decode of one packet, C fast path vs pure-Python reference.

Both backends run in the same process on the same frames, interleaved, so the ratio is
measured side by side (machine load affects both alike). Each row is the best of several
repeats, in packets per second for one encode followed by one decode of the packet as its
receiver sees it (uSID: destination shifted to the final one). Time is this thread's CPU
time, not wall-clock time: on a shared machine, wall-clock time also counts the slices in
which other processes ran instead of this one, which says nothing about either codec.

    python bench/codec.py            # about 25 s
    python bench/codec.py --quick    # about 5 s, noisier
"""

from __future__ import annotations

import argparse
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from mrc_transport.wire import codec
from mrc_transport.wire.frames import (
    DSCP_CONTROL,
    Common,
    DataHeader,
    Flags,
    Header,
    Opcode,
    PathHeader,
    SackHeader,
)

TARGET_RATIO = 10.0

SRC = bytes.fromhex("fd000000000000010000000000000001")
FINAL = bytes.fromhex("fd000000000000020000000000000001")
USID_CONTAINER = bytes.fromhex("fcbbbbbb010002010300fe0000000000")  # F3216: 4 hops
SEGMENTS = (
    bytes.fromhex("fcbb0000000100000000000000000000"),
    bytes.fromhex("fcbb0000000200000000000000000000"),
    bytes.fromhex("fcbb0000000300000000000000000000"),
    FINAL,
)
EV = 0x8001_2345


@dataclass(frozen=True)
class Case:
    """One row of the table."""

    name: str
    """What is measured."""
    path: PathHeader
    """Path the packet is sent on."""
    header: Header
    """MRC header."""
    payload: bytes
    """Data payload (empty for SACKs)."""


def _paths() -> dict[str, PathHeader]:
    usid = PathHeader(src=SRC, dst=USID_CONTAINER, final_dst=FINAL, ev=EV)
    srh = PathHeader(src=SRC, dst=SEGMENTS[0], segments=SEGMENTS, ev=EV)
    return {"uSID": usid, "SRH": srh}


def cases() -> list[Case]:
    data = DataHeader(
        Common(Opcode.WRITE_MIDDLE, Flags.TS, 0x1111, 0x2222), 1000, 7, 8192, 1 << 20, 10**15
    )
    sack = SackHeader(
        Common(Opcode.SACK, Flags.ECN_ECHO, 0x2222, 0x1111),
        1000, 1000, 0xF0F0_0000_0000_00FF, EV, 10**15, 3, 0, 1 << 20,
    )  # fmt: skip
    rows: list[Case] = []
    for size in (4096, 8192):
        payload = os.urandom(size)
        for encoding, path in _paths().items():
            rows.append(Case(f"data {size} B, {encoding}", path, data, payload))
    for encoding, path in _paths().items():
        control = PathHeader(
            src=path.src, dst=path.dst, final_dst=path.final_dst, segments=path.segments,
            ev=path.ev, dscp=DSCP_CONTROL,
        )  # fmt: skip
        rows.append(Case(f"SACK, {encoding}", control, sack, b""))
    return rows


def arrived(path: PathHeader, packet: bytes) -> bytes:
    """The packet at its receiver: a uSID destination has been shifted to the final one."""
    if path.segments or path.final_dst is None:
        return packet
    return packet[:24] + path.final_dst + packet[40:]


def timed_loop(backend: ModuleType, case: Case) -> Callable[[int], float]:
    """A function that runs n encode + decode pairs and returns the CPU seconds they took."""
    encode: Callable[..., bytes] = backend.encode
    decode: Callable[..., object] = backend.decode_untrusted
    path, header, payload = case.path, case.header, case.payload
    received = arrived(path, encode(path, header, payload))
    decode(received)  # warm caches and fail early if the frame does not round-trip

    def run(n: int) -> float:
        t0 = time.thread_time()
        for _ in range(n):
            encode(path, header, payload)
            decode(received)
        return time.thread_time() - t0

    return run


def calibrate(run: Callable[[int], float], seconds: float) -> int:
    """A loop count that takes about ``seconds``, so timer overhead does not matter."""
    n = 64
    while True:
        elapsed = run(n)
        if elapsed >= seconds or n >= 1 << 24:
            return n
        n = max(n * 2, int(n * seconds / max(elapsed, 1e-6)))


def best_rates(backends: list[ModuleType], case: Case, seconds: float, repeats: int) -> list[float]:
    """Best rate of each backend over repeats, the backends interleaved in every repeat so
    a burst of load from elsewhere on the machine hits both, and best-of discards it."""
    runs = [timed_loop(backend, case) for backend in backends]
    counts = [calibrate(run, seconds) for run in runs]
    best = [0.0] * len(backends)
    for _ in range(repeats):
        for i, (run, n) in enumerate(zip(runs, counts, strict=True)):
            best[i] = max(best[i], n / max(run(n), 1e-9))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, noisier figures")
    args = parser.parse_args(argv)
    seconds, repeats = (0.02, 10) if args.quick else (0.03, 40)
    fast: ModuleType | None
    try:
        fast = importlib.import_module("mrc_transport.wire.fast")
    except ImportError:
        print("C fast path not built (make fastpath); pure-Python figures only")
        fast = None
    print(f"{'encode + decode':<22} {'python pkt/s':>14} {'C pkt/s':>12} {'C / python':>11}")
    ratios: list[float] = []
    for case in cases():
        if fast is None:
            (py,) = best_rates([codec], case, seconds, repeats)
            print(f"{case.name:<22} {py:>14,.0f}")
            continue
        py, c = best_rates([codec, fast], case, seconds, repeats)
        ratios.append(c / py)
        print(f"{case.name:<22} {py:>14,.0f} {c:>12,.0f} {c / py:>10.1f}x")
    if ratios:
        met = sum(r >= TARGET_RATIO for r in ratios)
        print(f"target C >= {TARGET_RATIO:.0f}x python: met in {met} of {len(ratios)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
