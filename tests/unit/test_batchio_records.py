"""The receive burst decoder (``BurstReceiver.records`` / ``recv_records``, wire/burst.py):
a data packet's fields and payload read out in place, anything else left for the
one-at-a-time decoder; the C decoder (csrc/mrc_fast.c ``mrc_decode_rx_burst``) against its
Python twin, and struct mrc_rx_rec against the layouts of wire/records.py."""

from __future__ import annotations

import dataclasses
import select
import socket
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport import wire
from mrc_transport.io import batchio
from mrc_transport.io.sockets import open_rx
from mrc_transport.wire import records
from mrc_transport.wire.frames import (
    DSCP_DATA,
    DSCP_NO_TRIM,
    DSCP_RTX,
    DSCP_TRIMMED,
    DSCP_TRIMMED_LASTHOP,
    Common,
    DataHeader,
    Flags,
    Opcode,
    PathHeader,
    ProbeHeader,
    SackHeader,
)
from mrc_transport.wire.records import (
    OTHER_REC,
    RX_DATA,
    RX_OTHER,
    RX_REC,
    RX_SACK,
    DataField,
    RxMeta,
    RxRec,
    SackField,
)

SLOT = 1024
SRC = bytes(range(16))
DST = bytes(range(16, 32))
RECEIVERS: list[Callable[[int, int], batchio.BurstReceiver]] = [batchio.PyBurstReceiver]
if batchio.BACKEND == "c":
    RECEIVERS.append(batchio.CBurstReceiver)


def _name(make: Callable[..., object]) -> str:
    return getattr(make, "__name__", repr(make))


def _mrc(header: DataHeader | ProbeHeader, payload: bytes = b"") -> bytes:
    """The UDP payload (the MRC header and its payload) as a socket delivers it."""
    return wire.encode(PathHeader(SRC, DST), header, payload)[48:]


DATA = DataHeader(
    Common(Opcode.WRITE_MIDDLE, Flags.TS | Flags.ACK_REQ, 0x01020304, 9), 77, 5, 300, 900, 123
)
BODY = bytes(range(100)) * 3
SACK = SackHeader(
    Common(Opcode.SACK, Flags.TS | Flags.ECN_ECHO | Flags.RESTORE_WINDOW, 5, 6), 100, 90,
    0b1011, 0xABCDE, 999, 2, 127, 1 << 20, 1 << 40, 12345, 0b101,
)  # fmt: skip


def _burst(
    receiver: batchio.BurstReceiver, datagrams: list[bytes], metas: list[RxMeta]
) -> list[RxRec]:
    for i, d in enumerate(datagrams):
        receiver.view[i * SLOT : i * SLOT + len(d)] = d
    return list(receiver.records(metas))


def _meta(n: int, tclass: int = 2, truncated: int = 0) -> RxMeta:
    return (n, truncated, tclass, 0x8001, 0xABCDE, SRC, DST)


def _fields(rec: RxRec, layout: type[DataField] | type[SackField]) -> dict[str, object]:
    return {name: rec[i] for name, i in records.layout(layout).items()}


