"""Frozen value records without ``dataclasses``: the hook's start-up cost is paid on every tool call.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and builds each
class by generating and compiling code, some 10 ms for memd's config and core values, measured
on every memory write the PreToolUse and PostToolUse hooks see. A :class:`Record` subclass is
declared like a frozen dataclass (annotated fields, defaults, :func:`field` for mutable defaults)
and behaves like one: keyword or positional construction in field order, ``==`` and ``hash`` by
field values and class, a ``repr`` naming every field, and no assignment after construction.
Type checkers see a frozen dataclass (``dataclass_transform``). Imports nothing at run time.

A language helper, not memory logic: it lives beside the core rather than in it, and is the one
module outside ``memd.core`` the core may import (tests/test_layers.py).

``fields``, ``replace`` and ``astuple`` stand in for the ``dataclasses`` functions of the same name;
``key`` declares a schema field (default, description, bounds), as ``memd.config`` reads them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, TypeVar, dataclass_transform

    R = TypeVar("R", bound="Record")
else:
    def dataclass_transform(**_kw):  # typing costs ~3 ms to import; only type checkers need it
        return lambda cls: cls

_MISSING: Any = object()


class Field:
    """One field of a record: its name, default (or factory) and free-form metadata."""

    __slots__ = ("default", "factory", "metadata", "name")

    def __init__(self, default: Any = _MISSING, factory: Callable[[], Any] | None = None,
                 metadata: dict[str, Any] | None = None) -> None:
        self.name = ""
        self.default = default
        self.factory = factory
        self.metadata: dict[str, Any] = metadata or {}

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING or self.factory is not None

    def make_default(self) -> Any:
        return self.factory() if self.factory is not None else self.default

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None,
          metadata: dict[str, Any] | None = None) -> Any:
    """A field with a default factory (for mutable defaults) and/or metadata, as ``dataclasses.field``."""
    return Field(default, default_factory, metadata)


def key(default: Any, doc: str, *, min: float | None = None, max: float | None = None,
        choices: tuple[str, ...] | None = None) -> Any:
    """A schema field: its default, its description and optional bounds (in ``Field.metadata``;
    ``memd.config`` checks and documents every key from them). A list or dict default is copied
    for each record."""
    meta = {"doc": doc, "min": min, "max": max, "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: _copy(default), metadata=meta)
    return field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record:
    """Base of frozen records: subclasses declare annotated fields as a dataclass would."""

    __record_fields__: ClassVar[dict[str, Field]] = {}
    __record_names__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Field] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(base.__dict__.get("__record_fields__", {}))
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 (no inspect)
            if _is_classvar(annotation):
                continue
            value = cls.__dict__.get(name, _MISSING)
            f = value if isinstance(value, Field) else Field(value)
            f.name = name
            if value is not _MISSING:
                # as dataclasses do: a plain default stays a class attribute, a factory does not
                if f.default is _MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, f.default)
            fields.pop(name, None)
            fields[name] = f
        seen_default = False
        for f in fields.values():
            if f.has_default:
                seen_default = True
            elif seen_default:
                raise TypeError(f"{cls.__name__}: non-default field {f.name!r} follows a default field")
        cls.__record_fields__ = fields
        cls.__record_names__ = tuple(fields)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.__record_names__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} positional arguments, {len(args)} given")
        values = self.__dict__
        for name, value in zip(names, args, strict=False):
            values[name] = value
        for name, value in kwargs.items():
            if name in values or name not in self.__record_fields__:
                what = "got multiple values for" if name in values else "got an unexpected keyword"
                raise TypeError(f"{type(self).__name__}() {what} argument {name!r}")
            values[name] = value
        if len(values) < len(names):
            for name, f in self.__record_fields__.items():
                if name not in values:
                    if not f.has_default:
                        raise TypeError(f"{type(self).__name__}() missing required argument {name!r}")
                    values[name] = f.make_default()

    def _values(self) -> tuple[Any, ...]:
        d = self.__dict__
        return tuple(d[n] for n in self.__record_names__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        d = self.__dict__
        inner = ", ".join(f"{n}={d[n]!r}" for n in self.__record_names__)
        return f"{type(self).__qualname__}({inner})"

    if not TYPE_CHECKING:  # type checkers already treat records as frozen
        def __setattr__(self, name, value):
            raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

        def __delattr__(self, name):
            raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")


def fields(obj: Record | type[Record]) -> tuple[Field, ...]:
    """The fields of a record class (or instance), in order, as ``dataclasses.fields``."""
    return tuple(obj.__record_fields__.values())


def replace(obj: R, /, **changes: Any) -> R:
    """A copy of obj with some fields changed, as ``dataclasses.replace``."""
    values = dict(zip(obj.__record_names__, obj._values(), strict=True))
    for name in changes:
        if name not in values:
            raise TypeError(f"{type(obj).__name__} has no field {name!r}")
    values.update(changes)
    return type(obj)(**values)


def astuple(obj: Record) -> tuple[Any, ...]:
    """The field values in order (shallow, unlike ``dataclasses.astuple``: records hold plain values)."""
    return obj._values()
