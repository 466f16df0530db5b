"""`mrc lab`: build, inspect and break a multi-plane Clos fabric of network namespaces.

Parsing and printing only; the work is in labs/ (topology -> plan -> apply, faults, check).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mrc_transport.cli.export import register_lab_export
from mrc_transport.cli.main import UsageError

if TYPE_CHECKING:
    from labs.capture import Target
    from labs.faultkinds import Fault
    from labs.topology import Topology

DEFAULT_LAB = "mrc"


def register(subparsers: Any, help_text: str) -> None:
    lab = subparsers.add_parser("lab", help=help_text, description=help_text)
    sub = lab.add_subparsers(dest="lab_command", metavar="ACTION", parser_class=type(lab))
    lab.set_defaults(func=_no_action)

    def add(
        name: str, func: Callable[[argparse.Namespace], int], text: str, named: bool = True
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
        if named:
            p.add_argument(
                "--name",
                default=DEFAULT_LAB,
                type=_lab_name,
                help=f"lab name (default {DEFAULT_LAB})",
            )
        p.set_defaults(func=_guarded(func))
        return p

    _register_lifecycle(add)
    _register_faults(add)
    _register_capture(add)
    register_lab_export(add)


Add = Callable[..., argparse.ArgumentParser]
"""``add(name, func, text, named=True)``: a lab subcommand's parser (``register``)."""


def _register_lifecycle(add: Add) -> None:
    p = add("up", _up, "create the lab's namespaces, links, routes, SIDs, shaping, marking")
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--preset",
        choices=("tiny", "default", "large", "tiny-trim", "default-trim", "large-trim"),
        default=None,
        help="a fabric (NAME-trim: with packet trimming on every switch port)",
    )
    src.add_argument("--topology", metavar="FILE", help="YAML topology file")
    p.add_argument("--force", action="store_true", help="replace an existing lab of that name")
    p = add("down", _down, "remove everything the lab created (idempotent)")
    p.add_argument("--all", action="store_true", help="every lab with a state file")
    p = add("status", _status, "namespaces present, recent events, trimming/marking counters")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add("list", _list, "labs with a state file", named=False)
    p = add("exec", _exec, "run a command in a node's namespace: exec NODE -- CMD...")
    p.add_argument("node")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p = add("graph", _graph, "draw the fabric (PNG or SVG, by extension)")
    p.add_argument("out", metavar="FILE")
    p = add("check", _check, "probe every path between every host pair in every encoding")
    p.add_argument("--json", action="store_true", help="a JSON list of probe results")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds (default 1)")


def _register_faults(add: Add) -> None:
    """A verb per fault kind of the registry (labs/faultkinds.py), its options as flags."""
    from labs.faultkinds import FAULTS

    for kind in FAULTS.values():
        p = add(kind.verb, _fault, kind.summary)
        noun = "target" if "switch" in kind.takes else "link"
        p.add_argument("target", metavar=noun, help=_targets(kind))
        for o in kind.options:
            p.add_argument(
                f"--{o.key}",
                type=o.type,
                choices=o.choices or None,
                required=o.required,
                default=_CLI_DEFAULTS.get(o.key),
                metavar=o.metavar,
                help=o.help,
            )


_CLI_DEFAULTS = {"period": 1.0}
"""`mrc lab flap` cycles once a second unless told (a schedule's flap, twice: Flap.period)."""


def _targets(kind: type[Fault]) -> str:
    examples = {"link": "t0-p0-0:t1-p0-1", "links": "a:b+c:d", "group": "@links",
                "switch": "t1-p0-0", "port": "h0:p1"}  # fmt: skip
    return "e.g. " + ", ".join(examples[k] for k in kind.takes)


def _register_capture(add: Add) -> None:
    add("events", _events, "print the lab's fault log (JSONL)")
    p = add("capture", _capture, "record a node's ports into one pcapng (dumpcap in its namespace)")
    p.add_argument("target", metavar="NODE[:PORT]", help="NODE (every port) or NODE:PORT[,PORT..]")
    p.add_argument(
        "-w",
        dest="write",
        metavar="FILE",
        help="pcapng file, - for stdout (the default when stdout is a pipe); "
        "on a terminal without -w, one decoded line per packet (tshark)",
    )
    p.add_argument("-c", dest="count", type=_count, metavar="N", help="stop after N packets")
    p.add_argument("--duration", type=_seconds, metavar="S", help="stop after S seconds")


