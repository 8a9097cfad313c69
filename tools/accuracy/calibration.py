"""Calibration: compare the collective model with published nccl-tests measurements.

Rows come from ``tests/data/nccl-measurements.yaml`` (each with its source). A row's
communicator is rebuilt from what the source states (GPU, nodes, GPUs per node, NICs and
their rate, EFA, SHARP, NVLS, NCCL version, a forced algorithm) and the model predicts its
busbw, or its time for rows that publish only a time (nccl-tests prints busbw 0.00 at 8 B).
The relative error per row, per size class and per node count, is what `docs/accuracy.md`
publishes:

    python -m tools.accuracy.calibration tests/data/nccl-measurements.yaml > docs/accuracy.md

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

from infra.budget.collectives import CommTopology, Prediction, bus_factor, predict
from infra.budget.nccl_tests_launch import NCCL_TESTS_LAUNCH_US_PER_GPU, as_measured
from infra.budget.nccl_tests_launch import launch_floor_us as _thread_floor_us
from infra.catalog import Catalog, load_catalog
from tools.accuracy.calibration_notes import CAPS as _CAPS
from tools.accuracy.calibration_notes import CHANNELS as _CHANNELS
from tools.accuracy.calibration_notes import FOCUS as _FOCUS
from tools.accuracy.calibration_notes import LAUNCH_MODE as _LAUNCH_MODE
from tools.accuracy.calibration_notes import LL128_RANK as _LL128_RANK
from tools.accuracy.calibration_notes import METHOD as _METHOD
from tools.accuracy.calibration_notes import SHARP as _SHARP

__all__ = [
    "NCCL_TESTS_LAUNCH_US_PER_GPU",
    "Comparison",
    "accuracy_markdown",
    "comparable",
    "compare_rows",
    "gpus_per_thread",
    "is_efa",
    "is_harness_bound",
    "is_one_node_1mib",
    "is_sharp",
    "is_single_node_small",
    "launch_floor_us",
    "launch_stated",
    "load_measurements",
    "split",
]

LARGE = 256 * 2**20  # "large message": the bandwidth plateau nccl-tests reports
SMALL = 64 * 2**10
MEDIUM_TARGET = (2**20, 128 * 2**20)  # 1 MiB .. 128 MiB, the medium target's sizes (10 %)
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
    """Read the measurements file (trusted test data).

    libyaml's parser when PyYAML has it: the same safe loader's constructors, about ten times
    faster on the 100 KB file that four test modules read as they are collected.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return dict(yaml.load(Path(path).read_text(encoding="utf-8"), Loader=loader))


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
        sharp=row.get("sharp") is True,  # "unknown" is not SHARP
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


def gpus_per_thread(row: dict[str, Any]) -> int:
    """GPUs one nccl-tests thread drove for this row (``-g``; the row's ``gpus_per_process``).

    Rows without it were run one process per GPU, as their source says or, where it says
    nothing, as assumed (`launch_stated`).
    """
    return int(row.get("gpus_per_process") or 1)


def launch_stated(row: dict[str, Any], sources: dict[str, Any]) -> bool:
    """Whether the source states how nccl-tests was run for this row.

    Else one process per GPU is assumed. A row's ``gpus_per_process`` is always the
    source's; without it the source's ``launch_stated`` says.
    """
    return bool(row.get("gpus_per_process") or sources[row["source"]].get("launch_stated"))


def _launch_cell(row: dict[str, Any], sources: dict[str, Any]) -> str:
    """The ``-g`` column: GPUs per nccl-tests thread, ``1 (assumed)`` where not stated."""
    return f"{gpus_per_thread(row)}" + ("" if launch_stated(row, sources) else " (assumed)")


