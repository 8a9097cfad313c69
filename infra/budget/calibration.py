"""Calibration: compare the collective model with published nccl-tests measurements.

Rows come from ``tests/data/nccl-measurements.yaml`` (each with its source). A row's
communicator is rebuilt from what the source states (GPU, nodes, GPUs per node, NICs and
their rate, EFA, SHARP, NVLS, NCCL version, a forced algorithm) and the model predicts its
busbw, or its time for rows that publish only a time (nccl-tests prints busbw 0.00 at 8 B).
The relative error per row, per size class and per node count, is what `docs/accuracy.md`
publishes:

    python -m infra.budget.calibration tests/data/nccl-measurements.yaml > docs/accuracy.md

Split rule (deterministic): within each source, rows in file order alternate fit, held out,
fit, ... (`split`). The fitted constants in `collectives_nccl` were chosen on the fit half
only; the statistics that count are the held-out half's. Rows whose source reports a
misconfigured system (note starts with ``ANOMALOUS``) are shown but kept out of both.
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

__all__ = [
    "Comparison",
    "accuracy_markdown",
    "comparable",
    "compare_rows",
    "load_measurements",
    "split",
]

LARGE = 256 * 2**20  # "large message": the bandwidth plateau nccl-tests reports
SMALL = 64 * 2**10
MEDIUM_TARGET = (2**20, 128 * 2**20)  # issue 11's medium target band, 1 MiB .. 128 MiB
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
    held_out: bool = False
    measured_time_us: float = 0.0

    @property
    def error(self) -> float:
        """Relative error (+0.10 = model 10 % faster than measured).

        busbw rows: predicted / measured busbw - 1; time-only rows: measured / predicted time
        - 1, the same ratio expressed in time.
        """
        if self.measured_busbw > 0:
            return self.predicted.busbw_GBps / self.measured_busbw - 1
        return self.measured_time_us / self.predicted.time_us - 1


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
    version = {"nccl": str(row["nccl"])} if row.get("nccl") else {}
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
        efa=row["network"] == "efa",
        **version,  # type: ignore[arg-type]
    )


def _network(row: dict[str, Any]) -> tuple[int, float]:
    """NICs per node and their Gb/s, with the documented assumption for InfiniBand rows."""
    nics, rate = row.get("nics_per_node") or 0, row.get("nic_gbps") or 0
    if row["nodes"] > 1 and row["network"] in _IB_RATE:
        nics = nics or row["gpus_per_node"]
        rate = rate or _IB_RATE[row["network"]]
    return nics, rate


def comparable(row: dict[str, Any]) -> bool:
    """A row can be predicted: a busbw or a time at a known size, on a network of known size."""
    nics, rate = _network(row)
    measured = bool(row.get("busbw_GBps")) or bool(row.get("bytes") and row.get("time_us"))
    return measured and (row["nodes"] == 1 or (nics > 0 and rate > 0))


def split(rows: list[dict[str, Any]]) -> list[bool]:
    """Held-out flags: within each source, rows alternate fit (even) and held out (odd)."""
    seen: dict[str, int] = {}
    flags = []
    for row in rows:
        index = seen.get(row["source"], 0)
        seen[row["source"]] = index + 1
        flags.append(index % 2 == 1)
    return flags


def _size_class(nbytes: int) -> Literal["small", "medium", "large"]:
    return "large" if nbytes >= LARGE else "small" if nbytes <= SMALL else "medium"


def compare_rows(data: dict[str, Any], catalog: Catalog) -> list[Comparison]:
    """Predict every comparable measured row, marking the held-out half (`split`)."""
    rows = [r for r in data["measurements"] if comparable(r)]
    out = []
    for row, held in zip(rows, split(rows), strict=True):
        nbytes = row["bytes"] or PEAK_BYTES
        algos = _ALGO.get(str(row.get("algo")), ())
        predicted = predict(_topology(row, catalog), row["collective"], nbytes, algos)
        anomalous = str(row.get("note") or "").startswith("ANOMALOUS")
        busbw = float(row.get("busbw_GBps") or 0)
        time_us = float(row.get("time_us") or 0)
        size = _size_class(nbytes)
        out.append(Comparison(row, predicted, busbw, size, anomalous, held, time_us))
    return out


def _stats(rows: list[Comparison]) -> str:
    errors = [abs(c.error) for c in rows if not c.anomalous]
    if not errors:
        return "no rows"
    within = sum(e <= 0.10 for e in errors)
    signed = statistics.median(c.error for c in rows if not c.anomalous)
    return (
        f"{len(errors)} rows; median |error| {statistics.median(errors):.1%} "
        f"(median signed {signed:+.1%}), max {max(errors):.1%}; {within} within 10 %"
    )


def _node_class(nodes: int) -> str:
    return (
        "1 node"
        if nodes == 1
        else "2 nodes"
        if nodes == 2
        else "3-8 nodes"
        if nodes <= 8
        else "9+ nodes"
    )


def _in_target_band(c: Comparison) -> bool:
    nbytes = c.row["bytes"] or PEAK_BYTES
    return MEDIUM_TARGET[0] <= nbytes <= MEDIUM_TARGET[1]


def _summary(comparisons: list[Comparison]) -> list[str]:
    lines = []
    for label, held in (("Held-out half (the figures that count)", True), ("Fit half", False)):
        half = [c for c in comparisons if c.held_out == held]
        lines += [f"### {label}", ""]
        for size in ("large", "medium", "small"):
            rows = [c for c in half if c.size_class == size]
            lines.append(f"- **{size} messages**: {_stats(rows)}")
        band = [c for c in half if _in_target_band(c)]
        lines.append(f"- **1-128 MiB (issue 11's medium target)**: {_stats(band)}")
        for nodes in ("1 node", "2 nodes", "3-8 nodes", "9+ nodes"):
            rows = [c for c in half if _node_class(c.row["nodes"]) == nodes]
            lines.append(f"- **{nodes}**: {_stats(rows)}")
        lines.append("")
    return lines


def _table(comparisons: list[Comparison]) -> list[str]:
    lines = [
        (
            "| half | source | GPU | nodes x GPUs | network | collective | bytes | algo (source) "
            "| measured | predicted | model algo | error |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        r = c.row
        flag = " (anomalous)" if c.anomalous else ""
        nics, rate = _network(r)
        network = r["network"] + (f" {nics} x {rate:g}G" if r["nodes"] > 1 and nics else "")
        if c.measured_busbw > 0:
            measured, predicted = f"{c.measured_busbw:g} GB/s", f"{c.predicted.busbw_GBps:g} GB/s"
        else:
            measured, predicted = f"{c.measured_time_us:g} us", f"{c.predicted.time_us:g} us"
        lines.append(
            f"| {'held out' if c.held_out else 'fit'} | {r['source']} | {r['gpu']} | "
            f"{r['nodes']} x {r['gpus_per_node']} | {network} | "
            f"{r['collective']} | {r['bytes'] or 'peak'} | {r.get('algo')} | "
            f"{measured} | {predicted} | "
            f"{c.predicted.algorithm}/{c.predicted.protocol} | {c.error:+.1%}{flag} |"
        )
    return lines


_INTRO = (
    "Generated by `python -m infra.budget.calibration tests/data/nccl-measurements.yaml` "
    "(`make accuracy`); do not edit by hand. Error = predicted busbw / measured busbw - 1, "
    "or measured time / predicted time - 1 for rows that publish only a time (+10 % = the "
    "model is 10 % faster than measured). Measurements and their sources: "
    "`tests/data/nccl-measurements.yaml`."
)
_METHOD = (
    "Split rule: within each source, rows in file order alternate fit, held out, fit, ... "
    "The fitted constants of `infra/budget/collectives_nccl.py` (NVLS all-reduce gain, "
    "pipeline fill per hop and its cap, EFA latency) were chosen on the fit "
    "half only; the held-out half is the test. The 9+-node rows (sources `nccl-652`, "
    "`nccl-tests-283`, `nccl-tests-322`) and the rest of gj-aion's 4- and 8-node tables in "
    "`nccl-tests-309` (with `nccl-1368`) were added after the fit and fall into either half "
    "by the same rule; no constant was chosen on them. A refit of the pipeline term on the "
    "enlarged fit half (grid over separate NVLink and network hop costs) lowered the fit "
    "half's 1-128 MiB median to 6.4 % but moved the held-out one from 11.2 % to 11.4 %, so "
    "the constants were kept. NVLS Tree's per-channel bandwidth cap is now applied over the "
    "NVLS graph's channels (one per GPU, as NCCL's search.cc and nvls.cc do) instead of two "
    "per NIC: a correction to follow NCCL, not a fit; it moved the held-out 1-128 MiB median "
    "from 11.2 % to 9.9 % and the large one from 2.8 % to 3.9 %. Size classes: small <= 64 "
    "KiB, large >= 256 "
    "MiB, medium between; rows that give only a peak are compared at 8 GiB. Multi-node "
    "InfiniBand rows without NIC details assume one NIC per GPU at the generation's rate "
    "(HDR 200, NDR 400 Gb/s)."
)


def accuracy_markdown(data: dict[str, Any], catalog: Catalog) -> str:
    """The accuracy report: statistics per half, size class and node count, then every row."""
    comparisons = compare_rows(data, catalog)
    skipped = [r for r in data["measurements"] if not comparable(r)]
    lines = [
        "# Model accuracy",
        "",
        "## Collectives",
        "",
        _INTRO,
        "",
        _METHOD,
        "",
        *_summary(comparisons),
        (
            f"{len(skipped)} rows are not compared: multi-node rows on RoCE or EFA whose "
            "source states neither the NIC count nor the rate."
        ),
        "",
        "### Rows",
        "",
        *_table(comparisons),
        "",
        "### Sources",
        "",
    ]
    lines += [f"- `{key}`: {src['title']} — {src['url']}" for key, src in data["sources"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the documented regenerate command
    sys.stdout.write(accuracy_markdown(load_measurements(sys.argv[1]), load_catalog()))
