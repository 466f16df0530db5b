"""The messages the two ends of `mrc perf` exchange (perf/messages.py): each written once,
read back equal, and anything a peer could send that is not one raises PerfError naming
the key at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mrc_transport.perf.messages import (
    ConnReport,
    CpuSeconds,
    EvReport,
    Message,
    PerfError,
    PerfParams,
    PlaneReport,
    ReceiverReport,
    SenderReport,
)
from tests.unit import perf_inputs as inputs

CONN = ConnReport(
    counters={"packets_sent": 10, "retransmits": 1},
    planes=(PlaneReport(0, True, 64, 60, 4, 200, 66, 0, 1, 65536, 0.125),),
    evs=(EvReport(7, 0, ("t0-p0-1", "t1-p0-0"), "good", "active", 5, 4, 0, 0, 1, 0),),
    srtt_us=1234.5,
)
MESSAGES: list[Message] = [
    PerfParams("5e55", 1, 2, True, 2.5, 0, 131072, 10**8, (0, 2)),
    SenderReport(3 << 20, "0123abcd", 1.25, CpuSeconds(0.4125, 0.1031), CONN),
    ReceiverReport(3 << 20, "0123abcd", 1.2625, True, CpuSeconds(0.3, 0.06), CONN),
    ReceiverReport(0, "", 0.0, False, None, ConnReport({}, (), (), None)),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_reads_back_equal(msg: Message) -> None:
    wire = msg.encode()
    assert wire[:1] == msg.KIND
    assert type(msg).decode_untrusted(wire[1:]) == msg


def test_the_reports_keep_the_old_keys_in_order() -> None:
    """The E and R objects are also the server's --json-stream ``report``: the keys the
    hand-built dicts had, in their order."""
    old_e, old_r = inputs.sender_report(1, 0.5), inputs.receiver_report(1, 0.5)
    e = SenderReport.from_json_untrusted(old_e)
    r = ReceiverReport.from_json_untrusted(old_r)
    assert list(e.to_json()) == list(old_e)
    assert list(r.to_json()) == list(old_r)
    assert json.dumps(e.to_json()) == json.dumps(old_e)
    assert json.dumps(r.to_json()) == json.dumps(old_r)


def _bad(doc: dict[str, Any], path: list[Any], value: object) -> bytes:
    """``doc`` with the value at ``path`` replaced (or deleted, for ...)."""
    doc = json.loads(json.dumps(doc))
    *outer, last = path
    target = doc
    for key in outer:
        target = target[key]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (["bytes"], ..., "bytes: missing"),
        (["bytes"], "12", "bytes: expected int, got str"),
        (["bytes"], True, "bytes: expected int, got bool"),
        (["verified"], 1, "verified: expected bool, got int"),
        (["cpu", "user_s"], "x", "cpu.user_s: expected float, got str"),
        (["planes", 0, "marked"], None, "planes.marked: expected float, got NoneType"),
        (["planes"], {}, "planes: expected list, got dict"),
        (["evs", 0, "hops"], [1], "evs.hops: expected str, got int"),
        (["counters", "lost"], 1.5, "counters.lost: expected int, got float"),
        (["srtt_us"], "fast", "srtt_us: expected float, got str"),
    ],
)
def test_a_report_that_is_not_one_raises_one_error(
    path: list[Any], value: object, says: str
) -> None:
    body = _bad(inputs.receiver_report(10, 0.5, evs=[inputs.ev(1, 0)]), path, value)
    with pytest.raises(PerfError, match=rf"^R message is not valid: {says}$"):
        ReceiverReport.decode_untrusted(body)


def test_what_a_peer_may_leave_out_and_what_it_may_not() -> None:
    """A CPU the peer does not report is None; planes in P default to all."""
    report = ReceiverReport.decode_untrusted(_bad(inputs.receiver_report(1, 0.1), ["cpu"], ...))
    assert report.cpu is None
    params = json.loads(MESSAGES[0].encode()[1:])
    del params["planes"]
    assert PerfParams.decode_untrusted(json.dumps(params).encode()).planes == ()
    with pytest.raises(PerfError, match=r"^P message is not valid: session: missing$"):
        PerfParams.decode_untrusted(b'{"index": 0}')


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{nope", "E message is not JSON"),
        (b"[1, 2]", "E message is not valid: expected a JSON object, got list"),
        (b"null", "E message is not valid: expected a JSON object, got NoneType"),
    ],
)
def test_a_body_that_is_no_object_raises_one_error(body: bytes, says: str) -> None:
    with pytest.raises(PerfError, match=f"^{says}$"):
        SenderReport.decode_untrusted(body)


@pytest.mark.parametrize(
    "change",
    [{"length": 0}, {"length": (1 << 30) + 1}, {"nbytes": -1}, {"duration": -1}, {"parallel": 0}],
)
def test_parameters_out_of_range_are_refused(change: dict[str, int]) -> None:
    params = json.loads(MESSAGES[0].encode()[1:]) | change
    with pytest.raises(PerfError, match=r"^parameters out of range$"):
        PerfParams.decode_untrusted(json.dumps(params).encode())
