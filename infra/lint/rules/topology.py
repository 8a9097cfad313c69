"""Rules that need the planned topology: radix, oversubscription, balance, SHARP flows, racks.

They read `ctx.plan`, built once per spec. A spec that cannot be planned gets one RP049
finding (at the spec path the planner names) and the other plan rules stay silent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from operator import attrgetter

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.wording import plural

_ENDS = attrgetter("a", "b")  # a cable's (A device, B device)
_FABRIC_PATH = {
    "compute": "fabrics.compute.switch",
    "storage": "fabrics.storage.switch",
    "inband": "fabrics.management.inband_switch",
    "oob": "fabrics.management.oob_switch",
}


@rule("RP049", "plan-failed", Severity.ERROR, "The spec cannot be planned.", needs_plan=True)
def plan_failed(ctx: LintContext) -> Iterator[Violation]:
    """The spec must expand into a plan (racks, fabrics, addresses).

    Why: a spec that cannot be planned cannot be built: a fabric too large for three tiers
    of its switch radix, rails that do not split into the planes, a scalable unit that leaves
    a leaf no uplink port, a node that fits in no rack.
    Fix: follow the message; for fabrics beyond three tiers set `fabrics.compute.planes`.
    """
    error = ctx.plan_error
    if error is not None:
        yield Violation(error.path, error.message, error.hint or "")


@rule(
    "RP045",
    "switch-radix-exceeded",
    Severity.ERROR,
    "A switch is cabled to more ports than it has.",
    needs_plan=True,
)
def switch_radix_exceeded(ctx: LintContext) -> Iterator[Violation]:
    """No switch may use more ports than its radix.

    Why: the planned wiring cannot be built; usually a pinned spine count too small for the
    leaves' uplinks, or a scalable unit larger than a leaf's down ports.
    Fix: drop `fabrics.compute.spines` (railplan then sizes the spines), or lower `su_size`.
    """
    plan = ctx.plan
    if plan is None:
        return
    # counted end by end in C: a large plan has a million cable ends
    used = Counter(c.a for c in plan.cables if c.a_port != "mgmt0")
    used.update(c.b for c in plan.cables if c.b_port != "mgmt0")
    worst: dict[str, tuple[str, int, int]] = {}
    for switch in plan.switches:
        if used[switch.name] > switch.ports and switch.fabric not in worst:
            worst[switch.fabric] = (switch.name, used[switch.name], switch.ports)
    for fabric, (name, n, ports) in sorted(worst.items()):
        yield Violation(
            _FABRIC_PATH[fabric],
            f"{name} would need {plural(n, 'port')} but has {ports}",
            "let railplan size the spines, or lower su_size",
        )


@rule(
    "RP046",
    "oversubscription-exceeded",
    Severity.ERROR,
    "The planned leaves are more oversubscribed than the spec allows.",
    needs_plan=True,
)
def oversubscription_exceeded(ctx: LintContext) -> Iterator[Violation]:
    """Planned leaf down:up ratios must not exceed the fabric's `oversubscription`.

    Why: when a scalable unit takes more than half of a leaf's ports, fewer ports remain for
    uplinks than a 1:1 (or the asked-for) ratio needs; collectives that cross the spine then
    run slower than the budget assumed.
    Fix: lower `su_size` to at most radix/(1+ratio) servers, or accept the ratio explicitly.
    """
    plan = ctx.plan
    compute = ctx.loaded.spec.fabrics.compute
    if plan is None or compute is None or "compute" not in plan.fabrics:
        return
    planned = plan.fabrics["compute"].oversubscription
    if planned > compute.oversubscription + 1e-9:
        yield Violation(
            "fabrics.compute.su_size",
            f"leaves would run {planned:g}:1 but the spec allows {compute.oversubscription:g}:1",
            f"use su_size of at most {plan.fabrics['compute'].radix // 2}",
        )


@rule(
    "RP047",
    "leaf-spine-unbalanced",
    Severity.WARNING,
    "Leaves have unequal numbers of links to their spines.",
    needs_plan=True,
)
def leaf_spine_unbalanced(ctx: LintContext) -> Iterator[Violation]:
    """Every leaf should reach every spine of its pod with an even share of its uplinks.

    Why: ECMP hashes flows evenly over equal-cost uplinks; a spine with fewer links from a
    leaf congests first and the fabric delivers less than its cable count suggests. Two-tier
    fabrics should give every leaf the same links to every spine (NVIDIA's sizes do); in
    three tiers railplan deals a pod's links out evenly, counts differing by at most one.
    Fix: use a spine count that divides each leaf's uplinks (drop `spines` to let railplan
    choose).
    """
    plan = ctx.plan
    if plan is None:
        return
    for fabric in ("compute", "storage"):
        if fabric not in plan.fabrics:
            continue
        links = Counter(map(_ENDS, plan.cables_in(fabric, "leaf_spine")))
        per_leaf: dict[str, list[int]] = defaultdict(list)
        for (leaf, _), n in links.items():
            per_leaf[leaf].append(n)
        if plan.fabrics[fabric].tiers == 2:
            unbalanced = len(set(links.values())) > 1
        else:
            unbalanced = any(max(v) - min(v) > 1 for v in per_leaf.values())
        if unbalanced:
            yield Violation(
                _FABRIC_PATH[fabric].rsplit(".", 1)[0],
                f"{fabric} leaves have {min(links.values())} to "
                f"{max(links.values())} links per spine",
                "choose a spine count that divides the leaf uplinks",
            )


@rule(
    "RP055",
    "rack-over-budget",
    Severity.ERROR,
    "A planned rack exceeds the rack power budget or its units.",
    needs_plan=True,
)
def rack_over_budget(ctx: LintContext) -> Iterator[Violation]:
    """Every planned rack must stay within its rack class's `power_kw` and `units`.

    Why: the placer fills racks up to their class's budget, but a single switch or server
    can exceed it on its own; that rack would trip its breakers or not close. Each class
    (`site.rack`, `site.rack_classes.<name>`) is checked on its own racks.
    Fix: raise the class's budget, or choose equipment that fits.
    """
    plan = ctx.plan
    if plan is None:
        return
    reported: set[tuple[str, str]] = set()
    for rack in plan.racks:
        path = (
            "site.rack" if rack.rack_class == "default" else f"site.rack_classes.{rack.rack_class}"
        )
        if rack.power_kw > rack.power_budget_kw + 1e-9 and (path, "power") not in reported:
            reported.add((path, "power"))
            yield Violation(
                f"{path}.power_kw",
                f"rack {rack.name} would draw {rack.power_kw:g} kW of a "
                f"{rack.power_budget_kw:g} kW budget",
                "raise the rack class's power_kw",
            )
        if rack.units_used > rack.units and (path, "units") not in reported:
            reported.add((path, "units"))
            yield Violation(
                f"{path}.units",
                f"rack {rack.name} would need {rack.units_used}U of {rack.units}U",
                "raise the rack class's units",
            )


@rule(
    "RP057",
    "ufm-no-port",
    Severity.WARNING,
    "The UFM appliance has no free fabric port in the plan.",
    needs_plan=True,
)
def ufm_no_port(ctx: LintContext) -> Iterator[Violation]:
    """A UFM-managed fabric needs fabric ports for the UFM appliance.

    Why: NVIDIA's reference design gives the UFM the ports of one server slot ("a DGX system
    must be removed to accommodate for UFM connectivity"); when every slot and spine port is
    taken, the subnet manager has nowhere to plug in.
    Fix: plan one server fewer (127 instead of 128 in a 4-SU H100 design).
    """
    plan = ctx.plan
    for warning in plan.warnings if plan is not None else ():
        if warning.code == "ufm-no-port":
            yield Violation(warning.path, warning.message, warning.hint)


@rule(
    "RP058",
    "ufm-moves-with-growth",
    Severity.WARNING,
    "Growing to max_sus takes the UFM appliance's fabric ports.",
    needs_plan=True,
)
def ufm_moves_with_growth(ctx: LintContext) -> Iterator[Violation]:
    """The UFM appliance should sit on ports that growth up to `max_sus` leaves free.

    Why: `fabrics.compute.max_sus` promises that growing the cluster moves no cable, but
    when the fabric grown to that size has every slot and spine port in use, the UFM can
    only take a slot or port that later servers need, and it is recabled when they come.
    Fix: keep one server slot of the grown fabric free (grow to max_sus x su_size - 1
    servers), or raise `max_sus`.
    """
    plan = ctx.plan
    for warning in plan.warnings if plan is not None else ():
        if warning.code == "ufm-moves-with-growth":
            yield Violation(warning.path, warning.message, warning.hint)
