"""`mrc demo collisions`: two-rack permutation traffic, single-path TCP over ECMP and MPTCP
versus MRC.

Every host of rack 0 sends to a distinct host of rack 1 and every host of rack 1 to a
distinct host of rack 0, all at the same time (the paper's two-rack permutation,
mrc-protocol-notes.md "Headline comparisons"). First as one pinned TCP flow per pair
(harness/tcpflow.py: ECMP hashes each flow onto one port and one T1 without looking at the
others, so some uplinks carry two flows and some none), then as one MPTCP connection per
pair (a subflow per plane, each hashed by ECMP like a TCP flow: in the demo's one plane,
one subflow), then as one MRC connection per pair (`mrc perf`, sprayed over every plane
and T1). Per-flow throughput is measured from
the receivers' delivery records over a common window that skips the start-up, and reported
with min/max and Jain's index (harness/fairness.py).

The lab is brought up once for both runs and ALWAYS torn down, children killed first.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labs.topology import Topology
from mrc_transport.harness.baselines import BaselineKind
from mrc_transport.harness.errors import HarnessError
from mrc_transport.harness.flows import Flow, Flows
from mrc_transport.harness.patterns import pair_flows, pair_name, permutation
from mrc_transport.harness.timeline import Delivery
from mrc_transport.harness.windows import TAIL_S, WARMUP_S, common_window, window_rates


@dataclass(frozen=True, slots=True)
class CollisionsConfig:
    """One run of the demo."""

    topo: Topology
    """The fabric (at least two racks)."""
    lab: str
    """Lab name."""
    duration: float
    """Seconds each run sends."""
    out: Path
    """Output folder."""
    preset: str | None = None
    """Preset name, for the report."""
    scheduler: str = "random"
    """MRC spraying scheduler (`mrc perf --scheduler`)."""
    baselines: tuple[BaselineKind, ...] = ("tcp", "mptcp")
    """The runs before MRC's: tcp (one pinned flow per pair), mptcp (one connection)."""


def reshape(topo: Topology, planes: int, rate_bps: int) -> Topology:
    """The fabric cut down to ``planes`` planes at ``rate_bps`` (0 keeps either).

    Why: the permutation result is about how flows share the T0-T1 links of one plane, and
    each MRC end here is a Python process (about half a core per 100 Mbit/s;
    docs/measurements.md): 2 x (2 x hosts_per_rack) of them must not be CPU-bound, or the
    figure measures the CPU, not the fabric."""
    from dataclasses import replace

    from labs.errors import LabError

    if planes < 0 or rate_bps < 0:
        raise HarnessError("--planes and --rate must be >= 0")
    try:
        if planes:
            topo = replace(topo, planes=planes)
        if rate_bps:
            topo = replace(
                topo,
                host_link=replace(topo.host_link, rate_bps=rate_bps),
                fabric_link=replace(topo.fabric_link, rate_bps=rate_bps),
            )
    except LabError as exc:
        raise HarnessError(str(exc)) from None
    return topo


def check_fabric(topo: Topology) -> None:
    if topo.racks < 2:
        raise HarnessError("the collisions demo needs at least 2 racks")


@dataclass
class RunResult:
    """One of the two runs."""

    t_start: float = 0.0
    deliveries: list[Delivery] = field(default_factory=list)
    verified: dict[str, bool] = field(default_factory=dict)


async def _run(
    cfg: CollisionsConfig, flows: Sequence[Flow], tag: str, children: Any, res: RunResult
) -> None:
    """Receivers, then every sender at once, then wait for all (harness/flows.py)."""
    import trio

    run = Flows(cfg.lab, cfg.topo, cfg.out, tag, children)
    async with trio.open_nursery() as nursery:
        await run.start_receivers(nursery, flows)
        res.t_start = time.monotonic()
        await run.start_senders(nursery, flows)
        res.verified = await run.finish()
    res.deliveries += run.deliveries()


RUN_NAMES = {"tcp": "ecmp", "mptcp": "mptcp"}
"""A baseline's run in the report (and its files' prefix)."""


async def _baseline_run(
    cfg: CollisionsConfig,
    pairs: Sequence[tuple[str, str]],
    kind: BaselineKind,
    children: Any,
    res: RunResult,
) -> None:
    await _run(cfg, pair_flows(pairs, kind, cfg.duration), RUN_NAMES[kind], children, res)


async def _mrc_run(
    cfg: CollisionsConfig, pairs: Sequence[tuple[str, str]], children: Any, res: RunResult
) -> None:
    flows = pair_flows(pairs, "mrc", cfg.duration, cfg.scheduler)
    await _run(cfg, flows, "mrc", children, res)


def _window(res: RunResult, flows: Sequence[str], duration: float) -> tuple[float, float]:
    return common_window(res.deliveries, flows, res.t_start, res.t_start + duration)


def _rates(res: RunResult, flows: Sequence[str], duration: float) -> dict[str, float]:
    return window_rates(res.deliveries, flows, *_window(res, flows, duration))


def _window_meta(res: RunResult, flows: Sequence[str], duration: float) -> list[float]:
    """The measurement window in seconds after the run's launch, for the report."""
    t0, t1 = _window(res, flows, duration)
    return [round(t0 - res.t_start, 3), round(t1 - res.t_start, 3)]


