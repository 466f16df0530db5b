"""The receiver's SACK bitmap against its definition (docs/protocol.md): bit i set iff PSN
``sack_base + i`` arrived, for a base that covers the highest PSN received."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mrc_transport.protocol import Config
from mrc_transport.protocol.commons import TS, Commons
from mrc_transport.protocol.counters import ConnCounters
from mrc_transport.protocol.receiver import Receiver
from mrc_transport.wire.frames import Common, DataHeader, Flags, Opcode
from mrc_transport.wire.records import record_of

MSS = 100
CFG = Config(mss=MSS)
ISN = 1000


@given(st.sets(st.integers(0, 300), max_size=200))
def test_bitmap_marks_exactly_the_psns_received_above_the_cumulative_one(
    offsets: set[int],
) -> None:
    rx = Receiver(CFG, ISN, ConnCounters(), lambda e: None, 7, Commons(1, 2))
    common = Common(Opcode.WRITE_MIDDLE, Flags(TS), 7, 1)
    for off in sorted(offsets, reverse=True):  # out of order: holes stay open longest
        h = DataHeader(common, ISN + off, 0, off * MSS, 400 * MSS, 5)
        rec = record_of(h, ev=0, ce=0, src=bytes(16), at=0, size=MSS)
        assert rx.receive([rec], memoryview(bytes(MSS)), 0, 1, 0.0) == 1  # a burst of one
    sack = rx.sack()
    arrived = {ISN + off for off in offsets}
    cum = ISN
    while cum in arrived:
        cum += 1
    assert sack.cum_psn == cum
    # the bitmap ends at the highest PSN received (or starts at the cumulative one)
    assert sack.sack_base == max(cum, max(arrived, default=ISN) - 63)
    want = sum(
        1 << i for i in range(64) if sack.sack_base + i in arrived and sack.sack_base + i >= cum
    )
    assert sack.bitmap == want
    assert (Flags.TS in sack.common.flags) == bool(offsets)  # reflects its trigger's ts
