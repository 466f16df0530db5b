"""Fixtures for root/namespace tests: a lab under a unique name (the tiny preset, or a
topology of the test's own), ALWAYS torn down."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from labs.topology import Topology


def require_root_netns() -> None:
    """Skip (or, with MRC_REQUIRE_LAB=1, fail via tests/conftest.py) without root + netns."""
    if os.geteuid() != 0:
        pytest.skip("lab tests need root")
    if shutil.which("ip") is None or shutil.which("nft") is None:
        pytest.skip("lab tests need iproute2 and nftables")
    if not Path("/proc/self/ns/net").exists():
        pytest.skip("no network namespaces")


def unique_lab() -> str:
    return "t" + uuid.uuid4().hex[:8]


class RunningLab(Protocol):
    """The ``running_lab`` fixture: ``with running_lab(topo) as name: ...``."""

    def __call__(self, topo: Topology) -> AbstractContextManager[str]: ...


@contextmanager
def _running(topo: Topology) -> Iterator[str]:
    require_root_netns()
    from labs.apply import down, up

    name = unique_lab()
    try:
        up(topo, name)
        yield name
    finally:
        down(name)


@pytest.fixture(scope="session")
def running_lab() -> RunningLab:
    """``with running_lab(topo) as name``: ``topo`` up under a unique name inside the
    block, always removed after it; for a module-scoped fixture of a lab of its own (or a
    test's). Session-scoped: it keeps no state."""
    return _running


@pytest.fixture
def lab_name() -> Iterator[str]:
    require_root_netns()
    from labs.apply import down

    name = unique_lab()
    try:
        yield name
    finally:
        down(name)


@pytest.fixture
def tiny_lab(lab_name: str) -> str:
    """The tiny preset under lab_name; lab_name's teardown removes it."""
    from labs.apply import up
    from labs.topology import preset

    up(preset("tiny"), lab_name)
    return lab_name


@pytest.fixture(scope="module")
def module_tiny_lab(running_lab: RunningLab) -> Iterator[str]:
    """The tiny preset under a unique name, shared by a module's tests (bring-up is the
    slow part); always torn down."""
    from labs.topology import preset

    with running_lab(preset("tiny")) as name:
        yield name