def run_collisions(cfg: CollisionsConfig, console: Any = None) -> dict[str, Any]:
    """Both runs on one lab; returns the report (also cfg.out/collisions.json) and writes
    cfg.out/collisions.png."""
    from rich.console import Console

    from mrc_transport.harness.plot import collisions_png
    from mrc_transport.harness.report import write_json

    console = console or Console()
    _check(cfg)
    pairs = permutation(cfg.topo)
    flows = [pair_name(s, d) for s, d in pairs]
    cfg.out.mkdir(parents=True, exist_ok=True)
    console.print(
        f"lab {cfg.lab}: {len(pairs)} flows between rack 0 and rack 1: " + ", ".join(flows),
        highlight=False,
    )
    runs = _all_runs(cfg, pairs, console)
    rates = {name: _rates(res, flows, cfg.duration) for name, res in runs.items()}
    port = float(cfg.topo.host_link.rate_bps)
    doc = _report(cfg, flows, runs, rates)
    write_json(cfg.out / "collisions.json", doc)
    collisions_png(
        cfg.out / "collisions.png",
        rates.get("ecmp", {}),
        rates["mrc"],
        port,
        mptcp_bps=rates.get("mptcp"),
    )
    _print(console, doc, flows)
    return doc


def _check(cfg: CollisionsConfig) -> None:
    check_fabric(cfg.topo)
    if os.geteuid() != 0:
        raise HarnessError("needs root (network namespaces); try sudo")
    if cfg.duration <= WARMUP_S + TAIL_S:
        raise HarnessError(f"--duration must be more than {WARMUP_S + TAIL_S:g} s")


RUN_WORDS = {
    "tcp": "one single-path TCP flow per pair (ECMP)",
    "mptcp": "one MPTCP connection per pair (a subflow per plane)",
}


def _all_runs(
    cfg: CollisionsConfig, pairs: Sequence[tuple[str, str]], console: Any
) -> dict[str, RunResult]:
    """Each baseline's run, then MRC's, on one lab that is always removed."""
    import trio

    from labs.apply import down, up
    from mrc_transport.harness.errors import unwrap
    from mrc_transport.harness.mptcp import check_ready
    from mrc_transport.harness.procs import Children

    children = Children(cfg.out / "logs")
    runs = {RUN_NAMES[k]: RunResult() for k in cfg.baselines} | {"mrc": RunResult()}
    try:
        up(cfg.topo, cfg.lab)
        if "mptcp" in cfg.baselines:
            check_ready(cfg.lab, sorted({h for pair in pairs for h in pair}))
        try:
            for i, kind in enumerate(cfg.baselines):
                console.print(f"run {i + 1}: {RUN_WORDS[kind]}", highlight=False)
                trio.run(_baseline_run, cfg, pairs, kind, children, runs[RUN_NAMES[kind]])
            console.print(f"run {len(runs)}: one MRC connection per pair", highlight=False)
            trio.run(_mrc_run, cfg, pairs, children, runs["mrc"])
        except BaseExceptionGroup as group:
            raise unwrap(group) from None
    finally:
        children.kill_all()
        down(cfg.lab)
    return runs


def _report(
    cfg: CollisionsConfig,
    flows: Sequence[str],
    runs: Mapping[str, RunResult],
    rates: Mapping[str, dict[str, float]],
) -> dict[str, Any]:
    from mrc_transport.harness.report import collisions_report

    port = float(cfg.topo.host_link.rate_bps)
    mrc = runs["mrc"]
    return collisions_report(
        rates.get("ecmp", {}),
        rates["mrc"],
        port,
        verified=bool(mrc.verified) and all(mrc.verified.values()),
        mptcp_bps=rates.get("mptcp"),
        meta={
            "lab": cfg.lab,
            "preset": cfg.preset,
            "duration_s": cfg.duration,
            "runs": list(runs),
            "window_s": {n: _window_meta(r, flows, cfg.duration) for n, r in runs.items()},
            "pairs": list(flows),
            "planes": cfg.topo.planes,
            "scheduler": cfg.scheduler,
            "port_rate_bps": port,
            "host_rate_bps": port * cfg.topo.planes,
            **{f"{n}_verified": r.verified for n, r in runs.items()},
        },
    )


RUN_LABELS = {"ecmp": "TCP over ECMP", "mptcp": "MPTCP", "mrc": "MRC"}


def _print(console: Any, doc: Mapping[str, Any], flows: Sequence[str]) -> None:
    from rich.table import Table

    runs = [k for k in RUN_LABELS if doc.get(k, {}).get("flows")]
    table = Table(title="Two-rack permutation: per-flow throughput (Mbit/s)", title_justify="left")
    table.add_column("flow")
    for key in runs:
        table.add_column(RUN_LABELS[key], justify="right")
    for f in flows:
        table.add_row(f, *(f"{doc[k]['flows'][f] / 1e6:.1f}" for k in runs))
    console.print(table)
    for key in runs:
        label, d = RUN_LABELS[key], doc[key]
        console.print(
            f"{label:14s} min/max {d['min_over_max']:.2f}  Jain {d['jain']:.3f}  "
            f"mean {d['mean_bps'] / 1e6:.1f} Mbit/s",
            highlight=False,
        )
    console.print("MRC verified" if doc["verified"] else "[bold red]MRC NOT verified[/]")
