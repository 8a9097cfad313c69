"""Small helpers the rule modules share: spelling hints and node-group lookups."""

from __future__ import annotations

from collections.abc import Iterator

from infra.catalog import Gpu, Node
from infra.lint.engine import LintContext
from infra.spec import NodeGroup


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
