"""Fat trees: the shape (switch counts per tier) and wiring of leaf/spine/core fabrics.

One builder serves every InfiniBand fabric. Callers decide which endpoint port goes to which
leaf port (rail-optimized compute fabric, storage fabric); `fat_tree_shape` then sizes the
upper tiers and `wire_upper_tiers` yields the leaf-spine and spine-core cables.

Shape rules (Al-Fares et al., SIGCOMM 2008, generalised to oversubscribed leaves):

- Two tiers while every leaf can reach every spine: ``leaves <= radix``. Spines are the
  fewest ``S`` that divide a leaf's uplinks (so every leaf has the same number of links to
  every spine and ECMP spreads evenly) with ``leaves * up / S <= radix``.
  NVIDIA's published two-tier sizes follow this rule (3 SUs of H100: 16 spines, not 12).
- Three tiers beyond: leaves are grouped into pods of whole scalable units; a pod has the
  fewest spines that take its leaves' uplinks on half their ports (the other half goes up:
  no spine has more uplinks than downlinks). Leaf ``i``'s uplink ``j`` goes to spine
  ``(i * up + j) mod S``, so every leaf reaches every spine of its pod and link counts differ
  by at most one. Core switches form one group per spine position with the fewest cores
  that take the group's uplinks (cores are filled before another is added); uplinks go
  round robin over the group's cores. The pod size with the fewest switches wins. When the
  counts divide evenly (NVIDIA's three-tier sizes) every pair has the same links; strict
  divisibility everywhere would cost about 10% more switches at radix 40 (1,250 DGX A100:
  1,404 instead of 1,272). A single three-tier fabric holds at most ``radix`` pods; beyond
  that the spec needs planes.

>>> s = fat_tree_shape(leaves=32, up=32, radix=64, leaves_per_su=8)
>>> (s.tiers, s.spines, s.cores, s.links_leaf_spine)
(2, 16, 0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

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
    leaves: int,
    up: int,
    radix: int,
    leaves_per_su: int,
    spines: int | None = None,
    sized_for: int | None = None,
) -> TreeShape:
    """Size a fat tree over ``leaves`` leaves with ``up`` uplinks each.

    Args:
        leaves: leaf switches in this tree (all SUs of one plane).
        up: uplink ports per leaf.
        radix: ports per switch.
        leaves_per_su: leaves of one scalable unit (pods hold whole SUs).
        spines: force this many spines in a two-tier tree (what a user already owns);
            links are then spread as evenly as possible and may be unbalanced.
        sized_for: leaves the upper tiers are built for (growth); the shape keeps its
            tiers, pod size, spines per pod and cores from that size, and holds only the
            pods ``leaves`` fill. Wiring is by position, so growing up to it never moves
            a cable.

    Raises:
        PlanError: the tree needs more than three tiers, or ``spines`` exceeds ``up``.
    """
    if leaves < 1 or up < 1:
        raise PlanError(f"a fat tree needs leaves with uplinks (leaves={leaves}, up={up})")
    if spines is not None and spines > up:
        raise PlanError(
            f"{spines} spines are more than the {up} uplinks of each leaf: "
            f"{spines - up} would get no link",
            path="fabrics.compute.spines",
            hint=f"use at most {up} spines",
        )
    target = max(leaves, sized_for or 0)
    shape = _sized_shape(target, up, radix, leaves_per_su, spines)
    if target == leaves:
        return shape
    pods = math.ceil(leaves / shape.leaves_per_pod) if shape.tiers == 3 else 1
    return replace(shape, leaves=leaves, pods=pods)


def _sized_shape(
    leaves: int, up: int, radix: int, leaves_per_su: int, spines: int | None
) -> TreeShape:
    if spines is not None or leaves <= radix:
        count = spines or _smallest_divisor_at_least(up, leaves * up / radix) or up
        even = up // count if up % count == 0 else 0
        return TreeShape(2, leaves, up, 1, leaves, count, even)
    return _three_tier_shape(leaves, up, radix, leaves_per_su)


def _three_tier_shape(leaves: int, up: int, radix: int, leaves_per_su: int) -> TreeShape:
    half = radix // 2
    if half // leaves_per_su < 1:
        raise PlanError(
            f"one scalable unit has {leaves_per_su} leaves but a {radix}-port spine can "
            f"serve only {half} leaves in a three-tier pod",
            hint="use planes to split the rails, or a larger switch radix",
        )
    shapes = [
        shape
        for k in range(half // leaves_per_su, 0, -1)  # larger pods first: they win ties
        if (shape := _pod_shape(leaves, up, radix, k * leaves_per_su)) is not None
    ]
    if not shapes:
        per_pod = half // leaves_per_su * leaves_per_su
        raise PlanError(
            f"{math.ceil(leaves / per_pod)} pods exceed what one three-tier fabric of "
            f"{radix}-port switches holds ({radix} pods, {radix * per_pod} leaves)",
            hint="split the fabric into independent planes, or use switches of a larger radix",
        )
    return min(shapes, key=lambda t: t.spines + t.cores)


def _pod_shape(leaves: int, up: int, radix: int, per_pod: int) -> TreeShape | None:
    """Pods of ``per_pod`` leaves: the fewest spines and cores that terminate their links.

    A pod's spines take at most half their ports from leaves (the other half goes up), so
    the pod needs ``ceil(per_pod * up / (radix / 2))`` spines; each core group (one per
    spine position) needs its uplinks over ``radix``. Every full pod's spine must reach
    every core of its group, so a group has no more cores than a spine has uplinks.
    """
    pods = math.ceil(leaves / per_pod)
    spines = math.ceil(per_pod * up / (radix // 2))
    if pods > radix or spines > up:
        return None
    group_links = max(
        sum(_spine_down(leaves, up, per_pod, spines, p, s) for p in range(pods))
        for s in range(spines)
    )
    cores = math.ceil(group_links / radix)
    if cores > per_pod * up // spines:
        return None
    even_ls = up // spines if up % spines == 0 else 0
    spine_up = per_pod * up // spines
    even_sc = spine_up // cores if even_ls and spine_up % cores == 0 else 0
    return TreeShape(3, leaves, up, pods, per_pod, spines, even_ls, cores, even_sc)


def _spine_down(leaves: int, up: int, per_pod: int, spines: int, pod: int, spine: int) -> int:
    """Links from pod ``pod``'s leaves to its spine ``spine``.

    Leaf ``i``'s uplink ``j`` goes to spine ``(i * up + j) mod spines``: every leaf reaches
    every spine, and the pod's links are dealt out evenly (counts differ by at most one).
    """
    in_pod = min(per_pod, leaves - pod * per_pod)
    total = in_pod * up
    return total // spines + (1 if spine < total % spines else 0)


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
    per_pod = shape.spines_per_pod
    for leaf in range(shape.leaves):
        pod, local = divmod(leaf, shape.leaves_per_pod)
        for j in range(shape.up):
            position = (local * shape.up + j) % per_pod
            spine = pod * per_pod + position
            if shape.links_leaf_spine:  # balanced: the port follows from the position
                port = local * shape.links_leaf_spine + j // per_pod + 1
            else:
                used[spine] += 1
                port = used[spine]
            yield UpperLink("leaf_spine", leaf, down + j + 1, spine, port)


def _spine_core(shape: TreeShape) -> Iterator[UpperLink]:
    """Yield spine-core cables: one uplink per downlink, round robin over the group's cores.

    Spine ``s`` of every pod feeds core group ``s``; the round robin runs across pods, so
    every core fills evenly and every full pod's spine reaches every core of its group.
    """
    per_pod = shape.spines_per_pod
    spine_down = math.ceil(shape.leaves_per_pod * shape.up / per_pod)
    group = shape.cores_per_group
    next_core = [0] * per_pod
    used = [0] * shape.cores
    for spine in range(shape.spines):
        pod, position = divmod(spine, per_pod)
        links = _spine_down(shape.leaves, shape.up, shape.leaves_per_pod, per_pod, pod, position)
        for m in range(links):
            core = position * group + next_core[position] % group
            next_core[position] += 1
            used[core] += 1
            yield UpperLink("spine_core", spine, spine_down + m + 1, core, used[core])