def launch_floor_us(row: dict[str, Any]) -> float:
    """The least time per iteration of a row measured with one thread driving several GPUs.

    `infra.budget.nccl_tests_launch`: nccl-tests' ``-g N`` makes one thread launch the
    collective on all N GPUs, one after another, every iteration; when the GPUs finish
    sooner, the thread sets the pace (NVIDIA/nccl-tests#123). Rows run one process per GPU
    have no such floor, and neither do real jobs, so `predict` never adds it.
    """
    return _thread_floor_us(gpus_per_thread(row))


def compare_rows(data: dict[str, Any], catalog: Catalog) -> list[Comparison]:
    """Predict every comparable measured row, marking the held-out half (`split`)."""
    rows = [r for r in data["measurements"] if comparable(r)]
    out = []
    for row, held in zip(rows, split(rows), strict=True):
        nbytes = row["bytes"] or PEAK_BYTES
        algos = _ALGO.get(str(row.get("algo")), ())
        model = predict(_topology(row, catalog), row["collective"], nbytes, algos)
        factor = bus_factor(row["collective"], row["nodes"] * row["gpus_per_node"])
        predicted = as_measured(model, gpus_per_thread(row), factor)
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
        lines.append(f"- **1-128 MiB (medium target: median within 10 %)**: {_stats(band)}")
        for nodes in ("1 node", "2 nodes", "3-8 nodes", "9+ nodes"):
            rows = [c for c in half if _node_class(c.row["nodes"]) == nodes]
            lines.append(f"- **{nodes}**: {_stats(rows)}")
        lines.append("")
    return lines


