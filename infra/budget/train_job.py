"""What the training step model is asked about: the job (`Job`) and its layout (`Layout`).

This module owns the step model's inputs (`infra.budget.train_layout` times a step of them,
`infra.budget.train_comm` its communication): the model, GPU, precision, global batch and
communicator of a job with its software stack's switches, and how it is split over GPUs
(tensor, context, pipeline and data parallelism, micro-batch, interleaving, recomputation,
ZeRO stage).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.budget.collectives import CommTopology
from infra.budget.train_model import ModelShape, Recompute
from infra.budget.train_stack import MEGATRON_CORE_PIPELINE, PipelineRules
from infra.catalog.models import Gpu
from infra.spec.base import Precision

__all__ = ["Job", "Layout"]


@dataclass(frozen=True)
class Layout:
    """How the job is split: ``tp·pp·dp`` GPUs, micro-batches of ``micro_batch``."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    virtual: int = 1  # interleaved stages per GPU (1 = plain 1F1B)
    recompute: Recompute = "selective"
    zero: int = 1
    sp: bool = True  # sequence parallelism with TP
    cp: int = 1  # context parallelism: each sequence split over cp GPUs

    @property
    def gpus(self) -> int:
        """GPUs the layout needs."""
        return self.tp * self.cp * self.pp * self.dp

    def cp_label(self, times: str = "x") -> str:
        """`` x CP n`` for a layout that splits sequences, else empty (layout labels)."""
        return f" {times} CP {self.cp}" if self.cp > 1 else ""

    @property
    def replicas(self) -> int:
        """GPUs holding the same weights (DP x CP): gradients reduce, and ZeRO shards, over them."""
        return self.dp * self.cp


@dataclass(frozen=True)
class Job:
    """What is trained on what: the model, the GPU, the communicator of all the GPUs."""

    shape: ModelShape
    gpu: Gpu
    precision: Precision
    global_batch: int
    comm: CommTopology
    dp_overlap: bool = True  # gradient reduction overlaps the last backward pass
    flash_attention: bool = True  # fused attention: no s x s scores in memory
    tp_overlap: bool = False  # TP collectives pipelined with their GEMMs (`train_comm.tp_exposed`)
    pipeline_zero: int = 3  # the highest ZeRO stage the framework runs with PP > 1
    pipeline: PipelineRules = MEGATRON_CORE_PIPELINE  # what the stack's pipeline code refuses
