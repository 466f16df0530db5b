"""Packet trimming against drop-tail in an incast, side by side in one run.

SENDERS hosts send SIZE bytes each to one host, all at once, so that host's ports are
where the queues build. It is run twice on the shaped lab: on PRESET, where a full port
drops, so SACKs and RACK find the losses, and on PRESET-trim, where every switch port
trims above 64 KB and the receiver NACKs each stub. With --no-trim, a third time on
PRESET-trim with every flow in the no-trim class (`mrc perf --no-trim`), which those
ports drop above 64 KB instead of trimming it. Per run:

- the tail completion time: the last flow's last delivery, from the run's origin;
- retransmissions and RTOs;
- the time from a loss to its retransmission, median and p99: for a trimmed packet from
  the arrival of its stub at the receiver (its receiver's TrimmedNacked event; the stub
  left the port that cut it ahead of the queue) to the resend; for every loss, trimmed or
  not, from the lost transmission (the senders' Retransmit events, ``after``: an upper
  bound, which includes the queues the packet waited in before it was lost);
- the base RTT: the sRTT of a lone 256 KB transfer on the same lab before the incast.

Target with trimming: p99 trim-to-resend <= 2x the base RTT, and no RTO in the incast.
Printed: the ratio of tail completion times (trim on / off). Every byte of every flow is
verified.

Run as root: .venv/bin/python bench/trim.py [--senders N] [--size BYTES] [--preset NAME]
             [--no-trim] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from labs.topology import Topology
from labs.units import UnitError, parse_rate, parse_size
from mrc_transport.harness.flows import Flow
from mrc_transport.repro.engine import ReproConfig, run_on_lab
from mrc_transport.repro.measure import ends
from mrc_transport.repro.spec import START_SPREAD_S, Fabric, Run, RunResult

BASE_BYTES = 256 * 1024
MSG_LEN = "64K"
PORT = 4791


@dataclass(frozen=True)
class Figures:
    """One incast's measurements."""

    preset: str
    verified: bool
    base_rtt_ms: float
    tail_s: float
    retransmits: int
    by_cause: dict[str, int]
    rtos: int
    nacks: int
    """NACKs the senders accepted."""
    stubs: int
    """Trimmed stubs the receivers NACKed."""
    rtx_median_ms: float | None
    """Lost transmission to retransmission, every cause."""
    rtx_p99_ms: float | None
    trim_median_ms: float | None
    """A trim (its stub's arrival at the receiver, which NACKed it) to the resend."""
    trim_p99_ms: float | None


def plan(
    topo: Topology, senders: int, nbytes: int, no_trim: bool = False, cc_scope: str | None = None
) -> tuple[Run, Run]:
    """The lone base-RTT transfer, then the incast: the senders taken from the other racks
    first, all to the first host of rack 0."""
    receiver = topo.hosts_in_rack(0)[0]
    others = [h for h in reversed(topo.hosts) if h != receiver][:senders]
    if len(others) < senders:
        raise SystemExit(f"bench/trim.py: the lab has {len(others)} hosts besides {receiver}")
    line_rate = topo.host_link.rate_bps * topo.planes
    seconds = 2 * senders * nbytes * 8 / line_rate + START_SPREAD_S
    base = Flow(
        "base", "mrc", others[0], receiver, PORT, seconds, msg_len=MSG_LEN, nbytes=BASE_BYTES
    )
    flows = tuple(
        Flow(
            f"{src}->{receiver}",
            "mrc",
            src,
            receiver,
            PORT + 1 + i,
            seconds,
            msg_len=MSG_LEN,
            events=True,
            nbytes=nbytes,
            no_trim=no_trim,
            cc_scope=cc_scope,
        )
        for i, src in enumerate(others)
    )
    return Run("base", (base,), seconds), Run("incast", flows, seconds)


def percentile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def trim_to_resend(incast: RunResult) -> list[float]:
    """Per resend of a trimmed packet, ms from the arrival of its stub at the receiver
    (the latest before the resend): the stub left the port that cut it at once, ahead of
    its queue, so its arrival is the loss's time to within the hops after that port."""
    out: list[float] = []
    for name, sent in incast.recovery.items():
        stubs: dict[int, list[float]] = {}
        for e in incast.receiver_recovery.get(name, []):
            if e["event"] == "trimmed_nacked":
                stubs.setdefault(int(e["psn"]), []).append(float(e["t_mono"]))
        for e in sent:
            if e["event"] != "retransmit" or e["cause"] != "trimmed":
                continue
            t = float(e["t_mono"])
            seen = [s for s in stubs.get(int(e["psn"]) & 0xFFFF_FFFF, []) if s <= t]
            if seen:
                out.append((t - max(seen)) * 1e3)
    return out


def figures(name: str, base: RunResult, incast: RunResult) -> Figures:
    end = base.mrc_ends.get("base")
    srtt = end.streams[0].sender.srtt_us if end is not None and end.streams else None
    events = [e for evs in incast.recovery.values() for e in evs]
    rtx = [e for e in events if e["event"] == "retransmit"]
    after = [float(e["after"]) * 1e3 for e in rtx]
    causes: dict[str, int] = {}
    for e in rtx:
        causes[e["cause"]] = causes.get(e["cause"], 0) + 1
    streams = [s for end in incast.mrc_ends.values() for s in end.streams]
    trims = trim_to_resend(incast)
    names = [f.name for f in incast.run.flows]
    return Figures(
        preset=name,
        verified=all(base.verified.values()) and all(incast.verified.values()),
        base_rtt_ms=(srtt or 0.0) / 1e3,
        tail_s=max(ends(incast.deliveries, names), default=incast.t_origin) - incast.t_origin,
        retransmits=sum(c["retransmits"] for c in incast.counters.values()),
        by_cause=causes,
        rtos=sum(1 for e in events if e["event"] == "rto_fired"),
        nacks=sum(s.sender_counters.get("nacks_received", 0) for s in streams),
        stubs=sum(s.receiver_counters.get("trimmed_received", 0) for s in streams),
        rtx_median_ms=statistics.median(after) if after else None,
        rtx_p99_ms=percentile(after, 0.99),
        trim_median_ms=statistics.median(trims) if trims else None,
        trim_p99_ms=percentile(trims, 0.99),
    )


