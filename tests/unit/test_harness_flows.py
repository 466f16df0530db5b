"""An experiment's MRC flow reaches `mrc perf` with the options it names: the argv a
Flows run starts parses as mrc perf's own CLI does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from labs.topology import preset
from mrc_transport.cli import perf as cli
from mrc_transport.cli.main import build_parser
from mrc_transport.harness.flows import Flow, Flows


def _perf_opts(argv: list[str]) -> Any:
    args = build_parser().parse_args(argv[argv.index("perf") :])
    cli.check_args(args)
    return cli.options(args)


@pytest.mark.parametrize(
    ("extra", "scope", "no_trim"),
    [({}, "connection", False), ({"cc_scope": "plane", "no_trim": True}, "plane", True)],
    ids=["defaults", "plane-windows-no-trim"],
)
def test_an_mrc_flows_options_reach_mrc_perf(
    tmp_path: Path, extra: dict[str, Any], scope: str, no_trim: bool
) -> None:
    flows = Flows("lab", preset("tiny"), tmp_path, "t", children=None)  # type: ignore[arg-type]
    flow = Flow("f", "mrc", "h1", "h0", 5001, 2.0, **extra)
    sender = _perf_opts(flows.sender_argv(flow))
    assert (sender.cc_scope, sender.no_trim, sender.lab) == (scope, no_trim, "lab")
    assert _perf_opts(flows.receiver_argv(flow)).no_trim is no_trim
