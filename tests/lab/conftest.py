"""Fixtures for root/namespace tests: a tiny lab under a unique name, ALWAYS torn down."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


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


@contextmanager
def running_tiny_lab() -> Iterator[str]:
    """The tiny preset under a unique name, for a module-scoped fixture; always removed."""
    require_root_netns()
    from labs.apply import down, up
    from labs.topology import preset

    name = unique_lab()
    try:
        up(preset("tiny"), name)
        yield name
    finally:
        down(name)


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
def module_tiny_lab() -> Iterator[str]:
    """The tiny preset under a unique name, shared by a module's tests (bring-up is the
    slow part); always torn down."""
    with running_tiny_lab() as name:
        yield name
