"""`mrc perf --pairs`: the pairs' parser and the flags that go with them (no lab needed)."""

from __future__ import annotations

import pytest

from mrc_transport.perf.options import OptionsError
from mrc_transport.perf.pairs import Pair, parse_pairs
from tests.conftest import CliError


def test_pairs_parse_in_order() -> None:
    assert parse_pairs("h4:h0, h5:h0,h0:h4") == (
        Pair("h4", "h0"),
        Pair("h5", "h0"),
        Pair("h0", "h4"),
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [("h4", "is not SRC:DST"), ("h4:", "is not SRC:DST"), ("a:b:c", "is not SRC:DST"),
     ("h1:h1", "sends to itself"), ("h4:h0,,h5:h0", "is not SRC:DST")],
)  # fmt: skip
def test_bad_pairs_are_one_line(text: str, says: str) -> None:
    with pytest.raises(OptionsError, match=says):
        parse_pairs(text)


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["--pairs", "h4:h0"], "--pairs needs --lab"),
     (["--pairs", "h4:h0", "-s"], "give exactly one of"),
     (["--lab", "x", "--pairs", "h4"], "is not SRC:DST")],
)  # fmt: skip
def test_pairs_flags_exit_2(argv: list[str], says: str, cli_error: CliError) -> None:
    cli_error(["perf", *argv], says)
