"""Write old_code.json: tests/unit/perf_inputs.py's fixed inputs run through `mrc perf`'s
code as it was before perf/ left cli/perf.py (this script imports that code, so it runs
only at the commit that added it): the start, interval and end documents, the text lines,
the endpoint configuration, the one-shot mode's command lines and the size and rate
parsers' answers. tests/unit/test_perf_report.py compares the new code with them.

    .venv/bin/python tests/data/perf/old_code.py
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from labs import topology
from mrc_transport.cli import perf as cli
from mrc_transport.cli.main import UsageError, build_parser
from mrc_transport.io import perf as session
from tests.unit import perf_inputs as inputs

OUT = Path(__file__).resolve().parent / "old_code.json"
CONFIG_KEYS = ("mss", "ev_count", "cc", "cc_scope", "scheduler", "nic_rate_bps", "host_delay")
"""The fields of the endpoint's Config that `mrc perf` sets (the rest are defaults)."""


def end_docs() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in inputs.STREAMS:
        for k, (cpu0, cpu1, wall) in enumerate(inputs.CPU):
            streams = inputs.streams(session.StreamStats, case)
            end = cli._end_doc(streams, cpu0, cpu1, wall, dict(inputs.ENDPOINT))
            texts = {}
            for reverse in (False, True):
                o = cli.Output(io.StringIO(), "text", False)
                cli._print_end(o, streams, end, reverse)
                texts[str(reverse)] = o.stream.getvalue()  # type: ignore[attr-defined]
            out[f"{case}/{k}"] = {"json": json.dumps(end), "text": texts}
    return out


def intervals() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sending in (True, False):
        for n in (0, 1, 2):
            lines = []
            for mode in ("text", "stream"):
                streams = inputs.reporter_streams(session.StreamStats, sending, n)
                o = cli.Output(io.StringIO(), mode, False)
                reporter = cli._Reporter(o, streams, 0.5)
                reporter.line(0.0, 0.5)
                inputs.advance(streams)
                reporter.line(0.5, 1.0)
                lines.append(o.stream.getvalue())  # type: ignore[attr-defined]
            out[f"{sending}/{n}"] = {"text": lines[0], "stream": lines[1]}
    return out


def starts() -> dict[str, Any]:
    out: dict[str, Any] = {}
    parser = build_parser()
    time.time = lambda: inputs.T_WALL  # type: ignore[assignment]
    for name, argv in inputs.CLIENT_ARGV.items():
        args = parser.parse_args(argv)
        cli.check_args(args)
        paths = [SimpleNamespace(plane=p) for p in (1, 0, 1, 0, 2)]
        for topo_name in (None, "tiny", "default"):
            provider = SimpleNamespace(topo=topology.preset(topo_name)) if topo_name else None
            cfg = cli._config(args, provider)
            out[f"config/{name}/{topo_name}"] = {k: asdict(cfg)[k] for k in CONFIG_KEYS}
        cfg = cli._config(args, None)
        nbytes = cli.parse_size(args.bytes, "-n") if args.bytes else 0
        duration = args.time if args.time is not None else (0.0 if nbytes else 10.0)
        doc = cli._start_doc(args, paths, cfg, duration, nbytes, "c00c1e")
        out[f"client/{name}"] = json.dumps(doc)
        params = session.PerfParams(
            "5e55", 1, args.parallel, args.reverse, duration, nbytes // args.parallel,
            cli.parse_size(args.length, "-l"), cli.parse_rate(args.bitrate),
            cli.parse_planes(args.planes),
        )  # fmt: skip
        handle = inputs.fake_handle(1, True)
        out[f"server/{name}"] = json.dumps(cli._server_start_doc(args, params, handle))
    return out


class _Server:
    def __init__(self, argv: list[str], **_: Any) -> None:
        CALLS.append(argv)
        self.stderr = io.StringIO("Server listening on 4791\n")

    def poll(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0


CALLS: list[list[str]] = []


def one_shots() -> dict[str, Any]:
    out: dict[str, Any] = {}
    parser = build_parser()
    subprocess.Popen = _Server  # type: ignore[assignment,misc]
    subprocess.call = lambda argv, **_: CALLS.append(argv) or 0  # type: ignore[assignment]
    os.path.exists = lambda path: True  # type: ignore[assignment]
    for name, argv in inputs.ONE_SHOT_ARGV.items():
        CALLS.clear()
        args = parser.parse_args(argv)
        cli.check_args(args)
        rc = cli.run_one_shot(args)
        out[name] = {"rc": rc, "argv": [[sys_py(a) for a in c] for c in CALLS]}
    return out


def sys_py(arg: str) -> str:
    return "PYTHON" if arg == sys.executable else arg


def units() -> dict[str, Any]:
    def answer(f: Any, text: str) -> Any:
        try:
            return f(text)
        except (UsageError, topology.TopologyError) as exc:
            return f"error: {exc}"

    return {
        "perf_size": {t: answer(lambda x: cli.parse_size(x, "-n"), t) for t in inputs.SIZES},
        "perf_rate": {t: answer(cli.parse_rate, t) for t in inputs.RATES},
        "lab_size": {t: answer(lambda x: topology.parse_size(x, "w"), t) for t in inputs.SIZES},
        "lab_rate": {t: answer(lambda x: topology.parse_rate(x, "w"), t) for t in inputs.RATES},
    }


def main() -> None:
    doc = {
        "end": end_docs(),
        "interval": intervals(),
        "start": starts(),
        "units": units(),
        "one_shot": one_shots(),
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
