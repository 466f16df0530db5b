"""Batched non-blocking datagram IO: N packets per system call.

Contract, the same for both implementations (the C one with ``sendmmsg``/``recvmmsg`` from
csrc/mrc_fast.c, the pure-Python twin with a loop of ``sendto``/``recv_into``):

* Every call is non-blocking (``MSG_DONTWAIT``) whatever the socket's own mode.
* "Would block" is not an error: ``send_batch`` returns how many packets went out (0 if
  none) and ``recv_batch`` returns the packets that were waiting (an empty list if none).
  ``BlockingIOError`` never reaches the caller's hot loop; on a short count the caller waits
  (``trio.lowlevel.wait_writable``/``wait_readable``, trio ``_unix_pipes.py``) and retries
  with the rest.
* Any other failure raises ``OSError`` with the errno, unless some packets already went
  through: then the call returns that count and the error shows up on the next call
  (``sendmmsg(2)`` semantics).
* A datagram larger than its slot is cut to ``slot_size`` bytes, like ``recv(2)``; size the
  slots to the MTU and the decoder rejects what is left of a cut packet.

What the endpoint uses per packet (csrc/mrc_io.c, the same contract): a ``BurstReceiver``
receives a burst into reusable slots with each datagram's path information (IPV6_PKTINFO,
IPV6_TCLASS, IPV6_FLOWINFO, source) and has it decoded into records (wire/burst.py),
``send_raw6`` sends complete IPv6 packets each to its own header's destination, and a
``BurstEncoder`` encodes a transmit burst straight into one reusable buffer for it. Each
is a ``typing.Protocol`` with two independent implementations, ``Py...`` and ``C...``;
``burst_receiver`` and ``burst_encoder`` make the backend's.

The backend is mrc_transport/backend.py's choice, as for the codecs (mrc_transport/wire);
``BACKEND`` says which one is in use: "c" or "python".
"""

from __future__ import annotations

import errno
import itertools
import operator
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from mrc_transport import backend, wire
from mrc_transport.io.sockets import ANC_SIZE, parse_cmsgs
from mrc_transport.protocol.ev import Ev
from mrc_transport.protocol.segments import DataRun
from mrc_transport.wire.burst import BurstDecoder, CBurstDecoder, PyBurstDecoder
from mrc_transport.wire.frames import DataHeader, Header, PathHeader, SackHeader
from mrc_transport.wire.records import RX_BAD_INNER, RxMeta, RxRec

if backend.FASTPATH:
    from mrc_transport._fastpath import ffi as _ffi
    from mrc_transport._fastpath import lib as _lib

BACKEND = "c" if backend.FASTPATH else "python"

Buffer = bytes | bytearray | memoryview
Destination = tuple[bytes, int]
"""A 16-byte IPv6 address and a port (0 for raw sockets: the kernel ignores it)."""
Received = tuple[int, int]
"""(offset in the receive buffer, length) of one datagram."""
ReceivedFrom = tuple[int, int, bytes, int]
"""(offset, length, 16-byte source address, source port) of one datagram."""

SOCKADDR_IN6_LEN = 28  # struct sockaddr_in6 on Linux
MAX_PACKET = 40 + 0xFFFF  # IPv6 header + the largest payload without jumbograms (RFC 2675)
IPV6_DST = slice(24, 40)  # destination address in a fixed IPv6 header (RFC 8200 section 3)
Item = tuple[PathHeader, Header, bytes | memoryview]
"""One packet for a burst encoder: its path, its header, its payload."""
EV_TEMPLATES = 4096
"""EV templates a ``CBurstEncoder`` keeps before it starts over (a few per connection;
as many as its C table has slots, csrc/mrc_fast.h MRC_TMPL_SLOTS)."""


