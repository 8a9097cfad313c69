"""The simulation section of `railplan report`: what replaying a job trace on the plan gave.

`simulation_section` turns a `SimResult` (`infra.simulate.result`) into one HTML
``<section>``: a summary table (allocation, fragmentation, preemptions and reclaims, lost
GPU-hours, energy, the trace's rows used and skipped per reason), three plots
(`simulation_svg`: allocated GPUs over time with the repartitions, queueing delay per
tenant, the 24 h profile), the repartitions (the first `REPARTITION_ROWS`, then a count),
the jobs that never ran grouped by reason, and queueing per tenant and per job size. Given
the same trace replayed on the spec's MIG variants (`infra.simulate.compare.MigComparison`),
it opens with their side-by-side table (the rows `railplan simulate --compare-mig` prints).
It is pure and deterministic. Tenant names, reasons and the trace's path come from user files:
the template (``templates/report/simulation.html.j2``) renders with autoescape and the SVG
helpers escape, so none of them can open a tag.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from infra.render.templating import render_html
from infra.report.simulation_svg import (
    allocation_chart,
    clock,
    duration,
    hourly_chart,
    queueing_chart,
)
from infra.simulate.compare import MigComparison, comparison_rows
from infra.simulate.result import Delays, NeverRan, Repartition, SimResult

__all__ = ["REPARTITION_ROWS", "simulation_section"]

REPARTITION_ROWS = 20
_EXAMPLES = 3  # job names shown per never-ran reason


@dataclass(frozen=True)
class _Reason:
    reason: str
    jobs: int
    examples: str


def _pct(share: float) -> str:
    return "—" if math.isnan(share) else f"{share:.1%}"


def _number(value: float, digits: int = 1) -> str:
    return "—" if math.isnan(value) else f"{value:,.{digits}f}"


def _span(seconds: float) -> str:
    """The replay's horizon: ``7 d 0 h`` or ``5.2 h``."""
    if seconds >= 86400:
        days, hours = divmod(round(seconds / 3600), 24)  # round first: 1 d 23.99 h is 2 d 0 h
        return f"{days} d {hours} h"
    return duration(seconds)


def _shares(shares: dict[str, float]) -> str:
    return ", ".join(f"{name}: {_pct(share)}" for name, share in sorted(shares.items()))


def _trace_rows(result: SimResult) -> list[tuple[str, str]]:
    t = result.trace
    skipped = sum(t.skipped.values())
    reasons = "; ".join(f"{reason}: {n:,}" for reason, n in sorted(t.skipped.items()))
    return [
        ("trace", f"{t.source} ({t.format})"),
        ("rows", f"{t.rows:,}: {t.used:,} used, {skipped:,} skipped"),
        *([("skipped", reasons)] if reasons else []),
    ]


def _energy(result: SimResult) -> str:
    saved, used = result.energy_saved_kwh, result.energy_kwh
    base = used + saved
    share = f" ({saved / base:.1%} of the draw without power saving)" if base > 0 else ""
    return f"{_number(used, 0)} kWh used; {_number(saved, 0)} kWh saved{share}"


def _allocation(result: SimResult) -> list[tuple[str, str]]:
    mean, p50, p95 = (
        _pct(s) for s in (result.allocation_mean, result.allocation_p50, result.allocation_p95)
    )
    rows = [("allocation", f"mean {mean}, p50 {p50}, p95 {p95}")]
    if result.allocation_by_group:
        rows.append(("by node group", _shares(result.allocation_by_group)))
    if result.allocation_by_tenant:
        rows.append(("by tenant", _shares(result.allocation_by_tenant)))
    return rows


def _summary(result: SimResult) -> list[tuple[str, str]]:
    lost = sum(r.lost_gpu_hours for r in result.repartitions)
    return [
        *_trace_rows(result),
        ("cluster", f"{result.gpus:,} GPUs over {_span(result.horizon_s)}"),
        ("trace window (the shares)", _span(result.window_s)),
        *_allocation(result),
        ("fragmentation", f"{_pct(result.fragmentation)} of GPUs free but unusable by the queue"),
        ("preemptions", f"{result.preemptions:,} preemptions, {result.reclaims:,} reclaims"),
        ("lost GPU-hours", f"{_number(result.lost_gpu_hours)}; repartitions: {_number(lost)}"),
        ("repartitions", f"{len(result.repartitions):,}"),
        ("energy", _energy(result)),
        ("never ran", f"{len(result.never_ran):,} jobs"),
    ]


def _delay_rows(delays: dict[str, Delays]) -> list[tuple[str, ...]]:
    return [
        (name, f"{d.jobs:,}", *map(duration, (d.mean_s, d.p50_s, d.p95_s, d.p99_s)))
        for name, d in delays.items()
    ]


def _repartition_row(r: Repartition) -> tuple[str, ...]:
    return (
        clock(r.at_s),
        r.group,
        r.su,
        r.mig,
        f"{r.nodes:,}",
        duration(r.drain_s),
        duration(r.reconfigure_s),
        f"{r.evicted_jobs:,}",
        _number(r.lost_gpu_hours),
    )


def _reasons(never_ran: Sequence[NeverRan]) -> list[_Reason]:
    """Jobs that never ran, grouped by reason, the most frequent first."""
    counts = Counter(n.reason for n in never_ran)
    out = []
    for reason, jobs in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        first = [n for n in never_ran if n.reason == reason][:_EXAMPLES]
        examples = ", ".join(f"{n.job} (line {n.line})" for n in first)
        out.append(_Reason(reason, jobs, examples + (", …" if jobs > len(first) else "")))
    return out


def _ran(result: SimResult) -> int:
    return sum(d.jobs for d in result.queueing.values())


def _declared(result: SimResult, variants: MigComparison | None) -> str | None:
    """The name of the variant ``result`` is (the spec as declared), if any."""
    if variants is None:
        return None
    return next((name for name, r in variants.results.items() if r is result), None)


def simulation_section(
    result: SimResult,
    *,
    title: str = "Simulation",
    anchor: str = "simulation",
    variants: MigComparison | None = None,
) -> str:
    """The report's ``<section id=anchor>`` for ``result`` (a distinct ``anchor`` per replay).

    ``variants``: the same trace on the spec's MIG variants, ``result`` among them or not.
    """
    ran = _ran(result)
    tenants = dict(sorted(result.queueing.items()))
    plots = ran > 0
    return render_html(
        "report/simulation.html.j2",
        title=title,
        anchor=anchor,
        ran=ran,
        variant_names=list(variants.results) if variants else [],
        variant_rows=comparison_rows(variants) if variants else [],
        declared=_declared(result, variants),
        summary=_summary(result),
        notes=result.notes,
        allocation=allocation_chart(
            result.series, result.gpus, result.horizon_s, result.repartitions
        )
        if plots
        else None,
        queueing=queueing_chart(tenants) if plots else None,
        hourly=hourly_chart(result.profile_24h, result.allocation_mean)
        if plots and len(result.profile_24h) == 24
        else None,
        repartitions=[_repartition_row(r) for r in result.repartitions[:REPARTITION_ROWS]],
        more_repartitions=max(0, len(result.repartitions) - REPARTITION_ROWS),
        repartition_count=len(result.repartitions),
        reasons=_reasons(result.never_ran),
        never_ran=len(result.never_ran),
        by_tenant=_delay_rows(tenants),
        by_size=_delay_rows(result.queueing_by_size),
    )
