"""Growth headroom: where each node group's SUs and leaves sit, and numbered-name order.

Every position in a fabric is kept for the group that owns it. A node group keeps room for
``node_groups[].max_count`` servers (``count`` without it): its SUs take the next
``ceil(max_count / su_size)`` SU positions of the compute fabric, and its storage and
in-band leaves the next leaves of those trees, so a group growing within its maximum fills
its own positions and every group after it keeps its leaves, spine ports, rack units and
addresses. Spines and cores are built for ``fabrics.compute.max_sus``; when it is not set
but a group declares ``max_count``, for the SUs the groups keep. Positions a group keeps but
has not filled have no leaf and no cable; the spines above them are built (for the growth).

`natural_key` orders names with numbers in them as numbers (``st-spine-9`` before
``st-spine-10``): names are identities, and where they are ordered (shared addresses, rack
lists) a new switch numbered past 99 must come after the others, not between 10 and 11.
"""

from __future__ import annotations

import math
import re

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.model import PlanError

__all__ = ["effective_max_sus", "natural_key", "su_offsets", "with_growth"]

_NUMBER = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key for ``name``: digit runs compare as numbers, the rest as text."""
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in _NUMBER.split(name))


def _on_fabric(spec: Spec, catalog: Catalog) -> list[tuple[str, int]]:
    """(group, SU positions it keeps) for each group on the compute fabric, spec order."""
    compute = spec.fabrics.compute
    if compute is None:
        return []
    return [
        (g.name, math.ceil(g.reserved / compute.su_size))
        for g in spec.node_groups
        if g.node in catalog.nodes and catalog.nodes[g.node].compute_hcas
    ]


def su_offsets(spec: Spec, catalog: Catalog) -> dict[str, int]:
    """The first SU position (0-based) of each compute-fabric group: the SUs before it kept."""
    offsets: dict[str, int] = {}
    taken = 0
    for name, kept in _on_fabric(spec, catalog):
        offsets[name] = taken
        taken += kept
    return offsets


def effective_max_sus(spec: Spec, catalog: Catalog) -> int | None:
    """The SUs spines and cores are built for: ``max_sus``, else the SUs groups keep.

    None when neither is declared (the fabric is sized for what is planned).

    Raises:
        PlanError: the groups' declared maxima need more SUs than ``max_sus``.
    """
    compute = spec.fabrics.compute
    if compute is None:
        return None
    kept = sum(n for _, n in _on_fabric(spec, catalog))
    declared = any(g.max_count is not None for g in spec.node_groups)
    if compute.max_sus is None:
        return kept if declared else None
    if declared and kept > compute.max_sus:
        raise PlanError(
            f"the node groups keep {kept} scalable units (count or max_count, each group "
            f"in whole SUs of {compute.su_size}) but the fabric is built for max_sus "
            f"{compute.max_sus}",
            path="fabrics.compute.max_sus",
            hint=f"raise max_sus to at least {kept}, or lower a node group's max_count",
        )
    return compute.max_sus


def with_growth(spec: Spec, catalog: Catalog) -> Spec:
    """``spec`` with ``fabrics.compute.max_sus`` set to `effective_max_sus` (for planning)."""
    compute = spec.fabrics.compute
    max_sus = effective_max_sus(spec, catalog)
    if compute is None or max_sus == compute.max_sus:
        return spec
    fabrics = spec.fabrics.model_copy(
        update={"compute": compute.model_copy(update={"max_sus": max_sus})}
    )
    return spec.model_copy(update={"fabrics": fabrics})
