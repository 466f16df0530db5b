"""The sender's kernel paths side by side: is there one cheaper than the raw socket's?

The raw-socket floor of `bench/perf.py` (its prebuilt MRC packets, 64 a burst over every
path) sent as fast as one core can by a small C program (`bench/kernelpaths.c`, built
here with gcc) through each of:

- raw: a raw IPv6 socket, `sendmmsg` (the floor's and MRC's path: a route lookup per
  packet on its uSID destination, then the IPv6 output path);
- packet: AF_PACKET `SOCK_DGRAM`, `sendmmsg`, each packet to its plane's port and the
  neighbour's MAC (what a sender that picks its port itself would use);
- packet-bypass: the same with `PACKET_QDISC_BYPASS`;
- xdp: AF_XDP in copy mode, a socket and a UMEM per port, each packet copied into the UMEM
  first (where a C data path would encode it), a kick per port per burst.

The bypass and AF_XDP skip the port's qdisc, so they would not be shaped in the shaped
labs. Each run drains the packets at the other host (`bench/perf.py --drain`) and counts
goodput there. Printed: goodput and the sender's CPU per Gbit (user space + kernel) per
path, medians of ``--repeat`` interleaved runs, and each path's ratio to raw (the median
of the runs' ratios). Issue 20 asks 1.0x the raw floor of MRC, whose kernel is ~3/4 of its
sender: only a cheaper kernel path could give it that.

Run as root: .venv/bin/python bench/kernelpaths.py [--seconds N] [--repeat N]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import perf  # bench/perf.py

from labs.apply import down, up
from labs.topology import namespace

MODES = ("raw", "packet", "packet-bypass", "xdp")
HERE = Path(__file__).resolve().parent


def _ip(*args: str) -> list[dict[str, object]]:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout or "[]"))


@functools.cache  # a burst repeats its few paths: ask the kernel once per destination
def _port(dst: bytes) -> str:
    """(in the sender's namespace) ``IFNAME,SRCMAC,DSTMAC`` of the port and neighbour the
    kernel's route to ``dst`` takes."""
    import ipaddress

    route = _ip("-6", "route", "get", str(ipaddress.IPv6Address(dst)))[0]
    dev, via = str(route["dev"]), str(route["gateway"])
    neigh = [n for n in _ip("-6", "neigh", "show", "dev", dev) if n.get("dst") == via]
    if not neigh or "lladdr" not in neigh[0]:
        raise SystemExit(f"kernelpaths.py: no neighbour {via} on {dev}")
    return f"{dev},{_ip('link', 'show', 'dev', dev)[0]['address']},{neigh[0]['lladdr']}"


def write_packets(lab: str, src: str, dst: str, path: str) -> None:
    """(in src's namespace) The floor's burst as the C program reads it, each packet with
    its port's index; print the ports."""
    from mrc_transport.io import batchio

    enc, phs, _ = perf.floor_burst(lab, src, dst)
    ports: list[str] = []
    with open(path, "wb") as f:
        for i in range(len(phs)):
            pkt = bytes(enc.packet(i))
            port = _port(pkt[batchio.IPV6_DST])
            if port not in ports:
                ports.append(port)
            f.write(struct.pack("<II", len(pkt), ports.index(port)) + pkt)
    print(json.dumps(ports))


def _packets(lab: str, src: str, dst: str, path: str) -> list[str]:
    """``write_packets`` run in src's namespace; the ports it found."""
    cmd = ["ip", "netns", "exec", namespace(lab, src), sys.executable, __file__,
           "--packets", lab, src, dst, path]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def _build(tmp: str) -> str:
    exe = os.path.join(tmp, "kernelpaths")
    cmd = ["gcc", "-O2", "-Wall", "-o", exe, str(HERE / "kernelpaths.c")]
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        msg = f"kernelpaths.py: cannot build kernelpaths.c ({e}); make setup installs gcc"
        raise SystemExit(msg) from None
    return exe


def _why(e: subprocess.CalledProcessError) -> str:
    lines = (e.stderr or "").strip().splitlines()
    return lines[-1] if lines else f"exit code {e.returncode}"


def _round(
    lab: str, src: str, dst: str, seconds: float, command: Callable[[str], list[str]],
    runs: dict[str, list[perf.Sides]], missing: dict[str, str],
) -> None:  # fmt: skip
    """One run of every path still in ``runs``; a path the kernel refuses (e.g. no AF_XDP)
    moves to ``missing`` with the sender's reason."""
    for mode in list(runs):
        try:
            runs[mode].append(perf.floor_run(lab, src, dst, seconds, command(mode)))
        except subprocess.CalledProcessError as e:
            if mode == "raw":  # the baseline: nothing to compare with
                raise SystemExit(f"kernelpaths.py: the raw socket failed: {_why(e)}") from None
            missing[mode] = _why(e)
            del runs[mode]


def run(seconds: float, repeat: int) -> None:
    lab, src, dst = "bk" + uuid.uuid4().hex[:6], "h0", "h1"
    runs: dict[str, list[perf.Sides]] = {m: [] for m in MODES}
    missing: dict[str, str] = {}
    print(f"kernel paths, unshaped lab, {src} -> {dst}, {seconds:g} s each")
    with tempfile.TemporaryDirectory() as tmp:
        exe, packets = _build(tmp), os.path.join(tmp, "packets")
        try:
            up(perf.unshaped_topology(), lab)
            ports = _packets(lab, src, dst, packets)

            def command(mode: str) -> list[str]:
                return [exe, mode, str(seconds + 1), packets, *ports]

            for i in range(repeat):  # interleaved, so a slow spell of the VM hits all alike
                _round(lab, src, dst, seconds, command, runs, missing)
                got = "  ".join(f"{m} {r[-1].bps / 1e9:.2f}" for m, r in runs.items())
                print(f"  run {i + 1}: {got} Gbit/s")
        finally:
            down(lab)
    _report(runs, seconds)
    for mode, why in missing.items():
        print(f"    {mode:14} unavailable here: {why}")


def _report(runs: dict[str, list[perf.Sides]], seconds: float) -> None:
    print(f"  medians of {len(runs['raw'])} runs:")
    print(f"    {'':14} {'goodput':>12}  {'/ raw':>6}   sender CPU s/Gbit, user + kernel")
    raw = [s.bps for s in runs["raw"]]
    for mode, got in runs.items():
        bps = [s.bps for s in got]
        # CPU per Gbit of the runs that delivered anything
        per = [s.per_gbit(seconds) for s in got if s.bps > 0]
        cpu = "-"
        if per:
            user = statistics.median(p[3] for p in per)
            cpu = f"{user:.3f} + {statistics.median(p[1] - p[3] for p in per):.3f}"
        print(f"    {mode:14} {statistics.median(bps) / 1e9:7.2f} Gbit/s  "
              f"{perf.median_ratio(bps, raw):6.3f}   {cpu}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--packets", nargs=4, help=argparse.SUPPRESS)  # LAB SRC DST FILE
    args = ap.parse_args(argv)
    if args.packets:
        lab, src, dst, path = args.packets
        if not perf.in_lab_host([lab, src]):
            print("kernelpaths.py: --packets runs only inside the lab's host namespace",
                  file=sys.stderr)  # fmt: skip
            return 2
        write_packets(lab, src, dst, path)
        return 0
    if args.seconds <= 0 or args.repeat < 1:
        print("kernelpaths.py: --seconds must be > 0 and --repeat >= 1", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("kernelpaths.py: run as root (it builds a lab)", file=sys.stderr)
        return 2
    run(args.seconds, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
