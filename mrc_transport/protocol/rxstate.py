"""The receiver's placement state, declared once: struct mrc_rx_state and its Python twin.

The placement (protocol/rxplace.py in Python, csrc/mrc_rx.c in C) keeps a connection's
per-packet receive state in one struct. Each member is declared here once, as a
``Field`` (name, C type, what it holds); from these tuples come

* the C declarations (``c_declarations``): csrc/mrc_fast.h holds them between its
  "generated" markers, and the cffi cdef is read from that header, so
  tests/unit/test_rx_place.py checks the header against this text
  (``python csrc/build.py --header`` rewrites it);
* the Python twin's classes (``Struct``: one slot per member, zeroed as C's calloc
  leaves them), which rxplace.py's ``RxMsg`` and ``RxState`` are;
* the named result of a placement call (``RxTaken``): what the calls did, the struct's
  ``TAKEN`` members read together and zeroed (rxplace.py and rxfast.py ``take``).

Adding a member is one line here, then its use in mrc_rx.c and rxplace.py.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, NamedTuple


class Field(NamedTuple):
    """One member of a C struct and of its Python twin."""

    name: str
    """Its name, the same in C and Python."""
    ctype: str
    """Its C type: a scalar, a pointer (``T *``) or an array (``T[N]``)."""
    doc: str
    """What it holds (a comment in C)."""


MAX_DELIVERED: Final = 64
"""Messages one call may deliver, and open with spares (MRC_RX_MAX_DELIVERED)."""
SPARES: Final = 8
"""Recycled buffers the state keeps (MRC_RX_SPARES)."""

MSG: Final = (
    Field("msn", "int64_t", "its MSN"),
    Field("buf", "char *", "len bytes: the core's buffer for it"),
    Field("placed", "uint8_t *", "one flag per segment"),
    Field("len", "uint64_t", "its length, bytes"),
    Field("missing", "uint64_t", "segments not placed yet"),
    Field("state", "uint64_t", "MRC_MSG_FREE, _OPEN, _DONE or _DELIVERED"),
)
"""struct mrc_rx_msg: a message being reassembled, a slot of the table by MSN."""

SPARE: Final = (
    Field("buf", "char *", "len bytes"),
    Field("placed", "uint8_t *", "flags for its segments"),
    Field("len", "uint64_t", "its length, bytes"),
)
"""struct mrc_rx_spare: a recycled message buffer."""

TAKEN: Final = (
    Field("why", "uint64_t", "why the latest call stopped: MRC_RX_END ..."),
    Field("sacks", "uint64_t", "data packets that made a SACK due (not those with CE)"),
    Field("n_delivered", "uint64_t", "messages delivered, their slots in delivered"),
    Field("n_opened", "uint64_t", "messages opened with spares, their slots in opened"),
    Field("packets", "uint64_t", "data packets taken (placed, duplicate or dropped)"),
    Field("data", "uint64_t", "data packets placed"),
    Field("bytes", "uint64_t", "payload bytes placed"),
    Field("ce", "uint64_t", "data packets placed that came with CE"),
    Field("dup_packets", "uint64_t", "data packets whose PSN had arrived"),
    Field("inconsistent_header", "uint64_t", "lengths that contradict a limit or the message"),
    Field("bad_segment", "uint64_t", "payloads off the message's segment grid"),
    Field("msn_out_of_window", "uint64_t", "messages outside the window or delivered"),
    Field("dup_segment", "uint64_t", "a new PSN for a segment placed already"),
    Field("messages", "uint64_t", "messages delivered"),
)
"""What the calls since the last ``take`` did, read together and zeroed: ``RxTaken``."""

STATE: Final = (
    # configuration
    Field("seg_size", "uint64_t", "the peer's segment size"),
    Field("mss", "uint64_t", "the longest payload"),
    Field("max_message", "uint64_t", "the longest message"),
    Field("reorder_window", "uint64_t", "PSNs from cum on that are taken"),
    Field("msn_window", "uint64_t", "MSNs from next_msn on that are taken"),
    Field("sack_every_bytes", "uint64_t", "new bytes that make a SACK due"),
    Field("ack_delay", "double", "longest a SACK waits otherwise, seconds"),
    Field("ooo_mask", "uint64_t", "ooo has ooo_mask + 1 >= reorder_window entries"),
    Field("msg_mask", "uint64_t", "msgs has msg_mask + 1 >= msn_window slots"),
    Field("ooo", "uint8_t *", "1: that PSN (mod the size) arrived above cum"),
    Field("msgs", "struct mrc_rx_msg *", "the messages being placed, by MSN"),
    # the receiver's state (PSNs and MSNs expanded to 64 bits, as the core keeps them)
    Field("cum", "int64_t", "every PSN below it arrived"),
    Field("highest", "int64_t", "the highest PSN that arrived"),
    Field("next_msn", "int64_t", "the next message to deliver"),
    Field("ooo_count", "uint64_t", "PSNs above cum that arrived"),
    Field("since_sack", "uint64_t", "new bytes since the last SACK"),
    Field("held", "uint64_t", "bytes delivered that the application holds"),
    Field("ack_deadline", "double", "when a delayed SACK is due (inf: none)"),
    Field("trig_ev", "uint64_t", "the EV of the latest data packet (SACK's trigger)"),
    Field("trig_ts", "uint64_t", "its timestamp"),
    Field("trig_has_ts", "uint64_t", "1 if it carried one"),
    Field("trig_at", "double", "when it arrived (the core's clock): the SACK's service time"),
    *TAKEN,
    Field("delivered", "uint32_t[MRC_RX_MAX_DELIVERED]", "slots of the messages delivered"),
    Field("opened", "uint32_t[MRC_RX_MAX_DELIVERED]", "slots of messages opened with spares"),
    # the core's recycled buffers, a stack: a new message of the top one's length takes it
    Field("n_spares", "uint64_t", "spares on the stack"),
    Field("spares", "struct mrc_rx_spare[MRC_RX_SPARES]", "the stack, its top last"),
)
"""struct mrc_rx_state: one connection's receiving state."""

