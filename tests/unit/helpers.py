"""Plain functions shared by unit tests, which set nothing up: made-up paths, payload
bytes, a connection's events read, a Transmit as its peer receives it, a data packet's
PSN, and the configs the fixtures use. Test modules import these from here, never from
each other.

What a test sets up is a fixture instead: two hosts on a simulated fabric (``pair``,
``make_pair``) and a connection established over it (``established``,
``make_established``) in tests/unit/conftest.py; a CLI's one-line refusal
(``cli_error``) in tests/conftest.py."""

from __future__ import annotations

import random
from ipaddress import IPv6Address

from mrc_transport.protocol import Config, Connection, Transmit, events
from mrc_transport.wire import frames
from srv6.path import SrPath

PAIR_CFG = Config(nic_rate_bps=8e9, ev_count=32, ev_backup=8)
"""The config of ``make_pair``'s hosts unless told."""
SMALL_CFG = Config(nic_rate_bps=8e9, ev_count=16, ev_backup=4)
"""The config of ``make_established``'s connections unless told: few EVs, so a test can
walk them all."""


def paths(planes: int = 2, per_plane: int = 4) -> list[SrPath]:
    """Made-up paths, ``per_plane`` in each plane (no lab behind them)."""
    out = []
    for p in range(planes):
        for k in range(per_plane):
            a = IPv6Address(f"fd00:{p}::1")
            b = IPv6Address(f"fd00:{p}::2")
            out.append(SrPath(p, ("t0-a", f"t1-p{p}-{k}", "t0-b"), a, b, b, (b,), f"p{p}"))
    return out


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


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
