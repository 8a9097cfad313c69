r"""Generate the band table (``infra/budget/data/bands.json``) and its docs/accuracy.md section.

Reads the published rows through the same comparisons that write docs/accuracy.md
(`calibration.compare_rows` for nccl-tests rows, `train_accuracy.compare` for training rows),
keeps the held-out half's ratios per regime (`infra.budget.band_regimes`) and every row's
coordinates for the envelope (`infra.budget.bands.collective_fit`, `.training_fit`)::

    python -m tools.accuracy.band_table json tests/data/nccl-measurements.yaml \\
        tests/data/training-measurements.yaml tests/data/checkpoint-measurements.yaml \\
        > infra/budget/data/bands.json

``make accuracy`` runs it; tests/test_bands.py checks the committed file is what the data give.
Only held-out rows set a band: the fitted constants never saw them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any

from infra.budget import band_regimes as regimes
from infra.budget.bands import MIN_ROWS, collective_bands
from infra.budget.cluster import comm_topology
from infra.budget.collectives import predict
from infra.budget.train_bands import training_point
from infra.budget.train_layout import StepResult
from infra.budget.train_plan import train
from infra.budget.train_request import TrainRequest, model_shape
from infra.budget.train_stack import resolve as resolve_stack
from infra.catalog import Catalog, load_catalog
from infra.spec import Spec, load_spec
from tools.accuracy.calibration import PEAK_BYTES, Comparison, compare_rows, load_measurements
from tools.accuracy.checkpoint_table import checkpoint_markdown, checkpoint_part
from tools.accuracy.train_accuracy import (
    TrainComparison,
    compare,
    load_rows,
    row_job,
    row_stack,
)

__all__ = ["acceptance_markdown", "band_document", "bands_markdown", "search_markdown"]

_GPU_ALIAS = {"a100-sxm4-unknown": "a100-sxm4-80gb"}


def _add(found: dict[str, list[float]], levels: Iterable[str], ratio: float) -> None:
    for regime in dict.fromkeys(levels):  # a family named like its stack is one regime
        low, high, rows = found.get(regime, [ratio, ratio, 0])
        found[regime] = [round(min(low, ratio), 4), round(max(high, ratio), 4), rows + 1]


def _collective_coordinates(c: Comparison, catalog: Catalog) -> list[Any]:
    r = c.row
    arch = catalog.gpus[_GPU_ALIAS.get(r["gpu"], r["gpu"])].architecture
    fabric = regimes.fabric_of(r["nodes"], r.get("sharp") is True, r["network"] == "efa")
    nbytes = int(r["bytes"] or PEAK_BYTES)
    label = (
        f"{r['source']}: {r['nodes']} x {r['gpus_per_node']} {r['gpu']} {r['network']}, "
        f"{r['collective']} {r['bytes'] or 'peak'} B"
    )
    return [label, arch, fabric, regimes.collective_family(r["collective"]), r["nodes"], nbytes]


def collective_part(data: dict[str, Any], catalog: Catalog) -> dict[str, Any]:
    """Held-out ratios per collective regime, and every comparable row's coordinates."""
    ratios: dict[str, list[float]] = {}
    envelope = []
    for c in compare_rows(data, catalog):
        if c.anomalous:
            continue
        point = _collective_coordinates(c, catalog)
        envelope.append(point)
        if c.held_out:
            levels = regimes.collective_levels(point[3], point[5], point[4], point[2])
            _add(ratios, levels, 1 + c.error)
    return {"ratios": ratios, "envelope": envelope}


def _throughput_ratio(c: TrainComparison) -> float:
    """The ratio predicted / measured of a higher-is-better figure (a time's ratio is inverted)."""
    if c.metric == "iteration s":
        return c.measured / c.predicted
    return c.predicted / c.measured


def _training_point(row: dict[str, Any], data: dict[str, Any], catalog: Catalog) -> list[Any]:
    job, layout = row_job(row, catalog, data["sources"])
    point = training_point(job, layout, row_stack(row, data["sources"]).name)
    return [row["id"], *astuple(point)]


def _training_levels(
    row: dict[str, Any], data: dict[str, Any], catalog: Catalog, scaling: bool = False
) -> list[str]:
    job, layout = row_job(row, catalog, data["sources"])
    stack = row_stack(row, data["sources"]).name
    levels = regimes.scaling_levels if scaling else regimes.training_levels
    return levels(stack, layout.zero, layout.tp, layout.pp, layout.cp, job.gpu.architecture)


