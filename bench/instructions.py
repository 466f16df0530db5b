"""The protocol core's instructions per data packet, counted by callgrind: a figure this
shared VM does not move, where its clock moves the CPU-time figures of bench/core.py by up
to 2x within minutes (docs/measurements.md), so a change to the core can be judged by one
run.

bench/core.py's in-memory transfer ("perf" setup: as ``mrc perf`` runs the core, 9 KB
packets, 128 KB messages), through the endpoint's burst encoder and receiver, runs in a
child under ``valgrind --tool=callgrind``, collecting only inside one function at a time
(``--toggle-collect``); the count is divided by the data packets sent:

- ``Sender.fill``: new data and resends, planned per burst;
- ``Sender.sack``: one SACK's bookkeeping (per data packet: SACKs are fewer);
- ``Connection._data_run``: the receiver's placement of a run of data packets (with
  the C placement, its copy of each payload: ~2 instructions a byte as callgrind counts
  ``rep movs``).

Side by side, the baseline: the whole transfer's instructions per packet (both cores, both
codecs, and the harness moving each packet's bytes into the receiver's slots, ~2 x 18 KB of
copies) with the compiled core and C codec, and with the pure-Python reference
(``MRC_PUREPYTHON=1``), each less a run of no data (start-up and imports), and their ratio.

    python bench/instructions.py            # about 2 minutes; needs valgrind (apt)
    python bench/instructions.py --mb 30    # a longer transfer
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

FUNCTIONS = {
    "Sender.fill": "CPyDef_sender___Sender___fill",
    "Sender.sack": "CPyDef_sender___Sender___sack",
    "Connection._data_run": "CPyDef_connection___Connection____data_run",
}
"""What to count, and the compiled core's C function for it (mypyc's naming)."""


def child(megabytes: int) -> int:
    """(under callgrind) Run the transfer; print the data packets the sender sent."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import core  # bench/core.py

    from mrc_transport.io import batchio

    how = core.setup("perf", 8916)
    burst = 2 * how.cfg.max_burst + 64
    if batchio.BACKEND == "c":
        link = core.Codec("c", batchio.CBurstEncoder, batchio.CBurstReceiver, burst, 8916)
    else:
        link = core.Codec("py", batchio.PyBurstEncoder, batchio.PyBurstReceiver, burst, 8916)
    print(core.run(link, megabytes * 1_000_000, how).data_packets)
    return 0


def counted(megabytes: int, toggle: str | None, pure: bool) -> tuple[int, int]:
    """(instructions, data packets) of one child run under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        if toggle:
            cmd.append(f"--toggle-collect={toggle}")
        cmd += [sys.executable, os.path.abspath(__file__), "--child", str(megabytes)]
        env = {**os.environ, "MRC_PUREPYTHON": "1" if pure else "0"}
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        with open(out) as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
    return total, int(res.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--mb", type=int, default=10, help="megabytes to transfer (default 10)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return child(args.child)
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    print(f"{args.mb} MB in memory, perf setup, C codec; instructions a data packet")
    for name, symbol in FUNCTIONS.items():
        ir, packets = counted(args.mb, symbol, pure=False)
        print(f"  {name:<30}{ir / packets:>12,.0f}")
    whole = {}
    for pure in (False, True):
        ir, packets = counted(args.mb, None, pure)
        start, _ = counted(0, None, pure)
        whole[pure] = (ir - start) / packets
    print("baseline, the whole transfer less start-up:")
    print(f"  {'compiled core, C codec':<30}{whole[False]:>12,.0f}")
    print(f"  {'pure-Python reference':<30}{whole[True]:>12,.0f}")
    print(f"  reference / compiled = {whole[True] / whole[False]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
