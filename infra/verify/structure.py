"""Structure checks of a discovered fabric that need no plan and no names railplan chose.

`check_structure(fabric)` reads the fabric's shape from its links alone: HCAs are CA nodes
(SHARP aggregation nodes are not nodes, see `infra.verify.model`), leaves are switches with an
HCA, spines are the other switches that reach a leaf, cores the rest. A pod is a connected
group of leaves and spines (the cores left out); an SU is a connected group of leaves and the
servers (hosts with two or more HCAs, grouped by the ``<host> <device>`` NodeDescription)
cabled to them, and a leaf's rail is the HCA index most of its servers reach it from. It then
finds what ``ibdiagnet --rail_validation`` and a fat-tree's symmetry demand: a leaf reached from
several HCA indexes (`rail_mixed`), a leaf with another number of links to a spine of its pod
than its peers (`uplinks_unequal`), an SU without a leaf for a rail the others have or a
server without one of its SU's rails (`grid_gap`), a switch without the SHARP aggregation
node its peers (or the plan) have (`sharp_missing`), and a link slower than most of its tier
(`rate_below_peers`). A pure function, linear in the number of links.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from infra.verify.compare import Finding, NamedEnd, Place, link_gbps
from infra.verify.model import Fabric, Link, Node
from infra.verify.resolve import hca_name, named
from infra.wording import plural

__all__ = ["STRUCTURE_KINDS", "Shape", "Structure", "check_structure", "combine"]

STRUCTURE_KINDS = (
    "rail_mixed",
    "uplinks_unequal",
    "grid_gap",
    "sharp_missing",
    "rate_below_peers",
)
_INDEX = re.compile(r"(\d+)$")
_UP = frozenset({"", "active", "linkup"})
_LEAF_SHARE = 4  # a leaf has at least 1 HCA link for every 4 switch links (1:1 has 1 for 1)
Placer = Callable[[NamedEnd], Place]


def _bare(end: NamedEnd) -> Place:
    return Place(end.device, end.port)


@dataclass(frozen=True)
class Shape:
    """What the checks found the fabric to be; `unplaced` HCAs name no host."""

    leaves: int
    spines: int
    cores: int
    pods: int
    hcas: int
    servers: int
    rails: int  # 0: not rail-optimized (most servers' HCAs share a leaf), no rail check
    sus: int
    unplaced: int
    sharp: int

    def as_dict(self) -> dict[str, int]:
        """The JSON summary's ``structure`` object."""
        return asdict(self)

    def text(self) -> str:
        """One line for the text report."""
        switches = (
            f"{plural(self.leaves, 'leaf', 'leaves')}, {plural(self.spines, 'spine')}, "
            f"{plural(self.cores, 'core')} in {plural(self.pods, 'pod')}"
        )
        servers = f"{plural(self.servers, 'server')} with 2+ HCAs"
        if not self.servers:
            rails = "no server with 2+ HCAs (single-rail: no rail or grid check)"
        elif not self.rails:
            rails = f"{servers}, not rail-optimized (their HCAs share leaves): no rail check"
        else:
            rails = f"{servers} on {plural(self.rails, 'rail')} in {plural(self.sus, 'SU')}"
        unplaced = (
            f"HCAs whose description names no host: {self.unplaced:,}" if self.unplaced else ""
        )
        parts = [switches, f"{plural(self.hcas, 'HCA')}, {rails}", unplaced]
        parts.append(f"{plural(self.sharp, 'switch', 'switches')} with a SHARP aggregation node")
        return "structure: " + "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Structure:
    """The structure findings (walking order) and the shape they were checked against."""

    findings: tuple[Finding, ...]
    shape: Shape


@dataclass(frozen=True)
class _Hca:
    """A named HCA port on a leaf: host, device (``mlx5_3``), its index, the leaf port."""

    host: str
    device: str
    index: int
    leaf: str
    port: str


