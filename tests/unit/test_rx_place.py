"""The receiver's placement (csrc/mrc_rx.c) against its pure-Python twin (protocol/rxplace.py):
the same bursts of data records, with loss, duplicates, reordering, CE marks and
malformed fields drawn by hypothesis, leave the same state after every call; and the
state's one declaration (protocol/rxstate.py) against the C header and the cffi struct."""

from __future__ import annotations

import math
import pathlib
import runpy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport import backend
from mrc_transport.protocol import rxplace, rxstate
from mrc_transport.protocol.rxplace import RxState, expand
from mrc_transport.wire.records import RX_DATA, RX_OTHER, DataField, RxRec

needs_c = pytest.mark.skipif(not backend.FASTPATH, reason="the C fast path is not built")

CONN = 7
SEG = 24
SRC = bytes(16)


@dataclass
class Burst:
    recs: list[RxRec]
    payloads: bytes


def _records(draw: Any) -> tuple[int, list[Burst]]:
    """A transfer's data packets as they might arrive, cut into bursts."""
    initial = draw(st.integers(0, 2**32 - 1))
    # mostly one length, as a transfer of equal messages recycles its buffers (spares)
    sizes = st.one_of(st.sampled_from([3 * SEG, 3 * SEG, 2 * SEG + 5]), st.integers(0, 5 * SEG + 7))
    lengths = draw(st.lists(sizes, min_size=1, max_size=10))
    packets = []  # (psn, msn, offset, msg_len, payload)
    psn = initial
    for msn, length in enumerate(lengths):
        body = bytes((msn * 31 + k) & 0xFF for k in range(length))
        for off in range(0, max(length, 1), SEG):
            packets.append((psn, msn, off, length, body[off : off + SEG]))
            psn += 1
    # the network: each packet lost, doubled, moved a few places, marked or mangled
    order = []
    for k, pkt in enumerate(packets):
        fate = draw(st.sampled_from(["ok"] * 6 + ["drop", "dup", "late", "ce", "req", "bad"]))
        if fate == "drop":
            continue
        key = k + (draw(st.integers(1, 6)) if fate == "late" else 0)
        order.append((key, k, pkt, fate))
        if fate == "dup":
            order.append((key + draw(st.integers(0, 40)), k, pkt, "ok"))
    order.sort(key=lambda x: (x[0], x[1]))
    recs, payloads = [], bytearray()
    for _, _, (psn, msn, off, length, payload), fate in order:
        flags, ce, kind, conn = 0x02, 0, RX_DATA, CONN
        if fate == "ce":
            ce = 1
        if fate == "req":
            flags |= 0x08
        if fate == "bad":
            what = draw(st.sampled_from(["psn", "msn", "off", "len", "other", "conn"]))
            if what == "psn":
                psn += draw(st.sampled_from([64, 1 << 31, -(1 << 20)]))
            elif what == "msn":
                msn += draw(st.sampled_from([9, 1 << 20, -3]))
            elif what == "off":
                off += 1
            elif what == "len":
                length += SEG
            elif what == "other":
                kind = RX_OTHER
            else:
                conn = CONN + 1
        rec: RxRec = (
            kind, conn, SRC, flags, psn & 0xFFFFFFFF, msn & 0xFFFFFFFF, off, length,
            123, len(payloads), len(payload), 0x10005, ce, 0,
        )  # fmt: skip
        recs.append(rec)
        payloads += payload
    bursts, i = [], 0
    while i < len(recs):
        n = draw(st.integers(1, 12))
        bursts.append(Burst(recs[i : i + n], bytes(payloads)))
        i += n
    return initial, bursts


records = st.composite(_records)


