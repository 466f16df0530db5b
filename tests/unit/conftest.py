"""Fixtures for the unit tests of the demo and repro CLIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.state import STATE_DIR_ENV


@pytest.fixture
def no_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))

    def must_not_build(*_args: object, **_kwargs: object) -> float:
        raise AssertionError("the CLI tried to build a lab from input it should refuse")

    monkeypatch.setattr("labs.apply.up", must_not_build)
