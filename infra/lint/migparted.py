"""Checks for mig-parted ``version: v1`` files, the format NVIDIA's MIG manager consumes.

A mig-parted file (``nvidia-mig-parted apply -f FILE -c NAME``; the GPU Operator's
``default-mig-parted-config`` ConfigMap) maps config names to lists of entries; each entry
selects GPUs (``device-filter``, ``devices``) and says whether MIG is on and which profiles to
create. The schema follows NVIDIA/mig-parted ``api/spec/v1/spec.go`` (unknown fields rejected,
``devices`` and ``mig-enabled`` required, ``mig-devices`` required when enabled and empty when
disabled) and ``pkg/types/mig_config.go`` (profile keys, counts >= 0, not all zero).

Then each entry is checked against each selected catalog GPU it applies to: every profile must
be a profile of that GPU (RP103) and the counts must fit (RP104, `infra.catalog.mig`). An entry
with a ``device-filter`` applies to a GPU when one of its device ids is the GPU's (subsystem
suffix ignored). An entry without a filter applies to every GPU when both ``gpu_id`` and
``config`` are given (the user says "this config on this GPU"); otherwise it applies only to
GPUs that have at least one of its profiles (or when it names none), because mig-parted files
conventionally keep per-model configs side by side without filters: NVIDIA's default file has
``all-1g.5gb`` for A100-40GB next to ``all-1g.10gb.me`` for 80 GB GPUs. RP106 warns when no
entry of a config applies to a GPU because every entry's device-filter excludes it, when the user
selected the config, or when the config names one of the GPU's profiles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.catalog.mig import GRAMMAR, check_layout, parse_profile, resolve_profile
from infra.catalog.models import Gpu
from infra.errors import RailplanError, spelling_hint
from infra.lint.finding import Finding, Severity
from infra.spec.yamlpos import SourceMap, join_path

__all__ = ["MIG_CHECKS", "MIG_SEVERITY", "check_mig_parted"]

MIG_CHECKS: dict[str, tuple[str, str, str]] = {
    "RP101": (
        "mig-parted-schema",
        "The file follows mig-parted's v1 schema.",
        (
            "nvidia-mig-parted and the GPU Operator's MIG manager refuse a file that does not "
            "parse as `version: v1` (unknown or misspelt fields, a missing `devices` or "
            "`mig-enabled`, `mig-devices` missing while MIG is enabled or present while it is "
            "disabled, counts that are negative or all zero, malformed profile names); the node "
            "is then left in its old MIG state and labelled failed. Fix the field the finding "
            "names; the hint suggests the closest valid spelling."
        ),
    ),
    "RP102": (
        "mig-parted-device-filter",
        "Every device-filter is a PCI id `0x<device><vendor 10DE>`.",
        (
            "A device-filter selects GPUs by PCI device and vendor id, written as 8 hex digits "
            "after `0x` with NVIDIA's vendor id 10DE last (A100-SXM4-40GB is `0x20B010DE`), "
            "optionally followed by `:0x<subsystem>`. A malformed or non-NVIDIA id matches no GPU, "
            "so the entry silently never applies. Copy the ids from `lspci -nn -d 10de:` or from "
            "NVIDIA's default config."
        ),
    ),
    "RP103": (
        "mig-parted-profile-unknown",
        "Every profile in an entry is a MIG profile of the GPUs it applies to.",
        (
            "Profile names carry the GPU's memory size (`1g.5gb` on A100-40GB is `1g.10gb` on "
            "A100-80GB and H100, `1g.18gb` on H200), so a name copied from another GPU model "
            "makes mig-parted fail on every node of this model. Use the GPU's own profile names "
            "(`nvidia-smi mig -lgip`), or add a device-filter so the entry only applies to the "
            "model it was written for."
        ),
    ),
    "RP104": (
        "mig-parted-does-not-fit",
        "The profile counts of an entry fit on one GPU.",
        (
            "MIG GPU instances occupy fixed memory-slice placements: no more than a profile's "
            "maximum count, at most 7 instances, no overlapping slices, and 4g + 3g only from "
            "driver R510. A layout that cannot be placed fails on the node after MIG mode was "
            "already switched. Reduce the counts or pick smaller profiles; the message names the "
            "rule broken."
        ),
    ),
    "RP105": (
        "mig-parted-config-missing",
        "The selected config exists in the file.",
        (
            "Nodes select a config by name (label `nvidia.com/mig.config=NAME`, or "
            "`nvidia-mig-parted apply -c NAME`); a name that is not a key of `mig-configs` makes "
            "the MIG manager fail. Fix the name (the hint suggests the closest one) or add the "
            "config."
        ),
    ),
    "RP106": (
        "mig-parted-no-entry-applies",
        "Some entry of a config applies to each selected GPU.",
        (
            "When every entry of a config has a device-filter that excludes a GPU model, the MIG "
            "manager changes nothing on that model's nodes, which keep their previous MIG "
            "layout. Add the GPU's device id to a filter, or add an entry "
            "for it."
        ),
    ),
}
"""Rule id -> (name, one-line summary, doc: why it matters and how to fix it)."""

MIG_SEVERITY: dict[str, Severity] = {rule: Severity.ERROR for rule in MIG_CHECKS}
MIG_SEVERITY["RP106"] = Severity.WARNING
"""Rule id -> the severity of its findings."""

_TOP_FIELDS = ("version", "mig-configs")
_ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")
_FILTER = re.compile(r"0x([0-9a-f]{4})([0-9a-f]{4})(:0x[0-9a-f]{8})?", re.IGNORECASE)
_NVIDIA_VENDOR = "10DE"


@dataclass(frozen=True)
class _Entry:
    """One valid entry of a config: which GPUs it selects and what it asks for."""

    path: str
    filters: tuple[str, ...] | None  # upper-case "0x<device>10DE" ids; None: every GPU
    profiles: Mapping[str, int]  # mig-devices; empty when MIG is disabled or `{}`


@dataclass(frozen=True)
class _Config:
    """A config: its path, its valid entries, and whether any entry was invalid."""

    path: str
    entries: tuple[_Entry, ...]
    complete: bool


# MIG profiles of every GPU NVIDIA's published mig-parted default config covers, including GPUs
# outside the catalog (RTX PRO 6000 Blackwell, B200, GH200, ...): the names in
# NVIDIA/mig-parted@1400787269cadb4f91db863a4b9f9af5c8fabcd7:deployments/systemd/config-default.yaml
# (vendored as examples/mig-parted/config-default.yaml). A profile of an unfiltered entry that is
# neither here nor on a catalog GPU exists on no GPU (RP103), e.g. "1g.11gb".
NVIDIA_PROFILES = frozenset(
    {
        "1g.5gb",
        "1g.5gb+me",
        "1g.6gb",
        "1g.6gb+me",
        "1g.10gb",
        "1g.10gb+me",
        "1g.12gb",
        "1g.12gb+me",
        "1g.18gb",
        "1g.18gb+me",
        "1g.20gb",
        "1g.23gb",
        "1g.23gb+me",
        "1g.24gb",
        "1g.24gb+gfx",
        "1g.24gb+me.all",
        "1g.24gb-me",
        "1g.35gb",
        "1g.36gb",
        "1g.45gb",
        "1g.47gb",
        "2g.10gb",
        "2g.12gb",
        "2g.12gb+me",
        "2g.20gb",
        "2g.24gb",
        "2g.35gb",
        "2g.36gb",
        "2g.45gb",
        "2g.47gb",
        "2g.48gb",
        "2g.48gb+gfx",
        "2g.48gb+me.all",
        "2g.48gb-me",
        "3g.20gb",
        "3g.40gb",
        "3g.47gb",
        "3g.48gb",
        "3g.71gb",
        "3g.72gb",
        "3g.90gb",
        "3g.95gb",
        "4g.20gb",
        "4g.24gb",
        "4g.40gb",
        "4g.47gb",
        "4g.48gb",
        "4g.71gb",
        "4g.72gb",
        "4g.90gb",
        "4g.95gb",
        "4g.96gb",
        "4g.96gb+gfx",
        "7g.40gb",
        "7g.80gb",
        "7g.94gb",
        "7g.96gb",
        "7g.141gb",
        "7g.144gb",
        "7g.180gb",
        "7g.189gb",
    }
)


@dataclass(frozen=True)
class _Mode:
    """How the user narrowed the check (see the module docstring)."""

    strict: bool  # both gpu_id and config given: unfiltered entries apply to the GPU
    selected: bool  # config given: warn (RP106) for every selected GPU the config skips


@dataclass
class _Report:
    """Collects findings, placing each at its path's position in the source."""

    source: SourceMap
    findings: list[Finding] = field(default_factory=list)

    def add(self, rule: str, path: str, message: str, hint: str = "") -> None:
        pos = self.source.position(path)
        severity = MIG_SEVERITY[rule]
        self.findings.append(
            Finding(self.source.file, pos.line, pos.column, rule, severity, message, path, hint)
        )

    def result(self) -> list[Finding]:
        return sorted(set(self.findings))