def _drive(st_: Any, view: memoryview, recs: list[RxRec], bufs: dict[int, bytearray]) -> list[Any]:
    """What the receiver does with ``place``'s stops, the same for both twins: the log
    of each call's outputs (``take``) and of the messages delivered, each with its bytes;
    each delivered buffer goes back on the spares, as an application recycles it."""
    log: list[Any] = []
    i, n = 0, len(recs)
    buf, placed = st_.prepare(recs, view, 0, n)
    while i < n:
        i = st_.place(buf, placed, i, n, CONN, 1.0)
        taken = st_.take()
        log.append((i, tuple(int(v) for v in taken)))
        for slot, msg_buf in st_.opened_buffers(taken.n_opened):
            bufs[int(slot)] = msg_buf
        for k in range(taken.n_delivered):
            slot = int(st_.delivered[k])
            msg_buf = bufs.pop(slot)
            log.append(("delivered", int(st_.msgs[slot].msn), bytes(msg_buf)))
            st_.close_message(slot)
            st_.push_spare(msg_buf)
        if taken.why == rxplace.NEW_MESSAGE:
            rec = recs[i]
            msg_len = rec[DataField.MSG_LEN]
            off, size = rec[DataField.MSG_OFFSET], rec[DataField.PAYLOAD_LEN]
            if rxplace.grid_index(SEG, SEG, 1 << 31, off, msg_len, size) < 0:
                log.append(("dropped", i))
                i += 1
                continue
            msn = expand(rec[DataField.MSN], int(st_.next_msn))
            slot = msn & int(st_.msg_mask)
            assert int(st_.msgs[slot].state) == rxplace.MSG_FREE
            msg_buf = st_.pop_spare(msg_len)
            msg_buf = bytearray(msg_len) if msg_buf is None else msg_buf
            bufs[slot] = msg_buf
            st_.open_message(slot, msn, msg_buf, max(1, -(-msg_len // SEG)))
        elif taken.why in (rxplace.OUT_OF_WINDOW, rxplace.OTHER_RECORD):
            i += 1  # the core's own path takes it
    return log


SCALARS = (
    "cum", "highest", "next_msn", "ooo_count", "since_sack", "held", "ack_deadline",
    "trig_ev", "trig_ts", "trig_has_ts", "trig_at",
)  # fmt: skip


def _snapshot(st_: Any, bufs: dict[int, bytearray]) -> dict[str, Any]:
    snap: dict[str, Any] = {name: getattr(st_, name) for name in SCALARS}
    snap["ack_deadline"] = float(snap["ack_deadline"])
    snap["trig_at"] = float(snap["trig_at"])
    if isinstance(st_, RxState):
        spares = st_.spares[: st_.n_spares]
    else:
        spares = [b for b, _, _ in st_._spares]
    snap["spares"] = [len(b) for b in spares]
    snap["bufs"] = {slot: bytes(b) for slot, b in bufs.items()}
    snap["ooo"] = bytes(st_.ooo[i] for i in range(int(st_.ooo_mask) + 1))
    msgs = []
    for slot in range(int(st_.msg_mask) + 1):
        m = st_.msgs[slot]
        if int(m.state) == rxplace.MSG_FREE:
            continue
        segs = max(1, -(-int(m.len) // SEG))
        placed = bytes(int(m.placed[k]) for k in range(segs))
        msgs.append((slot, int(m.msn), int(m.len), int(m.missing), int(m.state), placed))
    snap["msgs"] = msgs
    return {
        k: (int(v) if not isinstance(v, float | bytes | list | dict) else v)
        for k, v in snap.items()
    }


def _states(initial: int) -> tuple[RxState, Any]:
    from mrc_transport.protocol.rxfast import CRxState

    args = (SEG, SEG, 1 << 31, 16, 4, 3 * SEG, 0.001, initial)
    return RxState(*args), CRxState(*args)


@needs_c
@settings(max_examples=300, deadline=None)
@given(records())
def test_c_and_python_placement_agree(drawn: tuple[int, list[Burst]]) -> None:
    initial, bursts = drawn
    py, c = _states(initial)
    py_bufs: dict[int, bytearray] = {}
    c_bufs: dict[int, bytearray] = {}
    for burst in bursts:
        view = memoryview(burst.payloads)
        py_log = _drive(py, view, burst.recs, py_bufs)
        c_log = _drive(c, view, burst.recs, c_bufs)
        assert c_log == py_log
        assert _snapshot(c, c_bufs) == _snapshot(py, py_bufs)


def test_a_transfer_in_order_is_delivered_whole() -> None:
    """The twin alone, no loss: every message delivered once, in order, with its bytes."""
    bodies = [bytes(range(40)), b"", bytes(100)]
    recs, payloads, psn = [], bytearray(), 5
    for msn, body in enumerate(bodies):
        for off in range(0, max(len(body), 1), SEG):
            chunk = body[off : off + SEG]
            recs.append((RX_DATA, CONN, SRC, 0x02, psn, msn, off, len(body), 9, len(payloads),
                         len(chunk), 1, 0, 0))  # fmt: skip
            payloads += chunk
            psn += 1
    py = RxState(SEG, SEG, 1 << 31, 16, 4, 3 * SEG, 0.001, 5)
    log = _drive(py, memoryview(bytes(payloads)), recs, {})
    assert [entry[2] for entry in log if entry[0] == "delivered"] == bodies
    assert (py.cum, py.next_msn) == (psn, 3)
    taken = [entry[1] for entry in log if isinstance(entry[0], int)]
    # 24, 40, 40, 64 bytes since a SACK wait for the ack delay; 88, 112, 136, 140 reach the
    # 72 of sack_every_bytes: four SACKs due, no delay left
    assert sum(t[1] for t in taken) == 4
    assert py.ack_deadline == math.inf
    assert sum(t[8] for t in taken) == 0  # no duplicates


@needs_c
def test_a_recycled_buffer_keeps_its_own_segment_flags() -> None:
    """A message opened with a spare, then a message the core opens in the same table
    slot while that buffer is in use again: the two must not share segment flags (a
    bug did: the later message's flags marked the other's segment placed, which then
    dropped it as a duplicate and never completed)."""
    size = 2 * SEG
    order = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (5, 0), (2, 1)]  # (msn, segment)
    recs, payloads = [], bytearray()
    for psn, (msn, seg) in enumerate(order):
        chunk = bytes([msn * 16 + seg]) * SEG
        recs.append((RX_DATA, CONN, SRC, 0x02, 100 + psn, msn, seg * SEG, size, 9,
                     len(payloads), SEG, 1, 0, 0))  # fmt: skip
        payloads += chunk
    py, c = _states(100)
    py_bufs: dict[int, bytearray] = {}
    c_bufs: dict[int, bytearray] = {}
    for k in range(len(recs)):  # a packet a burst, so buffers are recycled in between
        one = recs[k : k + 1]
        py_log = _drive(py, memoryview(bytes(payloads)), one, py_bufs)
        c_log = _drive(c, memoryview(bytes(payloads)), one, c_bufs)
        assert c_log == py_log
        assert _snapshot(c, c_bufs) == _snapshot(py, py_bufs)
    assert int(c.next_msn) == 3  # 0, 1 and 2 delivered; 5 waits for 3 and 4


def test_the_header_holds_the_declared_structs() -> None:
    """csrc/mrc_fast.h, which the cdef is read from, has rxstate.py's text of the structs
    (``python csrc/build.py --header`` writes it)."""
    build = runpy.run_path(str(pathlib.Path(__file__).parents[2] / "csrc" / "build.py"))
    header = build["HEADER"].read_text()
    assert build["generated"](header) == rxstate.c_declarations()


@needs_c
def test_the_c_struct_has_the_declared_members() -> None:
    """The cffi struct, member for member what rxstate.py declares, and the Python twin
    with a slot for each, zeroed."""
    from mrc_transport._fastpath import ffi

    for tag, fields in rxstate.STRUCTS:
        assert [name for name, _ in ffi.typeof(f"struct {tag}").fields] == [f.name for f in fields]
    py = RxState(SEG, SEG, 1 << 31, 16, 4, 3 * SEG, 0.001, 0)
    assert all(getattr(py, f.name) == 0 for f in rxstate.TAKEN)
    assert tuple(py.take()) == (0,) * len(rxstate.TAKEN)


def test_the_result_names_each_member_taken() -> None:
    """``take``'s result reads each of the struct's ``TAKEN`` members by its name."""
    py = RxState(SEG, SEG, 1 << 31, 16, 4, 3 * SEG, 0.001, 0)
    for k, f in enumerate(rxstate.TAKEN):
        setattr(py, f.name, k + 1)
    taken = py.take()
    assert [getattr(taken, f.name) for f in rxstate.TAKEN] == list(range(1, len(rxstate.TAKEN) + 1))
    assert tuple(py.take()) == (0,) * len(rxstate.TAKEN)  # zeroed by the first
