"""Unplaced plan parts: switches and links as the fabric planners emit them, before racks.

Fabric planners (compute, storage, in-band, out-of-band) say what exists and how it is
wired; `infra.topology.plan` then places switches into racks, gives every device an
address, and turns each `Link` into a `Cable` with both ends' rack, unit, medium and
length. Keeping the two apart lets each planner stay a pure function of its inputs.
This module also owns the fabric arithmetic every planner shares: the lower bound on
switches, port use per tier and the bisection across the worst equal split.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from infra.topology.model import FabricName, SwitchTier, Tier, TierUse
from infra.topology.record_maker import maker

__all__ = [
    "LeafLoad",
    "Link",
    "SwitchPart",
    "bisection_links",
    "half_cut",
    "link_ends",
    "make_link",
    "port_text",
    "switch_lower_bound",
    "switch_max_flow",
    "tier_use",
]


@dataclass(frozen=True, slots=True)
class SwitchPart:
    """A switch before placement; ``zone`` says which racks it belongs with."""

    name: str
    fabric: FabricName
    tier: SwitchTier
    model: str
    plane: int
    pod: int | None
    su: str | None
    rail: int | None
    zone: str  # an SU name (its network racks), or a shared row such as "core"


@dataclass(frozen=True, slots=True)
class Link:
    """One cable by its ends, before racks and lengths are known."""

    fabric: FabricName
    tier: Tier
    a: str
    a_port: str
    b: str
    b_port: str
    gbps: float


make_link = maker(Link)  # `Link(...)`, faster: a large plan makes half a million


@functools.cache
def port_text(port: int) -> str:
    """A port number as a `Link` carries it, one string per number.

    Shared by every cable on that port: a large plan has a million cable ends and a few
    hundred port numbers.
    """
    return str(port)


def switch_lower_bound(leaves: int, up: int, radix: int, tiers: int) -> int:
    """The fewest switches any fat tree over ``leaves`` leaves with ``up`` uplinks can have.

    Two tiers: the spines must terminate every leaf uplink (``leaves * up / radix``).
    Three tiers: a spine that neither adds nor removes oversubscription gives at most half
    its ports to leaves, and the cores must terminate the spines' uplinks.
    """
    if tiers <= 1 or leaves <= 1:
        return leaves
    if tiers == 2:
        return leaves + math.ceil(leaves * up / radix)
    return leaves + math.ceil(2 * leaves * up / radix) + math.ceil(leaves * up / radix)


def tier_use(
    tier: SwitchTier, switches: Sequence[str], ends: Mapping[str, int], radix: int
) -> TierUse:
    """Ports in use on ``switches`` against their radix.

    ``ends``: the `link_ends` of the fabric's links, counted once for every tier.
    """
    names = set(switches)
    used = sum(ends.get(name, 0) for name in names)
    return TierUse(tier, len(names), used, len(names) * radix)


def link_ends(links: Iterable[Link]) -> Counter[str]:
    """Device -> how many link ends it has."""
    links = list(links)
    ends = Counter(map(attrgetter("a"), links))
    ends.update(map(attrgetter("b"), links))
    return ends


@dataclass(frozen=True, slots=True)
class LeafLoad:
    """One leaf as the bisection sees it: endpoint ports on each side, uplinks, pod."""

    a_ports: int
    b_ports: int
    up: int
    pod: int


def _match(loads: Iterable[tuple[int, int, int]]) -> tuple[int, int, int]:
    """Combine children ``(a surplus, b surplus, capacity up)``: matched flow and leftovers."""
    a_total = b_total = 0
    for a, b, cap in loads:
        a_total += min(a, cap)
        b_total += min(b, cap)
    matched = min(a_total, b_total)
    return matched, a_total - matched, b_total - matched


def bisection_links(leaves: Sequence[LeafLoad], spine_up: dict[int, int] | None = None) -> int:
    """Links of flow across the cut that puts each leaf's ``a_ports`` on one side.

    Exact max-flow on the fat tree with each tier's switches merged (every leaf reaches
    every spine of its pod, every spine its core group): a leaf switches its own ports,
    sends what is left over up to its capacity, and each pod (then the core) does the same
    with its leaves' leftovers. ``spine_up`` gives each pod's uplinks for three tiers.
    """
    matched = 0
    pods: dict[int, list[tuple[int, int, int]]] = {}
    for leaf in leaves:
        local = min(leaf.a_ports, leaf.b_ports)
        matched += local
        pods.setdefault(leaf.pod, []).append((leaf.a_ports - local, leaf.b_ports - local, leaf.up))
    upward = []
    for pod, children in sorted(pods.items()):
        m, a_left, b_left = _match(children)
        matched += m
        cap = (spine_up or {}).get(pod, 10**12)
        upward.append((a_left, b_left, cap))
    if spine_up is not None:
        matched += _match(upward)[0]
    return matched


def half_cut(endpoints: Sequence[Link]) -> tuple[dict[str, list[int]], float]:
    """The bisection's cut: endpoint ports per switch on each side, and its scale.

    The cut puts the first half of the endpoint devices (in plan order: SU by SU, which
    sends the most traffic through the top of a tree) on one side and the second half on
    the other. With an odd count one device stays out, and the scale (``n / (2 * (n // 2))``)
    states the result for ``n / 2`` devices a side, so a non-blocking fabric's bisection is
    exactly half its injection.
    """
    order = list(dict.fromkeys(lk.a for lk in endpoints))
    half = len(order) // 2
    side = dict.fromkeys(order[:half], 0) | dict.fromkeys(order[half : 2 * half], 1)
    ports: dict[str, list[int]] = {}
    for lk in endpoints:
        counts = ports.setdefault(lk.b, [0, 0])
        where = side.get(lk.a)
        if where is not None:
            counts[where] += 1
    return ports, (len(order) / (2 * half) if half else 0.0)


def switch_max_flow(links: Iterable[Link], ports: dict[str, list[int]]) -> int:
    """Max-flow (in links) between the two sides of a cut, on the switches themselves.

    ``links`` are the switch-to-switch cables of one plane; ``ports`` gives each leaf's
    endpoint ports on side A and side B. For fabrics whose wiring is not uniform (link
    counts that differ by one), where `bisection_links`'s merged tiers would overstate.
    """
    import networkx as nx  # here: only such fabrics need it, and it is slow to import

    graph: nx.DiGraph[str] = nx.DiGraph()
    for (a, b), n in Counter((lk.a, lk.b) for lk in links).items():
        graph.add_edge(a, b, capacity=n)
        graph.add_edge(b, a, capacity=n)
    for leaf, (a_ports, b_ports) in ports.items():
        graph.add_edge("<side a>", leaf, capacity=a_ports)
        graph.add_edge(leaf, "<side b>", capacity=b_ports)
    if "<side a>" not in graph or "<side b>" not in graph:
        return 0
    return int(nx.maximum_flow_value(graph, "<side a>", "<side b>"))