STRUCTS: Final = (("mrc_rx_msg", MSG), ("mrc_rx_spare", SPARE), ("mrc_rx_state", STATE))
"""The structs, in the order C declares them."""

C_CONSTANTS: Final = {"MRC_RX_MAX_DELIVERED": MAX_DELIVERED, "MRC_RX_SPARES": SPARES}
"""The array sizes the C declarations name, as csrc/mrc_fast.h defines them."""


def c_declarations() -> str:
    """The C text of ``STRUCTS``: what csrc/mrc_fast.h holds between its markers."""
    return "\n".join(c_struct(tag, fields) for tag, fields in STRUCTS)


def c_struct(tag: str, fields: Sequence[Field]) -> str:
    """``struct tag { ... };``, one member a line with its doc as a comment."""
    members = [f"    {_c_member(f)} /* {f.doc} */" for f in fields]
    return "\n".join([f"struct {tag} {{", *members, "};"]) + "\n"


def _c_member(f: Field) -> str:
    base, bracket, count = f.ctype.partition("[")
    if bracket:
        return f"{base} {f.name}[{count};"
    return f"{base}{f.name};" if base.endswith("*") else f"{base} {f.name};"


def zero(ctype: str) -> Any:
    """A member of C type ``ctype`` as calloc leaves it, in Python: 0, 0.0, None for a
    pointer, a list for an array (of zeros, or of None for an array of structs)."""
    base, bracket, count = ctype.partition("[")
    if bracket:
        n = C_CONSTANTS[count.rstrip("]")]
        return [None] * n if base.startswith("struct") else [0] * n
    if base.endswith("*"):
        return None
    return 0.0 if base == "double" else 0


def slots(fields: Sequence[Field], *extra: str) -> tuple[str, ...]:
    """A ``Struct``'s ``__slots__``: its members' names, then ``extra`` of its own."""
    return (*(f.name for f in fields), *extra)


class Struct:
    """A C struct's Python twin: a subclass sets ``FIELDS`` and ``__slots__ =
    slots(FIELDS)``; ``__init__`` zeroes every member (``zero``). The members are the
    schema's, not declared to mypy one by one, so an access is checked at run time by
    the slots (a misspelt name raises) and by the twins' test, not by mypy."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _zeros: ClassVar[tuple[tuple[str, Any], ...]] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._zeros = tuple((f.name, zero(f.ctype)) for f in cls.FIELDS)

    def __init__(self) -> None:
        for name, value in self._zeros:  # a connection makes a table of them
            setattr(self, name, value.copy() if type(value) is list else value)

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...


class RxTaken(tuple[int, ...]):
    """What the placement calls since the last ``take`` did: ``TAKEN``'s members in
    order, each by its name (``taken.why``, ``taken.packets``)."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> int: ...


# each member's reader is namedtuple's, one C descriptor that reads item i of the tuple,
# where property(itemgetter(i)) is two calls: the receiver reads 14 per placement call
_readers = collections.namedtuple("_Readers", [f.name for f in TAKEN])  # type: ignore[misc]
for _f in TAKEN:
    _reader = _readers.__dict__[_f.name]
    _reader.__doc__ = _f.doc  # as the namedtuple documentation does it
    setattr(RxTaken, _f.name, _reader)
