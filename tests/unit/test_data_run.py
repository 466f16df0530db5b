"""``DataRun``: the sender's consecutive new data packets handed over as one item, what
each of its packets is, and its encoding by the burst encoders (C in one call, the
Python twin packet by packet) against ``wire.encode`` of each packet."""

from __future__ import annotations

import os
import random
import select
import socket
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport import wire
from mrc_transport.io import batchio
from mrc_transport.io.sockets import open_rx
from mrc_transport.protocol import Config
from mrc_transport.protocol.commons import ACK_REQ, Commons
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.segments import DataRun, expand_runs
from mrc_transport.protocol.transmit import Transmit
from mrc_transport.wire.frames import (
    DSCP_DATA,
    Common,
    DataHeader,
    Flags,
    Opcode,
    PathHeader,
    ProbeHeader,
)
from tests.unit.conftest import MakeEstablished

MakeEncoder = Callable[[int, int], batchio.BurstEncoder]
ENCODERS: list[MakeEncoder] = [batchio.PyBurstEncoder]
if batchio.BACKEND == "c":
    ENCODERS.append(batchio.CBurstEncoder)


@pytest.fixture(scope="module")
def evs(make_established: MakeEstablished) -> list[Ev]:
    """The EVs of a connection of 8, the same objects for every test of the module (as
    ``_path_of`` caches by EV)."""
    return list(make_established(cfg=Config(ev_count=8)).client.evs.by_value.values())


_PATHS: dict[int, PathHeader] = {}


def _path_of(ev: Ev) -> PathHeader:
    """One PathHeader per EV, the same object every time (as an endpoint's cache)."""
    if ev.value not in _PATHS:
        _PATHS[ev.value] = PathHeader(src=ev.path.src.packed, dst=ev.path.dst.packed, ev=ev.value)
    return _PATHS[ev.value]


def _run(
    evs: list[Ev], psn: int, offset: int, seg: int, total: int, count: int, last_flags: int = 0
) -> DataRun:
    data = memoryview(bytes(random.Random(psn).randbytes(total)))
    run = DataRun(Commons(7, 9), psn, 3, offset, seg, data, 10**9 + 5, evs[0], DSCP_DATA)
    for i in range(1, count):
        run.evs.append(evs[i % len(evs)])
    run.last_flags = last_flags
    return run


def test_a_runs_packets_are_the_messages_segments_in_order(evs: list[Ev]) -> None:
    run = _run(evs, psn=(1 << 32) - 2, offset=0, seg=1000, total=3500, count=4, last_flags=ACK_REQ)
    txs = run.transmits()
    assert [t.header.psn for t in txs] == [(1 << 32) - 2, (1 << 32) - 1, 0, 1]  # wraps
    assert [h.common.opcode for h in (t.header for t in txs)] == [
        Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST
    ]  # fmt: skip
    assert [len(t.payload) for t in txs] == [1000, 1000, 1000, 500]
    assert b"".join(bytes(t.payload) for t in txs) == bytes(run.data)
    assert [t.header.msg_offset for t in txs] == [0, 1000, 2000, 3000]
    assert [t.header.common.flags for t in txs] == [Flags.TS] * 3 + [Flags.TS | Flags.ACK_REQ]
    assert [(t.path, t.ev) for t in txs] == [(ev.path, ev.value) for ev in run.evs]
    assert all(t.header.common.dst_conn == 9 and t.header.common.src_conn == 7 for t in txs)


def test_expand_runs_keeps_order_and_plain_packets(evs: list[Ev]) -> None:
    run = _run(evs, psn=5, offset=0, seg=100, total=250, count=3)
    probe = run.transmit(0)
    items: list[Transmit | DataRun] = [probe, run, probe]
    assert expand_runs(items) == [probe, *run.transmits(), probe]


