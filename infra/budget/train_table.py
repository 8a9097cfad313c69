"""Text and JSON of a `railplan train` answer (the CLI prints what these return).

The JSON carries DESIGN.md's keys (gpus, nodes, tp, pp, dp, micro_batch, global_batch,
step_s, tokens_per_s, model/hardware TFLOP/s per GPU, mfu, hfu, scaling_efficiency,
memory_gb_per_gpu, breakdown) plus cp (context parallelism), the memory by part, the software
stack and the search's cost, and ``band`` (each figure's interval from the held-out
rows of its regime), ``calibration`` (calibrated or extrapolated, the nearest published row) and
``search.ranked_by`` with the layout shown beside the choice; the text shows the layout, a table
of seconds per component with its share of the step, memory by part, MFU/HFU and the scaling
efficiency, each figure with its band, and the calibration flag.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from infra.budget.train_layout import StepResult
from infra.budget.train_plan import TrainAnswer
from infra.budget.train_search import Candidate
from infra.wording import plural

__all__ = ["train_dict", "train_json", "train_text"]


def train_dict(answer: TrainAnswer) -> dict[str, Any]:
    """The answer as DESIGN.md's JSON object."""
    r, layout = answer.result, answer.result.layout
    batch = r.micro_batches * layout.dp * layout.micro_batch
    mem = r.memory
    return {
        "gpus": layout.gpus,
        "nodes": answer.nodes,
        "group": answer.group,
        "tp": layout.tp,
        "cp": layout.cp,
        "pp": layout.pp,
        "dp": layout.dp,
        "virtual_stages": layout.virtual,
        "micro_batch": layout.micro_batch,
        "micro_batches": r.micro_batches,
        "global_batch": batch,
        "recompute": layout.recompute,
        "zero": layout.zero,
        "sequence_parallel": layout.sp,
        "stack": answer.stack,
        "step_s": round(r.step_s, 6),
        "tokens_per_s": round(batch * answer.seq / r.step_s, 1),
        "model_tflops_per_gpu": round(r.tflops_per_gpu(False), 2),
        "hardware_tflops_per_gpu": round(r.tflops_per_gpu(True), 2),
        "mfu": round(r.tflops_per_gpu(False) / r.peak_tflops, 4),
        "hfu": round(r.tflops_per_gpu(True) / r.peak_tflops, 4),
        "scaling_efficiency": round(answer.scaling_efficiency, 4),
        "memory_gb_per_gpu": round(mem.total / 1e9, 2),
        "memory_fits": mem.fits,
        "memory_gb": {
            "weights": round(mem.weights / 1e9, 2),
            "gradients": round(mem.gradients / 1e9, 2),
            "optimizer": round(mem.optimizer / 1e9, 2),
            "activations": round(mem.activations / 1e9, 2),
            "usable": round(mem.usable / 1e9, 2),
        },
        "breakdown": {k: round(v, 6) for k, v in asdict(r.breakdown).items()},
        "search": _search_dict(answer),
        **_band_dict(answer, batch),
    }


def _pair(low: float, high: float, digits: int) -> list[float]:
    return [round(low, digits), round(high, digits)]


def _band_dict(answer: TrainAnswer, batch: int) -> dict[str, Any]:
    """``band`` (every figure's interval) and ``calibration`` of the chosen layout."""
    band, r = answer.band, answer.result
    if band is None:
        return {}
    step = band.time(r.step_s, 6)
    model, hardware = (
        band.throughput(r.tflops_per_gpu(False), 2),
        band.throughput(r.tflops_per_gpu(True), 2),
    )
    efficiency = band.efficiency(answer.scaling_efficiency)
    tokens = batch * answer.seq
    return {
        "band": {
            "step_s": [step.low, step.high],
            "tokens_per_s": _pair(tokens / step.high, tokens / step.low, 1),
            "model_tflops_per_gpu": [model.low, model.high],
            "hardware_tflops_per_gpu": [hardware.low, hardware.high],
            "mfu": _pair(model.low / r.peak_tflops, model.high / r.peak_tflops, 4),
            "hfu": _pair(hardware.low / r.peak_tflops, hardware.high / r.peak_tflops, 4),
            "scaling_efficiency": [efficiency.low, efficiency.high],
            "regime": step.regime,
            "rows": step.rows,
            "scaling_regime": efficiency.regime,
        },
        "calibration": band.fit.as_json(),
    }


def _layout_label(r: StepResult) -> str:
    lay = r.layout
    return (
        f"TP {lay.tp}{lay.cp_label()} x PP {lay.pp} (x{lay.virtual}) x DP {lay.dp}, "
        f"micro-batch {lay.micro_batch}, recompute {lay.recompute}, ZeRO-{lay.zero}"
    )


