"""Rules about the site: rack power, space, cooling, address space and device names."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import group_path, known_groups
from infra.topology.addressing import usable_hosts
from infra.topology.model import Host, Pdu, Plan, Server, Switch
from infra.wording import plural


class Named(Protocol):
    """A planned item with a name (switch, host, PDU, rack)."""

    @property
    def name(self) -> str:
        """Its name, unique in the plan."""


@rule(
    "RP050",
    "rack-power-below-node",
    Severity.ERROR,
    "The rack power budget is below one node's maximum power.",
)
def rack_power_below_node(ctx: LintContext) -> Iterator[Violation]:
    """A rack must be able to power at least one server at its maximum draw.

    Why: a DGX H100 draws up to 10.2 kW; in a 8 kW rack it cannot be placed at all (and
    power-capping it below its max costs throughput and trips PSU redundancy alarms).
    Fix: raise `site.rack.power_kw` to at least the node's maximum, or choose a smaller node.
    """
    rack_kw = ctx.loaded.spec.site.rack.power_kw
    for i, _, node, _ in known_groups(ctx):
        if node.max_power_kw > rack_kw:
            yield Violation(
                group_path(i, "node"),
                f"{node.name} draws up to {node.max_power_kw:g} kW but racks are "
                f"budgeted at {rack_kw:g} kW",
                "raise site.rack.power_kw",
            )


@rule(
    "RP051", "rack-space-below-node", Severity.ERROR, "A rack has fewer units than one node needs."
)
def rack_space_below_node(ctx: LintContext) -> Iterator[Violation]:
    """A rack must hold at least one server.

    Why: the node cannot be placed; the rack plan fails.
    Fix: raise `site.rack.units`.
    """
    units = ctx.loaded.spec.site.rack.units
    for i, _, node, _ in known_groups(ctx):
        if node.rack_units > units:
            yield Violation(
                group_path(i, "node"),
                f"{node.name} needs {node.rack_units}U but racks have {units}U",
                "raise site.rack.units",
            )


@rule(
    "RP052",
    "air-cooling-exceeded",
    Severity.WARNING,
    "Air-cooled racks are budgeted above what air can cool (an error at a limit you set).",
)
def air_cooling_exceeded(ctx: LintContext) -> Iterator[Violation]:
    """An air-cooled rack's power budget must stay within what air can remove.

    Why: every watt becomes heat; past roughly 40-45 kW per rack (NVIDIA's air-cooled DGX
    H100 racks run just above 40 kW) air needs rear-door heat exchangers, and beyond that
    direct liquid cooling. Planning servers up to a budget the hall cannot cool means
    throttled GPUs or racks that must be left half empty.
    railplan's own limit (catalog `site.air_cooling_limit_kw`, 45 kW) is a rule of thumb, so
    exceeding it is a warning; exceeding an `air_cooling_limit_kw` you set for the rack class
    (your hall's rating) is an error. Every rack class is checked.
    Fix: lower the class's `power_kw`, set `cooling: liquid`, or — if your hall is rated
    higher — set its `air_cooling_limit_kw` to that rating.
    """
    site = ctx.loaded.spec.site
    classes = {"site.rack": site.rack} | {
        f"site.rack_classes.{name}": rack for name, rack in site.rack_classes.items()
    }
    for path, rack in classes.items():
        own = rack.air_cooling_limit_kw
        limit = own or ctx.catalog.site["air_cooling_limit_kw"]
        if rack.cooling == "air" and rack.power_kw > limit:
            whose = "the limit set" if own else "railplan's default air-cooling limit"
            yield Violation(
                f"{path}.power_kw",
                f"air-cooled racks budgeted at {rack.power_kw:g} kW exceed {whose} of {limit:g} kW",
                "use cooling: liquid, lower power_kw, or set air_cooling_limit_kw to "
                "your hall's rating",
                Severity.ERROR if own else None,
            )


@rule(
    "RP053",
    "cidr-too-small",
    Severity.ERROR,
    "A management or BMC network has fewer addresses than devices.",
)
def cidr_too_small(ctx: LintContext) -> Iterator[Violation]:
    """Management and BMC networks need an address for every device on them.

    Why: addresses are assigned from these CIDRs; with too few, the last devices get none and
    the inventory cannot be rendered. Each CIDR is split into `2**site.address_block_bits`
    blocks (block 0 for shared switches, then one per node group, so growing one group never
    renumbers another); a group's block must hold its servers and its SUs' devices. The BMC
    network serves server BMCs, every switch's management port, every PDU and the UFM host.
    Fix: widen the CIDR with a shorter prefix (a /16 holds sixteen /20 blocks of 4,094 hosts).
    """
    site, plan = ctx.loaded.spec.site, ctx.plan
    if plan is None:
        servers = ctx.loaded.spec.gpu_servers
        for field, network in (
            ("management_cidr", site.management_cidr),
            ("bmc_cidr", site.bmc_cidr),
        ):
            if usable_hosts(network) < servers:
                yield Violation(
                    f"site.{field}",
                    f"{network} has {plural(usable_hosts(network), 'host address', 'host addresses')} "
                    f"for {plural(servers, 'server')}",
                    _shorter_prefix_hint(servers),
                )
        return
    bmc_devices: list[Server | Switch | Pdu | Host] = [
        *plan.servers,
        *plan.switches,
        *plan.pdus,
        *(h for h in plan.hosts if h.rack),
    ]
    for field, network, missing in (
        (
            "management_cidr",
            site.management_cidr,
            [s.name for s in plan.servers if s.mgmt_ip is None],
        ),
        ("bmc_cidr", site.bmc_cidr, [d.name for d in bmc_devices if d.bmc_ip is None]),
    ):
        if missing:
            yield Violation(
                f"site.{field}",
                f"{plural(len(missing), 'device')} {'gets' if len(missing) == 1 else 'get'} no address "
                f"from {network} (first: {missing[0]}); "
                f"each of its {2**site.address_block_bits} blocks (shared, then one per node "
                "group) holds its own devices",
                f"use a shorter prefix than /{network.prefixlen} (e.g. "
                f"/{max(8, network.prefixlen - 4)}: 16 times the addresses), or lower "
                "site.address_block_bits",
            )


def _shorter_prefix_hint(hosts: int) -> str:
    """``use a shorter prefix such as /24`` for the longest prefix that holds ``hosts``."""
    prefix = 32 - max(2, (hosts + 1).bit_length())  # network and broadcast take two addresses
    return f"use a shorter prefix such as /{prefix} (fewer prefix bits, more addresses)"


@rule("RP054", "cidr-overlap", Severity.ERROR, "Management and BMC networks overlap.")
def cidr_overlap(ctx: LintContext) -> Iterator[Violation]:
    """The in-band management and out-of-band BMC networks must not overlap.

    Why: overlapping networks route BMC traffic into the host network (and the reverse) and
    give two devices one address.
    Fix: choose disjoint CIDRs, e.g. 10.10.0.0/16 and 10.11.0.0/16.
    """
    site = ctx.loaded.spec.site
    if site.management_cidr.overlaps(site.bmc_cidr):
        yield Violation(
            "site.bmc_cidr", f"{site.bmc_cidr} overlaps management_cidr {site.management_cidr}"
        )


@rule(
    "RP056",
    "hostname-device-clash",
    Severity.ERROR,
    "A server's hostname is the name of a planned switch, PDU, host or rack.",
    needs_plan=True,
)
def hostname_device_clash(ctx: LintContext) -> Iterator[Violation]:
    """Server hostnames must differ from every other planned device's name.

    Why: names are identities in the cabling sheet, the inventory and DNS; a pattern such as
    `ib0-leaf-su001-r{index}` that renders a leaf switch's name plans a cable from a device
    to itself and gives two devices one address record.
    Fix: give the node group a `hostname` prefix that no switch, PDU, host or rack uses
    (switches start with `ib`, `eth` or `oob`; racks with the group name).
    """
    plan = ctx.plan
    if plan is None:
        return
    others = {d.name: kind for kind, items in _named_devices(plan) for d in items}
    groups = {g.name: i for i, g in enumerate(ctx.loaded.spec.node_groups)}
    reported: set[str] = set()
    for server in plan.servers:
        kind = others.get(server.name)
        if kind is None or server.group in reported:
            continue
        reported.add(server.group)
        yield Violation(
            group_path(groups.get(server.group, 0), "hostname"),
            f"server {server.name!r} of node group {server.group!r} has the name of a "
            f"planned {kind}",
            "use a hostname prefix no switch, PDU, host or rack name starts with",
        )


def _named_devices(plan: Plan) -> list[tuple[str, Sequence[Named]]]:
    return [
        ("switch", plan.switches),
        ("host", plan.hosts),
        ("PDU", plan.pdus),
        ("rack", plan.racks),
    ]
