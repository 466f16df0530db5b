"""Path failure, readmission, ECN steering, multipath scaling and fairness, in virtual time."""

from __future__ import annotations

import pytest

from mrc_transport.protocol import Config, events
from mrc_transport.protocol.ev import EvState

from .fabric import Fabric, Link
from .scenarios import PATH_RATE, blob, jain, start

PAYLOAD_SHARE = 1200 / 1284  # MSS over MSS plus headers: the best goodput per wire rate


def test_silent_path_death_costs_a_handful_of_packets_then_readmission() -> None:
    run = start(2, planes=2, paths=4)
    f = run.fabric
    run.conn.send_message(blob(14_000_000, 1), f.now)
    run.sample_every(100e-6)
    dead = f.links[(0, 1, "fwd")]
    t_kill, t_back = 5e-3, 9e-3
    f.at(t_kill, lambda: setattr(dead, "dead", True))
    f.at(t_back, lambda: setattr(dead, "dead", False))
    f.run(t_back)
    rtt = run.conn.sender.min_rtt
    # every packet in flight on the path when it died, plus what went out while the first
    # losses were detected (about two RTTs): a small fraction of the ~9000 packets sent
    assert 0 < dead.dead_data <= 32
    key = next(i for i, p in enumerate(run.conn.evs.paths) if f.link_of(p) is dead)
    on_path = [e for e in run.conn.evs.by_value.values() if e.path_key == key]
    assert all(e.state is EvState.ASSUMED_BAD for e in on_path)
    values = {e.value for e in on_path}
    retired = [
        e
        for e in run.a.events
        if isinstance(e, events.PathRetired) and e.time >= t_kill and e.ev in values
    ]
    assert max(e.time for e in retired) - t_kill < 10 * rtt
    # goodput: within a few RTTs back to what it was, scaled to the 7 surviving paths of 8
    before = run.rate(t_kill - 2e-3, t_kill)
    after = run.rate(t_kill + 10 * rtt, t_back)
    assert after >= 0.9 * before * 7 / 8
    # the path comes back: its EVs pass their probes and carry data again
    data_before = dead.data_packets
    f.run(t_back + 6e-3)  # probes count in the smoothed RTT (ev.py probe_rtt)
    back = [e for e in run.a.events if isinstance(e, events.PathReadmitted) and e.time > t_back]
    assert len({e.ev for e in back}) >= len(on_path) // 2
    assert back
    cfg = run.conn.cfg  # the slowest probe schedule: backed-off retry, then the successes
    evs = run.conn.evs
    bound = evs.probe_wait * 8 + evs.probe_rtt * (cfg.probe_next_rtts * cfg.readmit_probes + 2)
    assert min(e.time for e in back) - t_back < bound
    assert dead.data_packets - data_before > 100


def test_plane_down_moves_traffic_to_the_other_plane() -> None:
    run = start(3, planes=2, paths=2)
    f = run.fabric
    run.conn.send_message(blob(8_000_000, 2), f.now)
    run.sample_every(100e-6)
    t_kill = 4e-3
    for k in range(2):
        f.at(t_kill, lambda k=k: setattr(f.links[(0, k, "fwd")], "dead", True))  # type: ignore[misc]
    f.run(t_kill + 4e-3)
    down = [e for e in run.a.events if isinstance(e, events.PlaneDown)]
    assert [e.plane for e in down] == [0]
    rtt = run.conn.sender.min_rtt
    assert down[0].time - t_kill < 10 * rtt
    surviving = 2 * PATH_RATE * PAYLOAD_SHARE
    recovered = next(
        t for t, _ in run.samples if t > t_kill and run.rate(t, t + 5e-4) > 0.8 * surviving
    )
    assert (recovered - t_kill) / rtt < 10
    assert run.rate(t_kill + 1e-3, t_kill + 4e-3) > 0.8 * surviving


def ecn_on_path_2(seed: int) -> tuple[int, float]:
    """Data packets on the marked path and the mean over the other three paths."""
    run = start(seed, planes=1, paths=4)
    f = run.fabric
    hot = f.links[(0, 2, "fwd")]
    hot.mark = 1.0  # every packet on this path comes back with CE
    run.conn.send_message(blob(4_000_000, 3), f.now)
    f.run(1.0, lambda: len(run.b.messages) == 1)
    others = [f.links[(0, k, "fwd")].data_packets for k in (0, 1, 3)]
    assert run.conn.counters.ecn_echoes > 0
    assert any(isinstance(e, events.PathSkipped) for e in run.a.events)
    return hot.data_packets, sum(others) / len(others)


def test_ecn_on_one_path_moves_traffic_off_it() -> None:
    # Each CE echo skips the EV for a rotation, so the hot path carries clearly less. Over
    # several seeds: in one run the hot path's share spreads from 0.65 to 1.16 of the
    # least loaded other path (8 seeds); the mean over 6 is 0.71-0.77 of the others'.
    runs = [ecn_on_path_2(seed) for seed in range(1, 7)]
    hot, others = sum(r[0] for r in runs), sum(r[1] for r in runs)
    assert hot < 0.85 * others, runs


def goodput(paths: int, seed: int = 1) -> float:
    run = start(seed, planes=1, paths=paths)
    n = 1_000_000 * paths
    t0 = run.fabric.now
    run.conn.send_message(blob(n, seed), t0)
    run.fabric.run(10.0, lambda: len(run.b.messages) == 1)
    return n * 8 / (run.fabric.now - t0)


def test_n_equal_paths_give_about_n_times_one_path() -> None:
    one = goodput(1)
    assert one > 0.9 * PATH_RATE * PAYLOAD_SHARE
    # random spraying queues each path a little (a random walk around its drain rate):
    # 3.1-3.6 x one path over seeds 1-6; three paths' worth would be at most 3 x
    four = sum(goodput(4, seed) for seed in range(1, 4)) / 3
    assert four / one > 0.8 * 4


@pytest.mark.parametrize(
    ("cc", "fair"),
    # measured, seeds 5-7: UEC's NSCC 0.939-1.000 (3.40-3.52 Gb/s together), the project's
    # former NSCC 0.999-1.000 (3.20-3.29 Gb/s): the one place "nscc-lab" measures better
    [("nscc", 0.93), ("nscc-lab", 0.95)],
)
def test_two_connections_share_fairly(cc: str, fair: float) -> None:
    f = Fabric(5, planes=1, paths_per_plane=4, link=lambda: Link(rate_bps=PATH_RATE))
    cfg = Config(nic_rate_bps=4 * PATH_RATE, cc=cc)
    hosts = [f.add_host(n, cfg) for n in "abcd"]
    a, b, c, d = hosts
    conns = [a.endpoint.connect(f.paths(a, b), 0.0), c.endpoint.connect(f.paths(c, d), 0.0)]
    f.run(1e-3)
    for conn in conns:
        conn.send_message(blob(6_000_000, 4), f.now)
    t0 = f.now
    f.run(1.0, lambda: len(b.messages) + len(d.messages) >= 1)
    t1 = f.now
    got = [sum(x.counters.bytes_received for x in h.endpoint.connections.values()) for h in (b, d)]
    rates = [g * 8 / (t1 - t0) for g in got]
    assert jain(rates) > fair
    assert sum(rates) > 0.75 * 4 * PATH_RATE * PAYLOAD_SHARE  # and together they fill the paths
