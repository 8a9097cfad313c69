"""Tables for the terminal and JSON: `railplan predict` (nccl-tests style) and budgets."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from infra.budget.collectives import CommTopology, Prediction
from infra.budget.evaluate import BudgetResult
from infra.catalog.nccl import nccl_has
from infra.wording import plural

__all__ = ["budgets_json", "budgets_text", "predict_json", "predict_text"]


def _finite(value: float, digits: int | None = None) -> float | None:
    """``value`` (rounded to ``digits``), or None (JSON null) when it is infinite or NaN.

    JSON has no Infinity or NaN; `json.dumps` would write them and break every parser.
    """
    if not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)


def _dumps(doc: object) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"


def predict_json(collective: str, t: CommTopology, rows: Sequence[Prediction]) -> str:
    """The docs/design.md JSON of `railplan predict --format json`."""
    doc = {
        "collective": collective,
        "gpus": t.ranks,
        "nodes": t.nodes,
        "rows": [
            {
                "bytes": r.bytes,
                "time_us": _finite(r.time_us),
                "algbw_GBps": _finite(r.algbw_GBps),
                "busbw_GBps": _finite(r.busbw_GBps),
                "algorithm": r.algorithm,
                "protocol": r.protocol,
            }
            for r in rows
        ],
    }
    return _dumps(doc)


def predict_text(collective: str, node: str, t: CommTopology, rows: Sequence[Prediction]) -> str:
    """An nccl-tests-like table: size, time, algbw, busbw, algorithm/protocol."""
    nvls = t.nvls and t.arch == "hopper" and t.nvswitch and nccl_has(t.nccl, "nvls")
    fabric = f"{t.tiers}-tier" + (
        f", {t.oversubscription:g}:1 beyond {t.leaf_nodes} nodes"
        if t.spans_leaf_groups and t.oversubscription > 1
        else ""
    )
    head = [
        (
            f"# railplan predict: {collective} on {t.ranks} GPUs ({t.nodes} x {t.gpus_per_node}, "
            f"{node}); NICs {t.nics} x {t.nic_gbps:g} Gb/s{' EFA' if t.efa else ''}; "
            f"NVLS {'yes' if nvls else 'no'}; SHARP {'yes' if t.sharp else 'no'}; "
            f"NCCL {t.nccl}" + (f"; fabric {fabric}" if t.nodes > 1 and t.leaf_nodes else "")
        ),
        "# model: NCCL tuning.cc structure; see docs/accuracy.md for its error",
        (
            f"#{'size (B)':>13} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  "
            "algorithm/protocol"
        ),
    ]
    body = [
        f"{r.bytes:>14} {r.time_us:>12.2f} {r.algbw_GBps:>13.2f} {r.busbw_GBps:>13.2f}  "
        f"{r.algorithm}/{r.protocol}"
        for r in rows
    ]
    large = [r for r in rows if r.bytes >= 2**30] or rows[-1:]
    tail = [f"# large-message busbw: {max(r.busbw_GBps for r in large):.2f} GB/s"]
    return "\n".join(head + body + tail) + "\n"


def _value(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:.3f}"
    return f"{value:,.2f} {unit}"


def budgets_text(results: Sequence[BudgetResult]) -> str:
    """One line per budget: verdict, predicted vs limit, headroom, and why."""
    if not results:
        return "no budgets declared (see `budgets:` in `railplan schema`)\n"
    lines = []
    for r in results:
        if r.error:
            lines.append(f"ERROR  {r.path}: cannot evaluate: {r.error}")
            continue
        op = "<=" if r.better == "lower" else ">="
        verdict = (r.verdict if r.passed else r.verdict.upper()).ljust(5)  # pass, FAIL, MISS
        lines.append(
            f"{verdict}  {r.path}: {_value(r.predicted, r.unit)} {op} "
            f"{_value(r.limit, r.unit)} (headroom {r.margin:+.1%})"
        )
        lines.append(f"       {r.detail}")
        if r.claim:
            lines.append(f"       claim: {r.claim}")
    passed = sum(r.passed for r in results)
    missed = sum(r.verdict == "miss" for r in results)
    claims = f"; {plural(missed, 'claim')} not met (reported, not failed)" if missed else ""
    lines.append(f"{passed} of {len(results)} budgets met{claims}")
    return "\n".join(lines) + "\n"


def budgets_json(results: Sequence[BudgetResult]) -> str:
    """Budgets as JSON: kind, path, predicted, limit, unit, passed, margin, detail, error."""
    doc = {
        "budgets": [
            {
                "kind": r.kind,
                "path": r.path,
                "predicted": None if r.error else _finite(r.predicted, 6),
                "limit": None if r.error else _finite(r.limit, 6),
                "unit": r.unit,
                "better": r.better,
                "passed": r.passed,
                "claim": r.claim or None,
                "margin": None if r.error else _finite(r.margin, 6),
                "detail": r.detail,
                "error": r.error,
            }
            for r in results
        ]
    }
    return _dumps(doc)
