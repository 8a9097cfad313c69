"""Fast constructors for the plan's most numerous frozen records (cables, links).

A plan of 16,384 servers makes half a million cables, and as many links before them. A
frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__``, which
made a third of the planning time at that size. `maker(cls)` returns a constructor that
takes every field positionally, as ``cls(...)`` does, builds the instance on a mutable twin
class with the very same slots (its ``__init__`` stores the fields directly) and then gives
it ``cls`` as its class, which Python allows between classes of one memory layout. What
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
        f"_{cls.__name__}Twin", [(f.name, f.type) for f in fields], slots=True, eq=False
    )

    def make(*values: object) -> _T:
        record = twin(*values)
        record.__class__ = cls
        return record  # type: ignore[no-any-return]

    return make
