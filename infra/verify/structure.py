"""Structure checks of a discovered fabric that need no plan and no names railplan chose.

`check_structure(fabric)` reads the fabric's shape from its links alone (`infra.verify.layout`:
tiers, servers, rails). A pod is a connected group of leaves and spines (the cores left out);
an SU is a connected group of leaves and the servers cabled to them. It then finds what
``ibdiagnet --rail_validation`` and a fat-tree's symmetry demand: a leaf reached from several
HCA indexes (`rail_mixed`), a leaf with another number of links to a spine of its pod
than its peers (`uplinks_unequal`), an SU without a leaf for a rail the others have or a
server without one of its SU's rails (`grid_gap`), a switch without the SHARP aggregation
node its peers (or the plan) have (`sharp_missing`), a link slower than most of its tier
(`rate_below_peers`), and a link whose rate cannot be read (`unreadable_rate`, as the plan
check names it). A pure function, linear in the number of links.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from infra.verify.findings import Finding, Place, second_peer, unreadable
from infra.verify.layout import (
    Groups,
    Hca,
    View,
    classify,
    device_name,
    missing_name,
    mode,
    rail_optimized,
    rails_of,
    servers_of,
    tier_of,
)
from infra.verify.model import Fabric, Link
from infra.verify.resolve import conflicts
from infra.verify.seen import NamedEnd, link_gbps
from infra.wording import plural

__all__ = ["STRUCTURE_KINDS", "Shape", "Structure", "check_structure", "combine"]

STRUCTURE_KINDS = (
    "rail_mixed",
    "uplinks_unequal",
    "grid_gap",
    "sharp_missing",
    "rate_below_peers",
    "unreadable_rate",
)
_UP = frozenset({"", "active", "linkup"})
Placer = Callable[[NamedEnd], Place]


def _bare(end: NamedEnd) -> Place:
    """Without a plan a device has no rack: its discovered name and port are the place."""
    return Place(end.device, end.port)


@dataclass(frozen=True)
class Shape:
    """What the checks found the fabric to be; `unplaced` HCAs name no host."""

    leaves: int
    spines: int
    cores: int
    pods: int
    uplinks: str  # links from a leaf to each spine of its pod, most pods: "6", "2-3"
    hcas: int
    servers: int
    rails: int  # 0: not rail-optimized (most servers' HCAs share a leaf), no rail check
    sus: int
    unplaced: int
    sharp: int

    def as_dict(self) -> dict[str, int | str]:
        """The JSON summary's ``structure`` object."""
        return asdict(self)

    def text(self) -> str:
        """One line for the text report."""
        switches = (
            f"{plural(self.leaves, 'leaf', 'leaves')}, {plural(self.spines, 'spine')}, "
            f"{plural(self.cores, 'core')} in {plural(self.pods, 'pod')}, "
            f"{self.uplinks} link{'' if self.uplinks == '1' else 's'} from each leaf to each spine"
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


def _uplinks(view: View, place: Placer) -> tuple[list[Finding], list[str]]:
    """Leaves whose links to the spines of their pod differ from the pod's usual.

    Also each pod's band of links from a leaf to a spine ("6", "2-3").
    """
    groups = Groups()
    for leaf, spine in view.uplinks:
        groups.join(leaf, spine)
    pods = groups.groups({g for pair in view.uplinks for g in pair})
    findings, bands = [], []
    for pod in pods:
        leaves = [g for g in pod if view.tier[g] == "leaf"]
        spines = [g for g in pod if view.tier[g] == "spine"]
        found, band = _pod_uplinks(view, place, leaves, spines)
        findings += found
        bands.append(band)
    return findings, bands


def _pod_uplinks(
    view: View, place: Placer, leaves: list[str], spines: list[str]
) -> tuple[list[Finding], str]:
    """Each leaf has the pod's usual number of uplinks, spread as evenly as it divides.

    20 uplinks over 8 spines are 2 or 3 to each spine by design; a pair outside that band is
    named, else a leaf short (or over) of the usual total is, with the one spine short (or
    over) of its usual total when that is a single spine.
    """
    total = {lf: sum(view.uplinks[(lf, sp)] for sp in spines) for lf in leaves}
    usual = mode(total.values())
    low, high = usual // len(spines), -(-usual // len(spines))
    spine_total = {sp: sum(view.uplinks[(lf, sp)] for lf in leaves) for sp in spines}
    spine_usual = mode(spine_total.values())
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
    return findings, f"{low}" if low == high else f"{low}-{high}"


def _unequal(
    view: View,
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


def _rail_mixed(
    servers: dict[str, list[Hca]],
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
            to = (
                place(NamedEnd(target, "")).text()
                if target
                else f"the leaf for HCA index {hca.index}"
            )
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
    servers: dict[str, list[Hca]], rails: dict[str, tuple[int, int]], place: Placer
) -> tuple[list[Finding], int, dict[tuple[str, int], str]]:
    """SUs lacking a rail the others have; servers lacking a rail of their SU."""
    groups = Groups()
    for host, hcas in servers.items():
        for hca in hcas:
            groups.join("leaf:" + hca.leaf, "host:" + host)
    sus = groups.groups([*("leaf:" + leaf for leaf in rails), *("host:" + h for h in servers)])
    everywhere = {rails[leaf][0] for leaf in rails}
    devices = _devices(servers)
    findings: list[Finding] = []
    leaf_of: dict[tuple[str, int], str] = {}
    for su in sus:
        leaves = {rails[m[5:]][0]: m[5:] for m in reversed(su) if m.startswith("leaf:")}
        hosts = [m[5:] for m in su if m.startswith("host:")]
        leaf_of |= {(h, rail): leaf for h in hosts for rail, leaf in leaves.items()}
        for rail in sorted(everywhere - set(leaves)):
            peers = sorted(leaf for leaf, (r, _) in rails.items() if r == rail)
            name = missing_name(sorted(leaves.values()), peers)
            gap = _RailGap(rail, devices[rail], name)
            findings.append(_su_gap(sorted(leaves.values()), hosts, gap, place))
        for host in hosts:
            have = {hca.index for hca in servers[host]}
            device = servers[host][0].device
            for rail in sorted(set(leaves) - have):
                findings.append(_server_gap(host, device, rail, leaves[rail], place))
    return findings, len(sus), leaf_of


@dataclass(frozen=True)
class _RailGap:
    """A rail an SU has no leaf for: its index, its HCAs' names elsewhere, the leaf's name."""

    rail: int
    devices: tuple[str, ...]  # ("HCA-5", "mlx5_4"): what the servers call that HCA
    name: str | None  # the missing leaf's name, read from its peers' names (`missing_name`)

    def text(self) -> str:
        """``HCA index 4 (HCA-5, mlx5_4)``."""
        return f"HCA index {self.rail} ({', '.join(self.devices)})"


def _devices(servers: dict[str, list[Hca]]) -> dict[int, tuple[str, ...]]:
    """HCA index -> the device names servers give it (a site may mix ``mlx5_N`` and ``HCA-N``)."""
    found: dict[int, set[str]] = defaultdict(set)
    for hcas in servers.values():
        for hca in hcas:
            found[hca.index].add(hca.device)
    return {index: tuple(sorted(names)) for index, names in found.items()}


def _su_gap(leaves: list[str], hosts: list[str], gap: _RailGap, place: Placer) -> Finding:
    """An SU without a leaf for a rail: the leaf named where its peers' names tell it."""
    a = place(NamedEnd(gap.name or leaves[0], ""))
    named_by = ", ".join(leaves[:3]) + (", ..." if len(leaves) > 3 else "")
    servers = plural(len(hosts), "server")
    leaf = f"{gap.name}, the leaf" if gap.name else "the leaf"
    called = f" (named as its peers are: {gap.name})" if gap.name else ""
    return Finding(
        "grid_gap",
        a,
        Place("", ""),
        f"a leaf for {gap.text()}, as the other SUs have{called}",
        f"none: the SU of {named_by} ({servers}) has no leaf for HCA index {gap.rail}",
        f"power on and cable {leaf} for HCA index {gap.rail} of the SU of {named_by}: "
        f"no HCA index {gap.rail} of its {servers} is seen",
    )


def _server_gap(host: str, device: str, rail: int, leaf: str, place: Placer) -> Finding:
    port = device_name(device, rail)  # mlx5_0 -> mlx5_3: the host's own naming
    a, z = place(NamedEnd(host, port)), place(NamedEnd(leaf, ""))
    return Finding(
        "grid_gap",
        a,
        z,
        f"{host} {port} on {leaf}, its SU's leaf for HCA index {rail}",
        "no link",
        f"cable {a.text()} to {z.text()} and check that the HCA is up",
    )


def _sharp(view: View, expected: bool | None, place: Placer) -> list[Finding]:
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


def _rates(view: View, place: Placer) -> list[Finding]:
    """Links slower than the rate most links of their tier have, and unreadable rates.

    A rate the dump prints in a form no tool prints is `unreadable_rate`, as the plan check
    names it: such a field could hide a slow link.
    """
    tiers: dict[str, list[tuple[Link, int, float]]] = defaultdict(list)
    unread: list[tuple[Link, tuple[str, int] | None]] = []
    for link in view.fabric.links:
        if (link.state or "").lower() not in _UP:
            continue
        near = tier_of(view, link)
        if link.unreadable is not None:
            unread.append((link, near))
            continue
        gbps = link_gbps(link.width or "", link.speed or "")
        if near is not None and gbps is not None:
            tiers[near[0]].append((link, near[1], gbps))
    findings, usual_of = [], {}
    for tier, links in sorted(tiers.items()):
        usual, count = Counter(g for _, _, g in links).most_common(1)[0]
        if 2 * count <= len(links):
            continue  # no rate most links have: a mixed tier by design
        rate = next(f"{x.width}{x.speed}" for x, _, g in links if g == usual)
        expected = f"{rate} ({usual:g} Gb/s), as {count:,} of {len(links):,} {tier} links"
        usual_of[tier] = expected
        for link, side, gbps in links:
            if gbps < usual:
                a, z = place(view.end(link, side)), place(view.end(link, 1 - side))
                findings.append(_slow(a, z, expected, f"{link.width}{link.speed} ({gbps:g} Gb/s)"))
    for link, near in unread:
        side = near[1] if near else 0
        a, z = place(view.end(link, side)), place(view.end(link, 1 - side))
        expected = usual_of.get(near[0], "a readable rate") if near else "a readable rate"
        source = f"{link.source.file}:{link.source.line}"
        findings.append(unreadable(a, z, expected, link.unreadable or "", source))
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
    Without a plan (`place` None) a port the dumps give two peers is an `unexpected` finding
    here; with one, the plan check names it.
    """
    doubled = [second_peer(_bare, c) for c in conflicts(fabric)] if place is None else []
    place = place or _bare
    view = classify(fabric)
    findings, bands = _uplinks(view, place)
    servers = servers_of(view)
    rails = rails_of(servers) if rail_optimized(servers) else {}
    if rails:
        grid, sus, leaf_of = _grid(servers, rails, place)
        findings += _rail_mixed(servers, rails, leaf_of, place) + grid
    else:
        sus = 0
    findings += _sharp(view, sharp, place) + _rates(view, place) + doubled
    tiers = Counter(view.tier.values())
    shape = Shape(
        leaves=tiers["leaf"],
        spines=tiers["spine"],
        cores=tiers["core"],
        pods=len(bands),
        uplinks=Counter(bands).most_common(1)[0][0] if bands else "0",
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
