"""`railplan simulate`'s text and JSON views of a `SimResult` (pure: the CLI prints them)."""

from __future__ import annotations

import json

from infra.errors import escape_lines
from infra.simulate.result import Delays, SimResult

__all__ = ["result_json", "result_text"]


def result_json(result: SimResult) -> str:
    """One JSON document, keys sorted."""
    return json.dumps(result.as_json(), indent=2, sort_keys=True) + "\n"


def _pct(share: float) -> str:
    return f"{share * 100:.1f} %"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def _delay_rows(title: str, table: dict[str, Delays]) -> list[str]:
    lines = [f"{title:<16} {'jobs':>7} {'mean':>10} {'p50':>10} {'p95':>10} {'p99':>10}"]
    for name, d in table.items():
        cells = (_hours(v) for v in (d.mean_s, d.p50_s, d.p95_s, d.p99_s))
        lines.append(f"{name:<16} {d.jobs:>7} " + " ".join(f"{c:>10}" for c in cells))
    return lines


def result_text(result: SimResult) -> str:
    """The human view: trace rows, allocation, queueing tables, preemption, MIG, never-ran.

    Tenants and reasons come from the trace: control characters are shown escaped.
    """
    t = result.trace
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(t.skipped.items())) or "none"
    flagged = ", ".join(f"{n} {why}" for why, n in sorted(t.flagged.items()))
    lines = [
        f"trace {t.source} ({t.format}): {t.rows} rows, {t.used} used, skipped: {skipped};"
        f" {t.jobs} jobs" + (f" (flagged: {flagged})" if flagged else ""),
        (
            f"cluster {result.gpus} GPUs; trace window {_hours(result.window_s)} (shares below), "
            f"replay {_hours(result.horizon_s)}"
        ),
        (
            f"allocation mean {_pct(result.allocation_mean)}, p50 {_pct(result.allocation_p50)}, "
            f"p95 {_pct(result.allocation_p95)}; fragmentation {_pct(result.fragmentation)}"
        ),
    ]
    groups = ", ".join(f"{g} {_pct(v)}" for g, v in result.allocation_by_group.items())
    lines.append(f"allocation by group: {groups or 'none'}")
    fgd, waste = result.fragmentation_fgd, result.share_waste
    lines.append(
        f"FGD fragmentation {_pct(fgd.get('share', 0.0))} of the GPUs,"
        f" {_pct(fgd.get('share_of_free', 0.0))} of the free ones; held beyond what jobs asked"
        f" {waste.get('gpu_hours', 0.0):.1f} GPU-hours ({_pct(waste.get('share', 0.0))})"
    )
    outcomes = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in result.outcomes.items())
    lines.append(f"jobs: {outcomes}; makespan {_hours(result.makespan_s)}")
    lines += ["", *_delay_rows("queueing/tenant", result.queueing)]
    lines += ["", *_delay_rows("queueing/size", result.queueing_by_size)]
    lines += ["", *_delay_rows("completion", {"finished": result.jct}), ""]
    lines.append(
        f"preemptions {result.preemptions} ({result.reclaims} reclaims), "
        f"lost {result.lost_gpu_hours:.1f} GPU-hours"
    )
    lines.append(
        f"energy {result.energy_kwh:.0f} kWh, saved by power saving {result.energy_saved_kwh:.0f} kWh"
    )
    lines += _repartition_lines(result)
    lines += _never_lines(result)
    lines += [f"note: {n}" for n in result.notes]
    return escape_lines("\n".join(lines)) + "\n"


def _repartition_lines(result: SimResult) -> list[str]:
    reps = result.repartitions
    if not reps:
        return ["re-partitions: none"]
    evicted = sum(r.evicted_jobs for r in reps)
    lost = sum(r.lost_gpu_hours for r in reps)
    down = sum(r.drain_s + r.reconfigure_s for r in reps)
    return [
        (
            f"re-partitions: {len(reps)} SU changes, {evicted} jobs evicted, "
            f"{lost:.1f} GPU-hours lost, {_hours(down)} of SU drain and reconfiguration"
        )
    ]


def _never_lines(result: SimResult) -> list[str]:
    if not result.never_ran:
        return ["never ran: none"]
    reasons: dict[str, int] = {}
    for n in result.never_ran:
        reasons[n.reason] = reasons.get(n.reason, 0) + 1
    lines = [f"never ran: {len(result.never_ran)} jobs"]
    lines += [f"  {count} x {reason}" for reason, count in sorted(reasons.items())]
    return lines
