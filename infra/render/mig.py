"""mig-parted configs from the spec: one named config per distinct `mig` value a group uses.

A node group's `mig` is a layout name (every GPU the same), `disabled`, or a list of
per-GPU assignments. Each distinct value becomes one `version: v1` mig-parted config: a
layout name keeps its name (so a `nvidia.com/mig.config` label or an Ansible variable reads
the same as the spec), `disabled` becomes NVIDIA's `all-disabled`, and a per-GPU list is
named after its group (`group-<name>`). The same configs serve the Ansible `mig` role and,
later, the GPU Operator's MIG manager, so both partition a GPU the same way.
"""

from __future__ import annotations

from typing import Any

from infra.spec import MigAssignment, NodeGroup, Spec

__all__ = ["DISABLED", "mig_config_name", "mig_parted_configs"]

DISABLED = "all-disabled"  # NVIDIA's name for it in config-default.yaml


def mig_config_name(group: NodeGroup) -> str:
    """The mig-parted config a node group applies."""
    if isinstance(group.mig, str):
        return DISABLED if group.mig == "disabled" else group.mig
    return f"group-{group.name.replace('_', '-')}"


def mig_parted_configs(spec: Spec, groups: list[NodeGroup] | None = None) -> dict[str, Any]:
    """A mig-parted ``version: v1`` document holding the configs of ``groups`` (default all)."""
    configs: dict[str, list[dict[str, Any]]] = {}
    for group in spec.node_groups if groups is None else groups:
        configs[mig_config_name(group)] = [
            _entry(spec, assignment) for assignment in group.assignments()
        ]
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}


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