@pytest.mark.parametrize("make", RECEIVERS, ids=_name)
def test_records_read_data_packets_and_leave_the_rest(
    make: Callable[[int, int], batchio.BurstReceiver],
) -> None:
    data = _mrc(DATA, BODY)
    probe = _mrc(ProbeHeader(Common(Opcode.PROBE, Flags.NONE, 1, 2), 1, 0, 0))
    sack = _mrc(SACK)
    ack = _mrc(dataclasses.replace(SACK, common=Common(Opcode.ACK, Flags.NONE, 5, 6), bitmap=0))
    bad_version = bytes([data[0] ^ 0xFF]) + data[1:]
    datagrams = [data, data, sack, ack, probe, bad_version, data[:20], data, data]
    metas = [
        _meta(len(data)),
        _meta(len(data), tclass=3),  # CE
        _meta(len(sack)),
        _meta(len(ack)),
        _meta(len(probe)),
        _meta(len(data)),
        _meta(20),
        _meta(len(data), truncated=1),  # cut by the socket: not to be trusted
        _meta(SLOT + 1),  # longer than its slot
    ]
    receiver = make(16, SLOT)
    recs = _burst(receiver, datagrams, metas)
    kinds = [r[DataField.KIND] for r in recs]
    assert kinds == [RX_DATA] * 2 + [RX_SACK] * 2 + [RX_OTHER] * 5
    for i, ce in ((0, 0), (1, 1)):
        data = _fields(recs[i], DataField)
        at, n = data.pop("payload_off"), data.pop("payload_len")
        assert data == {
            "kind": RX_DATA, "dst_conn": 0x01020304, "src": SRC,
            "flags": int(DATA.common.flags), "psn": 77, "msn": 5, "msg_offset": 300,
            "msg_len": 900, "ts": 123, "ev": 0x8001 << 16 | 0xBCDE, "ce": ce, "unused": 0,
        }  # fmt: skip
        assert isinstance(at, int)
        assert isinstance(n, int)
        assert bytes(receiver.view[at : at + n]) == BODY
    # a SACK's fields in its own layout: cumulative PSN, base, window, the EV it reflects,
    # the received bytes, the service time, the receiver's ports down and its penalty
    assert _fields(recs[2], SackField) == {
        "kind": RX_SACK, "dst_conn": 5, "src": SRC,
        "flags": int(Flags.TS | Flags.ECN_ECHO | Flags.RESTORE_WINDOW),
        "cum_psn": 100, "sack_base": 90, "bitmap": 0b1011, "ev": 0xABCDE, "ts": 999,
        "rwnd": 1 << 20, "rcvd_bytes": 1 << 40, "service_time": 12345, "ports_down": 0b101,
        "penalty": 127,
    }  # fmt: skip
    assert len(recs[2]) == len(records.layout(SackField))
    ack = _fields(recs[3], SackField)
    assert (ack["kind"], ack["flags"], ack["dst_conn"], ack["ts"], ack["bitmap"]) == (
        RX_SACK, 0, 5, 999, 0,
    )  # fmt: skip
    assert (ack["ev"], ack["cum_psn"]) == (0xABCDE, 100)
    assert recs[4] == OTHER_REC
    assert [receiver.meta(i) for i in range(len(metas))] == metas


@pytest.mark.parametrize("make", RECEIVERS, ids=_name)
@pytest.mark.parametrize("dscp", [DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP])
def test_a_trimmed_stub_is_left_for_the_one_at_a_time_decoder(
    make: Callable[[int, int], batchio.BurstReceiver], dscp: int
) -> None:
    """A data packet with a trimmed DSCP is NACKed, not placed: its record is RX_OTHER,
    with or without the payload a switch cut (and with or without CE)."""
    whole, stub, sack = _mrc(DATA, BODY), _mrc(DATA), _mrc(SACK)
    datagrams = [whole, stub, stub, whole, sack]
    metas = [
        _meta(len(whole), tclass=dscp << 2 | 2),
        _meta(len(stub), tclass=dscp << 2 | 2),
        _meta(len(stub), tclass=dscp << 2 | 3),
        _meta(len(whole), tclass=DSCP_DATA << 2 | 2),
        _meta(len(sack), tclass=dscp << 2 | 2),  # only data is trimmed: a SACK stays one
    ]
    recs = _burst(make(16, SLOT), datagrams, metas)
    assert [r[DataField.KIND] for r in recs] == [RX_OTHER] * 3 + [RX_DATA, RX_SACK]


@pytest.mark.parametrize("make", RECEIVERS, ids=_name)
def test_every_data_class_is_data_to_place(
    make: Callable[[int, int], batchio.BurstReceiver],
) -> None:
    """New data, a retransmission and the no-trim class, each with its payload: placed by
    the burst decoder alike, in C as in Python (only a trimmed DSCP sends a data packet
    elsewhere)."""
    whole = _mrc(DATA, BODY)
    metas = [_meta(len(whole), tclass=d << 2 | 2) for d in (DSCP_DATA, DSCP_RTX, DSCP_NO_TRIM)]
    receiver = make(16, SLOT)
    recs = _burst(receiver, [whole] * 3, metas)
    assert [r[DataField.KIND] for r in recs] == [RX_DATA] * 3
    at, n = DataField.PAYLOAD_OFF, DataField.PAYLOAD_LEN
    assert [bytes(receiver.view[r[at] : r[at] + r[n]]) for r in recs] == [BODY] * 3
    fields = [_fields(r, DataField) | {"payload_off": 0} for r in recs]  # its own slot each
    assert fields[0] == fields[1] == fields[2]


