"""Building frozen slotted dataclasses on per-packet paths, without their slow ``__init__``.

A frozen dataclass's ``__init__`` stores each field with ``object.__setattr__`` (its own
``__setattr__`` raises), which makes ``DataHeader(...)`` and ``Transmit(...)`` a visible
share of the sender's work per data packet (docs/measurements.md).
``fast_constructor(cls)`` returns a positional constructor that builds the same object
through a plain class with the same slots (``slot_alike_class``), then gives it its class
by ``__class__`` assignment, at about a quarter of the cost. A subclass of another slotted
dataclass (the events) fits no such class; it is built by storing each field through its
slot's descriptor instead, at a little over half the cost (``slot_setter_constructor``).
"""

from __future__ import annotations

import dataclasses
import types
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


def slot_setter_constructor(cls: type[T]) -> Callable[..., T] | None:
    """``new(*fields)`` for a frozen slotted dataclass ``cls``: ``object.__new__`` and
    each field stored through its slot's member descriptor, which the frozen class's
    ``__setattr__`` does not guard (what its ``__init__`` does, less one
    ``object.__setattr__`` lookup per field). None for a class this does not fit."""
    if hasattr(cls, "__post_init__") or "__slots__" not in cls.__dict__:
        return None
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, name in enumerate(names):
        slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if not isinstance(slot, types.MemberDescriptorType):
            return None
        env[f"_set{i}"] = slot.__set__
    body = ["o = _new(_cls)", *(f"_set{i}(o, {name})" for i, name in enumerate(names))]
    return _generated(names, body, env)


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """``new(*fields)``: a ``cls`` from every field, positionally, in declaration order
    (no defaults, no checks: a dataclass ``__init__`` checks nothing either), built
    through its ``slot_alike_class``, else by ``slot_setter_constructor``; ``cls``
    itself where neither fits."""
    made = slot_alike_class(cls)
    if made is None:
        return slot_setter_constructor(cls) or cls
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    body = ["o = _Alike()", *(f"o.{name} = {name}" for name in names), "o.__class__ = _cls"]
    return _generated(names, body, {"_Alike": made, "_cls": cls})


def _generated(names: list[str], body: list[str], env: dict[str, Any]) -> Callable[..., Any]:
    """``def new(*names): body; return o``, compiled in ``env``: the namedtuple technique,
    code generated once at import."""
    lines = [f"def new({', '.join(names)}):", *(f"    {line}" for line in body), "    return o"]
    exec("\n".join(lines), env)
    new: Callable[..., Any] = env["new"]
    return new
