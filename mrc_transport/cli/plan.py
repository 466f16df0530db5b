"""`mrc plan`: multi-plane Clos sizing beside a single-plane fat tree (pure arithmetic).

The numbers come from labs/sizing.py; this module parses flags and prints. docs/plan.md
explains the arithmetic and the assumptions listed in ASSUMPTIONS.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from labs.sizing import (
    PAPER_NIC_GBPS,
    PAPER_PLANES,
    PAPER_RADIX,
    Comparison,
    FabricSize,
    SizingError,
    compare,
)
from mrc_transport.cli.main import UsageError

ASSUMPTIONS: tuple[str, ...] = (
    "one switch ASIC for both fabrics: radix x port speed (512 x 100G = 64 x 800G = 51.2 Tb/s)",
    "full bisection: below the top tier a switch uses radix/2 ports down and radix/2 up",
    "optics in NIC-speed modules (800G = 8 x 100G breakout): one per switch-side link end "
    "plus one per NIC",
    "ratios are per NIC; without --hosts both fabrics are fully built (2 vs 3 tiers)",
    "capacity lost per T0-T1 link: share of the T0's uplinks; per node: that / planes",
)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], help_text: str
) -> None:
    parser = subparsers.add_parser("plan", help=help_text, description=help_text)
    parser.add_argument(
        "--radix",
        type=int,
        default=PAPER_RADIX,
        help=f"switch ports at NIC-port speed, i.e. nic-gbps/planes (default {PAPER_RADIX})",
    )
    parser.add_argument(
        "--planes",
        type=int,
        default=PAPER_PLANES,
        help=f"planes = ports per NIC (default {PAPER_PLANES})",
    )
    parser.add_argument(
        "--nic-gbps",
        type=int,
        default=PAPER_NIC_GBPS,
        help=f"NIC speed in Gb/s (default {PAPER_NIC_GBPS})",
    )
    parser.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="size the smallest fabrics that hold this many NICs (default: full fabrics)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document instead")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        cmp = compare(args.radix, args.planes, args.nic_gbps, args.hosts)
    except SizingError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(_document(args, cmp), indent=2))
    else:
        _print_table(cmp, sized=args.hosts is not None)
    return 0


def _document(args: argparse.Namespace, cmp: Comparison) -> dict[str, object]:
    inputs = {
        "radix": args.radix,
        "planes": args.planes,
        "nic_gbps": args.nic_gbps,
        "hosts": args.hosts,
    }
    return {"inputs": inputs, **cmp.as_dict(), "assumptions": list(ASSUMPTIONS)}


def _print_table(cmp: Comparison, sized: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    mp, base = cmp.multiplane, cmp.baseline
    table = Table(title=f"{mp.radix * mp.port_gbps / 1000:g} Tb/s switches, {mp.nic_gbps}G NICs")
    table.add_column("")
    table.add_column(f"multi-plane\n{mp.planes} x {mp.port_gbps}G", justify="right")
    table.add_column(f"single-plane\n1 x {base.port_gbps}G", justify="right")
    table.add_column("ratio\nper NIC", justify="right")
    for row in _rows(cmp, sized):
        table.add_row(*row)
    Console().print(table)
    for line in ASSUMPTIONS:
        print(f"  - {line}")


def _rows(cmp: Comparison, sized: bool) -> list[tuple[str, str, str, str]]:
    mp, base = cmp.multiplane, cmp.baseline
    rows = [
        ("switch ports", f"{mp.radix} x {mp.port_gbps}G", f"{base.radix} x {base.port_gbps}G", ""),
        ("NICs", f"{mp.nics:,}", f"{base.nics:,}", ""),
    ]
    if sized:
        rows.append(("NICs when full", f"{mp.max_nics:,}", f"{base.max_nics:,}", ""))
    rows.append(("tiers", str(mp.tiers), str(base.tiers), ""))
    for i in range(max(mp.tiers, base.tiers)):
        rows.append((f"T{i} switches", _count(mp, i), _count(base, i), ""))
    rows += [
        ("switches", f"{mp.switches:,}", f"{base.switches:,}", _ratio(cmp.switches)),
        ("links (at port speed)", f"{mp.links:,}", f"{base.links:,}", ""),
        (f"optics ({mp.optic_gbps}G)", f"{mp.optics:,}", f"{base.optics:,}", _ratio(cmp.optics)),
        (
            "longest path (switches)",
            str(mp.longest_path),
            str(base.longest_path),
            _ratio(cmp.longest_path),
        ),
        (
            "lost per T0-T1 link",
            _pct(mp.uplink_loss),
            _pct(base.uplink_loss),
            _ratio(cmp.uplink_loss),
        ),
        ("  of a node (all planes)", _pct(mp.node_loss), _pct(base.node_loss), ""),
    ]
    return rows


def _count(fabric: FabricSize, tier: int) -> str:
    return f"{fabric.tier(tier):,}" if tier < fabric.tiers else "-"


def _ratio(r: Fraction | None) -> str:
    return "-" if r is None else f"{r} ({float(r):.3f})"


def _pct(f: Fraction | None) -> str:
    return "-" if f is None else f"{float(f):.3%} ({f})"