@pytest.mark.parametrize("make", RECEIVERS, ids=_name)
def test_recv_records_through_a_socket(make: Callable[[int, int], batchio.BurstReceiver]) -> None:
    rx = open_rx(0, "::1")
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        tx.bind(("::1", 0))
        sent = [_mrc(DataHeader(DATA.common, psn, 5, 300, 900, 123), BODY) for psn in range(6)]
        for d in sent:
            tx.sendto(d, rx.getsockname())
        receiver = make(8, SLOT)
        recs: list[RxRec] = []
        while len(recs) < len(sent):
            assert select.select([rx], [], [], 2.0)[0], f"only {len(recs)} arrived"
            got = list(receiver.recv_records(rx))
            recs += got
            at, n = DataField.PAYLOAD_OFF, DataField.PAYLOAD_LEN
            assert all(bytes(receiver.view[r[at] : r[at] + r[n]]) == BODY for r in got)
        assert [r[DataField.PSN] for r in recs] == list(range(6))
        assert {r[DataField.EV] >> 16 for r in recs} == {tx.getsockname()[1]}
        assert not receiver.recv_records(rx)
    finally:
        rx.close()
        tx.close()


@pytest.mark.skipif(batchio.BACKEND != "c", reason="the C fast path is not loaded")
@settings(max_examples=300, deadline=None)
@given(
    cuts=st.lists(st.integers(0, 400), min_size=1, max_size=8),
    flips=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 255)), max_size=3),
    tclass=st.integers(0, 255),
    flow=st.integers(0, 0xFFFFF),
    sack_base=st.booleans(),
)
def test_c_and_python_records_agree(
    cuts: list[int], flips: list[tuple[int, int]], tclass: int, flow: int, sack_base: bool
) -> None:
    """Every datagram a valid data packet or SACK cut short or with header bytes changed."""
    base = bytearray(_mrc(DATA, BODY) if sack_base is False else _mrc(SACK))
    for at, x in flips:
        base[at] ^= x
    datagrams = [bytes(base[: len(base) - cut]) for cut in cuts]
    metas = [(len(d), 0, tclass, 0x8001, flow, SRC, DST) for d in datagrams]
    c = _burst(batchio.CBurstReceiver(8, SLOT), datagrams, metas)
    py = _burst(batchio.PyBurstReceiver(8, SLOT), datagrams, metas)
    assert c == py


def test_meta_refuses_a_datagram_beyond_the_burst() -> None:
    receiver = batchio.burst_receiver(4, SLOT)
    _burst(receiver, [b"x"], [_meta(1)])
    with pytest.raises(IndexError):
        receiver.meta(1)


@pytest.mark.skipif(batchio.BACKEND != "c", reason="the C fast path is not loaded")
def test_the_c_record_is_the_documented_layout() -> None:
    """struct mrc_rx_rec, field by field, where RX_REC reads each slot of each layout."""
    from mrc_transport._fastpath import ffi

    assert ffi.sizeof("struct mrc_rx_rec") == RX_REC.size
    where = [0]  # each slot's offset in RX_REC's format "=bxxxI16s11Q"
    for size in (4, 4, 16, *[8] * 11):
        where.append(where[-1] + size)
    head = {"kind": (), "dst_conn": (), "src": ()}
    for layout, body in ((DataField, "data"), (SackField, "sack")):
        for name, i in records.layout(layout).items():
            path = head.get(name, ("body", body))
            assert ffi.offsetof("struct mrc_rx_rec", *path, name) == where[i], name
    assert len(records.layout(DataField)) == len(RX_REC.unpack(bytes(RX_REC.size)))
    assert len(records.layout(SackField)) == len(RX_REC.unpack(bytes(RX_REC.size)))


@pytest.mark.skipif(batchio.BACKEND != "c", reason="the C fast path is not loaded")
def test_c_records_unpack_each_record_as_the_tuples_do() -> None:
    """CRecords, the C decoder's lazy sequence: by index (negative too), by slice, and
    IndexError past either end, record for record what the tuples hold."""
    receiver = batchio.CBurstReceiver(8, SLOT)
    datagrams = [_mrc(DATA, BODY), _mrc(SACK), b"junk"]
    for i, d in enumerate(datagrams):
        receiver.view[i * SLOT : i * SLOT + len(d)] = d
    recs = receiver.records([_meta(len(d)) for d in datagrams])
    want = list(RX_REC.iter_unpack(bytes(RX_REC.size * len(datagrams))))  # the layout
    assert len(recs) == len(want) == 3
    assert [recs[i] for i in range(3)] == list(recs) == recs[:] == [recs[-3], recs[-2], recs[-1]]
    assert recs[1:] == [recs[1], recs[2]]
    assert [len(r) for r in recs] == [len(w) for w in want]
    assert recs[0][DataField.PSN] == DATA.psn
    assert recs[2] == OTHER_REC
    for bad in (3, -4):
        with pytest.raises(IndexError):
            recs[bad]
