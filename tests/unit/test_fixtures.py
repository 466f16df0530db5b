"""The shared fixtures fail where they should, so a test that leans on them can fail."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import CliError, CliMain


def printing(code: int, out: str = "", err: str = "") -> CliMain:
    """A CLI's main that prints ``out`` and ``err`` and exits ``code``."""

    def main(argv: list[str]) -> int:
        sys.stdout.write(out)
        sys.stderr.write(err)
        return code

    return main


@pytest.mark.parametrize(
    ("code", "out", "err"),
    [
        (0, "", "mrc: error: bad\n"),
        (1, "", "mrc: error: bad\n"),
        (2, "", ""),
        (2, "", "mrc: error: bad"),
        (2, "", "mrc: error: bad\nand more\n"),
        (2, "", "\nmrc: error: bad\n"),
        (2, "half done\n", "mrc: error: bad\n"),
        (2, "", "Traceback (most recent call last): bad\n"),
    ],
    ids=[
        "exit 0",
        "exit 1",
        "silent",
        "no line end",
        "two lines",
        "a blank line first",
        "stdout",
        "traceback",
    ],
)
def test_cli_error_refuses_anything_but_one_line_and_exit_2(
    cli_error: CliError, code: int, out: str, err: str
) -> None:
    with pytest.raises(AssertionError):
        cli_error([], main=printing(code, out, err))


def test_cli_error_gives_the_line_of_this_call_and_checks_its_words(
    cli_error: CliError, capsys: pytest.CaptureFixture[str]
) -> None:
    main = printing(2, err="mrc: error: bad flag\n")
    print("an earlier call's output", file=sys.stderr)
    assert cli_error([], "bad", "flag", main=main) == "mrc: error: bad flag"
    with pytest.raises(AssertionError):
        cli_error([], "bad", "topology", main=main)
    assert capsys.readouterr() == ("", "")
