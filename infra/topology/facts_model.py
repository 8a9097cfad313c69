"""The typed, frozen record of what the spec means: ``plan.facts`` and its parts.

This module owns the records `infra.topology.facts.cluster_facts` fills (and the planner's
own records of the same facts reuse): per node group its NICs, SUs, rolling batch, MIG over
time (`MigState`, `MigTimes`, `GroupMig`) and whether Slurm may power it off
(`GroupFacts`); per fabric its shape as built (`FabricGeometry`) and SHARP as one value
(`FabricFacts`, `SharpState`); the control hosts and which servers stay powered on, and
why (`ControlFacts`, `KeptReason`); and all of it together (`ClusterFacts`). The physical
plan that carries it is `infra.topology.model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from infra.spec import MigAssignment, MigValue

__all__ = [
    "ClusterFacts",
    "ControlFacts",
    "FabricFacts",
    "FabricGeometry",
    "GroupFacts",
    "GroupMig",
    "KeptReason",
    "MigState",
    "MigTimes",
    "SharpState",
    "SuFacts",
]


@dataclass(frozen=True, slots=True)
class MigState:
    """One MIG state of a node group: the group's `mig`, or one change of its `mig_schedule`.

    Attributes:
        path: spec path of the value (``node_groups[0].mig``, ``...mig_schedule.changes[1].mig``).
        at: the change's cron expression as written; None for the group's `mig`.
        daily_minute: minute of the day (local time) of a change that fires once every day,
            else None (`infra.spec.cron.daily_minute`).
        config: the mig-parted config that applies it (`infra.topology.migconfig`).
        per_gpu: layout name per GPU (index = GPU), None where MIG is disabled.
        value: the spec's value; assignments: the same as per-GPU assignments, in spec order.
    """

    path: str
    at: str | None
    daily_minute: int | None
    config: str
    per_gpu: tuple[str | None, ...]
    value: MigValue
    assignments: tuple[MigAssignment, ...]

    @property
    def splits(self) -> bool:
        """Whether this state splits some GPU into MIG instances."""
        return any(layout is not None for layout in self.per_gpu)


@dataclass(frozen=True, slots=True)
class MigTimes:
    """A `mig_schedule`'s timing: time zone of its cron times, each change's drain and batch."""

    timezone: str
    drain_timeout: str  # as written, e.g. ``30m``
    drain_s: int
    rolling_batch_sus: int = 1  # SUs a change takes at once


@dataclass(frozen=True, slots=True)
class GroupMig:
    """A node group's MIG over time: `mig`, then each scheduled change, and the timing."""

    states: tuple[MigState, ...]  # [0] is `mig`; the rest the schedule's changes in spec order
    schedule: MigTimes | None

    @property
    def now(self) -> MigState:
        """The group's `mig` (until the first scheduled change)."""
        return self.states[0]

    @property
    def changes(self) -> tuple[MigState, ...]:
        """The scheduled changes, in spec order."""
        return self.states[1:]

    @property
    def split(self) -> bool:
        """Whether a GPU of the group is MIG-split now or after any scheduled change."""
        return any(state.splits for state in self.states)


@dataclass(frozen=True, slots=True)
class FabricGeometry:
    """The shape of a compute fabric as built, from plain numbers.

    One function works it out (`infra.topology.fabric_geometry.compute_geometry`): the
    planner builds the fabric from it and the performance models (`railplan predict`,
    budgets) read it without planning, so the two cannot disagree. ``tiers`` is 1 for a
    fabric that fits one switch; ``spines`` and ``cores`` count one plane's switches.

    Attributes:
        tiers: 1 (one switch), 2 or 3.
        planes: independent fat trees the rails are split into.
        sus: scalable units planned.
        rails: leaves of one SU in each plane (NICs per server per plane).
        down: leaf ports to servers (``su_size``).
        up: uplinks per leaf (0 on one switch).
        pods: pods of a three-tier plane (1 for two tiers, 0 on one switch).
        sus_per_pod: SUs of a full pod (three tiers); every SU the fabric is built for
            otherwise.
        spines: spine switches of one plane.
        cores: core switches of one plane.
        oversubscription: the leaves' down:up ratio as built (1 on one switch).
    """

    tiers: int
    planes: int
    sus: int
    rails: int
    down: int
    up: int
    pods: int
    sus_per_pod: int
    spines: int
    cores: int
    oversubscription: float


KeptReason = Literal[
    "slurm controller", "subnet manager", "excluded group", "no BMC address", "cloud instance"
]

SharpState = Literal["off", "asked", "usable"]


@dataclass(frozen=True, slots=True)
class SuFacts:
    """One scalable unit of a node group: its name and its number in the group (1-based)."""

    name: str
    number: int


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One node group, as every later stage reads it.

    Attributes:
        name, index, node: the group's name, place in ``node_groups`` and catalog node.
        nics: compute NICs per server (the group's ``compute_nics.count``, else the node's).
        nic_gbps: the rate each NIC gets from the compute fabric (`group_nic_gbps`).
        sus: its scalable units in plan order (empty off the compute fabric).
        rolling_batch: servers per batch of a rolling change (`infra.topology.groups`).
        mig: its MIG states now and at each scheduled change.
        power_off: whether Slurm power saving may power its servers off at all (on, and the
            group not in ``exclude_groups``); servers may still be kept on one by one.
    """

    name: str
    index: int
    node: str
    nics: int
    nic_gbps: float
    sus: tuple[SuFacts, ...]
    rolling_batch: int
    mig: GroupMig
    power_off: bool


@dataclass(frozen=True, slots=True)
class FabricFacts:
    """A fabric's meaning: its shape as built (compute only) and SHARP as one value."""

    name: str
    geometry: FabricGeometry | None
    sharp: SharpState


@dataclass(frozen=True, slots=True)
class ControlFacts:
    """Facts that need the planned servers: control hosts and power-off eligibility.

    Empty (every field at its default) when the facts were built without servers.

    Attributes:
        controller: the slurmctld host (Slurm specs), else None.
        subnet_managers: OpenSM master then standby (OpenSM fabrics), else empty.
        kept_on: every server never powered off, with why, in plan order.
        may_power_off: the servers Slurm may power off, in plan order (none without
            power saving).
    """

    controller: str | None = None
    subnet_managers: tuple[str, ...] = ()
    kept_on: tuple[tuple[str, KeptReason], ...] = ()
    may_power_off: tuple[str, ...] = ()

    @property
    def standby_subnet_manager(self) -> str | None:
        """The standby OpenSM host, or None."""
        return self.subnet_managers[1] if len(self.subnet_managers) > 1 else None


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the spec means: per group, per fabric, and (when planned) the control hosts."""

    groups: Mapping[str, GroupFacts]
    fabrics: Mapping[str, FabricFacts]
    control: ControlFacts  # empty when built without planned servers
    planned: bool  # whether ``control`` comes from planned servers

    def sharp(self, fabric: str = "compute") -> SharpState:
        """SHARP on ``fabric``: ``off`` when the fabric is absent."""
        facts = self.fabrics.get(fabric)
        return facts.sharp if facts is not None else "off"