def training_part(data: dict[str, Any], catalog: Catalog) -> tuple[dict[str, Any], dict[str, Any]]:
    """(training, scaling): held-out ratios per regime; every row's coordinates for training."""
    by_id = {r["id"]: r for r in data["measurements"]}
    ratios: dict[str, list[float]] = {}
    scaling: dict[str, list[float]] = {}
    for c in compare(data, catalog):
        if not c.held_out:
            continue
        if c.metric == "scaling":
            row = by_id[c.row_id.split(" / ")[0]]
            _add(scaling, _training_levels(row, data, catalog, True), c.predicted / c.measured)
            continue
        _add(ratios, _training_levels(by_id[c.row_id], data, catalog), _throughput_ratio(c))
    envelope = [_training_point(r, data, catalog) for r in data["measurements"]]
    return {"ratios": ratios, "envelope": envelope}, {"ratios": scaling}


def band_document(
    nccl: dict[str, Any],
    training: dict[str, Any],
    catalog: Catalog,
    checkpoints: dict[str, Any] | None = None,
) -> str:
    """The JSON text of ``infra/budget/data/bands.json``."""
    train, scaling = training_part(training, catalog)
    doc = {
        "generated_by": "python -m tools.accuracy.band_table json (make accuracy); do not edit",
        "collective": collective_part(nccl, catalog),
        "training": train,
        "scaling": scaling,
        "checkpoint": checkpoint_part(checkpoints or {"measurements": []}),
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _band_rows(kind: str, doc: dict[str, Any], unit: str) -> list[str]:
    lines = []
    for regime, (low, high, rows) in sorted(doc[kind]["ratios"].items()):
        if rows < MIN_ROWS and regime != "all rows":
            continue  # never used: a prediction falls back past it
        lower, upper = 1 / max(high, 1.0), 1 / min(low, 1.0)
        lines.append(
            f"| {kind} | {regime} | {rows} | {low:.3f} .. {high:.3f} | "
            f"x{lower:.3f} .. x{upper:.3f} {unit} |"
        )
    return lines


def bands_markdown(doc: dict[str, Any]) -> str:
    """The "## Error bands" section of docs/accuracy.md, from the band table."""
    lines = [
        "## Error bands",
        "",
        (
            "Generated by `python -m tools.accuracy.band_table markdown ...` (`make accuracy`) "
            "from `infra/budget/data/bands.json`. Every `predict`, `train` and `budget` figure "
            "carries an interval: the range of the held-out rows' ratios `predicted / measured` "
            "in its regime (for a time, `measured / predicted`), widened to contain 1, applied "
            "to the prediction (a bandwidth or throughput is divided by the ratio, a time "
            "multiplied). A regime needs at least 3 held-out rows; with fewer, the prediction "
            "takes the next coarser regime of its list (collectives: collective, size, nodes, "
            "fabric -> size, nodes, fabric -> size, fabric -> fabric -> size -> all rows; "
            "training: stack, ZeRO, shape, GPU -> stack family, ZeRO, shape, GPU -> ZeRO, shape, "
            "GPU -> ZeRO, GPU -> GPU -> all rows). The range is what was observed, not a "
            "confidence interval. Only the regimes a prediction can use (3 or more held-out "
            "rows) appear below; `rows` counts them, and the last column is the band as multiples of a throughput prediction."
        ),
        "",
        "| kind | regime | rows | predicted / measured | band (throughput) |",
        "|---|---|---|---|---|",
        *_band_rows("collective", doc, "busbw"),
        *_band_rows("training", doc, "TFLOP/s"),
        *_band_rows("scaling", doc, "efficiency"),
        *_band_rows("checkpoint", doc, "write rate"),
        "",
    ]
    return "\n".join(lines)


SEARCH_EXAMPLE = "tests/data/accuracy/a100-hdr.yaml"
"""The spec of the layout-search example in docs/accuracy.md (DGX A100, 8 HDR NICs)."""

_ENVELOPE = (
    "**Envelope.** A prediction is `calibrated` when published rows cover it, else "
    "`extrapolated`, with the nearest published row and how it differs (JSON `calibration`: "
    "`status`, `nearest`, `gap`; text: a fit column or line). Collectives: rows of the same GPU "
    "generation, fabric (NVLink, InfiniBand, InfiniBand with SHARP, EFA) and collective family "
    "whose node counts and message sizes span the prediction's. Training: rows of the same GPU "
    "generation, stack family (Megatron-LM, Megatron-Core and NeMo are one), ZeRO group, TP "
    "size, pipelined or not, context-parallel or not, recompute mode and fused attention or not "
    "(no A100 row ran fused attention: Megatron-LM 2021 had none, so the default stack's A100 "
    "layouts are extrapolated, nearest row and `fused attention` named in the gap), whose GPU "
    "counts and parameter counts span the layout's within a factor of two and whose "
    "micro-batch and interleaving span it. Checkpoints: a published timing within a factor "
    "of two in bytes and writing GPUs. Power: datasheet figures, no envelope (the band is typical to maximum "
    "draw, and the detail names PSU ratings and devices without a typical figure)."
)
_SEARCH = (
    "**How the layout search uses them.** `railplan train` without `--tp/--pp` (and the "
    "`scaling_efficiency` budget) ranks every layout that fits by its conservative bound, the "
    "step time at the slow edge of its band, and keeps the best calibrated and the best "
    "extrapolated layout. The extrapolated one wins only if it beats the calibrated one by "
    "more than its own band (its slow edge is faster than the calibrated layout's central "
    "step); it is then shown flagged, with the calibrated layout beside it (JSON "
    "`search.beside`). When the calibrated layout wins, a faster extrapolated layout it passed "
    "over is shown beside it. Calibrated, for the ranking, is the layout's: the stack's own "
    "switches (fused attention) are the same for every candidate, so they are left aside there "
    "and named in the answer's flag."
)


def _unfused_note(spec: Spec, request: TrainRequest, r: StepResult) -> str:
    """Where the chosen layout's figure comes from: the same layout with unfused attention.

    Every A100 row ran Megatron-LM 2021's unfused attention; the default stack fuses it, and
    that switch, not the layout, is what no row covers.
    """
    lay, b = r.layout, r.breakdown
    fixed = replace(
        request,
        tp=lay.tp,
        pp=lay.pp,
        virtual=lay.virtual,
        micro_batch=lay.micro_batch,
        recompute=lay.recompute,
        zero=lay.zero,
        stack=resolve_stack(request.stack.name, fused_attention=False),
    )
    unfused = train(spec, load_catalog(), fixed).result
    ideal = b.compute_s + b.recompute_s + b.tp_comm_s
    return (
        f". Where it comes from: with the A100 rows' unfused attention (`--no-fused-attention`) "
        f"the same layout gives {unfused.tflops_per_gpu(False):.1f}; the interleaved schedule's "
        f"bubble is {b.pp_bubble_s:.2f} s of the {r.step_s:.2f} s step ((p - 1) / (v m) = "
        f"{lay.pp - 1} / {lay.virtual * r.micro_batches} of the {ideal:.2f} s of compute and TP "
        f"traffic), its pipeline sends {b.pp_comm_s:.2f} s and the exposed DP traffic at DP "
        f"{lay.dp} over HDR {b.dp_comm_exposed_s:.2f} s"
    )


def search_markdown(root: Path) -> str:
    """The layout-search example: GPT-3 175B on 1,024 A100, with its reproducing command."""
    spec = load_spec(root / SEARCH_EXAMPLE).spec
    request = TrainRequest(gpus=1024, shape=model_shape("gpt3-175b"), global_batch=1536)
    answer = train(spec, load_catalog(), request)
    r, band = answer.result, answer.band
    tflops = r.tflops_per_gpu(False)
    edges = band.throughput(tflops) if band else None
    lay = r.layout
    text = (
        f"The case that made the search rank layouts by their bounds, `railplan train "
        f"{SEARCH_EXAMPLE} --gpus 1024 --model gpt3-175b --global-batch 1536`: "
        f"TP {lay.tp} x PP {lay.pp} (x{lay.virtual}) x DP {lay.dp}, "
        f"micro-batch {lay.micro_batch}, recompute {lay.recompute}, ZeRO-{lay.zero}: "
        f"{tflops:.1f} TFLOP/s per GPU (MFU {tflops / r.peak_tflops:.1%})"
    )
    if band and edges:
        text += f", band {edges.low:.1f}-{edges.high:.1f}, {band.fit.status}"
        if band.fit.gap:
            text += f" (nearest {band.fit.nearest}: {band.fit.gap})"
    other = answer.other
    if other is not None:
        o = other.result
        o_edges = other.band.throughput(o.tflops_per_gpu(False))
        text += (
            f"; beside it, {other.band.fit.status}: TP "
            f"{o.layout.tp} x PP {o.layout.pp} x DP {o.layout.dp}, ZeRO-{o.layout.zero}, "
            f"{o.tflops_per_gpu(False):.1f} TFLOP/s (band {o_edges.low:.1f}-{o_edges.high:.1f})"
        )
    text += _unfused_note(spec, request, r)
    text += (
        ". Before it ranked by bounds the search took TP 8 x PP 1 x DP 128 with ZeRO-3 at "
        "191.2 (61 % MFU); published 175B runs on A100 reach about 140 (Megatron-LM 2021) and 52 % "
        "MFU (Korthikanti 2022)."
    )
    return f"### Envelope and layout search\n\n{_ENVELOPE}\n\n{_SEARCH}\n\n{text}\n"


ACCEPTANCE_EXAMPLE = "examples/dgx-a100-superpod.yaml"
"""The spec whose first SU the acceptance arithmetic of docs/accuracy.md is shown for."""
ACCEPTANCE_TOLERANCE = 0.2
"""The acceptance role's default ``acceptance_busbw_tolerance``."""


def acceptance_markdown(root: Path) -> str:
    """The "### Acceptance thresholds" arithmetic for one SU of `ACCEPTANCE_EXAMPLE`.

    The same figures `railplan render` writes (``infra.render.ansible_vars._expected_busbw``): the
    all_reduce prediction at 1 GiB across one SU and its band's lower edge.
    """
    spec = load_spec(root / ACCEPTANCE_EXAMPLE).spec
    catalog = load_catalog()
    group = spec.node_groups[0]
    su = spec.fabrics.compute.su_size if spec.fabrics.compute else 1
    gpus = min(su, group.count) * catalog.nodes[group.node].gpus
    topo = comm_topology(spec, catalog, gpus, group=group.name)
    row = predict(topo, "all_reduce", 2**30)
    band = collective_bands(topo, "all_reduce", row.bytes, row.busbw_GBps, row.time_us)
    low, tol = band.busbw.low, ACCEPTANCE_TOLERANCE
    return "\n".join(
        [
            "### Acceptance thresholds",
            "",
            (
                "`railplan render` writes `acceptance_su_expected_busbw_gbytes_per_s` (and the "
                "node one) as the lower edge of the prediction's band, not the prediction, so "
                "the acceptance role's threshold, expected x (1 - `acceptance_busbw_tolerance`), "
                "is the band's lower edge minus the tolerance: a healthy SU that runs as slow as "
                "the slowest held-out row of its regime still passes, and the tolerance is left "
                "for the run-to-run spread it is meant for. `acceptance_su_predicted_busbw_"
                f"gbytes_per_s` keeps the prediction. For one SU of `{ACCEPTANCE_EXAMPLE}` "
                f"({gpus} GPUs, {row.algorithm}/{row.protocol}, {band.fit.status}): predicted "
                f"{row.busbw_GBps:.2f} GB/s; band {band.busbw.low:.2f}-{band.busbw.high:.2f} "
                f"(held-out rows of {band.busbw.regime}: {band.busbw.rows}); rendered expected "
                f"{low:.2f}; threshold {low:.2f} x (1 - {tol:g}) = {low * (1 - tol):.2f} GB/s "
                f"(it was {row.busbw_GBps:.2f} x (1 - {tol:g}) = "
                f"{row.busbw_GBps * (1 - tol):.2f} from the prediction alone)."
            ),
            "",
        ]
    )


if __name__ == "__main__":  # pragma: no cover - the documented regenerate command
    cat = load_catalog()
    checkpoint_rows = load_rows(sys.argv[4])
    text = band_document(
        load_measurements(sys.argv[2]), load_rows(sys.argv[3]), cat, checkpoint_rows
    )
    if sys.argv[1] == "json":
        sys.stdout.write(text)
    else:
        doc = json.loads(text)
        parts = (
            bands_markdown(doc),
            search_markdown(Path()),
            acceptance_markdown(Path()),
            checkpoint_markdown(checkpoint_rows),
        )
        sys.stdout.write("\n".join(parts))
