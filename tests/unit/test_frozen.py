"""mrc_transport.frozen: fast constructors make the very objects a frozen dataclass's __init__
does."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv6Address

import pytest

from mrc_transport.frozen import fast_constructor, slot_alike_class
from mrc_transport.protocol.events import MessageAcked, PathRetired
from mrc_transport.protocol.transmit import Transmit
from mrc_transport.wire.frames import Common, DataHeader, Flags, Opcode, SackHeader
from srv6.path import SrPath

COMMON = Common(Opcode.WRITE_MIDDLE, Flags.TS, 1, 2)
A, B = IPv6Address("fd00::1"), IPv6Address("fd00::2")
PATH = SrPath(0, ("t0",), A, B, B, (B,), "p0")


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (DataHeader, (COMMON, 1, 2, 3, 4, 5)),
        (SackHeader, (COMMON, 1, 1, 0xFF, 7, 9, 2, 0, 1 << 20, 5, 6, 0b10)),
        (Transmit, (PATH, 7, DataHeader(COMMON, 1, 2, 3, 4, 5), b"x", 26)),
        (MessageAcked, (1.5, 3, 7, 131072)),  # subclasses: built through slot setters
        (PathRetired, (1.5, 3, 0x8000_0001, 2, "loss")),
    ],
)
def test_a_built_object_is_the_frozen_dataclass_itself(
    cls: type, fields: tuple[object, ...]
) -> None:
    new = fast_constructor(cls)
    assert new is not cls  # the fast way applies to these
    got, want = new(*fields), cls(*fields)
    assert type(got) is cls
    assert got == want
    assert hash(got) == hash(want)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(got, name, None)


def test_classes_no_slot_alike_class_fits_are_built_the_plain_way() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    assert slot_alike_class(NoSlots) is None
    assert fast_constructor(NoSlots) is NoSlots
    assert fast_constructor(Checked) is Checked
    with pytest.raises(ValueError, match="negative"):
        fast_constructor(Checked)(-1)
