"""Tables for the terminal and JSON: `railplan predict` (nccl-tests style) and budgets."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from infra.budget.bands import collective_bands
from infra.budget.collectives import CommTopology, Prediction
from infra.budget.evaluate import BudgetResult
from infra.catalog.nccl import nccl_has
from infra.errors import escape_lines
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
        "rows": [_predict_row(collective, t, r) for r in rows],
    }
    return _dumps(doc)


def _predict_row(collective: str, t: CommTopology, r: Prediction) -> dict[str, object]:
    """One JSON row: DESIGN.md's keys, plus ``band`` (busbw and time) and ``calibration``."""
    bands = collective_bands(t, collective, r.bytes, r.busbw_GBps, r.time_us)
    band = bands.busbw.as_json(2)
    return {
        "bytes": r.bytes,
        "time_us": _finite(r.time_us),
        "algbw_GBps": _finite(r.algbw_GBps),
        "busbw_GBps": _finite(r.busbw_GBps),
        "algorithm": r.algorithm,
        "protocol": r.protocol,
        "band": {
            "busbw_GBps": [band["low"], band["high"]],
            "time_us": [_finite(bands.time.low, 2), _finite(bands.time.high, 2)],
            "regime": band["regime"],
            "rows": band["rows"],
        },
        "calibration": bands.fit.as_json(),
    }


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
        (
            "# model: NCCL tuning.cc structure; busbw band = the held-out rows' range in the "
            "row's regime (docs/accuracy.md, Error bands)"
        ),
        (
            f"#{'size (B)':>13} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  "
            f"{'busbw band':>17}  {'algorithm/protocol':<20} fit"
        ),
    ]
    body: list[str] = []
    outside: list[tuple[int, str]] = []
    for r in rows:
        bands = collective_bands(t, collective, r.bytes, r.busbw_GBps, r.time_us)
        band = f"{bands.busbw.low:.2f}-{bands.busbw.high:.2f}"
        body.append(
            f"{r.bytes:>14} {r.time_us:>12.2f} {r.algbw_GBps:>13.2f} {r.busbw_GBps:>13.2f}  "
            f"{band:>17}  {r.algorithm + '/' + r.protocol:<20} {bands.fit.flag}"
        )
        if bands.fit.status == "extrapolated":
            outside.append((r.bytes, f"nearest published row {bands.fit.nearest}: {bands.fit.gap}"))
    large = [r for r in rows if r.bytes >= 2**30] or rows[-1:]
    tail = [f"# large-message busbw: {max(r.busbw_GBps for r in large):.2f} GB/s"]
    if outside:  # the largest size's note: the one budgets and acceptance tests use
        size, note = outside[-1]
        tail.append(f"# EXTRAPOLATED: {len(outside)} of {len(rows)} rows; at {size:,} B {note}")
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
            lines.append(f"ERROR  {r.path}: cannot evaluate: {r.error_text}")
            continue
        op = "<=" if r.better == "lower" else ">="
        verdict = (r.verdict if r.passed else r.verdict.upper()).ljust(5)  # pass, FAIL, MISS
        lines.append(
            f"{verdict}  {r.path}: {_value(r.tested, r.unit)} {op} "
            f"{_value(r.limit, r.unit)} (headroom {r.margin:+.1%}, {r.bound_label})"
        )
        lines.append(f"       {_band_text(r)}")
        lines.append(f"       {r.detail}")
        if r.claim:
            lines.append(f"       claim: {r.claim}")
    passed = sum(r.passed for r in results)
    missed = sum(r.verdict == "miss" for r in results)
    claims = f"; {plural(missed, 'claim')} not met (reported, not failed)" if missed else ""
    lines.append(f"{passed} of {len(results)} budgets met{claims}")
    return escape_lines("\n".join(lines)) + "\n"  # a replay's tenants come from its trace


def _band_text(r: BudgetResult) -> str:
    """``predicted 5.94 ms, band 5.10-9.90 ms (regime), calibrated`` for the text view."""
    text = f"predicted {_value(r.predicted, r.unit)}"
    if r.has_band:
        source = r.band_regime if r.fit is None else f"held-out rows of {r.band_regime}"
        text += f", band {_value(r.band_low, r.unit)} .. {_value(r.band_high, r.unit)} ({source})"
    if r.fit is None:
        what = "datasheet figures" if r.has_band else "arithmetic on the spec"
        return text + f"; {what}, nothing fitted"
    if r.fit.status == "calibrated":
        return text + "; calibrated"
    return text + f"; EXTRAPOLATED: nearest published row {r.fit.nearest}: {r.fit.gap}"


def _band_json(r: BudgetResult) -> dict[str, object] | None:
    if r.error or not r.has_band:
        return None
    return {
        "low": _finite(r.band_low, 6),
        "high": _finite(r.band_high, 6),
        "regime": r.band_regime,
    }


def budgets_json(results: Sequence[BudgetResult]) -> str:
    """Budgets as JSON: kind, path, predicted, limit, unit, passed, margin, detail, error.

    Plus ``bound`` (the edge the verdict tests, ``exact`` for arithmetic figures),
    ``tested`` (its value), ``band`` and ``calibration`` (null where nothing was fitted).
    """
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
                "error": r.error_text,
                "bound": r.bound if r.has_band else "exact",
                "tested": None if r.error else _finite(r.tested, 6),
                "band": _band_json(r),
                "calibration": r.fit.as_json() if r.fit and not r.error else None,
            }
            for r in results
        ]
    }
    return _dumps(doc)