class BurstReceiver(Protocol):
    """Receives the datagrams waiting on a UDP socket, up to ``max_pkts`` per call:
    datagram i into ``view[i * slot_size:]``, with the path information of its IPv6
    header from the control messages ``sockets.open_rx`` asks for (``RxMeta``). The slots
    are reused by the next call: copy what must outlive it.

    With ``decap_port`` it reads a raw IPPROTO_IPV6 socket (the encap encoding,
    ``sockets.open_rx_encap``) and decapsulates each datagram (``decap_slot``): what is
    left in the slot and its RxMeta are what a UDP socket on that port would have
    delivered, or the RxMeta is marked RX_BAD_INNER."""

    max_pkts: int
    slot_size: int
    view: memoryview
    decap_port: int | None

    def recv(self, sock: socket.socket) -> list[RxMeta]:
        """One ``RxMeta`` per datagram received, slot order; [] when none is waiting."""
        ...

    def recv_records(self, sock: socket.socket) -> Sequence[RxRec]:
        """``recv`` with each datagram decoded: one record per datagram, slot order
        (wire/records.py). A data packet's or SACK's record carries its fields, a data
        payload where it is in ``view``; anything else is only ``RX_OTHER``, for the
        caller to decode with ``meta(i)``, which names what is wrong with a bad one (the
        data path's cost is per packet, the rest is rare)."""
        ...

    def records(self, metas: Sequence[RxMeta]) -> Sequence[RxRec]:
        """The records of the datagrams in the slots, datagram i described by metas[i]
        (what ``recv`` returned for them)."""
        ...

    def meta(self, i: int) -> RxMeta:
        """The ``RxMeta`` of datagram i of the last burst decoded."""
        ...


class BurstEncoder(Protocol):
    """The packets of one transmit burst, encoded back to back into one reusable buffer
    and sent with one call (``send_raw6``: each to its own first hop).

    Usage per burst: ``clear()``, ``add(path, header, payload)`` per packet (raises
    ValueError/TypeError as ``wire.encode`` does), ``send(sock, start)`` until all went
    out; ``packet(i)`` copies one out (a backlog must outlive the buffer)."""

    def __len__(self) -> int: ...

    @property
    def nbytes(self) -> int:
        """Bytes of every packet added since ``clear``."""
        ...

    def clear(self) -> None: ...

    def add(self, path: PathHeader, header: Header, payload: bytes | memoryview = b"") -> int:
        """Encode one packet after the others; its length."""
        ...

    def add_many(self, items: Iterable[Item]) -> None:
        """``add`` of each item in order; raises at the first item ``add`` would refuse,
        the ones before it added."""
        ...

    def add_run(self, run: DataRun, path_of: Callable[[Ev], PathHeader]) -> None:
        """``add`` of each packet of ``run`` (sender.py ``DataRun``), packet i on
        ``path_of(run.evs[i])``, which must be the same for an EV every time (the C
        encoder keeps each EV's template). Raises at the first packet ``add`` would
        refuse, the ones before it added."""
        ...

    def packet(self, i: int) -> bytes:
        """A copy of packet ``i``."""
        ...

    def send(self, sock: socket.socket, start: int = 0) -> int:
        """``send_raw6`` of packets ``start:``; how many went out."""
        ...


# ------------------------------------------------------------------ helpers of both


def _check_batch(buf: Buffer, offsets: Sequence[int], addrs: Sequence[Destination] | None) -> int:
    count = len(offsets) - 1
    if count < 0:
        raise ValueError("offsets needs N + 1 entries for N packets")
    if any(b < a for a, b in itertools.pairwise(offsets)) or (
        count and (offsets[0] < 0 or offsets[-1] > len(buf))
    ):
        raise ValueError("offsets must be non-decreasing and inside the buffer")
    if addrs is not None and len(addrs) not in (1, count):
        raise ValueError(f"{len(addrs)} destinations for {count} packets (want 1 or N)")
    if addrs is not None and any(len(addr) != 16 for addr, _ in addrs):
        raise ValueError("destination addresses are 16-byte IPv6 addresses")
    return count


