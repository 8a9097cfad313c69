"""mig-parted configs from the spec: one named config per distinct `mig` value a group uses.

A node group's `mig` (and each change of its `mig_schedule`) is a layout name (every GPU the
same), `disabled`, or a list of per-GPU assignments. Each distinct value becomes one
`version: v1` mig-parted config: a layout name keeps its name (so a `nvidia.com/mig.config`
label or an Ansible variable reads the same as the spec), `disabled` becomes NVIDIA's
`all-disabled`, and a per-GPU list is named after its group (`group-<name>`, and
`group-<name>-change<N>` for the N-th scheduled change). The same configs serve the Ansible `mig` role and,
later, the GPU Operator's MIG manager, so both partition a GPU the same way. The generated
names come from infra.spec.mig, whose loader refuses a layout named like one of them.
"""

from __future__ import annotations

from typing import Any

from infra.spec import MigAssignment, MigValue, NodeGroup, Spec, assignments_of
from infra.spec.mig import DISABLED_CONFIG, group_config_name

__all__ = ["DISABLED", "mig_config_name", "mig_parted_configs"]

DISABLED = DISABLED_CONFIG  # NVIDIA's name; layouts cannot take it (infra.spec.mig)


def mig_config_name(group: NodeGroup, change: int | None = None) -> str:
    """The mig-parted config a node group applies: its `mig`, or scheduled change ``change``."""
    value = group.mig if change is None or group.mig_schedule is None else _change(group, change)
    if isinstance(value, str):
        return DISABLED if value == "disabled" else value
    return group_config_name(group.name, change)


def _change(group: NodeGroup, change: int) -> MigValue:
    assert group.mig_schedule is not None
    return group.mig_schedule.changes[change].mig


def mig_parted_configs(
    spec: Spec, groups: list[NodeGroup] | None = None, schedules: bool = False
) -> dict[str, Any]:
    """A mig-parted ``version: v1`` document holding the configs of ``groups`` (default all).

    Each group's `mig`, and with ``schedules`` every value its `mig_schedule` changes to.
    """
    configs: dict[str, list[dict[str, Any]]] = {}
    for group in spec.node_groups if groups is None else groups:
        configs[mig_config_name(group)] = _entries(spec, group.mig)
        changes = group.mig_schedule.changes if schedules and group.mig_schedule else ()
        for k, change in enumerate(changes):
            configs[mig_config_name(group, k)] = _entries(spec, change.mig)
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}


def _entries(spec: Spec, value: MigValue) -> list[dict[str, Any]]:
    return [_entry(spec, assignment) for assignment in assignments_of(value)]


def _entry(spec: Spec, assignment: MigAssignment) -> dict[str, Any]:
    devices: str | list[int] = (
        assignment.gpus if assignment.gpus == "all" else sorted(assignment.gpus)
    )
    if assignment.layout == "disabled":
        return {"devices": devices, "mig-enabled": False}
    profiles = spec.mig_layouts[assignment.layout].profiles
    return {
        "devices": devices,
        "mig-enabled": True,
        "mig-devices": {name: count for name, count in sorted(profiles.items()) if count},
    }