def _lab_name(text: str) -> str:
    """Checked at parse time for every action: the name becomes file and namespace names."""
    from labs.errors import TopologyError
    from labs.topology import check_lab_name

    try:
        return check_lab_name(text)
    except TopologyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of packets >= 1, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("missing ACTION (up, down, status, list, exec, graph, check, cut, ...)")


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """LabError (bad topology, unknown lab/link/node) -> UsageError: one line, exit 2.
    ApplyError (a command failed inside the lab) -> one line, exit 1."""

    def run(args: argparse.Namespace) -> int:
        from labs.errors import ApplyError, LabError

        try:
            return func(args)
        except ApplyError as exc:
            print(f"mrc lab {args.lab_command}: {exc}", file=sys.stderr)
            return 1
        except LabError as exc:
            raise UsageError(str(exc)) from None

    return run


def _need_root() -> None:
    from labs.errors import LabError

    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces); try sudo")


def _up(args: argparse.Namespace) -> int:
    from labs.topology import load_yaml, preset

    topo = load_yaml(args.topology) if args.topology else preset(args.preset or "default")
    _need_root()
    try:
        took = _up_with_progress(topo, args.name, args.force)
    except KeyboardInterrupt:
        # The state file was written first, so down finds whatever was made.
        print(
            f"mrc lab up: interrupted; `mrc lab down --name {args.name}` removes the rest",
            file=sys.stderr,
        )
        raise
    print(
        f"lab {args.name} up: {len(topo.hosts)} hosts, {len(topo.switches)} switches, "
        f"{len(topo.links)} links, {topo.planes} planes in {took:.2f} s"
    )
    return 0


def _up_with_progress(topo: Topology, name: str, force: bool) -> float:
    from rich.progress import Progress

    from labs.apply import up

    with Progress(transient=True, console=_stderr_console()) as bar:
        task = bar.add_task(f"lab {name}: {len(topo.nodes)} namespaces", total=None)

        def progress(total: int, _stage: int) -> Callable[[int], None]:
            bar.update(task, total=total)
            return lambda n: bar.advance(task, n)

        return up(topo, name, force=force, progress=progress)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _down(args: argparse.Namespace) -> int:
    from labs.apply import down
    from labs.state import list_labs

    _need_root()
    names = list_labs() if args.all else [args.name]
    if not names:
        print("no labs up: nothing to remove")
    for name in names:
        n = down(name)
        print(f"lab {name} down: {n} namespaces removed")
    return 0