def _check_slots(buf: Buffer, max_pkts: int, slot_size: int) -> None:
    if max_pkts < 0 or slot_size <= 0:
        raise ValueError("max_pkts must be >= 0 and slot_size > 0")
    if max_pkts * slot_size > len(buf):
        raise ValueError(f"{max_pkts} slots of {slot_size} bytes exceed the {len(buf)}-byte buffer")
    if isinstance(buf, bytes) or (isinstance(buf, memoryview) and buf.readonly):
        raise ValueError("the receive buffer must be writable")


# ------------------------------------------------------------------ pure-Python twin


def py_send_batch(
    sock: socket.socket, buf: Buffer, offsets: Sequence[int], addrs: Sequence[Destination] | None
) -> int:
    """Send packets ``buf[offsets[i]:offsets[i + 1]]`` to ``addrs[i]`` (or ``addrs[0]`` for
    all, or the connected/bound peer if None); return how many went out."""
    count = _check_batch(buf, offsets, addrs)
    view = memoryview(buf)

    def one(i: int) -> None:
        data = view[offsets[i] : offsets[i + 1]]
        if addrs is None:
            sock.send(data, socket.MSG_DONTWAIT)
        else:
            addr, port = addrs[i if len(addrs) > 1 else 0]
            sock.sendto(data, socket.MSG_DONTWAIT, (socket.inet_ntop(socket.AF_INET6, addr), port))

    return _sendmmsg_like(count, one)


def _sendmmsg_like(count: int, send_one: Callable[[int], None]) -> int:
    """sendmmsg(2)'s result for ``count`` single sends: how many went out before the
    socket would block; an error on the first packet is raised, a later one ends the
    batch (the caller's next call meets it first)."""
    for i in range(count):
        try:
            send_one(i)
        except (BlockingIOError, InterruptedError):
            return i
        except OSError:
            if i:
                return i
            raise
    return count


def _py_recv(
    sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int, want_from: bool
) -> list[ReceivedFrom]:
    _check_slots(buf, max_pkts, slot_size)
    view = memoryview(buf)
    got: list[ReceivedFrom] = []
    for i in range(max_pkts):
        offset = i * slot_size
        try:
            if want_from:
                n, peer = sock.recvfrom_into(
                    view[offset : offset + slot_size], slot_size, socket.MSG_DONTWAIT
                )
                got.append((offset, n, socket.inet_pton(socket.AF_INET6, peer[0]), peer[1]))
            else:
                n = sock.recv_into(
                    view[offset : offset + slot_size], slot_size, socket.MSG_DONTWAIT
                )
                got.append((offset, n, b"", 0))
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            if got:
                break
            raise
    return got


def py_recv_batch(
    sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int
) -> list[Received]:
    """Receive up to ``max_pkts`` datagrams, datagram i into ``buf[i * slot_size:]``;
    return (offset, length) of each."""
    return [(off, n) for off, n, _, _ in _py_recv(sock, buf, max_pkts, slot_size, False)]


def py_recv_batch_from(
    sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int
) -> list[ReceivedFrom]:
    """``py_recv_batch`` plus each datagram's source address and port (AF_INET6 sockets)."""
    return _py_recv(sock, buf, max_pkts, slot_size, True)


def _check_raw6(buf: Buffer, offsets: Sequence[int]) -> int:
    count = _check_batch(buf, offsets, None)
    if count and min(map(operator.sub, offsets[1:], offsets[:-1])) < IPV6_DST.stop:
        raise ValueError("a packet is shorter than an IPv6 header")
    return count


def py_send_raw6(sock: socket.socket, buf: Buffer, offsets: Sequence[int]) -> int:
    """Send complete IPv6 packets ``buf[offsets[i]:offsets[i + 1]]`` through a raw
    (IPPROTO_RAW) socket, each to its own header's destination; return how many went out."""
    count = _check_raw6(buf, offsets)
    view = memoryview(buf)

    def one(i: int) -> None:
        data = view[offsets[i] : offsets[i + 1]]
        host = socket.inet_ntop(socket.AF_INET6, data[IPV6_DST])
        sock.sendto(data, socket.MSG_DONTWAIT, (host, 0))

    return _sendmmsg_like(count, one)


