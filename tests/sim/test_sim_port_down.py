"""A sending host's NIC port goes down, then comes back: the plane dies in both directions.

Its data sends on that plane are refused at once (ENETUNREACH on Linux) and the receiver's
SACKs and probe replies to it on that plane vanish. The sender must move to the surviving
plane without a stall, the receiver must stop acknowledging on the dead plane, and both
must use the plane again soon after the port is back.
"""

from __future__ import annotations

import pytest

from mrc_transport.protocol import events

from .scenarios import PATH_RATE, Run, blob, start

PAYLOAD_SHARE = 1200 / 1284  # MSS over MSS plus headers
T_KILL, T_BACK, T_END = 5e-3, 25e-3, 45e-3
PATHS = 2  # per plane; two planes


def _longest_stall(run: Run, after: float) -> float:
    """Longest time without a new byte at the receiver, from ``after`` on."""
    samples = [s for s in run.samples if s[0] >= after]
    last_t, last_b, stall = samples[0][0], samples[0][1], 0.0
    for t, b in samples:
        if b > last_b:
            stall = max(stall, t - last_t)
            last_t, last_b = t, b
    return max(stall, samples[-1][0] - last_t)


def _first_time_at(run: Run, after: float, rate: float) -> float:
    """First sample time after ``after`` from which 0.5 ms of goodput reaches ``rate``."""
    return next(t for t, _ in run.samples if t > after and run.rate(t, t + 5e-4) >= rate)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sender_port_down_and_back(seed: int) -> None:
    run = start(seed, planes=2, paths=PATHS)
    f = run.fabric
    run.conn.send_message(blob(30_000_000, seed), f.now)
    run.sample_every(50e-6)
    f.at(T_KILL, lambda: f.set_port(run.a, 1, up=False))
    f.at(T_BACK, lambda: f.set_port(run.a, 1, up=True))
    f.run(T_KILL)
    lost0, rtos0 = run.conn.counters.lost, run.conn.counters.rtos
    f.run(T_BACK)
    rtt = run.conn.sender.min_rtt
    # probes are timed in the probe RTT in force while the port is down, not in the
    # (smaller) one after full-rate traffic has resumed
    probe_rtt = run.conn.evs.probe_rtt
    counters = run.conn.counters
    # the refused sends are resent at once, not lost; the few SACKs that vanish on the
    # way back are covered by the next ones (cumulative PSN + bitmap); no RTO
    assert f.refused > 0
    assert counters.lost - lost0 <= 4
    assert counters.rtos == rtos0
    assert f.port_drops <= 3 * PATHS * 4  # only replies to packets already on their way
    down = [e for e in run.a.events if isinstance(e, events.PlaneDown)]
    assert [e.plane for e in down] == [1]
    assert down[0].time - T_KILL < rtt  # the first refused send
    surviving = PATHS * PATH_RATE * PAYLOAD_SHARE
    assert _longest_stall(run, T_KILL) < 5 * rtt
    assert (_first_time_at(run, T_KILL, 0.8 * surviving) - T_KILL) / rtt < 5
    assert run.rate(T_KILL + 10 * rtt, T_BACK) > 0.85 * surviving
    # the port is back: one probe finds it, every EV behind it is probed and readmitted
    f.run(T_END)
    up = [e for e in run.a.events if isinstance(e, events.PlaneUp)]
    assert [e.plane for e in up] == [1]
    cfg, evs = run.conn.cfg, run.conn.evs
    wait = evs.probe_wait / probe_rtt  # the probe timeout, in probe RTTs
    bound = wait + cfg.probe_next_rtts * (cfg.readmit_probes - 1) + 4
    assert up[0].time - T_BACK < bound * probe_rtt
    full = 2 * surviving
    assert _first_time_at(run, T_BACK, 0.8 * full) - T_BACK < (bound + 10) * probe_rtt
    assert run.rate(T_BACK + 5e-3, T_END) > 0.8 * full
    assert not evs.retired
    assert not evs.ports_down
    # probing a dead port costs one probe per retry interval, not one per EV (64 of
    # them behind it); a retry interval is at least the probe wait
    intervals = (T_BACK - T_KILL) / evs.probe_wait
    assert counters.send_failed < intervals + 10


@pytest.mark.parametrize("seed", [1, 2])
def test_receiver_port_down_reaches_the_sender_in_a_sack(seed: int) -> None:
    """The receiving host's NIC port dies and the host knows it (its link state): its next
    SACK, sent over the other plane, reports the port down, and the sender stops using
    that plane at once, its EVs retired with reason "peer port" (paper sections 3 and
    5.2.2). Before, the sender learnt it only from losses, about a plane RTT later."""
    run = start(seed, planes=2, paths=PATHS)
    f = run.fabric
    run.conn.send_message(blob(30_000_000, seed), f.now)
    run.sample_every(50e-6)

    def kill() -> None:
        f.set_port(run.b, 1, up=False)
        run.b.endpoint.port_state("p1", False, f.now)

    f.at(T_KILL, kill)
    f.run(T_BACK)
    rtt = run.conn.sender.min_rtt
    retired = [
        e for e in run.a.events
        if isinstance(e, events.PathRetired) and e.plane == 1 and e.time >= T_KILL
    ]  # fmt: skip
    assert retired
    assert {e.reason for e in retired} == {"peer port"}
    assert min(e.time for e in retired) - T_KILL < 2 * rtt
    assert run.conn.counters.rtos == 0
    surviving = PATHS * PATH_RATE * PAYLOAD_SHARE
    assert run.rate(T_KILL + 5 * rtt, T_BACK) > 0.85 * surviving
    # back: the SACK's bit clears and the plane is probed and used again
    f.at(
        T_BACK,
        lambda: (f.set_port(run.b, 1, up=True), run.b.endpoint.port_state("p1", True, f.now)),
    )
    f.run(T_END)
    up = [e for e in run.a.events if isinstance(e, events.PlaneUp)]
    assert [e.plane for e in up] == [1]
    assert up[0].time - T_BACK < 10 * run.conn.evs.probe_rtt