def _list(args: argparse.Namespace) -> int:
    from labs.state import list_labs, load_state

    for name in list_labs():
        st = load_state(name)
        t = st.topology
        flag = "" if st.complete else " (incomplete: run down)"
        print(f"{name}: {t.planes} planes, {len(t.hosts)} hosts, {len(t.switches)} switches{flag}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from labs import netns
    from labs.faults import read_events
    from labs.state import load_state
    from labs.units import format_rate

    st = load_state(args.name)
    present = sum(netns.exists(ns) for ns in st.namespaces)
    t = st.topology
    ports = _port_counters(args.name, t) if present else []
    if args.json:
        doc = {
            "lab": st.lab,
            "complete": st.complete,
            "namespaces": len(st.namespaces),
            "present": present,
            "topology": t.to_dict(),
            "ports": ports,
            "events": read_events(args.name)[-5:],
        }
        print(json.dumps(doc))
        return 0
    print(
        f"lab {st.lab}: {'complete' if st.complete else 'INCOMPLETE'}, "
        f"{present}/{len(st.namespaces)} namespaces present"
    )
    print(
        f"  {t.planes} planes x ({t.racks} T0 + {t.t1_per_plane} T1), "
        f"{len(t.hosts)} hosts, host links {format_rate(t.host_link.rate_bps, width=0)}, "
        f"fabric links {format_rate(t.fabric_link.rate_bps, width=0)}, MTU {t.host_link.mtu}, "
        f"SRv6 by {t.srv6}, MPTCP endpoints {t.mptcp}"
    )
    if ports:
        keys = ("trimmed", "trimmed_rtx", "dropped", "dropped_no_trim", "marked")
        total = {k: sum(p[k] for p in ports) for k in keys}
        busiest = max(ports, key=lambda p: p["trimmed"] + p["dropped"] + p["marked"])
        print(
            f"  port program on {len(ports)} switch ports: {total['trimmed']} trimmed "
            f"({total['trimmed_rtx']} retransmissions), {total['dropped']} dropped "
            f"({total['dropped_no_trim']} no-trim above the threshold), {total['marked']} "
            f"marked (most: {busiest['node']} {busiest['dev']}; --json for every port)"
        )
    for ev in read_events(args.name)[-5:]:
        print(f"  t_mono={ev['t_mono']:.6f} {ev['kind']} {ev['target']} {ev['action']}")
    return 0


def _port_counters(lab: str, topo: Topology) -> list[dict[str, Any]]:
    """The port program's counters (labs/trim.py); needs root, as the lab itself."""
    from labs.trim import port_counters

    if not any(lc.programmed for lc in (topo.host_link, topo.fabric_link)):
        return []
    _need_root()
    return port_counters(lab, topo)


def _exec(args: argparse.Namespace) -> int:
    from labs.state import load_state
    from labs.topology import namespace

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise UsageError("exec NODE -- CMD...: missing CMD")
    st = load_state(args.name)
    st.topology.check_node(args.node)
    _need_root()
    return subprocess.call(["ip", "netns", "exec", namespace(args.name, args.node), *cmd])


def _graph(args: argparse.Namespace) -> int:
    from labs.graph import draw
    from labs.state import load_state

    if not args.out.endswith((".png", ".svg")):
        raise UsageError("graph FILE must end in .png or .svg")
    draw(load_state(args.name).topology, args.out, title=f"lab {args.name}")
    print(args.out)
    return 0


def _check(args: argparse.Namespace) -> int:
    from labs.check import fail_lines, matrix, run_check
    from labs.state import load_state

    _need_root()
    st = load_state(args.name)
    results = run_check(args.name, st.topology, timeout=args.timeout)
    if args.json:
        print(json.dumps([r.to_json() for r in results]))
    else:
        print(matrix(results, st.topology.hosts))
        ok = sum(r.ok for r in results)
        print(f"{ok}/{len(results)} probes OK")
        for line in fail_lines(results):
            print(line)
    return 0 if all(r.ok for r in results) else 1


def _lab(args: argparse.Namespace) -> Any:
    from labs.faults import Lab

    _need_root()
    return Lab(args.name)


def _say(ev: Any) -> None:
    print(f"t_mono={ev.t_mono:.6f} {ev.kind} {ev.target} {ev.action}")


def _fault(args: argparse.Namespace) -> int:
    """Any fault verb: the words parsed by the registry's one parser, then applied."""
    from labs.faultkinds import OPTION_KEYS, parse_fault

    given = {k: v for k, v in vars(args).items() if k in OPTION_KEYS and v is not None}
    fault = parse_fault(args.lab_command, {"target": args.target, **given})
    for ev in fault.apply(_lab(args)):
        _say(ev)
    return 0


def _events(args: argparse.Namespace) -> int:
    from labs.faults import read_events

    for ev in read_events(args.name):
        print(json.dumps(ev))
    return 0


def _capture(args: argparse.Namespace) -> int:
    from labs import capture
    from labs.state import load_state

    target = capture.resolve(args.name, load_state(args.name).topology, args.target)
    _need_root()
    where = f"{target.node} ({', '.join(target.ports)}) of lab {target.lab}"
    if args.write is None and sys.stdout.isatty():
        return _capture_live(target, args, where)
    if args.write in (None, "-"):
        if sys.stdout.isatty():
            raise UsageError("-w -: stdout is a terminal; pipe it (| wireshark -k -i -)")
        return _capture_stream(target, args, where)
    return _capture_file(target, args, where)


def _stopping(args: argparse.Namespace) -> str:
    stops = [f"after {args.count} packets"] if args.count else []
    stops += [f"after {args.duration:g} s"] if args.duration else []
    return " or ".join([*stops, "on Ctrl-C"])


def _capture_ended(tool: str, code: int) -> int:
    if code != 0:
        print(f"mrc lab capture: {tool} exited with status {code}", file=sys.stderr)
        return 1
    return 0


def _capture_live(target: Target, args: argparse.Namespace, where: str) -> int:
    from labs import capture
    from mrc_transport.wireshark import lua_path

    capture.require_tools(capture.TSHARK)
    print(f"decoding {where}; stops {_stopping(args)}", file=sys.stderr, flush=True)
    argv = capture.tshark_argv(target, lua_path(), args.count, args.duration)
    return _capture_ended(capture.TSHARK, capture.run(target, argv))


def _capture_stream(target: Target, args: argparse.Namespace, where: str) -> int:
    from labs import capture

    capture.require_tools(capture.DUMPCAP)
    print(f"capturing {where} to stdout; stops {_stopping(args)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    argv = capture.dumpcap_argv(target, "-", args.count, args.duration)
    return _capture_ended(capture.DUMPCAP, capture.run(target, argv))


def _capture_file(target: Target, args: argparse.Namespace, where: str) -> int:
    from pathlib import Path

    from labs import capture

    capture.require_tools(capture.DUMPCAP, capture.REORDERCAP)
    path = Path(args.write).absolute()
    capture.check_writable(path)
    print(f"capturing {where} to {path}; stops {_stopping(args)}", file=sys.stderr, flush=True)
    argv = capture.dumpcap_argv(target, str(path), args.count, args.duration)
    code = _capture_ended(capture.DUMPCAP, capture.run(target, argv))
    if code == 0:
        capture.sort_by_time(path)
    return code