def decap_slot(view: memoryview, off: int, meta: RxMeta, dport: int) -> RxMeta:
    """The pure-Python twin of csrc mrc_decap_burst for one datagram, at ``view[off:]``:
    an inner packet ``wire.decap_untrusted`` accepts is moved to the start of its slot as
    its UDP payload, its RxMeta then the inner packet's source, destination and source
    port (the traffic class and flow label stay the outer header's, which the switches
    mark); any other is marked RX_BAD_INNER."""
    n, truncated, tclass, _, flow, _, _ = meta
    if truncated:
        return meta
    try:
        src, dst, sport = wire.decap_untrusted(view[off : off + n], dport=dport)
    except wire.BadPacket:
        return (n, RX_BAD_INNER, *meta[2:])
    size = n - wire.DECAP_LEN
    view[off : off + size] = view[off + wire.DECAP_LEN : off + n]
    return (size, 0, tclass, sport, flow, src, dst)


class _Slots:
    """A receive buffer of ``max_pkts`` slots of ``slot_size`` bytes and the decoder of
    what arrives in it (``records``, ``meta``): what both receivers are made of."""

    def __init__(
        self,
        max_pkts: int,
        slot_size: int,
        decoder: Callable[[bytearray, int, int], BurstDecoder],
        decap_port: int | None,
    ) -> None:
        if max_pkts <= 0 or slot_size <= 0:
            raise ValueError("max_pkts and slot_size must be > 0")
        self.max_pkts, self.slot_size, self.decap_port = max_pkts, slot_size, decap_port
        self.buf = bytearray(max_pkts * slot_size)
        self.view = memoryview(self.buf)
        self.decoder = decoder(self.buf, max_pkts, slot_size)

    def records(self, metas: Sequence[RxMeta]) -> Sequence[RxRec]:
        return self.decoder.records(metas)

    def meta(self, i: int) -> RxMeta:
        return self.decoder.meta(i)


class PyBurstReceiver(_Slots):
    """``BurstReceiver`` in Python: one ``recvmsg_into`` per datagram, its control
    messages parsed in Python, the burst decoded by ``PyBurstDecoder``."""

    def __init__(self, max_pkts: int, slot_size: int, decap_port: int | None = None) -> None:
        super().__init__(max_pkts, slot_size, PyBurstDecoder, decap_port)

    def recv(self, sock: socket.socket) -> list[RxMeta]:
        view, slot = self.view, self.slot_size
        out: list[RxMeta] = []
        for i in range(self.max_pkts):
            try:
                n, anc, flags, addr = sock.recvmsg_into(
                    [view[i * slot : (i + 1) * slot]], ANC_SIZE, socket.MSG_DONTWAIT
                )
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                if out:
                    break
                raise
            dst, tclass, flow = parse_cmsgs(anc)
            src = socket.inet_pton(socket.AF_INET6, addr[0].partition("%")[0])
            truncated = 1 if flags & socket.MSG_TRUNC else 0
            out.append((n, truncated, tclass, addr[1], flow, src, dst or bytes(16)))
        port = self.decap_port
        if port is not None:
            out = [decap_slot(view, i * slot, m, port) for i, m in enumerate(out)]
        return out

    def recv_records(self, sock: socket.socket) -> Sequence[RxRec]:
        return self.records(self.recv(sock))


# ------------------------------------------------------------------ one burst, one buffer