@dataclass
class _View:
    """The fabric classified: switch tiers by GUID, names, HCA ends, leaf-spine link counts."""

    fabric: Fabric
    tier: dict[str, str] = field(default_factory=dict)  # switch GUID -> leaf, spine, core
    names: dict[str, str] = field(default_factory=dict)  # switch GUID -> its name
    hcas: list[_Hca] = field(default_factory=list)
    unplaced: set[str] = field(default_factory=set)
    uplinks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (leaf, spine)

    def node(self, link: Link, side: int) -> Node | None:
        return self.fabric.node_for(link.a if side == 0 else link.b)

    def end(self, link: Link, side: int) -> NamedEnd:
        return named(link.a if side == 0 else link.b, self.node(link, side))

    def kind(self, node: Node | None) -> str:
        if node is None:
            return "?"
        return "hca" if node.kind == "CA" else self.tier.get(node.guid, "?")


def _classify(fabric: Fabric) -> _View:
    """Tiers from who reaches whom; every named HCA port with its leaf and index."""
    view = _View(fabric)
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


def _tiers(view: _View, pairs: list[tuple[Node | None, Node | None]]) -> None:
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


def _add_hca(view: _View, hca: Node, leaf: str, port: str) -> None:
    host = hca_name(hca)
    index = _INDEX.search(host[1]) if host else None
    if host is None or index is None:
        view.unplaced.add(hca.guid)
        return
    view.hcas.append(_Hca(host[0], host[1], int(index[1]), leaf, port))


class _Groups:
    """Union-find over names: pods (leaves and spines) and SUs (leaves and servers)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, one: str, two: str) -> None:
        self.parent[self.find(one)] = self.find(two)

    def groups(self, items: Iterable[str]) -> list[list[str]]:
        found: dict[str, list[str]] = defaultdict(list)
        for item in sorted(items):
            found[self.find(item)].append(item)
        return sorted(found.values())


def _uplinks(view: _View, place: Placer) -> tuple[list[Finding], int]:
    """Leaves whose links to the spines of their pod differ from the pod's usual."""
    groups = _Groups()
    for leaf, spine in view.uplinks:
        groups.join(leaf, spine)
    pods = groups.groups({g for pair in view.uplinks for g in pair})
    findings = []
    for pod in pods:
        leaves = [g for g in pod if view.tier[g] == "leaf"]
        spines = [g for g in pod if view.tier[g] == "spine"]
        findings += _pod_uplinks(view, place, leaves, spines)
    return findings, len(pods)


def _usual(counts: Iterable[int]) -> int:
    """The most common count (the larger of a tie)."""
    seen = Counter(counts)
    return max(seen, key=lambda n: (seen[n], n))


def _pod_uplinks(view: _View, place: Placer, leaves: list[str], spines: list[str]) -> list[Finding]:
    """Each leaf has the pod's usual number of uplinks, spread as evenly as it divides.

    20 uplinks over 8 spines are 2 or 3 to each spine by design; a pair outside that band is
    named, else a leaf short (or over) of the usual total is, with the one spine short (or
    over) of its usual total when that is a single spine.
    """
    total = {lf: sum(view.uplinks[(lf, sp)] for sp in spines) for lf in leaves}
    usual = _usual(total.values())
    low, high = usual // len(spines), -(-usual // len(spines))
    spine_total = {sp: sum(view.uplinks[(lf, sp)] for lf in leaves) for sp in spines}
    spine_usual = _usual(spine_total.values())
    findings = []
    for leaf in leaves:
        odd = [sp for sp in spines if not low <= view.uplinks[(leaf, sp)] <= high]
        for spine in odd:
            band = f"{low}" if low == high else f"{low} or {high}"
            seen = view.uplinks[(leaf, spine)]
            name = view.names[spine]
            expected, found = f"{band} links to {name}", f"{plural(seen, 'link')} to {name}"
            findings.append(_unequal(view, place, (leaf, spine), (expected, found), seen < low))
        if odd or total[leaf] == usual:
            continue
        short = total[leaf] < usual
        off = [sp for sp in spines if (spine_total[sp] < spine_usual) == short]
        off = [sp for sp in off if spine_total[sp] != spine_usual]
        one = off[0] if len(off) == 1 else None
        expected = f"{usual} links to the {len(spines)} spines of its pod"
        found = plural(total[leaf], "link")
        if one is not None:
            found += f"; {view.names[one]} is the spine {'short' if short else 'over'}"
        findings.append(_unequal(view, place, (leaf, one), (expected, found), short))
    return findings


