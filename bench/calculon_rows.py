"""Time the A100 Megatron rows of tests/data/training-measurements.yaml with Calculon (dev only).

Calculon (Isaev et al., SC23; github.com/calculon-ai/calculon) is not on PyPI (PyPI's
``calculon`` is an unrelated package), so this is run by hand against a checkout of commit
84dea66 (the one calculon-ai/sc23 pins) and its output pasted into the data file's
``peers: calculon-run`` rows, which `make accuracy` reads::

    CALCULON_DIR=/path/to/calculon python bench/calculon_rows.py

Each row's own layout (TP, PP, DP, micro-batch, interleaving, recompute, sequence
parallelism, DP overlap) becomes a Calculon execution on ``systems/a100_80g.json``; the
validation's unused ``pandas``/``psutil`` imports must be importable (stubs will do).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, os.environ["CALCULON_DIR"])
import calculon  # type: ignore[import-not-found]
from calculon.llm import Llm  # type: ignore[import-not-found]

from tools.accuracy.train_accuracy import _shape

RECOMPUTE = {"full": "full", "selective": "attn_only", "none": "none"}


def execution(row: dict[str, Any]) -> dict[str, Any]:
    """Calculon's execution JSON for a measurement row (fp16 Megatron on DGX A100)."""
    return {
        "num_procs": row["gpus"], "tensor_par": row["tp"], "pipeline_par": row["pp"],
        "data_par": row["gpus"] // (row["tp"] * row["pp"]),
        "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
        "batch_size": row["global_batch"], "microbatch_size": row["micro_batch"],
        "datatype": "float16", "fused_activation": False, "attention_type": "multihead",
        "activation_recompute": RECOMPUTE[row["recompute"]],
        "pipeline_interleaving": row["virtual"], "optimizer_sharding": False,
        "tensor_par_comm_type": "rs_ag" if row["sp"] else "ar", "tensor_par_overlap": "none",
        "seq_par_ag_redo": bool(row["sp"]), "data_par_overlap": bool(row["dp_overlap"]),
        "weight_offload": False, "activations_offload": False, "optimizer_offload": False,
        "training": True,
    }  # fmt: skip


def main() -> None:
    """Print ``row: seconds`` for each A100 Megatron row Calculon can express."""
    data = yaml.safe_load(Path("tests/data/training-measurements.yaml").read_text())
    system_file = Path(os.environ["CALCULON_DIR"]) / "systems" / "a100_80g.json"
    system = calculon.System(calculon.read_json_file(str(system_file)))
    log = logging.getLogger("calculon")
    for row in data["measurements"]:
        shape = _shape(row)
        if row["node"] != "dgx-a100-640gb" or row.get("nics") or row["zero"] or shape.gated:
            continue  # DGX A100 with its 8 HDR NICs, Megatron (no ZeRO), GPT blocks only
        app = Llm.Application({
            "hidden": shape.hidden, "feedforward": shape.ffn_or_default, "seq_size": shape.seq,
            "attn_heads": shape.heads, "attn_size": shape.hidden // shape.heads,
            "num_blocks": shape.layers,
        })  # fmt: skip
        model = Llm(app, log)
        model.compile(system, Llm.Execution.from_json(execution(row)))
        model.run(system)
        print(f"{row['id']}: {model.get_stats_json(False)['total_time']:.4f}")


if __name__ == "__main__":
    main()
