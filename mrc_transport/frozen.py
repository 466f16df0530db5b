"""Building frozen slotted dataclasses on per-packet paths, without their slow ``__init__``.

A frozen dataclass's ``__init__`` stores each field with ``object.__setattr__`` (its own
``__setattr__`` raises), which makes ``DataHeader(...)`` and ``Transmit(...)`` a visible
share of the sender's work per data packet (docs/measurements.md).
``fast_constructor(cls)`` returns a positional constructor that builds the same object
through a plain class with the same slots (``slot_alike_class``), then gives it its class
by ``__class__`` assignment, at about a quarter of the cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def slot_alike_class(cls: type[Any]) -> type[Any] | None:
    """A plain class with the slot layout of frozen slotted dataclass ``cls``, or None.

    Its instance gets its slots by ordinary attribute stores (which CPython 3.11
    specializes to a direct slot write), then becomes a ``cls`` by ``__class__`` assignment,
    which CPython allows between classes of identical layout. The result is an ordinary
    ``cls`` instance, field for field what ``cls(...)`` builds, without the frozen
    ``__init__``'s one ``object.__setattr__`` call per field. None for a class this does
    not fit (``__post_init__``, no slots, a base class).
    """
    slots = cls.__dict__.get("__slots__")
    if slots is None or hasattr(cls, "__post_init__") or cls.__bases__ != (object,):
        return None
    made = type(f"_{cls.__name__}Slots", (), {"__slots__": slots})
    probe: Any = object.__new__(made)
    try:
        probe.__class__ = cls  # CPython refuses unless the layouts are identical
    except TypeError:
        return None
    return made


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """``new(*fields)``: a ``cls`` from every field, positionally, in declaration order
    (no defaults, no checks: a dataclass ``__init__`` checks nothing either), built
    through its ``slot_alike_class``; ``cls`` itself where that does not fit."""
    made = slot_alike_class(cls)
    if made is None:
        return cls
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    lines = [
        f"def new({', '.join(names)}):",
        "    o = _Alike()",
        *(f"    o.{name} = {name}" for name in names),
        "    o.__class__ = _cls",
        "    return o",
    ]
    env: dict[str, Any] = {"_Alike": made, "_cls": cls}
    exec("\n".join(lines), env)  # the namedtuple technique: code generated once at import
    new: Callable[..., T] = env["new"]
    return new
