"""Reading a mig-parted ``version: v1`` file: its schema (RP101) and device filters (RP102).

The schema follows NVIDIA/mig-parted ``api/spec/v1/spec.go`` (unknown fields rejected,
``devices`` and ``mig-enabled`` required, ``mig-devices`` required when enabled and empty when
disabled) and ``pkg/types/mig_config.go`` (profile keys, counts >= 0, not all zero). `read_file`
returns the valid configs and what was wrong, as (rule id, `Violation`) pairs: the rules in
`infra.lint.migparted` report them and check the valid entries against the catalog GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.catalog.mig import GRAMMAR, parse_profile
from infra.errors import spelling_hint
from infra.lint.finding import Violation
from infra.spec.base import repeated
from infra.spec.yamlpos import join_path

__all__ = ["Config", "Entry", "read_file"]

_TOP_FIELDS = ("version", "mig-configs")
_ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")
_FILTER = re.compile(r"0x([0-9a-f]{4})([0-9a-f]{4})(:0x[0-9a-f]{8})?", re.IGNORECASE)
_NVIDIA_VENDOR = "10DE"


@dataclass(frozen=True)
class Entry:
    """One valid entry of a config: which GPUs it selects and what it asks for."""

    path: str
    filters: tuple[str, ...] | None  # upper-case "0x<device>10DE" ids; None: every GPU
    profiles: Mapping[str, int]  # mig-devices; empty when MIG is disabled or `{}`


@dataclass(frozen=True)
class Config:
    """A config: its path, its valid entries, and whether any entry was invalid."""

    path: str
    entries: tuple[Entry, ...]
    complete: bool


@dataclass
class _Reader:
    """Collects what reading the file finds wrong (RP101, RP102), each at its path."""

    found: list[tuple[str, Violation]] = field(default_factory=list)

    def add(self, rule: str, path: str, message: str, hint: str = "") -> None:
        self.found.append((rule, Violation(path, message, hint)))


def read_file(data: Any) -> tuple[dict[str, Config] | None, list[tuple[str, Violation]]]:
    """The configs of a parsed file (``None`` when it has none to check) and its problems."""
    reader = _Reader()
    return _read_file(data, reader), reader.found


def _unknown_fields(
    report: _Reader, mapping: Mapping[Any, Any], path: str, known: tuple[str, ...]
) -> None:
    for key in mapping:
        if key not in known:
            hint = spelling_hint(str(key), known, "known fields")
            report.add("RP101", join_path(path, str(key)), f"unknown field {key!r}", hint)


def _read_file(data: Any, report: _Reader) -> dict[str, Config] | None:
    """Check the top level; return the configs (``None`` when there are none to check)."""
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        report.add(
            "RP101", "", f"a mig-parted file is a mapping with version and mig-configs, got {got}"
        )
        return None
    _unknown_fields(report, data, "", _TOP_FIELDS)
    if "version" not in data:
        report.add("RP101", "", 'missing required field version (must be "v1")')
    elif data["version"] != "v1":
        report.add("RP101", "version", f'version must be "v1", got {data["version"]!r}')
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        where = "mig-configs" if "mig-configs" in data else ""
        report.add("RP101", where, "mig-configs must be a non-empty mapping of config names")
        return None
    return {
        str(name): _read_config(report, join_path("mig-configs", str(name)), entries)
        for name, entries in configs.items()
    }


def _read_config(report: _Reader, path: str, entries: Any) -> Config:
    if not isinstance(entries, list) or not entries:
        report.add("RP101", path, "a config must be a non-empty list of entries")
        return Config(path, (), complete=False)
    read = [_read_entry(report, join_path(path, i), e) for i, e in enumerate(entries)]
    valid = tuple(e for e in read if e is not None)
    return Config(path, valid, complete=len(valid) == len(read))


def _read_entry(report: _Reader, path: str, entry: Any) -> Entry | None:
    """Check one entry; return it when it is valid enough to check against GPUs."""
    if not isinstance(entry, dict):
        report.add("RP101", path, "an entry must be a mapping (devices, mig-enabled, ...)")
        return None
    before = len(report.found)
    _unknown_fields(report, entry, path, _ENTRY_FIELDS)
    for required in ("devices", "mig-enabled"):
        if required not in entry:
            report.add("RP101", path, f"missing required field {required}")
    filters = _read_filters(report, join_path(path, "device-filter"), entry)
    _read_devices(report, join_path(path, "devices"), entry.get("devices", "all"))
    profiles = _read_mig_devices(report, path, entry)
    if len(report.found) > before:
        return None
    return Entry(path, filters, profiles)


def _read_filters(report: _Reader, path: str, entry: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "device-filter" not in entry:
        return None
    value = entry["device-filter"]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        number = next((i for i in _as_list(value) if type(i) is int and 0 <= i < 1 << 32), None)
        hint = "" if number is None else f'quote the id: "0x{number:08X}"'
        report.add("RP102", path, "device-filter must be a string or a list of strings", hint)
        return None
    if not items:
        report.add("RP102", path, "device-filter is an empty list", "remove it or list device ids")
    ids: list[str] = []
    for i, item in enumerate(items):
        item_path = path if isinstance(value, str) else join_path(path, i)
        device = _read_filter(report, item_path, item)
        if device is not None:
            ids.append(device)
    return tuple(ids)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _read_filter(report: _Reader, path: str, item: str) -> str | None:
    """Return ``0x<DEVICE>10DE`` for a valid filter id, else report it."""
    match = _FILTER.fullmatch(item)
    if match is None:
        short = re.fullmatch(r"(?:0x)?([0-9a-f]{4})", item, re.IGNORECASE)
        hint = f"did you mean '0x{short.group(1).upper()}10DE'?" if short else ""
        message = f"device-filter {item!r} is not 0x<device><vendor> (8 hex digits)"
        report.add("RP102", path, message, hint or "e.g. 0x20B010DE for A100-SXM4-40GB")
        return None
    if match.group(2).upper() != _NVIDIA_VENDOR:
        message = f"device-filter {item!r} has vendor id {match.group(2)}, not NVIDIA's 10DE"
        report.add("RP102", path, message)
        return None
    return f"0x{match.group(1).upper()}{_NVIDIA_VENDOR}"


def _read_devices(report: _Reader, path: str, value: Any) -> None:
    if value == "all":
        return
    ok = isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    )
    if not ok:
        report.add("RP101", path, 'devices must be "all" or a list of GPU indices (ints >= 0)')
    elif len(set(value)) != len(value):
        dupes = repeated(value)
        report.add("RP101", path, f"devices lists GPU indices more than once: {dupes}")


def _read_mig_devices(report: _Reader, path: str, entry: Mapping[str, Any]) -> dict[str, int]:
    enabled = entry.get("mig-enabled")
    if "mig-enabled" in entry and not isinstance(enabled, bool):
        report.add("RP101", join_path(path, "mig-enabled"), "mig-enabled must be true or false")
        return {}
    devices_path = join_path(path, "mig-devices")
    devices = entry.get("mig-devices")
    if enabled is False:
        if devices:
            report.add("RP101", devices_path, "mig-devices must be empty when mig-enabled is false")
        return {}
    if "mig-devices" not in entry:
        if enabled:
            report.add(
                "RP101", path, "missing required field mig-devices (may be {}) when MIG is enabled"
            )
        return {}
    if not isinstance(devices, dict):
        report.add("RP101", devices_path, "mig-devices must be a mapping of profile -> count")
        return {}
    return _read_counts(report, devices_path, devices)


def _read_counts(report: _Reader, path: str, devices: Mapping[Any, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key, count in devices.items():
        key_path = join_path(path, str(key))
        if parse_profile(str(key)) is None:
            message = f"{str(key)!r} is not a MIG profile name (expected {GRAMMAR})"
            report.add("RP101", key_path, message, "e.g. 1g.5gb, 1c.3g.20gb or 1g.10gb+me")
        elif not isinstance(count, int) or isinstance(count, bool) or count < 0:
            report.add("RP101", key_path, f"count for {key} must be an int >= 0, got {count!r}")
        else:
            counts[str(key)] = count
    if len(counts) == len(devices) and devices and not any(counts.values()):
        report.add(
            "RP101", path, "all counts in mig-devices are 0", "use mig-devices: {} or drop it"
        )
    return counts