def _candidate_dict(c: Candidate, role: str) -> dict[str, Any]:
    tflops = c.result.tflops_per_gpu(False)
    band = c.band.throughput(tflops, 2)
    return {
        "role": role,
        "layout": _layout_label(c.result),
        "step_s": round(c.result.step_s, 6),
        "model_tflops_per_gpu": round(tflops, 2),
        "band": {"model_tflops_per_gpu": [band.low, band.high], "regime": band.regime},
        "calibration": c.band.fit.as_json(),
    }


def _search_dict(answer: TrainAnswer) -> dict[str, Any]:
    """The search's cost, its ranking rule and the layout shown beside the choice."""
    doc: dict[str, Any] = {
        "candidates": answer.candidates,
        "seconds": round(answer.search_s, 3),
        "ranked_by": (
            "conservative bound (slow edge of each layout's band), calibrated layouts first "
            "(the stack's own switches aside)"
        ),
    }
    other = answer.other
    if other is not None:
        role = "best calibrated" if other.calibrated else "faster but extrapolated, not taken"
        doc["beside"] = _candidate_dict(other, role)
    return doc


def train_json(answer: TrainAnswer) -> str:
    """One JSON document, keys sorted."""
    return json.dumps(train_dict(answer), indent=2, sort_keys=True)


def train_text(answer: TrainAnswer, model: str) -> str:
    """The human view: layout, step breakdown, memory, utilisation and scaling."""
    d = train_dict(answer)
    step = d["step_s"]
    context = answer.result.layout.cp_label()
    lines = [
        (
            f"# {model} on {d['gpus']:,} GPUs ({plural(d['nodes'], 'node')} of {answer.node}, group "
            f"{answer.group})"
        ),
        (
            f"layout: TP {d['tp']}{context} x PP {d['pp']} (x{d['virtual_stages']} interleaved) x DP "
            f"{d['dp']}; micro-batch {d['micro_batch']} x {d['micro_batches']} per step, global "
            f"batch {d['global_batch']}; recompute {d['recompute']}, ZeRO-{d['zero']}, sequence "
            f"parallel {'on' if d['sequence_parallel'] else 'off'}"
        ),
        f"software stack {d['stack']}",
        f"searched {d['search']['candidates']:,} layouts in {d['search']['seconds']:.2f} s",
        "",
        f"{'component':<20} {'seconds':>10} {'share':>7}",
    ]
    for key, seconds in d["breakdown"].items():
        share = seconds / step if step else 0.0
        lines.append(f"{key.removesuffix('_s'):<20} {seconds:>10.4f} {share:>7.1%}")
    lines += [
        f"{'step':<20} {step:>10.4f} {1:>7.1%}",
        "",
        (
            f"tokens/s {d['tokens_per_s']:,.0f}; model {d['model_tflops_per_gpu']:.1f} TFLOP/s per "
            f"GPU (MFU {d['mfu']:.1%}), hardware {d['hardware_tflops_per_gpu']:.1f} (HFU "
            f"{d['hfu']:.1%})"
        ),
        (
            f"scaling efficiency {d['scaling_efficiency']:.3f} (per-GPU throughput against one "
            "replica, DP 1, same layout)"
        ),
        *_band_lines(d),
        "",
        "memory per GPU (GB): "
        + ", ".join(f"{k} {v:.1f}" for k, v in d["memory_gb"].items() if k != "usable")
        + f"; total {d['memory_gb_per_gpu']:.1f} of {d['memory_gb']['usable']:.1f} usable"
        + ("" if d["memory_fits"] else " — DOES NOT FIT"),
    ]
    return "\n".join(lines)


def _band_lines(d: dict[str, Any]) -> list[str]:
    """The bands, the calibration flag and the layout beside the choice, for the text view."""
    if "band" not in d:
        return []
    b, fit = d["band"], d["calibration"]
    lines = [
        (
            f"band: step {b['step_s'][0]:.4f}-{b['step_s'][1]:.4f} s; model "
            f"{b['model_tflops_per_gpu'][0]:.1f}-{b['model_tflops_per_gpu'][1]:.1f} TFLOP/s per "
            f"GPU (MFU {b['mfu'][0]:.1%}-{b['mfu'][1]:.1%}); scaling "
            f"{b['scaling_efficiency'][0]:.3f}-{b['scaling_efficiency'][1]:.3f} (held-out rows "
            f"of {b['regime']}: {b['rows']})"
        ),
    ]
    if fit["status"] == "calibrated":
        lines.append(f"calibrated: inside the published runs (nearest {fit['nearest']})")
    else:
        lines.append(
            "EXTRAPOLATED: no published run covers this layout and stack; nearest "
            f"{fit['nearest']}: {fit['gap']}"
        )
    beside = d["search"].get("beside")
    if beside:
        low, high = beside["band"]["model_tflops_per_gpu"]
        lines.append(
            f"{beside['role']}: {beside['layout']}: {beside['model_tflops_per_gpu']:.1f} "
            f"TFLOP/s per GPU (band {low:.1f}-{high:.1f}, {beside['calibration']['status']})"
        )
    lines.append(f"search ranked by the {d['search']['ranked_by']}")
    return lines
