"""Calibration: compare the collective model with published nccl-tests measurements.

Rows come from ``tests/data/nccl-measurements.yaml`` (each with its source). A row's
communicator is rebuilt from what the source states (GPU, nodes, GPUs per node, NICs and
their rate, SHARP, NVLS, a forced algorithm) and the model predicts its busbw. The
relative error per row, and per size class, is what `docs/accuracy.md` publishes:

    python -m infra.budget.calibration tests/data/nccl-measurements.yaml > docs/accuracy.md

Rows whose source reports a misconfigured system (note starts with ``ANOMALOUS``) are
shown but kept out of the statistics.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from infra.budget.collectives import CommTopology, Prediction, predict
from infra.catalog import Catalog, load_catalog

__all__ = ["Comparison", "accuracy_markdown", "comparable", "compare_rows", "load_measurements"]

LARGE = 256 * 2**20  # "large message": the bandwidth plateau nccl-tests reports
SMALL = 64 * 2**10
PEAK_BYTES = 8 * 2**30  # rows that give only a peak are compared at 8 GiB
_ALGO = {
    "ring": ("ring",),
    "tree": ("tree",),
    "nvls": ("nvls",),
    "nvlstree": ("nvls_tree",),
    "collnet": ("collnet_direct", "collnet_chain"),
}
_GPU_ALIAS = {"a100-sxm4-unknown": "a100-sxm4-80gb"}  # same NVLink; memory does not matter
# When a multi-node source names the InfiniBand generation but not the NIC count or rate,
# assume the rail-optimized norm: one NIC per GPU at the generation's rate.
_IB_RATE = {"hdr": 200, "ndr": 400}


@dataclass(frozen=True)
class Comparison:
    """One measured row against the model's prediction."""

    row: dict[str, Any]
    predicted: Prediction
    measured_busbw: float
    size_class: Literal["small", "medium", "large"]
    anomalous: bool

    @property
    def error(self) -> float:
        """Relative error of the predicted busbw (+0.10 = model 10 % above measured)."""
        return self.predicted.busbw_GBps / self.measured_busbw - 1


def load_measurements(path: str | Path) -> dict[str, Any]:
    """Read the measurements file (trusted test data)."""
    return dict(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


def _topology(row: dict[str, Any], catalog: Catalog) -> CommTopology:
    gpu = catalog.gpus[_GPU_ALIAS.get(row["gpu"], row["gpu"])]
    node = catalog.nodes.get(row["node"])
    # CPU vendor: from the catalog node, else the common platform of the GPU generation
    cpu = node.cpu if node else ("amd" if gpu.architecture == "ampere" else "intel")
    nvls = row.get("nvls") is not False
    nics, rate = _network(row)
    return CommTopology(
        arch=gpu.architecture,
        gpus_per_node=row["gpus_per_node"],
        nodes=row["nodes"],
        nvswitch=True,
        nvlink_links=gpu.nvlink_links,
        nics=nics,
        nic_gbps=rate,
        cpu=cpu,
        sharp=bool(row.get("sharp")),
        nvls=nvls,
    )


def _network(row: dict[str, Any]) -> tuple[int, float]:
    """NICs per node and their Gb/s, with the documented assumption for InfiniBand rows."""
    nics, rate = row.get("nics_per_node") or 0, row.get("nic_gbps") or 0
    if row["nodes"] > 1 and row["network"] in _IB_RATE:
        nics = nics or row["gpus_per_node"]
        rate = rate or _IB_RATE[row["network"]]
    return nics, rate


def comparable(row: dict[str, Any]) -> bool:
    """A row can be predicted: single node, or a network whose size is known or assumed."""
    nics, rate = _network(row)
    return bool(row.get("busbw_GBps")) and (row["nodes"] == 1 or (nics > 0 and rate > 0))


def _size_class(nbytes: int) -> Literal["small", "medium", "large"]:
    return "large" if nbytes >= LARGE else "small" if nbytes <= SMALL else "medium"


def compare_rows(data: dict[str, Any], catalog: Catalog) -> list[Comparison]:
    """Predict every measured row that has a busbw."""
    out = []
    for row in data["measurements"]:
        if not comparable(row):
            continue
        nbytes = row["bytes"] or PEAK_BYTES
        algos = _ALGO.get(str(row.get("algo")), ())
        predicted = predict(_topology(row, catalog), row["collective"], nbytes, algos)
        anomalous = str(row.get("note") or "").startswith("ANOMALOUS")
        out.append(
            Comparison(row, predicted, float(row["busbw_GBps"]), _size_class(nbytes), anomalous)
        )
    return out


def _stats(rows: list[Comparison]) -> str:
    errors = [abs(c.error) for c in rows if not c.anomalous]
    if not errors:
        return "no rows"
    within = sum(e <= 0.10 for e in errors)
    return (
        f"{len(errors)} rows; median |error| {statistics.median(errors):.1%}, "
        f"max {max(errors):.1%}; {within} within 10 %"
    )


def _table(comparisons: list[Comparison]) -> list[str]:
    lines = [
        (
            "| source | GPU | nodes x GPUs | network | collective | bytes | algo (source) "
            "| measured busbw | predicted busbw | model algo | error |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        r = c.row
        flag = " (anomalous)" if c.anomalous else ""
        nics, rate = _network(r)
        network = r["network"] + (f" {nics} x {rate:g}G" if r["nodes"] > 1 and nics else "")
        lines.append(
            f"| {r['source']} | {r['gpu']} | {r['nodes']} x {r['gpus_per_node']} | "
            f"{network} | "
            f"{r['collective']} | {r['bytes'] or 'peak'} | {r.get('algo')} | "
            f"{c.measured_busbw:g} | {c.predicted.busbw_GBps:g} | "
            f"{c.predicted.algorithm}/{c.predicted.protocol} | {c.error:+.1%}{flag} |"
        )
    return lines


def accuracy_markdown(data: dict[str, Any], catalog: Catalog) -> str:
    """The accuracy report: statistics per size class, then every row with its source."""
    comparisons = compare_rows(data, catalog)
    lines = [
        "# Collective model accuracy",
        "",
        (
            "Generated by `python -m infra.budget.calibration "
            "tests/data/nccl-measurements.yaml`; do not edit by hand. Error = predicted "
            "busbw / measured busbw - 1. Measurements and their sources: "
            "`tests/data/nccl-measurements.yaml`."
        ),
        "",
    ]
    for size in ("large", "medium", "small"):
        rows = [c for c in comparisons if c.size_class == size]
        lines.append(f"- **{size} messages**: {_stats(rows)}")
    skipped = [r for r in data["measurements"] if not comparable(r)]
    lines += [
        "",
        (
            f"{len(skipped)} rows are not compared: rows that give a time but no busbw, "
            "and multi-node rows on RoCE or EFA whose source states neither the NIC count "
            "nor the rate."
        ),
        (
            "Multi-node InfiniBand rows without NIC details assume one NIC per GPU at the "
            "generation's rate (HDR 200, NDR 400 Gb/s)."
        ),
        "",
        (
            "The model is NCCL's own ranking model with measured link speeds, plus a 10 us "
            "per-call overhead fitted to these rows. It tracks large-message bandwidth "
            "closely; at small sizes it stays optimistic, so treat latency-bound "
            "predictions as lower bounds on time."
        ),
        "",
        "## Rows",
        "",
        *_table(comparisons),
        "",
        "## Sources",
        "",
    ]
    lines += [f"- `{key}`: {src['title']} — {src['url']}" for key, src in data["sources"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the documented regenerate command
    sys.stdout.write(accuracy_markdown(load_measurements(sys.argv[1]), load_catalog()))
