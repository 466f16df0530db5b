"""An endpoint's connections share one burst: N connections must not put N bursts at once
into a port's queue (issue 34: -P 4 got a quarter of -P 1, its bursts overflowing the
host's tbf queues)."""

from __future__ import annotations

from collections import Counter

from mrc_transport.protocol import Config, ConnState
from mrc_transport.protocol.segments import DataRun
from tests.sim.fabric import Fabric
from tests.unit.conftest import MakePair, Pair
from tests.unit.helpers import drain, payload

CFG = Config(nic_rate_bps=8e9, ev_count=16, ev_backup=4, max_burst=64)


def _clients(pair: Pair, n: int) -> tuple[Fabric, list[int]]:
    """n established connections from host a to host b, each with data queued."""
    fabric, a, b = pair
    conns = [a.endpoint.connect(fabric.paths(a, b), 0.0) for _ in range(n)]
    fabric.run(1e-2, lambda: all(c.state is ConnState.ESTABLISHED for c in conns))
    for c in conns:
        drain(c)
        c.send_message(payload(4 << 20), 0.01)
    return fabric, [c.conn for c in conns]


def _data_by_conn(out: list[object]) -> Counter[int]:
    got: Counter[int] = Counter()
    for tx in out:
        if isinstance(tx, DataRun):
            got[tx.commons.src_conn] += len(tx)
    return got


def test_n_connections_share_one_burst_of_max_burst_packets(make_pair: MakePair) -> None:
    fabric, ids = _clients(make_pair(seed=3, cfg=CFG), 4)
    ep = fabric.hosts[0].endpoint
    got = _data_by_conn(ep.burst_to_send(0.011))
    assert sum(got.values()) <= CFG.max_burst
    assert set(got) == set(ids)  # everyone had a share
    assert max(got.values()) - min(got.values()) <= 1


def test_the_first_share_rotates_so_no_connection_is_always_last(make_pair: MakePair) -> None:
    fabric, ids = _clients(make_pair(seed=3, cfg=CFG), 3)
    ep = fabric.hosts[0].endpoint
    firsts = []
    for k in range(3):
        out = ep.burst_to_send(0.011 + k * 1e-6)
        firsts.append(next(tx.commons.src_conn for tx in out if isinstance(tx, DataRun)))
    assert sorted(firsts) == sorted(ids)
