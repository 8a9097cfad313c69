"""The `rack_power`, `cluster_power` and `cost_per_pflop_day` budgets, as stated bounds.

Each figure is reported at maximum draw (the number these budgets always gave) with a band
from typical to maximum draw (`power_bounds`), and the detail says which part of it is a PSU
rating (an upper bound), which devices have no sourced typical draw and which figures the
spec's ``site.device_power`` replaced. The default conservative bound tests the maximum.
"""

from __future__ import annotations

from dataclasses import replace

from infra.budget import power_cost
from infra.budget.budget_result import BudgetResult
from infra.budget.cluster import BudgetError
from infra.budget.power_bounds import PowerBounds, cluster_bounds, rack_bounds
from infra.catalog import Catalog
from infra.errors import spelling_hint
from infra.spec import Spec
from infra.spec.budgets import CostBudget, PowerBudget
from infra.topology import Plan
from infra.wording import plural

__all__ = ["cluster_power", "cost", "rack_power", "unknown_power_overrides"]


def unknown_power_overrides(spec: Spec, cat: Catalog) -> list[BudgetError]:
    """One error per ``site.device_power`` key that names no catalog node or switch.

    Lint RP007 reports each; a power or cost budget cannot be evaluated with the first.
    """
    known = sorted({*cat.nodes, *cat.switches})
    return [
        BudgetError(
            f"site.device_power names {device!r}, no catalog node or switch",
            path=f"site.device_power.{device}",
            hint=spelling_hint(device, known) or "use a catalog id, e.g. qm8790",
        )
        for device in spec.site.device_power
        if device not in cat.nodes and device not in cat.switches
    ]


def _check_overrides(spec: Spec, cat: Catalog) -> None:
    """Refuse a ``site.device_power`` key that names no catalog node or switch."""
    for error in unknown_power_overrides(spec, cat)[:1]:
        raise error


def _band(r: BudgetResult, bounds: PowerBounds, regime: str) -> BudgetResult:
    low, high = bounds.as_band()
    return replace(r, band_low=low, band_high=high, band_regime=regime)


def _caveat(bounds: PowerBounds) -> str:
    text = bounds.caveats()
    return f"; {text}" if text else ""


def rack_power(
    b: PowerBudget, spec: Spec, cat: Catalog, plan: Plan, r: BudgetResult
) -> BudgetResult:
    """The hottest rack at maximum draw; band from its typical draw."""
    _check_overrides(spec, cat)
    racks = rack_bounds(spec, cat, plan)
    if not racks:
        return replace(r, predicted=0.0, limit=b.max_kw, unit="kW", detail="no racked devices")
    name = max(racks, key=lambda k: (racks[k].max_kw, k))
    bounds = racks[name]
    result = replace(
        r,
        predicted=round(bounds.max_kw, 3),
        limit=b.max_kw,
        unit="kW",
        detail=f"hottest of {plural(len(plan.racks), 'rack')} ({name}) at maximum draw, "
        f"{bounds.typical_kw:,.2f} kW typical{_caveat(bounds)}",
    )
    return _band(result, bounds, "typical .. maximum draw")


def cluster_power(
    b: PowerBudget, spec: Spec, cat: Catalog, plan: Plan, r: BudgetResult
) -> BudgetResult:
    """IT power of servers and switches at maximum draw; band from typical draw."""
    _check_overrides(spec, cat)
    it = power_cost.it_power(plan, cat)
    bounds = cluster_bounds(spec, cat, plan, it.unracked_kw + it.estimated_kw)
    note = " (cloud servers estimated from GPU TDP)" if it.is_estimate else ""
    result = replace(
        r,
        predicted=round(bounds.max_kw, 3),
        limit=b.max_kw,
        unit="kW",
        detail=f"IT power of servers and switches at maximum draw{note}, "
        f"{bounds.typical_kw:,.1f} kW typical{_caveat(bounds)}",
    )
    return _band(result, bounds, "typical .. maximum draw")


def cost(b: CostBudget, spec: Spec, cat: Catalog, plan: Plan, r: BudgetResult) -> BudgetResult:
    """USD per PFLOP-day at maximum IT draw; band from typical draw."""
    _check_overrides(spec, cat)
    it = power_cost.it_power(plan, cat)
    bounds = cluster_bounds(spec, cat, plan, it.unracked_kw + it.estimated_kw)
    try:
        dense = power_cost.cluster_dense_tflops(plan, cat, b.precision)
        high = power_cost.cost_per_pflop_day(bounds.max_kw, dense, b.price_per_kwh, b.pue, b.mfu)
        low = power_cost.cost_per_pflop_day(bounds.typical_kw, dense, b.price_per_kwh, b.pue, b.mfu)
    except ValueError as exc:
        raise BudgetError(str(exc), path=f"{r.path}.precision") from None
    hardware = 0.0
    note = ""
    if b.price_per_node_usd:  # straight-line amortisation: USD per day over PFLOP-days per day
        per_day = len(plan.servers) * b.price_per_node_usd / (b.amortize_years * 365.0)
        hardware = per_day / high.delivered_pflops
        note = (
            f"; hardware {hardware:,.2f} USD ({len(plan.servers):,} servers at "
            f"{b.price_per_node_usd:,.0f} USD over {b.amortize_years:g} years) + energy "
            f"{high.usd_per_pflop_day:,.2f} USD"
        )
    result = replace(
        r,
        predicted=high.usd_per_pflop_day + hardware,
        limit=b.max_usd,
        unit="USD",
        detail=f"{high.facility_kw:,.0f} kW facility (maximum draw) for "
        f"{high.delivered_pflops:,.1f} delivered PFLOP/s: {high.kwh_per_pflop_day:,.0f} kWh "
        f"per PFLOP-day{note}{_caveat(bounds)}",
    )
    costs = PowerBounds(low.usd_per_pflop_day + hardware, high.usd_per_pflop_day + hardware)
    return _band(result, costs, "energy at typical .. maximum draw")
