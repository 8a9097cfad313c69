"""Small helpers the rule modules share: spelling hints, node-group lookups and MIG values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from infra.catalog import Gpu, Node
from infra.lint.context import LintContext
from infra.spec import MigAssignment, MigValue, NodeGroup, assignments_of


def group_path(index: int, field: str = "") -> str:
    """Spec path of node group ``index`` (and one of its fields)."""
    base = f"node_groups[{index}]"
    return f"{base}.{field}" if field else base


def known_groups(ctx: LintContext) -> Iterator[tuple[int, NodeGroup, Node, Gpu]]:
    """Node groups whose node id is in the catalog, with their node and GPU models."""
    for i, group in enumerate(ctx.loaded.spec.node_groups):
        node = ctx.catalog.nodes.get(group.node)
        if node is not None:
            yield i, group, node, ctx.catalog.gpus[node.gpu]


class MigUse(NamedTuple):
    """One `mig` value a node group takes: its `mig`, or one change of its `mig_schedule`."""

    group_index: int  # the group's index in node_groups
    group: NodeGroup
    path: str  # spec path of the value: node_groups[i].mig or ...mig_schedule.changes[j].mig
    value: MigValue

    @property
    def assignments(self) -> list[MigAssignment]:
        """The value as per-GPU assignments (a plain name covers all GPUs)."""
        return assignments_of(self.value)

    @property
    def scheduled(self) -> bool:
        """Whether the value is a `mig_schedule` change rather than the group's `mig`."""
        return self.path != group_path(self.group_index, "mig")

    @property
    def label(self) -> str:
        """How messages name the value: ``node group 'infer'`` (plus the change, if one)."""
        where = f" at {self.path.removeprefix(group_path(self.group_index) + '.')}"
        return f"node group {self.group.name!r}" + (where if self.scheduled else "")

    def assignment_path(self, j: int, field: str) -> str:
        """Spec path of assignment ``j``'s ``field`` (the value itself for a plain name)."""
        return self.path if isinstance(self.value, str) else f"{self.path}[{j}].{field}"


def mig_uses(ctx: LintContext) -> Iterator[MigUse]:
    """Every `mig` value of every node group: `mig`, then each `mig_schedule` change."""
    for i, group in enumerate(ctx.loaded.spec.node_groups):
        for suffix, value in group.mig_values():
            yield MigUse(i, group, group_path(i, suffix), value)


def known_mig_uses(ctx: LintContext) -> Iterator[tuple[MigUse, Node, Gpu]]:
    """`mig_uses` of node groups whose node id is in the catalog, with node and GPU models."""
    for use in mig_uses(ctx):
        node = ctx.catalog.nodes.get(use.group.node)
        if node is not None:
            yield use, node, ctx.catalog.gpus[node.gpu]


def gpu_layouts(assignments: list[MigAssignment], gpus: int) -> dict[int, str]:
    """Layout name per GPU index of a ``gpus``-GPU node (`disabled` where none covers it)."""
    per_gpu = dict.fromkeys(range(gpus), "disabled")
    for assignment in assignments:
        indices = range(gpus) if assignment.gpus == "all" else assignment.gpus
        for index in indices:
            if index < gpus:
                per_gpu[index] = assignment.layout
    return per_gpu
