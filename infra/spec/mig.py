"""The spec's MIG sections: layouts, a group's assignments and its time-based schedule.

A MIG layout is a set of instances created on one GPU (it becomes a mig-parted config); a node
group assigns layouts to some or all of its GPUs, and may change them on a cron schedule (one
Kubernetes CronJob per change, draining an SU at a time). The bounds here are the ones the
rendered `mig-change.sh` checks before it cordons anything.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from typing import Annotated, Literal

from pydantic import Field, field_validator

from infra.errors import HintedValueError, spelling_hint
from infra.spec.base import ONE_LINE_OR_EMPTY, StrictModel, TextRule, repeated
from infra.spec.cron import cron_fields, cron_fields_valid, cron_hint, never_fires
from infra.spec.scheduling import Duration, duration_seconds

MIG_PROFILE = r"^([1-7]c\.)?[1-7]g\.[0-9]+gb(\+me|\+me\.all|\+gfx|-me)?$"
# A MIG change's drain timeout: the bound mig-change.sh checks DRAIN_TIMEOUT against.
MAX_DRAIN_S = 86_400
# mig-change.sh refuses a ROLLING_BATCH_SUS above this before it cordons anything
MAX_ROLLING_BATCH_SUS = 1024

# The mig-parted configs railplan names itself (infra.topology.migconfig): NVIDIA's
# `all-disabled` for `disabled`, and `group-<group>[-change<N>]` for a group's per-GPU list.
# A layout keeps its own name as a config, so a layout of one of these names would share a
# config name with another body (in the ConfigMap, a node label, an Ansible variable): the
# loader refuses such a layout name (`reserved_layout`).
DISABLED_CONFIG = "all-disabled"  # NVIDIA's name for it in config-default.yaml
MIG_OFF = "disabled"  # a group's `mig` (or a change's) that means no MIG
GROUP_CONFIG_PREFIX = "group-"
RESERVED_LAYOUT_HINT = (
    f"rename the layout; `{MIG_OFF}` means MIG off, and railplan names its own mig-parted "
    f"configs {DISABLED_CONFIG} (for `{MIG_OFF}`) and {GROUP_CONFIG_PREFIX}<node group>"
    "[-change<N>] (for a per-GPU list)"
)


def group_config_name(group: str, change: int | None = None) -> str:
    """The config of a group's per-GPU list: ``group-infer``, ``group-infer-change2``."""
    suffix = "" if change is None else f"-change{change + 1}"
    return f"{GROUP_CONFIG_PREFIX}{group.replace('_', '-')}{suffix}"


def reserved_layout(name: str) -> bool:
    """Whether a layout of this name could meet a config railplan names itself.

    The spec's own word ``disabled`` (a group's `mig` without MIG) is reserved too: a layout
    of that name was never used, since ``mig: disabled`` means MIG off.

    >>> [reserved_layout(n) for n in ("all-disabled", "group-infer", "disabled", "infer-day")]
    [True, True, True, False]
    """
    return name in (DISABLED_CONFIG, MIG_OFF) or name.startswith(GROUP_CONFIG_PREFIX)


class MigAssignment(StrictModel):
    """One MIG layout applied to some GPUs of every node in a group."""

    gpus: Literal["all"] | list[Annotated[int, Field(ge=0, le=15)]] = Field(
        "all", description="GPU indices on the node, or `all`."
    )
    layout: str = Field(
        description="A key of `mig_layouts`, or `disabled` to leave these GPUs MIG-disabled."
    )

    @field_validator("gpus")
    @classmethod
    def _unique_gpus(cls, v: Literal["all"] | list[int]) -> Literal["all"] | list[int]:
        if isinstance(v, list) and len(set(v)) != len(v):
            raise ValueError("GPU indices must be unique")
        return v


MigValue = str | list[MigAssignment]


class MigChange(StrictModel):
    """One change of a MIG schedule: at a cron time, the group's GPUs take a new `mig` value."""

    at: str = Field(
        max_length=100,
        description='Cron schedule (five fields, or a macro such as `@daily`), e.g. `"0 8 * * *"`.',
    )
    mig: MigValue = Field(
        description="MIG from then on: a key of `mig_layouts`, `disabled`, or per-GPU list."
    )

    @field_validator("at")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        if not cron_fields_valid(v):
            raise HintedValueError(
                f"{v!r} is not a cron schedule: five fields (minute hour day-of-month month "
                'day-of-week), e.g. "0 20 * * *", or a macro such as @daily',
                hint=cron_hint(v),
            )
        if never_fires(v):  # valid to Kubernetes, and the change it schedules never happens
            raise HintedValueError(
                f"{v!r} never fires: no date has that day of the month in those months",
                hint="February has at most 29 days, and April, June, September and November "
                "30: pick a day every chosen month has",
            )
        return v