class _EncodeBuffer:
    """One reusable buffer of up to ``max_pkts`` packets of ``max_len`` bytes, back to
    back, and their offsets: what both encoders are made of."""

    def __init__(self, max_pkts: int, max_len: int = MAX_PACKET) -> None:
        if max_pkts <= 0 or max_len < IPV6_DST.stop:
            raise ValueError("max_pkts must be > 0 and max_len at least an IPv6 header")
        self.cap = max_pkts * max_len
        self.max_pkts, self.max_len = max_pkts, max_len
        self.buf = bytearray(self.cap)
        self.view = memoryview(self.buf)
        self.clear()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return self.offsets[-1]

    def clear(self) -> None:
        self.offsets = [0]
        """offsets[i]:offsets[i + 1] is packet i; offsets[-1] the bytes used."""

    def packet(self, i: int) -> bytes:
        return bytes(self.view[self.offsets[i] : self.offsets[i + 1]])

    def send(self, sock: socket.socket, start: int = 0) -> int:
        # the backend's send_raw6, looked up per call (the endpoint's tests replace it)
        return send_raw6(sock, self.view, self.offsets[start:])

    def add(self, path: PathHeader, header: Header, payload: bytes | memoryview = b"") -> int:
        raise NotImplementedError

    def add_many(self, items: Iterable[Item]) -> None:
        # a sender's new data comes as DataRuns, which add_run encodes in one call;
        # items are its control packets and resends
        for path, header, payload in items:
            self.add(path, header, payload)

    def _room(self) -> int:
        """Where the next packet goes; ValueError when the burst is full."""
        if len(self.offsets) > self.max_pkts:
            raise ValueError(f"the burst holds at most {self.max_pkts} packets")
        return self.offsets[-1]

    def _add_encoded(self, path: PathHeader, header: Header, payload: bytes | memoryview) -> int:
        """``add`` through ``wire.encode`` and a copy into the buffer."""
        off = self._room()
        pkt = wire.encode(path, header, payload)
        n = len(pkt)
        if n > self.max_len:
            raise ValueError(f"packet of {n} bytes exceeds the encoder's {self.max_len}")
        self.view[off : off + n] = pkt
        self._push(off + n)
        return n

    def _push(self, end: int) -> None:
        """The next packet ends at ``end``."""
        self.offsets.append(end)


class PyBurstEncoder(_EncodeBuffer):
    """``BurstEncoder`` in Python: each packet encoded by ``wire.encode`` and copied in."""

    def add(self, path: PathHeader, header: Header, payload: bytes | memoryview = b"") -> int:
        return self._add_encoded(path, header, payload)

    def add_run(self, run: DataRun, path_of: Callable[[Ev], PathHeader]) -> None:
        for i, ev in enumerate(run.evs):
            self.add(path_of(ev), run.header(i), run.payload(i))


# ------------------------------------------------------------------ C (sendmmsg/recvmmsg)


def _require_c() -> None:
    if not backend.FASTPATH:
        raise RuntimeError("the C fast path is not loaded (MRC_PUREPYTHON=1 or not built)")


def _raise_errno(rc: int) -> None:
    raise OSError(-rc, os.strerror(-rc))


def c_send_batch(
    sock: socket.socket, buf: Buffer, offsets: Sequence[int], addrs: Sequence[Destination] | None
) -> int:
    """``py_send_batch`` with one ``sendmmsg`` per 64 packets."""
    _require_c()
    count = _check_batch(buf, offsets, addrs)
    if count == 0:
        return 0
    c_addrs = _ffi.NULL
    if addrs is not None:
        c_addrs = _ffi.new("struct mrc_addr6[]", len(addrs))
        for slot, (addr, port) in zip(c_addrs, addrs, strict=True):
            slot.addr = addr
            slot.port = port
    rc = _lib.mrc_send_batch(
        sock.fileno(),
        _ffi.from_buffer(buf),
        _ffi.new("uint32_t[]", offsets),
        count,
        c_addrs,
        0 if addrs is None else len(addrs),
        0,
    )
    if rc < 0:
        _raise_errno(rc)
    return int(rc)