def _unequal(
    view: _View,
    place: Placer,
    pair: tuple[str, str | None],
    said: tuple[str, str],
    short: bool,
) -> Finding:
    leaf = view.names[pair[0]]
    spine = view.names[pair[1]] if pair[1] else ""
    a, z = place(NamedEnd(leaf, "")), place(NamedEnd(spine, "")) if spine else Place("", "")
    where = z.text() if spine else "the spines of its pod"
    fix = (
        f"find the missing cable from {a.text()} to {where}: a port down, unplugged or "
        "cabled to another switch"
        if short
        else f"{a.text()} has more cables to {where} than its peers: move one to the spine "
        "that is short"
    )
    return Finding("uplinks_unequal", a, z, *said, fix)


def _servers(view: _View) -> dict[str, list[_Hca]]:
    """The GPU servers: hosts with two or more HCA indexes, over half as many as most have.

    A UFM appliance or storage head with 4 HCAs beside 8-HCA servers carries no rails; a
    server with one HCA not cabled (7 of 8) still does, and its gap is a finding.
    """
    by_host: dict[str, list[_Hca]] = defaultdict(list)
    for hca in view.hcas:
        by_host[hca.host].append(hca)
    counts = {h: len({x.index for x in hcas}) for h, hcas in by_host.items()}
    many = Counter(n for n in counts.values() if n > 1)
    if not many:
        return {}
    usual = max(many, key=lambda n: (many[n], n))
    return {h: hcas for h, hcas in by_host.items() if counts[h] > 1 and 2 * counts[h] > usual}


def _rail_optimized(servers: dict[str, list[_Hca]]) -> bool:
    """Whether most servers cable each HCA to its own leaf.

    Else one leaf carries every rail, as a single-switch fabric does, and a leaf reached from
    several HCA indexes is no fault.
    """
    apart = sum(1 for hcas in servers.values() if len({h.leaf for h in hcas}) == len(hcas))
    return 2 * apart > len(servers)


def _rails(servers: dict[str, list[_Hca]]) -> dict[str, tuple[int, int]]:
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


def _rail_mixed(
    servers: dict[str, list[_Hca]],
    rails: dict[str, tuple[int, int]],
    leaf_of: dict[tuple[str, int], str],
    place: Placer,
) -> list[Finding]:
    """Every server HCA on a leaf whose other servers reach it from another HCA index."""
    findings = []
    for host in sorted(servers):
        for hca in sorted(servers[host], key=lambda x: x.index):
            rail, count = rails[hca.leaf]
            if hca.index == rail:
                continue
            a, z = place(NamedEnd(host, hca.device)), place(NamedEnd(hca.leaf, hca.port))
            target = leaf_of.get((host, hca.index))
            to = place(NamedEnd(target, "")).text() if target else f"the rail-{hca.index} leaf"
            findings.append(
                Finding(
                    "rail_mixed",
                    a,
                    z,
                    f"HCA index {rail} on {hca.leaf}, as {plural(count, 'server HCA')} there",
                    f"{host} {hca.device} (index {hca.index}) on {hca.leaf} port {hca.port}",
                    f"move the cable of {a.text()} from {z.text()} to {to}",
                )
            )
    return findings


