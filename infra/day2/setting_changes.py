"""Spec settings that differ between two specs: `railplan diff`'s ``settings`` list.

The rest of a diff is what the plan makes of a spec (servers, switches, cables, addresses,
moves), plus the MIG layouts and software versions it names. Settings that change the
rendered tree without touching the plan (the cluster's name, a tenant's name or priority,
the batch scheduler, the checkpoint storage class, an alert threshold, power saving) are
each reported here by their spec path, so a diff is never silent while the rendered tree
differs. `software` and the node groups' `mig` / `mig_schedule` are left out: the
``software`` and ``mig`` lists report them already.

Paths follow the spec: ``scheduler.tenants[research].priority``. A list of named entries
(node groups, tenants, budgets with a name) is matched by name, so a renamed entry reads as
one removed (``old`` set, ``new`` None) and one added; any other list that differs is one
change of the whole list. Values are the spec's own, as JSON would carry them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.spec import Spec

__all__ = ["SettingChange", "setting_changes"]

COVERED_TOP = ("software",)  # the diff's `software` list
COVERED_IN_GROUP = ("mig", "mig_schedule")  # the diff's `mig` list


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One spec setting whose value differs; None for a side where it is absent."""

    path: str
    old: Any
    new: Any


def setting_changes(old: Spec, new: Spec) -> tuple[SettingChange, ...]:
    """Every differing spec setting the diff's other lists do not report, in spec order."""
    before, after = _settings(old), _settings(new)
    return tuple(SettingChange(p, o, n) for p, o, n in _walk("", before, after))


def _settings(spec: Spec) -> dict[str, Any]:
    data: dict[str, Any] = spec.model_dump(mode="json")
    for key in COVERED_TOP:
        data.pop(key, None)
    for group in data.get("node_groups", []):
        for key in COVERED_IN_GROUP:
            group.pop(key, None)
    return data


def _walk(path: str, old: Any, new: Any) -> Iterator[tuple[str, Any, Any]]:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            yield from _walk(_join(path, key), old.get(key), new.get(key))
    elif _named_or_empty(old) and _named_or_empty(new):
        before = {item["name"]: item for item in old}
        after = {item["name"]: item for item in new}
        for name in [*after, *(n for n in before if n not in after)]:
            yield from _walk(f"{path}[{name}]", before.get(name), after.get(name))
    else:
        yield path, old, new


def _named_or_empty(value: Any) -> bool:
    """A list whose entries (if any) are all mappings with a unique ``name``."""
    if not isinstance(value, list):
        return False
    names = [item.get("name") for item in value if isinstance(item, dict)]
    return len(names) == len(value) and None not in names and len(set(names)) == len(names)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