def test_a_burst_of_new_data_is_one_run_asking_for_a_sack_at_its_end(
    make_established: MakeEstablished,
) -> None:
    cfg = Config(mss=1000, ev_count=8, max_burst=16, nic_rate_bps=1e12)
    client = make_established(cfg=cfg).client
    sent = client.counters.packets_sent
    client.send_message(bytes(20_000), 1.0)
    burst = client.burst_to_send(1.0)
    assert [len(item) for item in burst if isinstance(item, DataRun)] == [16]
    txs = expand_runs(burst)
    data = [t for t in txs if isinstance(t.header, DataHeader)]
    assert [t.header.psn for t in data] == [data[0].header.psn + i for i in range(16)]
    assert [bool(t.header.common.flags & Flags.ACK_REQ) for t in data] == [False] * 15 + [True]
    assert client.counters.packets_sent - sent == len(txs)  # packets, not items


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(
    psn=st.integers(0, (1 << 32) - 1),
    seg=st.integers(1, 700),
    total=st.integers(0, 4000),
    first=st.integers(0, 10),
    count=st.integers(1, 8),
    last=st.sampled_from([0, ACK_REQ]),
)
def test_add_run_writes_what_wire_encode_writes(
    make: MakeEncoder,
    psn: int,
    seg: int,
    total: int,
    first: int,
    count: int,
    last: int,
    evs: list[Ev],
) -> None:
    n_segs = max(1, -(-total // seg))
    first = min(first, n_segs - 1)
    count = min(count, n_segs - first)
    run = _run(evs, psn, first * seg, seg, total, count, last)
    enc = make(16, 2048)
    enc.add_run(run, _path_of)
    txs = run.transmits()
    want = [
        wire.encode(_path_of(ev), t.header, t.payload) for ev, t in zip(run.evs, txs, strict=True)
    ]
    assert [enc.packet(i) for i in range(len(enc))] == want
    enc.clear()
    enc.add_run(run, _path_of)  # the EVs' templates kept from the first time
    assert [enc.packet(i) for i in range(len(enc))] == want


@pytest.mark.skipif(batchio.CBurstEncoder not in ENCODERS, reason="needs the C codec")
def test_c_add_run_keeps_encoding_right_as_its_ev_table_starts_over(
    monkeypatch: pytest.MonkeyPatch, evs: list[Ev]
) -> None:
    """The C encoder's EV -> template table starts over when full, between runs; every
    run still encodes as wire.encode does, and the table never outgrows its limit."""
    monkeypatch.setattr(batchio, "EV_TEMPLATES", 10)
    enc = batchio.CBurstEncoder(16, 2048)
    tables = []  # kept, so no table's id is reused
    for psn in range(6):
        run = _run(evs, psn, 0, 100, 800, 8)  # 8 packets on 8 EVs, in turn
        if psn % 2:
            run.evs.reverse()
        enc.clear()
        enc.add_run(run, _path_of)
        want = [
            wire.encode(_path_of(ev), t.header, t.payload)
            for ev, t in zip(run.evs, run.transmits(), strict=True)
        ]
        assert [enc.packet(i) for i in range(len(enc))] == want
        assert len(enc._ev_templates) <= 10
        tables.append(enc._tcache)
    assert any(t is not tables[0] for t in tables)  # it did start over


@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_add_run_fills_the_burst_then_raises_as_add_does(make: MakeEncoder, evs: list[Ev]) -> None:
    run = _run(evs, psn=1, offset=0, seg=100, total=1000, count=6)
    path_of = [_path_of(ev) for ev in run.evs]
    enc = make(4, 1024)
    enc.add(path_of[0], run.header(0), run.payload(0))
    with pytest.raises(ValueError, match="at most 4 packets"):
        enc.add_run(run, _path_of)
    assert len(enc) == 4
    assert [enc.packet(i) for i in range(1, 4)] == [
        wire.encode(path_of[i], run.header(i), run.payload(i)) for i in range(3)
    ]
    assert isinstance(run.header(0), DataHeader)


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
@pytest.mark.parametrize("make", ENCODERS, ids=lambda c: c.__name__)
def test_a_run_sent_arrives_whole_and_checksummed(make: MakeEncoder, evs: list[Ev]) -> None:
    """Through a raw socket to a UDP socket, which checks each packet's checksum; a
    control packet first, and the burst reused after ``clear``."""
    rx = open_rx(0, "::1")
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        port = rx.getsockname()[1]
        loop = socket.inet_pton(socket.AF_INET6, "::1")

        made: dict[int, PathHeader] = {}  # one per EV, as an endpoint's cache

        def to_rx(ev: Ev) -> PathHeader:
            if ev.value not in made:
                made[ev.value] = PathHeader(src=loop, dst=loop, ev=ev.value, dport=port)
            return made[ev.value]

        run = _run(evs, psn=40, offset=0, seg=300, total=2000, count=7)
        probe = ProbeHeader(Common(Opcode.PROBE, Flags.NONE, 7, 9), 1, 2, 3)
        enc = make(16, 1500)
        for _ in range(2):  # the second time over a cleared buffer
            enc.clear()
            enc.add(to_rx(evs[0]), probe)
            enc.add_run(run, to_rx)
            assert enc.nbytes == sum(len(enc.packet(i)) for i in range(len(enc)))
            assert enc.send(raw, 3) == 5
            assert enc.send(raw) == 8
        want = [wire.encode(to_rx(evs[0]), probe)[48:]] + [
            wire.encode(to_rx(ev), run.header(i), run.payload(i))[48:]
            for i, ev in enumerate(run.evs)
        ]
        got: list[bytes] = []
        receiver = batchio.PyBurstReceiver(64, 2048)
        while len(got) < 26:
            assert select.select([rx], [], [], 2.0)[0], f"only {len(got)} arrived"
            for i, meta in enumerate(receiver.recv(rx)):
                got.append(bytes(receiver.view[i * 2048 : i * 2048 + meta[0]]))
        assert got == (want[3:] + want) * 2
    finally:
        rx.close()
        raw.close()
