"""Records that are JSON objects: a frozen dataclass whose fields are the object's keys, in
order, written once and read both ways.

``to_json()`` gives the object json.dumps writes (tuples as lists, a record inside as its
object, an ``INLINE`` record's keys in its place). ``from_json()`` reads back a document of
our own, taking the values as they are. ``from_json_untrusted()`` reads what a peer sent:
every value is checked against its field's type (an int is a float too; a field that may
be None may also be absent, a field with a default may be absent) and anything else raises
``SchemaError`` naming the key, as trio's ``*_untrusted`` parsers raise ``BadPacket``.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, fields
from typing import Any, ClassVar, Self, TypeVar, Union, get_args, get_origin, get_type_hints

JsonObject = dict[str, Any]
"""A JSON object as json.loads gives it."""
INLINE = {"inline": True}
"""Field metadata: the record in this field writes its keys into its parent's object."""


class SchemaError(ValueError):
    """A JSON value that is not what its record says (one line: the key and why)."""


def to_json(value: object) -> object:
    """A field's value as JSON: a record as its object, a tuple as a list."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    return value


def fields_json(doc: Any) -> JsonObject:
    """A dataclass's fields in their order, as one JSON object."""
    out: JsonObject = {}
    for f in fields(doc):
        value = getattr(doc, f.name)
        if f.metadata.get("inline"):
            out.update(value.to_json())
        else:
            out[f.name] = to_json(value)
    return out


class Record:
    """A frozen dataclass whose fields are its JSON object's keys, in that order."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_json(self) -> JsonObject:
        return fields_json(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Self:
        """A flat record from a document of our own; JSON lists as tuples."""
        return from_fields(cls, raw)

    @classmethod
    def from_json_untrusted(cls, raw: object) -> Self:
        """A record from what a peer sent, every value checked; ``SchemaError``."""
        obj = _object(raw)
        values: dict[str, object] = {}
        for f, check in _schema(cls):
            if f.metadata.get("inline"):
                values[f.name] = check(obj)
            elif f.name in obj:
                values[f.name] = _checked(f.name, check, obj[f.name])
            elif f.default is MISSING:
                values[f.name] = _absent(f.name, check)
        return cls(**values)


R = TypeVar("R", bound=Record)


def from_fields(cls: type[R], raw: Mapping[str, Any]) -> R:
    """A flat record from a document of our own, by its fields' names; JSON lists as
    tuples (``Record.from_json``, for a subclass that adds to it)."""
    values = (raw[f.name] for f in fields(cls))
    return cls(*(tuple(v) if isinstance(v, list) else v for v in values))


Check = Callable[[object], object]
_SCHEMAS: dict[type, list[tuple[Field[Any], Check]]] = {}


def _schema(cls: type[Record]) -> list[tuple[Field[Any], Check]]:
    """Each field of ``cls`` with the check of its type, made once per class."""
    schema = _SCHEMAS.get(cls)
    if schema is None:
        hints = get_type_hints(cls)
        schema = _SCHEMAS[cls] = [(f, _check_of(hints[f.name])) for f in fields(cls)]
    return schema


def _checked(key: str, check: Check, value: object) -> object:
    try:
        return check(value)
    except SchemaError as exc:
        raise SchemaError(f"{key}.{exc}" if ":" in str(exc) else f"{key}: {exc}") from None


def _absent(key: str, check: Check) -> object:
    """The value of a missing key: None where None is allowed, else an error."""
    try:
        return check(None)
    except SchemaError:
        raise SchemaError(f"{key}: missing") from None


def _check_of(hint: Any) -> Check:
    """The check of a field type: int, float, str, bool, a Record, X | None,
    tuple[X, ...] or dict[str, X]."""
    simple = _SIMPLE.get(hint)
    if simple is not None:
        return simple
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_json_untrusted
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = _check_of(args[0] if args[1] is type(None) else args[1])
        return lambda v: None if v is None else inner(v)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _check_of(args[0])
        return lambda v: tuple(item(x) for x in _typed(v, list))
    if origin is dict and args[0] is str:
        value = _check_of(args[1])
        return lambda v: {k: _checked(k, value, x) for k, x in _object(v).items()}
    raise TypeError(f"no JSON check for the field type {hint!r}")


def _typed(value: object, kind: type[Any]) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SchemaError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _float(value: object) -> float:
    """A JSON number as a float (json.dumps writes a whole float such as 0.0 as 0.0, but
    another writer may not)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return float(_typed(value, float))


def _object(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SchemaError(f"expected a JSON object, got {type(raw).__name__}")
    return raw


_SIMPLE: dict[Any, Check] = {
    int: lambda v: _typed(v, int),
    str: lambda v: _typed(v, str),
    bool: lambda v: _typed(v, bool),
    float: _float,
}