def check_mig_parted(
    data: Any,
    source: SourceMap,
    catalog_gpus: Mapping[str, Gpu],
    gpu_id: str | None = None,
    config: str | None = None,
    driver_branch: int | None = None,
) -> list[Finding]:
    """Validate a parsed mig-parted file against its schema and the catalog GPUs.

    Args:
        data: the parsed YAML (``load_yaml_text`` / ``read_yaml_file``).
        source: positions of ``data``'s paths.
        catalog_gpus: catalog GPU id -> GPU.
        gpu_id: check only this catalog GPU (default: every catalog GPU).
        config: check only this config (default: every config).
        driver_branch: NVIDIA driver branch (e.g. 470) for driver-dependent layout rules.

    Returns:
        The findings (rules RP101-RP106), sorted by position then rule.

    Raises:
        RailplanError: ``gpu_id`` is not a catalog GPU (a usage error, not a file problem).
    """
    gpus = _select_gpus(catalog_gpus, gpu_id)
    report = _Report(source)
    configs = _read_file(data, report)
    if config is not None:
        if configs is not None and config not in configs:
            hint = spelling_hint(config, configs, "configs")
            report.add("RP105", "mig-configs", f"config {config!r} is not in the file", hint)
        configs = {k: v for k, v in (configs or {}).items() if k == config}
    mode = _Mode(
        strict=gpu_id is not None and config is not None,
        selected=config is not None,
    )
    for gpu in gpus:
        for name, cfg in sorted((configs or {}).items()):
            _check_config_on_gpu(report, name, cfg, gpu, mode, driver_branch)
    for name, cfg in sorted((configs or {}).items()):
        _check_profiles_known_somewhere(report, name, cfg, list(catalog_gpus.values()))
    return report.result()


