"""Helpers shared by unit tests: paths, two cores pumped in memory, packets by hand, and the
CLI's one-line errors. Test modules import these from here, never from each other."""

from __future__ import annotations

import random
from ipaddress import IPv6Address
from typing import Any

import pytest

from mrc_transport.cli.main import main
from mrc_transport.protocol import Config, Connection, ConnState, Transmit, events
from mrc_transport.wire import frames
from srv6.path import SrPath
from tests.sim.fabric import Fabric, Host, Link

PAIR_CFG = Config(nic_rate_bps=8e9, ev_count=32, ev_backup=8)
"""The config of ``pair``'s hosts."""
SMALL_CFG = Config(nic_rate_bps=8e9, ev_count=16, ev_backup=4)
"""The config of ``established``'s connections: few EVs, so a test can walk them all."""


def paths(planes: int = 2, per_plane: int = 4) -> list[SrPath]:
    """Made-up paths, ``per_plane`` in each plane (no lab behind them)."""
    out = []
    for p in range(planes):
        for k in range(per_plane):
            a = IPv6Address(f"fd00:{p}::1")
            b = IPv6Address(f"fd00:{p}::2")
            out.append(SrPath(p, ("t0-a", f"t1-p{p}-{k}", "t0-b"), a, b, b, (b,), f"p{p}"))
    return out


def pair(seed: int = 1, cfg: Config = PAIR_CFG, **link: Any) -> tuple[Fabric, Host, Host]:
    """Two hosts on a simulated fabric of 2 planes x 2 paths."""
    fabric = Fabric(seed, planes=2, paths_per_plane=2, link=lambda: Link(rate_bps=2e9, **link))
    return fabric, fabric.add_host("a", cfg), fabric.add_host("b", cfg)


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def established(seed: int = 1, cfg: Config = SMALL_CFG) -> tuple[Fabric, Connection, Connection]:
    """A client and a server connection, established over 2 planes x 2 paths; from then
    on the test moves packets between them by hand."""
    fabric = Fabric(seed, planes=2, paths_per_plane=2)
    a, b = fabric.add_host("a", cfg), fabric.add_host("b", cfg)
    conn = a.endpoint.connect(fabric.paths(a, b), 0.0)
    fabric.run(1e-2, lambda: conn.state is ConnState.ESTABLISHED and bool(b.endpoint.connections))
    [server] = b.endpoint.connections.values()
    assert conn.state is server.state is ConnState.ESTABLISHED
    drain(conn)
    drain(server)
    return fabric, conn, server


def drain(conn: Connection) -> list[events.Event]:
    out = []
    while (e := conn.next_event()) is not None:
        out.append(e)
    return out


def as_packet(tx: Transmit) -> frames.Packet:
    """``tx`` as it arrives at the peer (its source address names the plane)."""
    ph = frames.PathHeader(tx.path.src.packed, tx.path.dst.packed, ev=tx.ev, dscp=tx.dscp)
    return frames.Packet(ph, tx.header, bytes(tx.payload))


def psn(tx: Transmit) -> int:
    assert isinstance(tx.header, frames.DataHeader)
    return tx.header.psn


def exit_2_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """``mrc ARGV`` exits 2 with exactly one line on stderr, no traceback; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def error_line(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """The one non-blank line on stderr, which names every one of ``words``."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]
