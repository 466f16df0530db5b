"""`mrc collective`'s bad input that needs no lab: one line, exit 2."""

from __future__ import annotations

import pytest

from tests.conftest import CliError


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["collective", "broadcast"], ["invalid choice: 'broadcast'"]),
        (["collective", "allreduce", "--lab", "nosuchlab0"], ["no lab 'nosuchlab0' is up"]),
        (["collective", "allreduce", "--collide"], ["go with --steps N"]),
        (["collective", "allreduce", "--schedule", "x.yaml"], ["go with --steps N"]),
        (["collective", "allreduce", "-f", "two"], ["-f/--stepfactor: invalid int value"]),
        (["collective", "allreduce", "--transport", "udp"], ["invalid choice: 'udp'"]),
        (
            ["collective", "allreduce", "--steps", "3", "--collide", "--schedule", "x"],
            ["not allowed"],
        ),
    ],
)
def test_bad_input_is_one_line(cli_error: CliError, argv: list[str], words: list[str]) -> None:
    cli_error(argv, *words)
