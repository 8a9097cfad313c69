"""Fast constructors for the plan's most numerous frozen records (cables, links).

A plan of 16,384 servers makes half a million cables, and as many links before them. A
frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__``, which
made a third of the planning time at that size. `maker(cls)` returns a constructor that
takes every field positionally, as ``cls(...)`` does: a mutable twin class with the very same
slots, whose ``__init__`` stores the fields directly and then gives the instance ``cls`` as
its class, which Python allows between classes of one memory layout. What
comes back is an ordinary ``cls`` instance: frozen, equal to and hashing as ``cls(...)``.

Only for frozen, slotted dataclasses whose fields have no defaults and that have no
``__post_init__`` (nothing the twin would skip); `maker` refuses any other class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["maker"]

_T = TypeVar("_T")


def maker(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of ``cls`` records, field values positional, faster than ``cls``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    params = getattr(cls, "__dataclass_params__", None)
    plain = all(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in fields
    )
    if (
        params is None
        or not params.frozen
        or cls.__dict__.get("__slots__") != names
        or hasattr(cls, "__post_init__")
        or not plain
    ):
        raise TypeError(f"{cls.__name__} is not a plain frozen, slotted dataclass")
    twin: Any = dataclasses.make_dataclass(
        f"_{cls.__name__}Twin",
        [(f.name, f.type) for f in fields],
        slots=True,
        init=False,
        repr=False,
        eq=False,
    )
    twin.__init__ = _init_becoming(cls, names)
    return twin  # type: ignore[no-any-return]


def _init_becoming(cls: type, names: tuple[str, ...]) -> Callable[..., None]:
    """The twin's ``__init__``: stores each field, then makes the instance a ``cls``.

    Generated, as dataclasses generate theirs: one frame per record, no wrapper around
    the twin's construction (that call was a fifth of a record's cost).
    """
    if {"_record_", "_record_class_"} & set(names):
        raise TypeError(f"{cls.__name__} has a field named as the maker's own variables")
    stores = "".join(f"    _record_.{n} = {n}\n" for n in names)
    source = (
        f"def __init__(_record_, {', '.join(names)}):\n{stores}"
        "    _record_.__class__ = _record_class_\n"
    )
    scope: dict[str, Any] = {"_record_class_": cls}
    exec(source, scope)  # noqa: S102 (the names are a dataclass's fields, identifiers)
    return scope["__init__"]  # type: ignore[no-any-return]
