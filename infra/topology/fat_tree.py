"""Fat trees: the shape (switch counts per tier) and wiring of leaf/spine/core fabrics.

One builder serves every InfiniBand fabric. Callers decide which endpoint port goes to which
leaf port (rail-optimized compute fabric, storage fabric); `fat_tree_shape` then sizes the
upper tiers and `wire_upper_tiers` yields the leaf-spine and spine-core cables.

Shape rules (Al-Fares et al., SIGCOMM 2008, generalised to oversubscribed leaves):

- Two tiers while every leaf can reach every spine: ``leaves <= radix``. Spines are the
  fewest ``S`` that divide a leaf's uplinks (so every leaf has the same number of links to
  every spine and ECMP spreads evenly) with ``leaves * up / S <= radix``.
- Three tiers beyond: leaves are grouped into pods of whole scalable units; a pod's spines
  split their ports half down, half up (non-blocking above the leaves). Core switches form
  one group per spine position; a spine's uplinks spread evenly over the cores of its group.
  A single three-tier fabric holds at most ``radix`` pods; beyond that the spec needs planes.

>>> s = fat_tree_shape(leaves=32, up=32, radix=64, leaves_per_su=8)
>>> (s.tiers, s.spines, s.cores, s.links_leaf_spine)
(2, 16, 0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from infra.topology.model import PlanError, Tier

__all__ = ["TreeShape", "UpperLink", "fat_tree_shape", "wire_upper_tiers"]


@dataclass(frozen=True)
class TreeShape:
    """Switch counts and link multiplicities of one fat tree (one plane of one fabric).

    Attributes:
        tiers: 2 or 3.
        leaves: leaf switches.
        up: uplinks per leaf.
        pods: pods (1 for a two-tier tree).
        leaves_per_pod: leaves in a full pod.
        spines_per_pod: spines in each pod (all spines for two tiers).
        links_leaf_spine: cables from one leaf to one spine of its pod; 0 when uneven.
        cores_per_group: core switches per spine position (0 for two tiers).
        links_spine_core: cables from one spine to one core of its group.
    """

    tiers: int
    leaves: int
    up: int
    pods: int
    leaves_per_pod: int
    spines_per_pod: int
    links_leaf_spine: int
    cores_per_group: int = 0
    links_spine_core: int = 0

    @property
    def spines(self) -> int:
        """All spine switches."""
        return self.pods * self.spines_per_pod

    @property
    def cores(self) -> int:
        """All core switches."""
        return self.spines_per_pod * self.cores_per_group

    @property
    def spine_up(self) -> int:
        """Uplinks per spine to the core (three tiers)."""
        return self.cores_per_group * self.links_spine_core


def _smallest_divisor_at_least(n: int, floor: float) -> int | None:
    return next((d for d in range(1, n + 1) if n % d == 0 and d >= floor), None)


def fat_tree_shape(
    leaves: int, up: int, radix: int, leaves_per_su: int, spines: int | None = None
) -> TreeShape:
    """Size a fat tree over ``leaves`` leaves with ``up`` uplinks each.

    Args:
        leaves: leaf switches in this tree (all SUs of one plane).
        up: uplink ports per leaf.
        radix: ports per switch.
        leaves_per_su: leaves of one scalable unit (pods hold whole SUs).
        spines: force this many spines in a two-tier tree (what a user already owns);
            links are then spread as evenly as possible and may be unbalanced.

    Raises:
        PlanError: the tree needs more than three tiers.
    """
    if leaves < 1 or up < 1:
        raise PlanError(f"a fat tree needs leaves with uplinks (leaves={leaves}, up={up})")
    if spines is not None or leaves <= radix:
        count = spines or _smallest_divisor_at_least(up, leaves * up / radix) or up
        even = up // count if up % count == 0 else 0
        return TreeShape(2, leaves, up, 1, leaves, count, even)
    return _three_tier_shape(leaves, up, radix, leaves_per_su)


def _three_tier_shape(leaves: int, up: int, radix: int, leaves_per_su: int) -> TreeShape:
    half = radix // 2
    sus_per_pod = half // leaves_per_su
    if sus_per_pod < 1:
        raise PlanError(
            f"one scalable unit has {leaves_per_su} leaves but a {radix}-port spine can "
            f"serve only {half} leaves in a three-tier pod",
            hint="use planes to split the rails, or a larger switch radix",
        )
    per_pod = sus_per_pod * leaves_per_su
    pods = math.ceil(leaves / per_pod)
    spines_per_pod = _smallest_divisor_at_least(up, per_pod * up / half) or up
    spine_up = per_pod * up // spines_per_pod
    if pods > radix:
        raise PlanError(
            f"{pods} pods exceed what one three-tier fabric of {radix}-port switches holds "
            f"({radix} pods, {radix * per_pod} leaves)",
            hint="split the fabric into independent planes, or use switches of a larger radix",
        )
    cores = _smallest_divisor_at_least(spine_up, pods * spine_up / radix) or spine_up
    return TreeShape(
        3, leaves, up, pods, per_pod, spines_per_pod, up // spines_per_pod, cores, spine_up // cores
    )


@dataclass(frozen=True, slots=True)
class UpperLink:
    """One leaf-spine or spine-core cable, by switch position and port (1-based ports)."""

    tier: Tier
    lower: int  # leaf or spine index within the plane
    lower_port: int
    upper: int  # spine or core index within the plane
    upper_port: int


def wire_upper_tiers(shape: TreeShape, down: int) -> Iterator[UpperLink]:
    """Yield every cable above the leaves; ``down`` is the leaf ports reserved for endpoints.

    Leaf ``i``'s uplink ``j`` (ports ``down+1 .. down+up``) goes to spine ``j mod S`` of its
    pod, so a balanced shape gives every leaf ``up / S`` links to every spine. Spine ``s`` of
    pod ``p`` sends uplink ``m`` to core ``m mod C`` of core group ``s``.
    """
    yield from _leaf_spine(shape, down)
    if shape.tiers == 3:
        yield from _spine_core(shape)


def _leaf_spine(shape: TreeShape, down: int) -> Iterator[UpperLink]:
    used = [0] * shape.spines  # next free down port per spine
    for leaf in range(shape.leaves):
        pod, local = divmod(leaf, shape.leaves_per_pod)
        for j in range(shape.up):
            spine = pod * shape.spines_per_pod + j % shape.spines_per_pod
            if shape.links_leaf_spine:  # balanced: the port follows from the position
                port = local * shape.links_leaf_spine + j // shape.spines_per_pod + 1
            else:
                used[spine] += 1
                port = used[spine]
            yield UpperLink("leaf_spine", leaf, down + j + 1, spine, port)


def _spine_core(shape: TreeShape) -> Iterator[UpperLink]:
    spine_down = shape.leaves_per_pod * shape.links_leaf_spine
    for spine in range(shape.spines):
        pod, position = divmod(spine, shape.spines_per_pod)
        # A partial pod's spines take no more uplinks than they have downlinks.
        leaves = min(shape.leaves_per_pod, shape.leaves - pod * shape.leaves_per_pod)
        for m in range(min(shape.spine_up, leaves * shape.links_leaf_spine)):
            core = position * shape.cores_per_group + m % shape.cores_per_group
            port = pod * shape.links_spine_core + m // shape.cores_per_group + 1
            yield UpperLink("spine_core", spine, spine_down + m + 1, core, port)
