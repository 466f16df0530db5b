"""The launcher's warm-up list names modules that exist (a moved module fails here, not as
a child that never says "ready" in a lab test)."""

from __future__ import annotations

import importlib

import pytest

from mrc_transport.harness.launch import WARM


@pytest.mark.parametrize("name", sorted({m for mods in WARM.values() for m in mods} | set(WARM)))
def test_every_warmed_module_imports(name: str) -> None:
    importlib.import_module(name)