def _grid(
    servers: dict[str, list[_Hca]], rails: dict[str, tuple[int, int]], place: Placer
) -> tuple[list[Finding], int, dict[tuple[str, int], str]]:
    """SUs lacking a rail the others have; servers lacking a rail of their SU."""
    groups = _Groups()
    for host, hcas in servers.items():
        for hca in hcas:
            groups.join("leaf:" + hca.leaf, "host:" + host)
    sus = groups.groups([*("leaf:" + leaf for leaf in rails), *("host:" + h for h in servers)])
    everywhere = {rails[leaf][0] for leaf in rails}
    findings: list[Finding] = []
    leaf_of: dict[tuple[str, int], str] = {}
    for su in sus:
        leaves = {rails[m[5:]][0]: m[5:] for m in reversed(su) if m.startswith("leaf:")}
        hosts = [m[5:] for m in su if m.startswith("host:")]
        leaf_of |= {(h, rail): leaf for h in hosts for rail, leaf in leaves.items()}
        for rail in sorted(everywhere - set(leaves)):
            findings.append(_su_gap(sorted(leaves.values()), hosts, rail, place))
        for host in hosts:
            have = {hca.index for hca in servers[host]}
            device = servers[host][0].device
            for rail in sorted(set(leaves) - have):
                findings.append(_server_gap(host, device, rail, leaves[rail], place))
    return findings, len(sus), leaf_of


def _su_gap(leaves: list[str], hosts: list[str], rail: int, place: Placer) -> Finding:
    a = place(NamedEnd(leaves[0], ""))
    named_by = ", ".join(leaves[:3]) + (", ..." if len(leaves) > 3 else "")
    return Finding(
        "grid_gap",
        a,
        Place("", ""),
        f"a leaf for rail {rail}, as the other SUs have",
        f"none: the SU of {named_by} ({plural(len(hosts), 'server')}) has no rail-{rail} leaf",
        f"power on and cable the rail-{rail} leaf of the SU of {named_by}: "
        f"no HCA index {rail} of its {plural(len(hosts), 'server')} is seen",
    )


def _server_gap(host: str, device: str, rail: int, leaf: str, place: Placer) -> Finding:
    port = _INDEX.sub(str(rail), device)  # mlx5_0 -> mlx5_3: the host's own naming
    a, z = place(NamedEnd(host, port)), place(NamedEnd(leaf, ""))
    return Finding(
        "grid_gap",
        a,
        z,
        f"{host} {port} on {leaf}, the rail-{rail} leaf of its SU",
        "no link",
        f"cable {a.text()} to {z.text()} and check that the HCA is up",
    )


def _sharp(view: _View, expected: bool | None, place: Placer) -> list[Finding]:
    """Switches without an aggregation node: all of them under a SHARP plan, else the odd ones."""
    has = set(view.fabric.sharp)
    if expected and not has and view.tier:
        return [_no_sharp_at_all(len(view.tier))]
    missing = []
    for tier in ("leaf", "spine", "core"):
        switches = [g for g, t in view.tier.items() if t == tier]
        if expected or (expected is None and any(g in has for g in switches)):
            missing += [g for g in switches if g not in has]
    why = "the plan enables SHARP" if expected else "the other switches of its tier have one"
    findings = []
    for guid in missing:
        a = place(NamedEnd(view.names[guid], ""))
        findings.append(
            Finding(
                "sharp_missing",
                a,
                Place("", ""),
                f"a SHARP aggregation node ({why})",
                "none",
                f"enable SHARP on {a.text()} (switch firmware and license) and check that the "
                "aggregation manager sees it",
            )
        )
    return findings


def _no_sharp_at_all(switches: int) -> Finding:
    """One finding, not one a switch, when no switch shows an aggregation node: SHARP is off."""
    return Finding(
        "sharp_missing",
        Place(f"all {switches:,} switches", ""),
        Place("", ""),
        f"a SHARP aggregation node on each of the {switches:,} switches (the plan enables SHARP)",
        "none on any switch",
        "enable SHARP on the switches (firmware and license), start the aggregation manager "
        "(sharp_am) beside the subnet manager, then discover the fabric again",
    )


