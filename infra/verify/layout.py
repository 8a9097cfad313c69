"""How a discovered fabric is laid out, read from its links alone: tiers, pods, servers, rails.

`classify` sorts switches into tiers: leaves carry HCAs (on at least a fifth of their cabled
ports), spines reach a leaf, cores are the rest; it collects every named HCA port on a leaf
(host and device from the NodeDescription, index the device's trailing number) and counts
leaf-spine links. `servers_of` picks the GPU servers among the hosts, `rail_optimized` says
whether their HCAs go to separate leaves, `rails_of` gives each leaf its rail. `Groups` is
the union-find that makes pods and SUs. Used by `infra.verify.structure`; pure.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from infra.verify.model import Fabric, Link, Node
from infra.verify.resolve import hca_name, named
from infra.verify.seen import NamedEnd

__all__ = [
    "INDEX",
    "Groups",
    "Hca",
    "View",
    "classify",
    "device_name",
    "hca_index",
    "missing_name",
    "mode",
    "rail_optimized",
    "rails_of",
    "servers_of",
    "tier_of",
]

# ASCII digits (\d alone also matches "٣"), few enough for int(): an index, never 5,000 digits
INDEX = re.compile(r"(?<![0-9])([0-9]{1,6})\Z")
# Sites that name HCAs ``HCA-<n>`` count from 1: in NVIDIA topograph's production NDR dump
# (tests/data/verify/topograph-ndr.out) one SU's rail leaves carry ``mlx5_0, 1, 4, 5`` where
# the others carry ``HCA-1, 2, 5, 6``, each leaf name giving the same rail to both.
_ONE_BASED = "HCA-"
_LEAF_SHARE = 4  # a leaf has at least 1 HCA link for every 4 switch links (1:1 has 1 for 1)


@dataclass(frozen=True, slots=True)
class Hca:
    """A named HCA port on a leaf: host, device (``mlx5_3``), its index, the leaf port."""

    host: str
    device: str
    index: int
    leaf: str
    port: str


@dataclass
class View:
    """The fabric classified: switch tiers by GUID, names, HCA ends, leaf-spine link counts."""

    fabric: Fabric
    tier: dict[str, str] = field(default_factory=dict)  # switch GUID -> leaf, spine, core
    names: dict[str, str] = field(default_factory=dict)  # switch GUID -> its name
    hcas: list[Hca] = field(default_factory=list)
    unplaced: set[str] = field(default_factory=set)
    uplinks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (leaf, spine)

    def node(self, link: Link, side: int) -> Node | None:
        """The node at one end of `link` (side 0: `link.a`, 1: `link.b`)."""
        return self.fabric.node_for(link.a if side == 0 else link.b)

    def end(self, link: Link, side: int) -> NamedEnd:
        """One end of `link` as the plan names it (`resolve.named`)."""
        return named(link.a if side == 0 else link.b, self.node(link, side))

    def kind(self, node: Node | None) -> str:
        """The node's tier: hca, leaf, spine, core, or ? for a node the dump does not list."""
        if node is None:
            return "?"
        return "hca" if node.kind == "CA" else self.tier.get(node.guid, "?")


def classify(fabric: Fabric) -> View:
    """Tiers from who reaches whom; every named HCA port with its leaf and index."""
    view = View(fabric)
    pairs = [(fabric.node_for(link.a), fabric.node_for(link.b)) for link in fabric.links]
    _tiers(view, pairs)
    for link, (na, nb) in zip(fabric.links, pairs, strict=True):
        if na is None or nb is None:
            continue
        if {view.kind(na), view.kind(nb)} == {"hca", "leaf"}:
            hca, leaf, end = (na, nb, link.b) if na.kind == "CA" else (nb, na, link.a)
            _add_hca(view, hca, view.names[leaf.guid], str(end.port))
        elif {view.kind(na), view.kind(nb)} == {"leaf", "spine"}:
            leaf, spine = (na, nb) if view.kind(na) == "leaf" else (nb, na)
            view.uplinks[(leaf.guid, spine.guid)] += 1
    return view


def _tiers(view: View, pairs: list[tuple[Node | None, Node | None]]) -> None:
    """Leaves are switches with HCAs, spines reach a leaf, the other switches are cores.

    A switch with HCAs on under a fifth of its cabled ports is no leaf: it is a spine or core
    that also carries a management host (the plan puts UFM on the cores).
    """
    ends = [(near, far) for pair in pairs for near, far in (pair, pair[::-1]) if near and far]
    hcas: Counter[str] = Counter()
    switches: Counter[str] = Counter()
    for near, far in ends:
        if near.kind == "SW":
            view.names[near.guid] = near.name or near.guid
            (hcas if far.kind == "CA" else switches)[near.guid] += 1
    for guid, count in hcas.items():
        if _LEAF_SHARE * count >= switches[guid]:
            view.tier[guid] = "leaf"
    for near, far in ends:
        if near.kind == far.kind == "SW" and view.tier.get(far.guid) == "leaf":
            view.tier.setdefault(near.guid, "spine")
    for guid in view.names:
        view.tier.setdefault(guid, "core")


