"""Start a child warm: import what it needs, say so, wait for a word, then run it.

Eight or sixteen Python senders launched at once on a busy 2-core machine each spend about
a CPU second importing (trio, cffi, the endpoint), so they start sending seconds apart
(docs/measurements.md), and
an experiment whose flows must start together (an incast, a permutation) would measure
the start-up. Launched through this module, a child imports first, prints
{"event": "ready"} and runs the module's ``main`` only when a line arrives on stdin; the
parent (harness/flows.py) sends that line to every sender at once.

    python -m mrc_transport.harness.launch mrc_transport.cli.main perf -c h0 ...
    python -m mrc_transport.harness.launch mrc_transport.harness.tcpflow send ...
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Sequence

WARM: dict[str, tuple[str, ...]] = {
    "mrc_transport.cli.main": (
        "trio",
        "mrc_transport.cli.perf",
        "mrc_transport.io.endpoint",
        "mrc_transport.perf.session",
        "mrc_transport.perf.client",
        "mrc_transport.perf.server",
        "mrc_transport.io.paths",
        "labs.paths",
    ),
}
"""Modules a program imports lazily once it runs, imported here before "ready"."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(
            "launch: usage: python -m mrc_transport.harness.launch MODULE ARGS...", file=sys.stderr
        )
        return 2
    module, *rest = args
    for name in WARM.get(module, ()):
        importlib.import_module(name)
    entry = importlib.import_module(module).main
    print(json.dumps({"event": "ready", "t_mono": time.monotonic()}), flush=True)
    if not sys.stdin.readline():
        return 2  # the parent went away before the word
    code: int = entry(rest)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