class MigSchedule(StrictModel):
    """Time-based re-partitioning of a group's GPUs (Kubernetes: one CronJob per change)."""

    timezone: str = Field(
        "Etc/UTC",
        max_length=64,
        description="IANA time zone the cron times are in, e.g. `Europe/Berlin`.",
    )
    drain_timeout: Duration = Field(
        "30m", description="How long GPU pods get to finish before a change goes ahead."
    )
    changes: list[MigChange] = Field(
        min_length=1, max_length=48, description="The changes, each at its own time."
    )
    rolling_batch_sus: int = Field(
        1,
        ge=1,
        le=MAX_ROLLING_BATCH_SUS,
        description="How many of the group's SUs one change drains and re-partitions at once, "
        "in plan order (default 1: one SU's jobs and leaf domain down at a time). A change "
        "of n SUs runs ceil(n / rolling_batch_sus) batches of drain_timeout + 15 min MIG "
        "reconfiguration + 10 min margin each.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        if v not in _time_zones():
            raise HintedValueError(
                f"{v!r} is not an IANA time zone name (e.g. Europe/Berlin, Etc/UTC)",
                hint=_zone_hint(v),
            )
        return v

    @field_validator("drain_timeout")
    @classmethod
    def _drain_within_a_day(cls, v: str) -> str:
        # mig-change.sh refuses DRAIN_TIMEOUT above 86400 s before it cordons anything
        if duration_seconds(v) > MAX_DRAIN_S:
            raise ValueError(f"drain_timeout {v} is longer than {MAX_DRAIN_S // 3600}h")
        return v

    @field_validator("changes")
    @classmethod
    def _distinct_times(cls, changes: list[MigChange]) -> list[MigChange]:
        times = [" ".join(cron_fields(c.at)) for c in changes]
        twice = repeated(times)
        if twice:
            raise ValueError(f"two changes at the same time: {', '.join(twice)}")
        return changes


@functools.cache
def _time_zones() -> frozenset[str]:
    # `localtime` and `posixrules` are files of a host's zoneinfo directory, not IANA zones:
    # a CronJob's timeZone is read from Go's own database, which has neither, and lint would
    # judge daylight saving by the host running it.
    return frozenset(zoneinfo.available_timezones()) - {"localtime", "posixrules"}


_UTC_OFFSET = re.compile(r"^(?:UTC|GMT)\s*([+-])\s*0?(\d{1,2})(?::?00)?\Z", re.IGNORECASE)


def _zone_hint(name: str) -> str:
    """The zone ``name`` probably means, or where the names are listed."""
    offset = _UTC_OFFSET.match(name.strip())
    if offset:  # UTC+2 is Etc/GMT-2: POSIX signs, west positive
        sign, hours = "-" if offset.group(1) == "+" else "+", int(offset.group(2))
        return f"a fixed offset is an Etc zone with the sign reversed: Etc/GMT{sign}{hours}"
    near = spelling_hint(name.strip(), _time_zones(), "") if len(name) <= 64 else ""
    if near.startswith("did you mean"):
        return near
    return (
        "write a zone of the IANA database as Area/City (`timedatectl list-timezones` lists "
        "them); a fixed offset is Etc/GMT-2 for UTC+2 (the sign is reversed)"
    )


def assignments_of(value: MigValue) -> list[MigAssignment]:
    """A `mig` value as a list of assignments (a plain name covers all GPUs)."""
    if isinstance(value, str):
        return [MigAssignment(gpus="all", layout=value)]
    return list(value)


# --- MIG layouts ----------------------------------------------------------------------------


class MigLayout(StrictModel):
    """A set of MIG instances created on one GPU (becomes a mig-parted config)."""

    profiles: dict[
        Annotated[str, Field(pattern=MIG_PROFILE)], Annotated[int, Field(ge=0, le=64)]
    ] = Field(description='MIG profile name -> instances per GPU, e.g. `{"1g.10gb": 7}`.')
    description: Annotated[str, TextRule] = Field(
        "",
        max_length=200,
        pattern=ONE_LINE_OR_EMPTY,  # it reaches the HTML report and diff's output
        description="Free text for reviewers: one line, no control characters.",
    )

    @field_validator("profiles")
    @classmethod
    def _some_instance(cls, v: dict[str, int]) -> dict[str, int]:
        if not any(v.values()):
            raise ValueError("a MIG layout needs at least one profile with a count above 0")
        return v