def _tier_of(view: _View, link: Link) -> tuple[str, int] | None:
    """The link's tier ("server-leaf", "leaf-spine", "spine-core") and its near side."""
    kinds = (view.kind(view.node(link, 0)), view.kind(view.node(link, 1)))
    for low, high in (("hca", "leaf"), ("leaf", "spine"), ("spine", "core")):
        if kinds == (low, high):
            return f"{'server' if low == 'hca' else low}-{high}", 0
        if kinds == (high, low):
            return f"{'server' if low == 'hca' else low}-{high}", 1
    return None


def _rates(view: _View, place: Placer) -> list[Finding]:
    """Links slower than the rate most links of their tier have."""
    tiers: dict[str, list[tuple[Link, int, float]]] = defaultdict(list)
    for link in view.fabric.links:
        near = _tier_of(view, link)
        gbps = link_gbps(link.width or "", link.speed or "")
        if near is None or gbps is None or (link.state or "").lower() not in _UP:
            continue
        tiers[near[0]].append((link, near[1], gbps))
    findings = []
    for tier, links in sorted(tiers.items()):
        usual, count = Counter(g for _, _, g in links).most_common(1)[0]
        if 2 * count <= len(links):
            continue  # no rate most links have: a mixed tier by design
        rate = next(f"{x.width}{x.speed}" for x, _, g in links if g == usual)
        expected = f"{rate} ({usual:g} Gb/s), as {count:,} of {len(links):,} {tier} links"
        for link, side, gbps in links:
            if gbps < usual:
                a, z = place(view.end(link, side)), place(view.end(link, 1 - side))
                findings.append(_slow(a, z, expected, f"{link.width}{link.speed} ({gbps:g} Gb/s)"))
    return findings


def _slow(a: Place, z: Place, expected: str, seen: str) -> Finding:
    return Finding(
        "rate_below_peers",
        a,
        z,
        expected,
        seen,
        f"reseat the cable between {a.text()} and {z.text()}; if it stays at {seen}, "
        "replace the cable or its transceivers",
    )


def check_structure(
    fabric: Fabric, *, sharp: bool | None = None, place: Placer | None = None
) -> Structure:
    """Every structure fault of `fabric`, in walking order, and the shape it was read as.

    `sharp` is the plan's word (True: every switch needs an aggregation node; None: no plan,
    compare switches of one tier); `place` puts a device in its rack (`compare.placer`).
    """
    place = place or _bare
    view = _classify(fabric)
    findings, pods = _uplinks(view, place)
    servers = _servers(view)
    rails = _rails(servers) if _rail_optimized(servers) else {}
    if rails:
        grid, sus, leaf_of = _grid(servers, rails, place)
        findings += _rail_mixed(servers, rails, leaf_of, place) + grid
    else:
        sus = 0
    findings += _sharp(view, sharp, place) + _rates(view, place)
    tiers = Counter(view.tier.values())
    shape = Shape(
        leaves=tiers["leaf"],
        spines=tiers["spine"],
        cores=tiers["core"],
        pods=pods,
        hcas=sum(1 for n in fabric.nodes if n.kind == "CA"),
        servers=len(servers),
        rails=len({rail for rail, _ in rails.values()}),
        sus=sus,
        unplaced=len(view.unplaced),
        sharp=len(fabric.sharp),
    )
    return Structure(tuple(sorted(findings, key=Finding.sort_key)), shape)


def combine(planned: Sequence[Finding], structural: Sequence[Finding]) -> list[Finding]:
    """Both checks' findings in walking order; a port the plan check names is not named again.

    A swapped HCA is `swapped_pair` there and would be `rail_mixed` here.
    """
    taken = {(p.device, p.port) for f in planned for p in (f.a, f.z) if p.port}
    extra = [f for f in structural if not {(f.a.device, f.a.port), (f.z.device, f.z.port)} & taken]
    return sorted([*planned, *extra], key=Finding.sort_key)
