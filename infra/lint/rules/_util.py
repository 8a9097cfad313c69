"""Small helpers the rule modules share: spelling hints, node-group lookups and MIG states.

MIG states come from `LintContext.migs` (`infra.topology.groups` owns the per-GPU expansion);
nothing here expands a `mig` value itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from infra.catalog import Gpu, Node
from infra.lint.context import LintContext
from infra.spec import MigAssignment, MigValue, NodeGroup
from infra.topology.facts_model import MigState


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
    """One MIG state of a node group, as lint locates it: its `mig` or one scheduled change."""

    group_index: int  # the group's index in node_groups
    group: NodeGroup
    state: MigState

    @property
    def path(self) -> str:
        """Spec path of the value: node_groups[i].mig or ...mig_schedule.changes[j].mig."""
        return self.state.path

    @property
    def value(self) -> MigValue:
        """The value as the spec writes it."""
        return self.state.value

    @property
    def assignments(self) -> tuple[MigAssignment, ...]:
        """The value as per-GPU assignments, in spec order (a plain name covers all GPUs)."""
        return self.state.assignments

    @property
    def layouts(self) -> dict[int, str]:
        """Layout name per GPU index (`disabled` where MIG is off), from the owner's state."""
        return {i: layout or "disabled" for i, layout in enumerate(self.state.per_gpu)}

    @property
    def scheduled(self) -> bool:
        """Whether the value is a `mig_schedule` change rather than the group's `mig`."""
        return self.state.at is not None

    @property
    def label(self) -> str:
        """How messages name the value: ``node group 'infer'`` (plus the change, if one)."""
        where = f" at {self.path.removeprefix(group_path(self.group_index) + '.')}"
        return f"node group {self.group.name!r}" + (where if self.scheduled else "")

    def assignment_path(self, j: int, field: str) -> str:
        """Spec path of assignment ``j``'s ``field`` (the value itself for a plain name)."""
        return self.path if isinstance(self.value, str) else f"{self.path}[{j}].{field}"


def mig_uses(ctx: LintContext) -> Iterator[MigUse]:
    """Every MIG state of every node group: `mig`, then each `mig_schedule` change."""
    for i, (group, mig) in enumerate(zip(ctx.loaded.spec.node_groups, ctx.migs, strict=True)):
        for state in mig.states:
            yield MigUse(i, group, state)


def known_mig_uses(ctx: LintContext) -> Iterator[tuple[MigUse, Node, Gpu]]:
    """`mig_uses` of node groups whose node id is in the catalog, with node and GPU models."""
    for use in mig_uses(ctx):
        node = ctx.catalog.nodes.get(use.group.node)
        if node is not None:
            yield use, node, ctx.catalog.gpus[node.gpu]