def _select_gpus(catalog_gpus: Mapping[str, Gpu], gpu_id: str | None) -> list[Gpu]:
    if gpu_id is None:
        return [catalog_gpus[k] for k in sorted(catalog_gpus)]
    if gpu_id not in catalog_gpus:
        hint = spelling_hint(gpu_id, catalog_gpus)
        raise RailplanError(f"unknown GPU {gpu_id!r}", hint=hint)
    return [catalog_gpus[gpu_id]]


# --- schema -------------------------------------------------------------------------------


def _unknown_fields(
    report: _Report, mapping: Mapping[Any, Any], path: str, known: tuple[str, ...]
) -> None:
    for key in mapping:
        if key not in known:
            hint = spelling_hint(str(key), known, "known fields")
            report.add("RP101", join_path(path, str(key)), f"unknown field {key!r}", hint)


def _read_file(data: Any, report: _Report) -> dict[str, _Config] | None:
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


def _read_config(report: _Report, path: str, entries: Any) -> _Config:
    if not isinstance(entries, list) or not entries:
        report.add("RP101", path, "a config must be a non-empty list of entries")
        return _Config(path, (), complete=False)
    read = [_read_entry(report, join_path(path, i), e) for i, e in enumerate(entries)]
    valid = tuple(e for e in read if e is not None)
    return _Config(path, valid, complete=len(valid) == len(read))


def _read_entry(report: _Report, path: str, entry: Any) -> _Entry | None:
    """Check one entry; return it when it is valid enough to check against GPUs."""
    if not isinstance(entry, dict):
        report.add("RP101", path, "an entry must be a mapping (devices, mig-enabled, ...)")
        return None
    before = len(report.findings)
    _unknown_fields(report, entry, path, _ENTRY_FIELDS)
    for required in ("devices", "mig-enabled"):
        if required not in entry:
            report.add("RP101", path, f"missing required field {required}")
    filters = _read_filters(report, join_path(path, "device-filter"), entry)
    _read_devices(report, join_path(path, "devices"), entry.get("devices", "all"))
    profiles = _read_mig_devices(report, path, entry)
    if len(report.findings) > before:
        return None
    return _Entry(path, filters, profiles)


