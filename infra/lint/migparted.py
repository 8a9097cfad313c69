"""Checks for mig-parted ``version: v1`` files, the format NVIDIA's MIG manager consumes.

A mig-parted file (``nvidia-mig-parted apply -f FILE -c NAME``; the GPU Operator's
``default-mig-parted-config`` ConfigMap) maps config names to lists of entries; each entry
selects GPUs (``device-filter``, ``devices``) and says whether MIG is on and which profiles to
create. These checks are lint `Rule`s over a `MigPartedContext` (the file, the catalog GPUs and
the user's narrowing), located and reported by the lint engine like the spec rules. Reading the
file against mig-parted's schema (RP101, RP102) is `infra.lint.migparted_read`.

Then each valid entry is checked against each selected catalog GPU it applies to: every profile must
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

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from infra.catalog.mig import check_layout, resolve_profile
from infra.catalog.models import Gpu
from infra.errors import RailplanError, spelling_hint
from infra.lint.engine import all_rules, run_rules, subject_rule
from infra.lint.finding import Finding, Severity, Violation
from infra.lint.migparted_read import Config, Entry, read_file
from infra.spec.yamlpos import SourceMap, join_path

__all__ = ["MIG_CHECKS", "MIG_SEVERITY", "MigPartedContext", "check_mig_parted"]

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


class MigPartedContext:
    """What the RP1xx rules check: one parsed mig-parted file, the GPUs, the user's narrowing.

    The file is read once (on first use) into its valid configs, so the schema rules and the
    rules against the catalog share one reading.
    """

    def __init__(
        self,
        data: Any,
        source: SourceMap,
        catalog_gpus: Mapping[str, Gpu],
        gpu_id: str | None = None,
        config: str | None = None,
        driver_branch: int | None = None,
    ) -> None:
        self.data = data
        self.source = source
        self.catalog_gpus = [catalog_gpus[k] for k in sorted(catalog_gpus)]
        self.gpus = _select_gpus(catalog_gpus, gpu_id)
        self.config = config
        self.driver_branch = driver_branch
        self.mode = _Mode(
            strict=gpu_id is not None and config is not None, selected=config is not None
        )

    @functools.cached_property
    def _read(self) -> tuple[dict[str, Config] | None, list[tuple[str, Violation]]]:
        return read_file(self.data)

    def read_problems(self, rule: str) -> Iterator[Violation]:
        """What reading the file found against ``rule`` (RP101 or RP102)."""
        return (v for r, v in self._read[1] if r == rule)

    @property
    def all_configs(self) -> dict[str, Config] | None:
        """Every config of the file (``None`` when the file has none to check)."""
        return self._read[0]

    @property
    def configs(self) -> list[tuple[str, Config]]:
        """The configs to check against the GPUs (the selected one only), by name."""
        configs = self.all_configs or {}
        return sorted((k, v) for k, v in configs.items() if self.config in (None, k))

    def applying(self) -> Iterator[tuple[str, Entry, Gpu]]:
        """Every (config name, entry, GPU) where mig-parted would apply the entry."""
        for gpu in self.gpus:
            for name, cfg in self.configs:
                for entry in cfg.entries:
                    if _applies(entry, gpu, self.mode.strict):
                        yield name, entry, gpu


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
    ctx = MigPartedContext(data, source, catalog_gpus, gpu_id, config, driver_branch)
    return run_rules(ctx, all_rules(MigPartedContext))


def _select_gpus(catalog_gpus: Mapping[str, Gpu], gpu_id: str | None) -> list[Gpu]:
    if gpu_id is None:
        return [catalog_gpus[k] for k in sorted(catalog_gpus)]
    if gpu_id not in catalog_gpus:
        hint = spelling_hint(gpu_id, catalog_gpus)
        raise RailplanError(f"unknown GPU {gpu_id!r}", hint=hint)
    return [catalog_gpus[gpu_id]]


# --- against the catalog ------------------------------------------------------------------


def _applies(entry: Entry, gpu: Gpu, strict: bool) -> bool:
    """Whether mig-parted would apply ``entry`` on ``gpu`` (see the module docstring)."""
    if entry.filters is not None:
        return gpu.mig_device_filter.upper() in {f.upper() for f in entry.filters}
    if strict or not any(entry.profiles.values()):
        return True
    return any(_known_on(gpu, name) for name, n in entry.profiles.items() if n > 0)


def _known_on(gpu: Gpu, name: str) -> bool:
    return not isinstance(resolve_profile(gpu, name), str)


def _mig_rule(
    rule_id: str, name: str, summary: str, doc: str, severity: Severity = Severity.ERROR
) -> Callable[[_MigCheck], _MigCheck]:
    return subject_rule(MigPartedContext, rule_id, name, severity, summary, doc=doc)


_MigCheck = Callable[[MigPartedContext], Iterable[Violation]]


@_mig_rule(
    "RP101",
    "mig-parted-schema",
    "The file follows mig-parted's v1 schema.",
    "nvidia-mig-parted and the GPU Operator's MIG manager refuse a file that does not "
    "parse as `version: v1` (unknown or misspelt fields, a missing `devices` or "
    "`mig-enabled`, `mig-devices` missing while MIG is enabled or present while it is "
    "disabled, counts that are negative or all zero, malformed profile names); the node "
    "is then left in its old MIG state and labelled failed. Fix the field the finding "
    "names; the hint suggests the closest valid spelling.",
)
def _schema(ctx: MigPartedContext) -> Iterable[Violation]:
    return ctx.read_problems("RP101")


@_mig_rule(
    "RP102",
    "mig-parted-device-filter",
    "Every device-filter is a PCI id `0x<device><vendor 10DE>`.",
    "A device-filter selects GPUs by PCI device and vendor id, written as 8 hex digits "
    "after `0x` with NVIDIA's vendor id 10DE last (A100-SXM4-40GB is `0x20B010DE`), "
    "optionally followed by `:0x<subsystem>`. A malformed or non-NVIDIA id matches no GPU, "
    "so the entry silently never applies. Copy the ids from `lspci -nn -d 10de:` or from "
    "NVIDIA's default config.",
)
def _device_filter(ctx: MigPartedContext) -> Iterable[Violation]:
    return ctx.read_problems("RP102")


@_mig_rule(
    "RP103",
    "mig-parted-profile-unknown",
    "Every profile in an entry is a MIG profile of the GPUs it applies to.",
    "Profile names carry the GPU's memory size (`1g.5gb` on A100-40GB is `1g.10gb` on "
    "A100-80GB and H100, `1g.18gb` on H200), so a name copied from another GPU model "
    "makes mig-parted fail on every node of this model. Use the GPU's own profile names "
    "(`nvidia-smi mig -lgip`), or add a device-filter so the entry only applies to the "
    "model it was written for.",
)
def _profile_unknown(ctx: MigPartedContext) -> Iterator[Violation]:
    for name, entry, gpu in ctx.applying():
        for profile, count in sorted(entry.profiles.items()):
            problem = resolve_profile(gpu, profile)
            if count > 0 and isinstance(problem, str):
                path = join_path(join_path(entry.path, "mig-devices"), profile)
                yield Violation(path, f"config {name}: {problem}")
    for name, cfg in ctx.configs:
        yield from _unknown_everywhere(name, cfg, ctx.catalog_gpus)


def _unknown_everywhere(name: str, cfg: Config, catalog_gpus: list[Gpu]) -> Iterator[Violation]:
    """The profiles of unfiltered entries that no GPU has (catalog or NVIDIA's list).

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
                yield Violation(
                    join_path(devices_path, profile),
                    f"config {name}: {profile} is a MIG profile of no GPU",
                    "list the GPU's profiles with `nvidia-smi mig -lgip` or `railplan catalog`",
                )


@_mig_rule(
    "RP104",
    "mig-parted-does-not-fit",
    "The profile counts of an entry fit on one GPU.",
    "MIG GPU instances occupy fixed memory-slice placements: no more than a profile's "
    "maximum count, at most 7 instances, no overlapping slices, and 4g + 3g only from "
    "driver R510. A layout that cannot be placed fails on the node after MIG mode was "
    "already switched. Reduce the counts or pick smaller profiles; the message names the "
    "rule broken.",
)
def _does_not_fit(ctx: MigPartedContext) -> Iterator[Violation]:
    for name, entry, gpu in ctx.applying():
        if any(n > 0 and not _known_on(gpu, p) for p, n in entry.profiles.items()):
            continue  # RP103 reports the entry; its layout means nothing on this GPU
        fit = check_layout(gpu, entry.profiles, ctx.driver_branch)
        for problem in fit.problems:
            path = join_path(entry.path, "mig-devices")
            yield Violation(path, f"config {name} on {gpu.name}: {problem}")


@_mig_rule(
    "RP105",
    "mig-parted-config-missing",
    "The selected config exists in the file.",
    "Nodes select a config by name (label `nvidia.com/mig.config=NAME`, or "
    "`nvidia-mig-parted apply -c NAME`); a name that is not a key of `mig-configs` makes "
    "the MIG manager fail. Fix the name (the hint suggests the closest one) or add the "
    "config.",
)
def _config_missing(ctx: MigPartedContext) -> Iterator[Violation]:
    configs = ctx.all_configs
    if ctx.config is not None and configs is not None and ctx.config not in configs:
        hint = spelling_hint(ctx.config, configs, "configs")
        yield Violation("mig-configs", f"config {ctx.config!r} is not in the file", hint)


@_mig_rule(
    "RP106",
    "mig-parted-no-entry-applies",
    "Some entry of a config applies to each selected GPU.",
    "When every entry of a config has a device-filter that excludes a GPU model, the MIG "
    "manager changes nothing on that model's nodes, which keep their previous MIG "
    "layout. Add the GPU's device id to a filter, or add an entry "
    "for it.",
    Severity.WARNING,
)
def _no_entry_applies(ctx: MigPartedContext) -> Iterator[Violation]:
    for gpu in ctx.gpus:
        for name, cfg in ctx.configs:
            if _idle_on(cfg, gpu, ctx.mode):
                yield Violation(
                    cfg.path,
                    f"no entry of config {name} applies to {gpu.name} (device id "
                    f"{gpu.mig_device_filter}); the MIG manager would change nothing on it",
                    f"add {gpu.mig_device_filter} to a device-filter",
                )


def _idle_on(cfg: Config, gpu: Gpu, mode: _Mode) -> bool:
    """Whether the config is meant for ``gpu`` but every entry's device-filter excludes it."""
    # An unfiltered entry that does not apply names only other GPUs' profiles: the config is
    # meant for another model (mig-parted would fail, not idle), so RP106 does not describe it.
    if not cfg.complete or any(e.filters is None for e in cfg.entries):
        return False
    if any(_applies(e, gpu, mode.strict) for e in cfg.entries):
        return False
    return mode.selected or any(_known_on(gpu, p) for e in cfg.entries for p in e.profiles)


MIG_CHECKS: dict[str, tuple[str, str, str]] = {
    r.id: (r.name, r.summary, r.doc) for r in all_rules(MigPartedContext)
}
"""Rule id -> (name, one-line summary, doc: why it matters and how to fix it)."""

MIG_SEVERITY: dict[str, Severity] = {r.id: r.severity for r in all_rules(MigPartedContext)}
"""Rule id -> the severity of its findings."""