def _c_recv(
    sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int, want_from: bool
) -> list[ReceivedFrom]:
    _require_c()
    _check_slots(buf, max_pkts, slot_size)
    if max_pkts == 0:
        return []
    lens = _ffi.new("uint32_t[]", max_pkts)
    names = namelens = _ffi.NULL
    if want_from:
        names = _ffi.new("char[]", max_pkts * SOCKADDR_IN6_LEN)
        namelens = _ffi.new("uint32_t[]", max_pkts)
    rc = _lib.mrc_recv_batch(
        sock.fileno(),
        _ffi.from_buffer(buf, require_writable=True),
        slot_size,
        max_pkts,
        lens,
        _ffi.NULL,
        names,
        SOCKADDR_IN6_LEN if want_from else 0,
        namelens,
        0,
    )
    if rc < 0:
        _raise_errno(rc)
    if not want_from:
        return [(i * slot_size, lens[i], b"", 0) for i in range(rc)]
    raw = _ffi.buffer(names)
    got: list[ReceivedFrom] = []
    for i in range(rc):
        name = raw[i * SOCKADDR_IN6_LEN : (i + 1) * SOCKADDR_IN6_LEN]
        # struct sockaddr_in6: family (host order), port (network order), flowinfo, addr
        got.append((i * slot_size, lens[i], bytes(name[8:24]), int.from_bytes(name[2:4], "big")))
    return got


def c_recv_batch(sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int) -> list[Received]:
    """``py_recv_batch`` with one ``recvmmsg`` per 64 packets."""
    return [(off, n) for off, n, _, _ in _c_recv(sock, buf, max_pkts, slot_size, False)]


def c_recv_batch_from(
    sock: socket.socket, buf: Buffer, max_pkts: int, slot_size: int
) -> list[ReceivedFrom]:
    """``py_recv_batch_from`` with one ``recvmmsg`` per 64 packets."""
    return _c_recv(sock, buf, max_pkts, slot_size, True)


def c_send_raw6(sock: socket.socket, buf: Buffer, offsets: Sequence[int]) -> int:
    """``py_send_raw6`` with one ``sendmmsg`` per 64 packets (csrc/mrc_io.c)."""
    _require_c()
    count = len(offsets) - 1
    if count <= 0:
        return _check_raw6(buf, offsets)  # nothing to send, or no offsets at all
    # C checks the offsets (a Python pass over them cost ~5% of a sender's CPU); the
    # reference's checks only name what C refused
    try:
        c_offsets = _ffi.new("uint32_t[]", offsets)
    except OverflowError:
        _check_raw6(buf, offsets)
        raise
    c_buf = _ffi.from_buffer(buf)
    rc = _lib.mrc_send_raw6(sock.fileno(), c_buf, len(c_buf), c_offsets, count, 0)
    if rc == -errno.EINVAL:
        _check_raw6(buf, offsets)
    if rc < 0:
        _raise_errno(rc)
    return int(rc)


class CBurstReceiver(_Slots):
    """``BurstReceiver`` in C: one ``recvmmsg`` per 64 datagrams with the control
    messages parsed in C (csrc/mrc_io.c), straight into the C decoder's array of
    ``RxMeta``; ``recv_records`` then decodes them in one more C call."""

    decoder: CBurstDecoder

    def __init__(self, max_pkts: int, slot_size: int, decap_port: int | None = None) -> None:
        _require_c()
        super().__init__(max_pkts, slot_size, CBurstDecoder, decap_port)

    def _recv_meta(self, sock: socket.socket) -> int:
        dec = self.decoder
        rc = _lib.mrc_recv_meta(
            sock.fileno(), dec.c_buf, self.slot_size, self.max_pkts, dec.c_metas, 0
        )
        if rc < 0:
            _raise_errno(rc)
        if rc and self.decap_port is not None:
            _lib.mrc_decap_burst(dec.c_buf, self.slot_size, dec.c_metas, rc, self.decap_port)
        return int(rc)

    def recv(self, sock: socket.socket) -> list[RxMeta]:
        return self.decoder.metas(self._recv_meta(sock))

    def recv_records(self, sock: socket.socket) -> Sequence[RxRec]:
        # one C decode per burst; a record becomes a tuple only when the core reads it
        # (wire/burst.py CRecords), where a packet was once a header, a payload copy ...
        return self.decoder.decode(self._recv_meta(sock))


