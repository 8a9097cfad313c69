"""One trace replayed on the MIG variants of a cluster, side by side (`infra.simulate.variants`).

`comparison_rows` turns the variants' `SimResult`s into the rows both `railplan simulate
--compare-mig` (text) and the report's comparison table show, already formatted, one column per
variant: mean allocation over the trace window, the allocated share of each MIG node group,
p95 queueing delay per tenant (the worst tenant alone when there are more than
`TENANT_ROWS`) and for the largest job-size bucket any variant ran, fragmentation,
preemptions, GPU-hours lost to all evictions and to re-partitioning alone, the re-partitions
(SU changes) and the SU-hours they held out of service. A figure a variant lacks (no job of
that tenant started) is ``—``. Pure and deterministic; `comparison_json` gives
``{"variants": {name: <simulate JSON>}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.errors import escape_lines
from infra.simulate.metrics import SIZE_BUCKETS
from infra.simulate.result import SimResult

__all__ = [
    "TENANT_ROWS",
    "MigComparison",
    "comparison_json",
    "comparison_rows",
    "comparison_text",
]

TENANT_ROWS = 6
"""Most tenants shown one row each; above it, one row names the worst tenant per variant."""

_MISSING = "—"
Row = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class MigComparison:
    """The variants' results in table order and the node groups that split GPUs with MIG."""

    results: Mapping[str, SimResult]
    groups: tuple[str, ...]


def _pct(share: float | None) -> str:
    return _MISSING if share is None or math.isnan(share) else f"{share * 100:.1f} %"


def _delay(seconds: float | None) -> str:
    """A delay as a reader says it: ``0 s``, ``42 s``, ``17 min``, ``4.3 h``, ``2.1 d``."""
    if seconds is None or math.isnan(seconds):
        return _MISSING
    for unit, scale in (("d", 86_400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= scale:
            return f"{round(seconds / scale, 1):g} {unit}"
    return f"{round(seconds):,} s"


def _bucket_label(bucket: str) -> str:
    if bucket.startswith(">"):
        return f"jobs over {bucket[1:]} GPUs"
    if bucket.startswith("<="):
        return f"jobs of at most {bucket[2:]} GPU"
    return f"jobs of {bucket} GPUs"


def _tenant_rows(results: Sequence[SimResult]) -> list[Row]:
    tenants = sorted({t for r in results for t in r.queueing})
    if len(tenants) <= TENANT_ROWS:
        return [
            (
                f"p95 queueing, tenant {t}",
                tuple(
                    _delay(r.queueing[t].p95_s) if t in r.queueing else _MISSING for r in results
                ),
            )
            for t in tenants
        ]
    cells = []
    for r in results:
        worst = max(r.queueing.items(), key=lambda kv: (kv[1].p95_s, kv[0]), default=None)
        cells.append(_MISSING if worst is None else f"{_delay(worst[1].p95_s)} ({worst[0]})")
    return [("p95 queueing, worst tenant", tuple(cells))]


def _size_rows(results: Sequence[SimResult]) -> list[Row]:
    present = [b for b in SIZE_BUCKETS if any(b in r.queueing_by_size for r in results)]
    if not present:
        return []
    largest = present[-1]
    cells = tuple(
        _delay(r.queueing_by_size[largest].p95_s) if largest in r.queueing_by_size else _MISSING
        for r in results
    )
    return [(f"p95 queueing, {_bucket_label(largest)}", cells)]


def _repartition_rows(results: Sequence[SimResult]) -> list[Row]:
    def lost(r: SimResult) -> str:
        return f"{sum(p.lost_gpu_hours for p in r.repartitions):,.1f}"

    def down(r: SimResult) -> str:
        return f"{sum(p.drain_s + p.reconfigure_s for p in r.repartitions) / 3600:,.1f}"

    return [
        ("GPU-hours lost, all evictions", tuple(f"{r.lost_gpu_hours:,.1f}" for r in results)),
        ("GPU-hours lost to re-partitioning", tuple(lost(r) for r in results)),
        ("re-partitions (SU changes)", tuple(f"{len(r.repartitions):,}" for r in results)),
        ("SU-hours draining or reconfiguring", tuple(down(r) for r in results)),
    ]


def comparison_rows(comparison: MigComparison) -> list[Row]:
    """The table's rows: ``(label, one formatted cell per variant in table order)``."""
    results = list(comparison.results.values())
    groups = [
        (
            f"allocation, node group {g}",
            tuple(_pct(r.allocation_by_group.get(g)) for r in results),
        )
        for g in comparison.groups
    ]
    return [
        ("allocation, mean over the trace window", tuple(_pct(r.allocation_mean) for r in results)),
        *groups,
        *_tenant_rows(results),
        *_size_rows(results),
        ("fragmentation", tuple(_pct(r.fragmentation) for r in results)),
        ("preemptions", tuple(f"{r.preemptions:,}" for r in results)),
        *_repartition_rows(results),
    ]


def comparison_text(comparison: MigComparison) -> str:
    """The side-by-side table as text: a label column, then one right-aligned column per variant."""
    names = list(comparison.results)
    rows = comparison_rows(comparison)
    first = max([len(label) for label, _ in rows] + [0])
    widths = [max([len(n)] + [len(cells[i]) for _, cells in rows]) for i, n in enumerate(names)]
    head = " " * first + "".join(f"  {n:>{w}}" for n, w in zip(names, widths, strict=True))
    lines = [head.rstrip()]
    for label, cells in rows:
        lines.append(
            f"{label:<{first}}" + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths, strict=True))
        )
    trace = next(iter(comparison.results.values())).trace if comparison.results else None
    if trace is not None:
        lines.append(
            f"trace {trace.source}: {trace.used:,} of {trace.rows:,} rows replayed on each"
        )
    return escape_lines("\n".join(lines)) + "\n"  # tenants come from the trace


def comparison_json(comparison: MigComparison) -> str:
    """``{"variants": {name: <simulate JSON>}}``, keys sorted (variant order is in the text view)."""
    doc = {"variants": {name: r.as_json() for name, r in comparison.results.items()}}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
