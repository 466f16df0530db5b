"""Fixtures of the unit tests: two protocol cores on a simulated fabric (``pair``, and
``established`` once their connection is up, each with a factory for a test that needs
its own seed or config), and a state directory with no lab for the demo and repro CLIs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pytest

from labs.state import STATE_DIR_ENV
from mrc_transport.protocol import Config, Connection, ConnState
from tests.sim.fabric import Fabric, Host, Link
from tests.unit.helpers import PAIR_CFG, SMALL_CFG, drain

Pair = tuple[Fabric, Host, Host]
"""A fabric and its two hosts, ``a`` and ``b``."""


class MakePair(Protocol):
    def __call__(self, seed: int = 1, cfg: Config = PAIR_CFG, **link: Any) -> Pair: ...


@pytest.fixture(scope="session")
def make_pair() -> MakePair:
    """``make_pair(seed=1, cfg=PAIR_CFG, **link)``: two hosts, not yet connected, on a
    simulated fabric of 2 planes x 2 paths of 2 Gbit/s links (``link`` sets the links'
    other fields: ``jitter=``, ``drop=``...). Session-scoped: it keeps no state, so a
    module-scoped fixture may use it too."""

    def make(seed: int = 1, cfg: Config = PAIR_CFG, **link: Any) -> Pair:
        fabric = Fabric(seed, planes=2, paths_per_plane=2, link=lambda: Link(rate_bps=2e9, **link))
        return fabric, fabric.add_host("a", cfg), fabric.add_host("b", cfg)

    return make


@pytest.fixture
def pair(make_pair: MakePair) -> Pair:
    """``make_pair()``: the fabric and its hosts ``a`` and ``b``."""
    return make_pair()


class Established(NamedTuple):
    """A client and a server connection, established over a ``make_pair`` fabric (its
    hosts are ``fabric.hosts``), their events read; from then on the test moves packets
    between them by hand or runs the fabric."""

    fabric: Fabric
    client: Connection
    server: Connection


class MakeEstablished(Protocol):
    def __call__(self, seed: int = 1, cfg: Config = SMALL_CFG, **link: Any) -> Established: ...


@pytest.fixture(scope="session")
def make_established(make_pair: MakePair) -> MakeEstablished:
    """``make_established(seed=1, cfg=SMALL_CFG, **link)``: ``make_pair``'s hosts with
    one connection, run until both ends are established."""

    def make(seed: int = 1, cfg: Config = SMALL_CFG, **link: Any) -> Established:
        fabric, a, b = make_pair(seed, cfg, **link)
        client = a.endpoint.connect(fabric.paths(a, b), 0.0)
        fabric.run(
            1e-2, lambda: client.state is ConnState.ESTABLISHED and bool(b.endpoint.connections)
        )
        [server] = b.endpoint.connections.values()
        assert client.state is server.state is ConnState.ESTABLISHED
        drain(client)
        drain(server)
        return Established(fabric, client, server)

    return make


@pytest.fixture
def established(make_established: MakeEstablished) -> Established:
    """``make_established()``: fabric, client and server, with few EVs (``SMALL_CFG``)."""
    return make_established()


@pytest.fixture
def no_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))

    def must_not_build(*_args: object, **_kwargs: object) -> float:
        raise AssertionError("the CLI tried to build a lab from input it should refuse")

    monkeypatch.setattr("labs.apply.up", must_not_build)