def _read_filters(report: _Report, path: str, entry: Mapping[str, Any]) -> tuple[str, ...] | None:
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


def _read_filter(report: _Report, path: str, item: str) -> str | None:
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


def _read_devices(report: _Report, path: str, value: Any) -> None:
    if value == "all":
        return
    ok = isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    )
    if not ok:
        report.add("RP101", path, 'devices must be "all" or a list of GPU indices (ints >= 0)')
    elif len(set(value)) != len(value):
        dupes = sorted({i for i in value if value.count(i) > 1})
        report.add("RP101", path, f"devices lists GPU indices more than once: {dupes}")


def _read_mig_devices(report: _Report, path: str, entry: Mapping[str, Any]) -> dict[str, int]:
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


def _read_counts(report: _Report, path: str, devices: Mapping[Any, Any]) -> dict[str, int]:
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


# --- against the catalog ------------------------------------------------------------------


def _applies(entry: _Entry, gpu: Gpu, strict: bool) -> bool:
    """Whether mig-parted would apply ``entry`` on ``gpu`` (see the module docstring)."""
    if entry.filters is not None:
        return gpu.mig_device_filter.upper() in {f.upper() for f in entry.filters}
    if strict or not any(entry.profiles.values()):
        return True
    return any(_known_on(gpu, name) for name, n in entry.profiles.items() if n > 0)


def _known_on(gpu: Gpu, name: str) -> bool:
    return not isinstance(resolve_profile(gpu, name), str)


def _check_config_on_gpu(
    report: _Report, name: str, cfg: _Config, gpu: Gpu, mode: _Mode, driver: int | None
) -> None:
    applying = [e for e in cfg.entries if _applies(e, gpu, mode.strict)]
    for entry in applying:
        _check_entry_on_gpu(report, name, entry, gpu, driver)
    # An unfiltered entry skipped above names only other GPUs' profiles: the config is meant
    # for another model (mig-parted would fail, not idle), so RP106 does not describe it.
    if applying or not cfg.complete or any(e.filters is None for e in cfg.entries):
        return
    meant = mode.selected or any(_known_on(gpu, p) for e in cfg.entries for p in e.profiles)
    if meant:
        report.add(
            "RP106",
            cfg.path,
            f"no entry of config {name} applies to {gpu.name} (device id "
            f"{gpu.mig_device_filter}); the MIG manager would change nothing on it",
            f"add {gpu.mig_device_filter} to a device-filter",
        )


def _check_profiles_known_somewhere(
    report: _Report, name: str, cfg: _Config, catalog_gpus: list[Gpu]
) -> None:
    """RP103 for the profiles of unfiltered entries that no GPU has (catalog or NVIDIA's list).

    Such an entry applies to no GPU (see `_applies`), so the per-GPU check never sees it;
    without this, ``"1g.11gb": 7`` would pass as "meant for another model".
    """
    for entry in cfg.entries:
        if entry.filters is not None or any(
            _known_on(gpu, p) for gpu in catalog_gpus for p, n in entry.profiles.items() if n
        ):
            continue
        devices_path = join_path(entry.path, "mig-devices")
        for profile, count in sorted(entry.profiles.items()):
            if count > 0 and re.sub(r"^[1-7]c\.", "", profile) not in NVIDIA_PROFILES:
                report.add(
                    "RP103",
                    join_path(devices_path, profile),
                    f"config {name}: {profile} is a MIG profile of no GPU",
                    "list the GPU's profiles with `nvidia-smi mig -lgip` or `railplan catalog`",
                )


def _check_entry_on_gpu(
    report: _Report, name: str, entry: _Entry, gpu: Gpu, driver: int | None
) -> None:
    devices_path = join_path(entry.path, "mig-devices")
    unknown = False
    for profile, count in sorted(entry.profiles.items()):
        problem = resolve_profile(gpu, profile)
        if count > 0 and isinstance(problem, str):
            unknown = True
            report.add("RP103", join_path(devices_path, profile), f"config {name}: {problem}")
    if unknown:
        return
    fit = check_layout(gpu, entry.profiles, driver)
    for problem in fit.problems:
        report.add("RP104", devices_path, f"config {name} on {gpu.name}: {problem}")
