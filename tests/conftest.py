"""Suite-wide hooks. With MRC_REQUIRE_LAB=1 (CI), a `lab` test that would skip (not root,
no network namespaces) FAILS instead, so a green run proves the lab tests really ran. When
the compiled protocol core runs, the session refuses to start if it was built from other
sources than those under test. An illegal transition of a state machine of the core
raises for the whole session (protocol/transitions.py), instead of being only counted.

The fixture every tier uses: ``cli_error``, a CLI call refused as the project's rule says
(one line on stderr, exit 2, no traceback)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Generator
from types import FrameType
from typing import Protocol

import pytest

from mrc_transport import backend
from mrc_transport.protocol import transitions

REQUIRE_LAB_ENV = "MRC_REQUIRE_LAB"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (a `timeout`, a CI runner stopping the job) would end pytest without running
    # fixture teardowns, leaving a lab's namespaces behind; as Ctrl-C, the lab fixtures'
    # finally blocks run and `lab down` removes them.
    signal.signal(signal.SIGTERM, _interrupt)
    transitions.STRICT = True
    # once per session, not on every import: it reads every compiled source
    stale = backend.stale_sources() if backend.COMPILED_CORE else []
    if stale:
        raise pytest.UsageError(
            f"the compiled protocol core is older than {', '.join(stale)}: `make` "
            "rebuilds it (MRC_PUREPYTHON=1 tests the source as it is)"
        )


def lab_required() -> bool:
    return os.environ.get(REQUIRE_LAB_ENV) == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and lab_required() and item.get_closest_marker("lab") is not None:
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_LAB_ENV}=1 but this lab test skipped: {report.longrepr}"


CliMain = Callable[[list[str]], int]
"""A CLI's entry point: ``main(argv) -> exit code``."""


class CliError(Protocol):
    """The ``cli_error`` fixture: ``cli_error(argv, *words, main=mrc's main) -> line``."""

    def __call__(self, argv: list[str], *words: str, main: CliMain | None = None) -> str: ...


@pytest.fixture
def cli_error(capsys: pytest.CaptureFixture[str]) -> CliError:
    """Runs ``main(argv)`` (``mrc`` unless told) and asserts it refused as bad input must be
    refused: exit 2, nothing on stdout, exactly one line on stderr, no traceback,
    naming every one of ``words``; returns that line. What earlier calls of the test printed
    is dropped first, so the line is this call's."""

    def run(argv: list[str], *words: str, main: CliMain | None = None) -> str:
        from mrc_transport.cli.main import main as mrc

        capsys.readouterr()
        code = (main or mrc)(argv)
        out, err = capsys.readouterr()
        assert code == 2, (argv, code, err)
        assert out == "", out
        assert "Traceback" not in err, err
        assert err.count("\n") == 1, err  # one line, ended
        assert err.endswith("\n"), err
        line = err[:-1]
        assert line.strip(), err
        for word in words:
            assert word in line, (word, line)
        return line

    return run
