"""The `mrc perf` integrity digest: the sender's digest of the bodies it sends equals the
digest the receiver computes from the bytes it is delivered, and any corrupted, missing,
duplicated or reordered byte or message the receiver gets changes the receiver's digest."""

from __future__ import annotations

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from mrc_transport.perf import session as perf
from mrc_transport.perf.messages import ConnReport


def sender_digest(pool: perf.MessagePool, sizes: list[int]) -> tuple[str, list[bytes]]:
    """What send_data reports, and the bodies it sent."""
    digest = perf.StreamDigest()
    bodies = []
    for n in sizes:
        message, body_digest = pool.take(n)
        assert message[:1] == perf.KIND_DATA
        assert body_digest == xxhash.xxh3_128_digest(message[1:])  # cached per slot
        digest.add_digest(body_digest)
        bodies.append(bytes(message[1:]))
    return digest.hexdigest(), bodies


def receiver_digest(bodies: list[bytes]) -> str:
    """What receive_data computes from the bodies delivered."""
    digest = perf.StreamDigest()
    for body in bodies:
        digest.add(memoryview(b"D" + body)[1:])
    return digest.hexdigest()


def test_messages_are_views_of_a_shared_pool_that_wrap() -> None:
    pool = perf.MessagePool(100, size=1000)  # 9 slots of 101 bytes
    sizes = [100] * 25 + [37]  # wraps the pool twice, a short last message
    first, bodies = sender_digest(pool, sizes)
    assert len(set(bodies[:9])) == 9
    assert bodies[9] == bodies[0]
    assert bodies[-1] == bodies[25 % 9][:37]
    assert pool.take(100)[0].obj is pool.view.obj  # no copy
    again, bodies_again = sender_digest(perf.MessagePool(100, size=1000), sizes)
    assert perf.MessagePool(100, size=1000).view.obj is pool.view.obj  # shared
    assert first == again == receiver_digest(bodies) == receiver_digest(bodies_again)


def test_the_shared_pools_are_bounded() -> None:
    first = perf.MessagePool(10, size=100)
    for length in range(11, 11 + perf.POOL_CACHE):
        perf.MessagePool(length, size=100)
    assert len(perf._pools) <= perf.POOL_CACHE
    assert first.take(10)[0][:1] == perf.KIND_DATA  # still usable: it holds its own pool


def test_a_message_longer_than_the_pool_size_is_whole() -> None:
    """-l above the pool size: the pool holds one message (it once held 8 MB of a longer
    body, and the receiver rightly failed the transfer)."""
    pool = perf.MessagePool(3000, size=1000)
    message, _ = pool.take(3000)
    assert len(message) == 3001
    assert pool.take(3000)[0] == message


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 64), min_size=2, max_size=12),
    st.sampled_from(["flip", "drop", "duplicate", "swap", "truncate", "move_byte"]),
    st.integers(0, 1 << 30),
)
def test_every_delivery_fault_is_detected(sizes: list[int], fault: str, where: int) -> None:
    sent, bodies = sender_digest(perf.MessagePool(64, size=1 << 14), sizes)
    got = list(bodies)
    i = where % len(got)
    if fault == "flip":
        body = bytearray(got[i])
        body[where % len(body)] ^= 1 << (where % 8)
        got[i] = bytes(body)
    elif fault == "drop":
        del got[i]
    elif fault == "duplicate":
        got.insert(i, got[i])
    elif fault == "swap":
        j = (i + 1) % len(got)
        if got[i] == got[j]:
            return  # not a fault the receiver could see
        got[i], got[j] = got[j], got[i]
    elif fault == "truncate":
        got[i] = got[i][:-1]
    else:  # one byte moved from a message to the next: same bytes, same order, new bounds
        j = (i + 1) % len(got)
        if j == 0 or len(got[i]) < 2:
            return
        got[i], got[j] = got[i][:-1], got[i][-1:] + got[j]
    assert receiver_digest(got) != sent
    assert receiver_digest(bodies) == sent


class FakeHandle:
    """The part of a ConnHandle that send_data and receive_data use: what is sent is
    recorded; what is received comes from a list."""

    def __init__(self, inbox: list[bytes] | None = None) -> None:
        self.sent: list[bytes] = []
        self.inbox = list(inbox or [])
        self.acked_bytes = 0
        self.unacked_bytes = 0  # everything is acknowledged at once

    def send(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        self.acked_bytes += len(data)
        return len(data)

    async def wait_unacked_below(self, limit: int) -> None:
        pass

    def recycle(self, buf: bytearray) -> None:
        pass

    async def receive(self) -> tuple[float, bytearray]:
        return 0.0, bytearray(self.inbox.pop(0))


def _params(nbytes: int, length: int) -> perf.PerfParams:
    return perf.PerfParams("s", 0, 1, False, 0.0, nbytes, length, 0)


async def _deliver(messages: list[bytes]) -> perf.StreamStats:
    rx = FakeHandle(messages)
    stats = perf.StreamStats(rx, sending=False)  # type: ignore[arg-type]
    await perf.receive_data(stats, lambda: 0.0)
    return stats


@pytest.mark.parametrize("fault", ["none", "flip", "drop", "duplicate", "swap"])
async def test_send_and_receive_data_agree_only_on_a_faithful_delivery(
    monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """Both ends of a session: send_data's E against what receive_data computes."""
    monkeypatch.setattr(perf, "conn_report", lambda handle: ConnReport({}, (), (), None))
    tx = FakeHandle()
    sender = perf.StreamStats(tx, sending=True)  # type: ignore[arg-type]
    await perf.send_data(sender, _params(2500, 300), lambda: 0.0)
    data, end = tx.sent[:-1], tx.sent[-1]
    assert len(data) == 9  # 8 x 300 + 100
    assert all(m[:1] == perf.KIND_DATA for m in data)
    if fault == "flip":
        data[4] = data[4][:7] + bytes([data[4][7] ^ 0x40]) + data[4][8:]
    elif fault == "drop":
        del data[4]
    elif fault == "duplicate":
        data.insert(4, data[4])
    elif fault == "swap":
        data[3], data[4] = data[4], data[3]
    stats = await _deliver([*data, end])
    assert stats.verified is (fault == "none")
    assert stats.receiver_report is not None
    assert sender.sender_report is not None
    assert stats.sender_report == sender.sender_report  # the E message as sent
    assert (stats.receiver_report.digest == sender.sender_report.digest) is (fault == "none")