class CBurstEncoder(_EncodeBuffer):
    """``BurstEncoder`` in C: data and SACK packets (the per-packet traffic) written by
    the C codec straight into the buffer (no per-packet bytes object, no join), a run of
    data packets in one call, the rest through ``wire.encode``.

    The offsets live in a C array that the codec writes and ``mrc_send_raw6`` reads as
    they are: a Python list of them cost a conversion of every offset twice a burst, out
    of C after each run and back in for the send (~0.1 us of the ~1.1 us that encoding
    and handing over a 9 KB packet took)."""

    def __init__(self, max_pkts: int, max_len: int = MAX_PACKET) -> None:
        _require_c()
        super().__init__(max_pkts, max_len)
        self._c_buf = _ffi.from_buffer(self.buf, require_writable=True)
        from mrc_transport.wire import fast

        self._template = fast._template  # the C codec's per-path template cache
        self._templates = fast._templates  # its entries, looked up inline per packet
        self._tmpls = _ffi.new("struct mrc_template *[]", max_pkts)  # add_run: templates
        self._ends = _ffi.new("uint32_t[]", max_pkts + 1)  # [i]:[i + 1] is packet i
        self._count = 0
        self._keys = _ffi.new("uint64_t[]", max_pkts)  # the EVs' ids, the table's keys
        self._tcache = _ffi.new("struct mrc_tmpl_cache *")  # id(ev) -> template, in C
        self._ev_templates: dict[int, tuple[Ev, Any]] = {}  # what keeps both alive

    @property
    def offsets(self) -> list[int]:  # type: ignore[override]
        """offsets[i]:offsets[i + 1] is packet i (a copy of the C array)."""
        return list(_ffi.unpack(self._ends, self._count + 1))

    def clear(self) -> None:
        self._count = 0  # _ends[0] is always 0

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return int(self._ends[self._count])

    def packet(self, i: int) -> bytes:
        if not 0 <= i < self._count:
            raise IndexError("packet index out of range")
        return bytes(self.view[self._ends[i] : self._ends[i + 1]])

    def send(self, sock: socket.socket, start: int = 0) -> int:
        if send_raw6 is not c_send_raw6:  # the endpoint's tests put their own wire there
            return send_raw6(sock, self.view, self.offsets[start:])
        count = self._count - start
        if count <= 0:
            return 0
        rc = _lib.mrc_send_raw6(sock.fileno(), self._c_buf, self.cap, self._ends + start, count, 0)
        if rc < 0:
            _raise_errno(rc)
        return int(rc)

    def _room(self) -> int:
        if self._count >= self.max_pkts:
            raise ValueError(f"the burst holds at most {self.max_pkts} packets")
        return int(self._ends[self._count])

    def _push(self, end: int) -> None:
        self._count += 1
        self._ends[self._count] = end

    def add(self, path: PathHeader, header: Header, payload: bytes | memoryview = b"") -> int:
        kind = type(header)
        if kind is not DataHeader and kind is not SackHeader:
            return self._add_encoded(path, header, payload)
        if payload and kind is SackHeader:
            raise ValueError("SackHeader carries no payload")
        off = self._room()
        out, cap = self._c_buf + off, min(self.max_len, self.cap - off)
        hit = self._templates.get(id(path))  # as fast.encode: a call costs as much
        template = hit[1] if hit is not None and hit[0] is path else self._template(path)
        c = header.common
        try:
            if kind is DataHeader:
                h: Any = header
                n = _lib.mrc_encode_data(
                    out, cap, template, c.opcode, c.flags, c.dst_conn, c.src_conn,
                    h.psn, h.msn, h.msg_offset, h.msg_len, h.ts,
                    payload if type(payload) is bytes else _ffi.from_buffer(payload),
                    len(payload),
                )  # fmt: skip
            else:
                k: Any = header
                n = _lib.mrc_encode_sack(
                    out, cap, template, c.opcode, c.flags, c.dst_conn, c.src_conn,
                    k.cum_psn, k.sack_base, k.bitmap, k.ev, k.ts, k.ooo_count,
                    k.rwnd_penalty, k.rwnd, k.rcvd_bytes, k.service_time, k.ports_down,
                )  # fmt: skip
        except (OverflowError, TypeError) as exc:  # cffi's range checks, as wire.encode
            raise ValueError(f"{kind.__name__}: a field is out of range ({exc})") from None
        if n < 0:  # a wrong opcode, too long, or no room: wire.encode names the error
            return self._add_encoded(path, header, payload)
        self._push(off + n)
        return int(n)

    def add_run(self, run: DataRun, path_of: Callable[[Ev], PathHeader]) -> None:
        evs = run.evs
        n = len(evs)
        k = min(n, self.max_pkts - self._count)  # the rest goes through add, which refuses
        if len(self._ev_templates) > EV_TEMPLATES - k:  # connections come and go: start
            self._ev_templates.clear()  # over, before the run, so none of its templates
            self._tcache = _ffi.new("struct mrc_tmpl_cache *")  # goes while it is encoded
        ids = list(map(id, evs))
        self._keys[0:k] = ids if k == n else ids[:k]
        # each EV's template from the C table, keyed by the EV's id: one call for the run,
        # instead of a dict lookup and a cffi store per packet (~4% of a sender's CPU)
        i = self._lookup(0, k)
        while i < k:
            self._put_template(evs[i], path_of)
            i = self._lookup(i, k)
        count = self._count
        off, commons, data = self._ends[count], run.commons, run.data
        done = _lib.mrc_encode_data_run(
            self._c_buf + off, self.cap - off, self.max_len, self._tmpls, k,
            run.flags, run.last_flags if k == n else 0, commons.dst_conn, commons.src_conn,
            run.psn, run.msn, run.offset, run.seg, _ffi.from_buffer(data), data.nbytes,
            run.ts, off, self._ends + count + 1,
        )  # fmt: skip
        self._count = count + done
        for i in range(done, n):
            self.add(path_of(evs[i]), run.header(i), run.payload(i))

    def _lookup(self, start: int, k: int) -> int:
        return int(_lib.mrc_tmpl_lookup(self._tcache, self._keys, start, k, self._tmpls))

    def _put_template(self, ev: Ev, path_of: Callable[[Ev], PathHeader]) -> None:
        """Build ``ev``'s template and put it in the C table, keeping ``ev`` (its id is
        the key, so it must not be reused) and the template alive meanwhile."""
        template = self._template(path_of(ev))
        self._ev_templates[id(ev)] = (ev, template)
        _lib.mrc_tmpl_put(self._tcache, id(ev), template)


def burst_receiver(max_pkts: int, slot_size: int, decap_port: int | None = None) -> BurstReceiver:
    """The backend's ``BurstReceiver`` (decapsulating for ``decap_port``, if given)."""
    if BACKEND == "c":
        return CBurstReceiver(max_pkts, slot_size, decap_port)
    return PyBurstReceiver(max_pkts, slot_size, decap_port)


def burst_encoder(max_pkts: int, max_len: int = MAX_PACKET) -> BurstEncoder:
    """The backend's ``BurstEncoder``."""
    if BACKEND == "c":
        return CBurstEncoder(max_pkts, max_len)
    return PyBurstEncoder(max_pkts, max_len)


if BACKEND == "c":
    send_batch, recv_batch, recv_batch_from = c_send_batch, c_recv_batch, c_recv_batch_from
    send_raw6 = c_send_raw6
else:
    send_batch, recv_batch, recv_batch_from = py_send_batch, py_recv_batch, py_recv_batch_from
    send_raw6 = py_send_raw6
