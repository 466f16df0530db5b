"""The common header of each kind of packet a connection sends, built once."""

from __future__ import annotations

from typing import Final

from mrc_transport.wire.frames import FLAGS_BY_VALUE, Common, Flags, Opcode

# The flag bits as ints, as ``Commons.get`` takes them: on the per-packet path an IntFlag
# "&" or "|" builds a new Flags through the enum machinery, int arithmetic does not.
# Final: mypyc keeps them in C globals, not a module-dict lookup per use.
TS: Final = int(Flags.TS)
ACK_REQ: Final = int(Flags.ACK_REQ)
ECN_ECHO: Final = int(Flags.ECN_ECHO)
RTX: Final = int(Flags.RTX)
RESTORE_WINDOW: Final = int(Flags.RESTORE_WINDOW)


class Commons:
    """One connection's common headers by opcode and flags. A connection sends a handful of
    kinds, and every packet carries one: each is built once (a frozen dataclass's
    ``__init__`` costs ~2 us) and shared by its sender, receiver and control packets."""

    def __init__(self, src_conn: int, dst_conn: int = 0) -> None:
        self.src_conn = src_conn
        """Our connection id."""
        self.dst_conn = dst_conn
        """The peer's (0 until its SETUP or SETUP_ACK names it)."""
        self._made: dict[int, Common] = {}

    def peer(self, dst_conn: int) -> None:
        """The peer named its connection id: the headers built so far named none."""
        self.dst_conn = dst_conn
        self._made.clear()

    def get(self, opcode: Opcode, flags: int) -> Common:
        """The common header of ``opcode`` with flag bits ``flags`` (ints: an IntFlag "|"
        goes through the enum machinery)."""
        key = int(opcode) << 8 | flags
        made = self._made.get(key)
        if made is None:
            made = Common(opcode, FLAGS_BY_VALUE[flags], self.dst_conn, self.src_conn)
            self._made[key] = made
        return made