def _table(comparisons: list[Comparison], sources: dict[str, Any]) -> list[str]:
    lines = [
        (
            "| half | source | GPU | nodes x GPUs | network | -g | collective | bytes "
            "| algo (source) | measured | predicted | model algo | error |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
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
            f"{r['nodes']} x {r['gpus_per_node']} | {network} | {_launch_cell(r, sources)} | "
            f"{r['collective']} | {r['bytes'] or 'peak'} | {r.get('algo')} | "
            f"{measured} | {predicted} | "
            f"{c.predicted.algorithm}/{c.predicted.protocol} | {c.error:+.1%}{flag} |"
        )
    return lines


_INTRO = (
    "Generated by `python -m tools.accuracy.calibration tests/data/nccl-measurements.yaml` "
    "(`make accuracy`); do not edit by hand. Error = predicted busbw / measured busbw - 1, "
    "or measured time / predicted time - 1 for rows that publish only a time (+10 % = the "
    "model is 10 % faster than measured). Measurements and their sources: "
    "`tests/data/nccl-measurements.yaml`."
)


FOCUS_SMALL = 4 * 2**20  # "single-node small messages": one node, at most 4 MiB
TARGET_1MIB = 2**20  # the one-node small-message target's size ...
TARGET_1MIB_WORST = 0.30  # ... and its bound on the worst held-out row


def is_efa(c: Comparison) -> bool:
    """An AWS EFA row (aws-ofi-nccl)."""
    return bool(c.row["network"] == "efa")


def is_single_node_small(c: Comparison) -> bool:
    """A one-node row at a size (at most 4 MiB) where latency and launch dominate."""
    return bool(c.row["nodes"] == 1 and (c.row["bytes"] or PEAK_BYTES) <= FOCUS_SMALL)


def is_one_node_1mib(c: Comparison) -> bool:
    """A one-node row at 1 MiB: the size of the one-node small-message target."""
    return bool(c.row["nodes"] == 1 and c.row["bytes"] == TARGET_1MIB)


def is_harness_bound(c: Comparison) -> bool:
    """Measured with one thread driving several GPUs (nccl-tests ``-g``), not one per GPU."""
    return launch_floor_us(c.row) > 0


def _target_1mib(comparisons: list[Comparison]) -> list[str]:
    """The 1 MiB one-node target on held-out rows: counted rows, then the -g rows beside them."""
    held = [c for c in comparisons if is_one_node_1mib(c) and c.held_out]
    counted = [c for c in held if not is_harness_bound(c)]
    harness = [c for c in held if is_harness_bound(c)]
    bound = f"{TARGET_1MIB_WORST * 100:.0f} %"
    per_gpu = "one process per GPU"
    return [
        f"- **1 MiB one node, held out, {per_gpu} (target: worst within {bound})**: "
        + _stats(counted),
        "- **1 MiB one node, held out, nccl-tests -g 8 (reported, not in the target)**: "
        + _stats(harness),
        "- **1 MiB one node, held out, both launch modes**: " + _stats(held),
    ]


def _focus(comparisons: list[Comparison], sources: dict[str, Any]) -> list[str]:
    """The EFA and single-node small-message rows, with their statistics per half."""
    lines = ["### EFA and single-node small messages", "", _FOCUS, "", _CHANNELS, ""]
    lines += [_LAUNCH_MODE, "", *_target_1mib(comparisons), "", _LL128_RANK, "", _CAPS, ""]
    groups = (
        ("EFA", is_efa),
        ("one node, <= 4 MiB", is_single_node_small),
        ("one A100 node, <= 4 MiB", lambda c: is_single_node_small(c) and _a100(c)),
    )
    for label, keep in groups:
        for half, held in (("held out", True), ("fit", False)):
            rows = [c for c in comparisons if keep(c) and c.held_out == held]
            lines.append(f"- **{label}, {half}**: {_stats(rows)}")
    lines += [
        "",
        "| half | source | GPU | nodes x GPUs | collective | bytes | -g | error | fitted |",
    ]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for c in comparisons:
        if is_efa(c) or is_single_node_small(c):
            r = c.row
            lines.append(
                f"| {'held out' if c.held_out else 'fit'} | {r['source']} | {r['gpu']} | "
                f"{r['nodes']} x {r['gpus_per_node']} | {r['collective']} | {r['bytes']} | "
                f"{_launch_cell(r, sources)} | {c.error:+.1%} | {r.get('fitted') or ''} |"
            )
    return [*lines, ""]


def is_sharp(c: Comparison) -> bool:
    """A multi-node row measured with IB SHARP (NCCL CollNet) enabled."""
    return bool(c.row["nodes"] > 1 and c.row.get("sharp") is True)


def _sharp_focus(comparisons: list[Comparison]) -> list[str]:
    """The SHARP rows, with their statistics per half."""
    lines = ["### SHARP", "", _SHARP, ""]
    for half, held in (("held out", True), ("fit", False)):
        rows = [c for c in comparisons if is_sharp(c) and c.held_out == held]
        lines.append(f"- **SHARP, {half}**: {_stats(rows)}")
    lines += ["", "| half | nodes x GPUs | NICs | bytes | model algo | error | fitted |"]
    lines.append("|---|---|---|---|---|---|---|")
    for c in comparisons:
        if is_sharp(c):
            r = c.row
            lines.append(
                f"| {'held out' if c.held_out else 'fit'} | {r['nodes']} x {r['gpus_per_node']} "
                f"| {r['nics_per_node']} x {r['nic_gbps']}G | {r['bytes']} | "
                f"{c.predicted.algorithm}/{c.predicted.protocol} | {c.error:+.1%} | "
                f"{r.get('fitted') or ''} |"
            )
    return [*lines, ""]


def _a100(c: Comparison) -> bool:
    return str(c.row["gpu"]).startswith("a100")


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
        *_focus(comparisons, data["sources"]),
        *_sharp_focus(comparisons),
        (
            f"{len(skipped)} rows are not compared: multi-node rows on RoCE or EFA whose "
            "source states neither the NIC count nor the rate."
        ),
        "",
        "### Rows",
        "",
        *_table(comparisons, data["sources"]),
        "",
        "### Sources",
        "",
    ]
    lines += [f"- `{key}`: {src['title']} — {src['url']}" for key, src in data["sources"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the documented regenerate command
    sys.stdout.write(accuracy_markdown(load_measurements(sys.argv[1]), load_catalog()))