def hca_index(device: str) -> int | None:
    """The HCA's index from its device name: ``mlx5_3`` 3, ``HCA-4`` 3 (those count from 1)."""
    found = INDEX.search(device)
    if found is None:
        return None
    return int(found[1]) - (1 if device.startswith(_ONE_BASED) else 0)


def device_name(like: str, index: int) -> str:
    """The device of HCA ``index`` named as ``like`` is (``mlx5_0`` -> ``mlx5_3``)."""
    return INDEX.sub(str(index + (1 if like.startswith(_ONE_BASED) else 0)), like)


def _add_hca(view: View, hca: Node, leaf: str, port: str) -> None:
    host = hca_name(hca)
    index = hca_index(host[1]) if host else None
    if host is None or index is None or index < 0:
        view.unplaced.add(hca.guid)
        return
    view.hcas.append(Hca(host[0], host[1], index, leaf, port))


class Groups:
    """Union-find over names: pods (leaves and spines) and SUs (leaves and servers)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        """The representative of `item`'s group (path halving keeps chains short)."""
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, one: str, two: str) -> None:
        """Put two items in one group."""
        self.parent[self.find(one)] = self.find(two)

    def groups(self, items: Iterable[str]) -> list[list[str]]:
        """`items` by group, each sorted, the groups in order of their first item."""
        found: dict[str, list[str]] = defaultdict(list)
        for item in sorted(items):
            found[self.find(item)].append(item)
        return sorted(found.values())


def mode(counts: Iterable[int]) -> int:
    """The most common count (the larger of a tie)."""
    seen = Counter(counts)
    return max(seen, key=lambda n: (seen[n], n))


def servers_of(view: View) -> dict[str, list[Hca]]:
    """The GPU servers: hosts with two or more HCA indexes, over half as many as most have.

    A UFM appliance or storage head with 4 HCAs beside 8-HCA servers carries no rails; a
    server with one HCA not cabled (7 of 8) still does, and its gap is a finding.
    """
    by_host: dict[str, list[Hca]] = defaultdict(list)
    for hca in view.hcas:
        by_host[hca.host].append(hca)
    counts = {h: len({x.index for x in hcas}) for h, hcas in by_host.items()}
    many = Counter(n for n in counts.values() if n > 1)
    if not many:
        return {}
    usual = max(many, key=lambda n: (many[n], n))
    return {h: hcas for h, hcas in by_host.items() if counts[h] > 1 and 2 * counts[h] > usual}


def rail_optimized(servers: dict[str, list[Hca]]) -> bool:
    """Whether most servers cable each HCA to its own leaf.

    Else one leaf carries every rail, as a single-switch fabric does, and a leaf reached from
    several HCA indexes is no fault.
    """
    apart = sum(1 for hcas in servers.values() if len({h.leaf for h in hcas}) == len(hcas))
    return 2 * apart > len(servers)


def rails_of(servers: dict[str, list[Hca]]) -> dict[str, tuple[int, int]]:
    """Leaf -> (rail, how many server HCAs have it): the index most of them have.

    The lowest index wins a tie (a server with two HCAs on one leaf breaks the rail either way).
    """
    seen: dict[str, Counter[int]] = defaultdict(Counter)
    for hcas in servers.values():
        for hca in hcas:
            seen[hca.leaf][hca.index] += 1
    rails = {}
    for leaf, counts in seen.items():
        rail = max(counts, key=lambda i: (counts[i], -i))
        rails[leaf] = (rail, counts[rail])
    return rails


def tier_of(view: View, link: Link) -> tuple[str, int] | None:
    """The link's tier ("server-leaf", "leaf-spine", "spine-core") and its near side."""
    kinds = (view.kind(view.node(link, 0)), view.kind(view.node(link, 1)))
    for low, high in (("hca", "leaf"), ("leaf", "spine"), ("spine", "core")):
        if kinds == (low, high):
            return f"{'server' if low == 'hca' else low}-{high}", 0
        if kinds == (high, low):
            return f"{'server' if low == 'hca' else low}-{high}", 1
    return None


_FIELDS = re.compile(r"[0-9]+|[^0-9]+")


def missing_name(su_leaves: Iterable[str], rail_leaves: Iterable[str]) -> str | None:
    """The name an SU's missing leaf would have, read from its peers' names, else None.

    ``A09-P1-IBLEAF-03-01`` from the SU's leaves (``...-01-01``, ``...-02-01``, ``...-04-01``)
    and the rail's leaves in other SUs (``...-03-02``, ``...-03-03``): names cut into digit
    and other runs, each run taken from the group in which it does not change. None unless
    every name has the same runs and each run is settled that way (no guess).
    """
    mine, theirs = ([_FIELDS.findall(n) for n in names] for names in (su_leaves, rail_leaves))
    if len(mine) < 2 or len(theirs) < 2 or len({len(f) for f in mine + theirs}) != 1:
        return None
    name = []
    for column in zip(*mine, *theirs, strict=True):
        su, rail = set(column[: len(mine)]), set(column[len(mine) :])
        if len(su) == 1 and (len(rail) > 1 or su == rail):
            name.append(column[0])
        elif len(rail) == 1 and len(su) > 1:
            name.append(column[-1])
        else:
            return None
    return "".join(name)