def run(
    name: str,
    rate_bps: int,
    senders: int,
    nbytes: int,
    out: Path,
    no_trim: bool = False,
    cc_scope: str | None = None,
) -> Figures:
    topo = Fabric(preset=name, rate_bps=rate_bps).build()
    runs = plan(topo, senders, nbytes, no_trim, cc_scope)
    label = name + (" --no-trim" if no_trim else "") + (f" --{cc_scope}" if cc_scope else "")
    lab = f"btrim{secrets.token_hex(2)}"
    cfg = ReproConfig(topo, out / label.replace(" --", "-"))
    results = run_on_lab(runs, cfg, lab, Console(stderr=True))
    return figures(label, results[0], results[1])


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} ms"


def report(off: Figures, on: Figures, *more: Figures) -> None:
    """The runs side by side (off, on, then any others, e.g. on with --no-trim)."""
    runs = (off, on, *more)
    rows: list[tuple[str, Callable[[Figures], str]]] = [
        ("every byte verified", lambda f: str(f.verified)),
        ("base RTT (lone sRTT)", lambda f: _ms(f.base_rtt_ms)),
        ("tail completion", lambda f: f"{f.tail_s:.3f} s"),
        ("retransmissions", lambda f: str(f.retransmits)),
        ("  by cause", lambda f: _causes(f.by_cause)),
        ("RTOs", lambda f: str(f.rtos)),
        ("stubs NACKed / NACKs taken", lambda f: f"{f.stubs} / {f.nacks}"),
        ("lost send -> resend, median", lambda f: _ms(f.rtx_median_ms)),
        ("lost send -> resend, p99", lambda f: _ms(f.rtx_p99_ms)),
        ("trim -> resend, median", lambda f: _ms(f.trim_median_ms)),
        ("trim -> resend, p99", lambda f: _ms(f.trim_p99_ms)),
    ]
    print(f"{'':30}" + "".join(f" {f.preset:>24}" for f in runs))
    for label, cell in rows:
        print(f"{label:30}" + "".join(f" {cell(f):>24}" for f in runs))
    ratio = on.tail_s / off.tail_s if off.tail_s > 0 else float("nan")
    print(f"tail completion, trim on / off: {ratio:.2f}x")
    for f in (on, *(f for f in more if f.stubs)):
        print(f"target ({f.preset}: {_target(f)}")


def _target(f: Figures) -> str:
    """The bench's target for a run whose stubs were NACKed."""
    p99_ok = f.trim_p99_ms is not None and f.trim_p99_ms <= 2 * f.base_rtt_ms
    verdict = "met" if p99_ok and f.rtos == 0 else "not met"
    return f"p99 trim -> resend <= 2x base RTT = {_ms(2 * f.base_rtt_ms)}, 0 RTOs): {verdict}"


def _causes(c: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items())) or "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--senders", type=int, default=6)
    ap.add_argument("--size", default="2M", help="bytes per sender (default 2M)")
    ap.add_argument("--preset", default="default", help="the lab without trimming")
    ap.add_argument(
        "--rate",
        default="20mbit",
        help="every link's rate (default 20mbit: low enough that the Python ends are not "
        "CPU-bound, so the receiver's ports are the bottleneck)",
    )
    ap.add_argument(
        "--no-trim",
        action="store_true",
        help="a third run: PRESET-trim with every flow in the no-trim class (dropped there)",
    )
    ap.add_argument(
        "--plane-windows",
        action="store_true",
        help="another run: PRESET-trim with a window per plane (--cc-scope plane, ours)",
    )
    ap.add_argument("--json", type=Path, help="write the runs' figures here")
    ap.add_argument("--out", type=Path, help="keep the runs' records, events and logs here")
    args = ap.parse_args(argv)
    try:
        nbytes, rate = parse_size(args.size, "--size"), parse_rate(args.rate, "--rate")
    except UnitError as exc:
        print(f"bench/trim.py: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mrc-bench-trim-") as tmp:
        out = args.out or Path(tmp)
        off = run(args.preset, rate, args.senders, nbytes, out)
        on = run(f"{args.preset}-trim", rate, args.senders, nbytes, out)
        extra = {
            key: run(f"{args.preset}-trim", rate, args.senders, nbytes, out, **kw)
            for key, wanted, kw in (
                ("no_trim", args.no_trim, {"no_trim": True}),
                ("plane_windows", args.plane_windows, {"cc_scope": "plane"}),
            )
            if wanted
        }
    more = list(extra.values())
    report(off, on, *more)
    if args.json is not None:
        doc = {"off": asdict(off), "on": asdict(on)} | {k: asdict(f) for k, f in extra.items()}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(f.verified for f in (off, on, *more)) else 1


if __name__ == "__main__":
    sys.exit(main())
