"""Spec models of the budgets a cluster must meet (evaluated by `infra.budget`).

Each budget names one prediction (all-reduce time, scaling efficiency, checkpoint time, rack
and cluster power, model fit, SHARP gain, cost) and the limit it must stay within; `Budget`
is the one-key wrapper a spec lists.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from infra.spec.base import Precision, StrictModel
from infra.spec.units import ByteSize, Count

MAX_BUDGET_GPUS = 2**20
"""Most GPUs a budget can name: above any plannable cluster (32,768 servers of 8 GPUs), and
small enough that memory estimates stay ordinary floats (``10**400`` would overflow them)."""


class AllReduceBudget(StrictModel):
    """NCCL all-reduce of `bytes` over `gpus` GPUs must finish within `max_ms`."""

    bytes: ByteSize = Field(description="Message size, e.g. `1GiB`.")
    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs taking part.")
    max_ms: float = Field(gt=0, le=86_400_000, description="Limit, milliseconds (at most a day).")
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


# Parameter counts of published models a budget can name instead of `model_params`.
MODEL_PRESETS = {
    "gpt3-175b": 175e9,  # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
    "mt-nlg-530b": 530e9,  # Smith et al. 2022, "Using DeepSpeed and Megatron to Train MT-NLG"
}


class ScalingEfficiencyBudget(StrictModel):
    """Data-parallel training must keep at least `min` of linear scaling at `gpus` GPUs."""

    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs in the job.")
    min: float = Field(gt=0, le=1, description="Minimum efficiency, 0-1 (0.89 = 89 %).")
    model: Literal["gpt3-175b", "mt-nlg-530b"] | None = Field(
        None, description="A published model whose parameter count to use (or `model_params`)."
    )
    model_params: Count = Field(description="Model parameters, e.g. `175e9`.")
    precision: Precision = Field(Precision.BF16, strict=False, description="Compute precision.")
    tokens_per_gpu: Count = Field(
        8192, description="Tokens each GPU processes per step (micro-batches x sequence)."
    )
    mfu: float = Field(0.4, gt=0, le=1, description="Model FLOPs utilisation assumed.")
    gradient_bytes: int = Field(2, ge=1, le=4, description="Bytes per gradient (bf16 = 2).")
    overlap: float = Field(
        0.5, ge=0, le=1, description="Share of compute time that hides gradient all-reduce."
    )
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )

    @model_validator(mode="before")
    @classmethod
    def _preset_params(cls, data: object) -> object:
        """`model: gpt3-175b` stands for its parameter count (an explicit count wins)."""
        if isinstance(data, dict) and data.get("model") in MODEL_PRESETS:
            return {"model_params": MODEL_PRESETS[data["model"]], **data}
        return data


class CheckpointBudget(StrictModel):
    """Saving a checkpoint of `bytes` must take at most `max_s` seconds."""

    bytes: ByteSize = Field(description="Checkpoint size, e.g. `2.8TB`.")
    max_s: float = Field(gt=0, le=604_800, description="Limit, seconds (at most a week).")


class PowerBudget(StrictModel):
    """Power must stay at or below `max_kw`."""

    max_kw: float = Field(gt=0, le=10_000_000, description="Limit, kW (at most 10 GW).")


class ActivationSpec(StrictModel):
    """Transformer shape for the activation-memory estimate (Korthikanti et al. 2022)."""

    seq_len: int = Field(ge=1, le=100_000_000, description="Sequence length in tokens.")
    micro_batch: int = Field(ge=1, le=1_000_000, description="Micro-batch size per GPU.")
    hidden: int = Field(ge=1, le=1_000_000, description="Hidden size.")
    layers: int = Field(ge=1, le=100_000, description="Transformer layers held by one GPU.")
    heads: int = Field(ge=1, le=100_000, description="Attention heads.")
    recompute: Literal["none", "selective", "full"] = Field(
        "none", description="Activation recomputation."
    )


class ModelFitsBudget(StrictModel):
    """A model must fit for mixed-precision Adam training."""

    model_params: Count = Field(description="Model parameters, e.g. `70e9`.")
    precision: Precision = Field(
        Precision.BF16, strict=False, description="Weight/activation precision."
    )
    gpus: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET_GPUS,
        description="GPUs to fit on (at most the group's); default the group's GPUs.",
    )
    zero_stage: Literal[0, 1, 2, 3] = Field(0, description="ZeRO / FSDP sharding stage.")
    activations: ActivationSpec | None = Field(
        None, description="Add activation memory for this transformer shape; default none."
    )
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


class SharpGainBudget(StrictModel):
    """SHARP must cut all-reduce time of `bytes` over `gpus` GPUs by at least `min`."""

    bytes: ByteSize = Field(description="Message size, e.g. `64KiB` for a latency claim.")
    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs taking part.")
    min: float = Field(gt=0, lt=1, description="Minimum reduction, 0-1 (0.4 = 40 % faster).")
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


class CostBudget(StrictModel):
    """Energy cost per PFLOP-day must stay at or below `max_usd`."""

    max_usd: float = Field(gt=0, le=1e9, description="Limit, USD per PFLOP-day.")
    price_per_kwh: float = Field(gt=0, le=1000, description="Electricity price, USD per kWh.")
    pue: float = Field(1.3, ge=1.0, le=3.0, description="Power usage effectiveness.")
    precision: Precision = Field(
        Precision.BF16, strict=False, description="Precision the PFLOPs are counted at."
    )
    mfu: float = Field(0.4, gt=0, le=1, description="Model FLOPs utilisation assumed.")


class Budget(StrictModel):
    """One declared budget: exactly one of the keys below."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})

    all_reduce: AllReduceBudget | None = Field(None, description=AllReduceBudget.__doc__)
    scaling_efficiency: ScalingEfficiencyBudget | None = Field(
        None, description=ScalingEfficiencyBudget.__doc__
    )
    checkpoint: CheckpointBudget | None = Field(None, description=CheckpointBudget.__doc__)
    rack_power: PowerBudget | None = Field(None, description="Per-rack power limit.")
    cluster_power: PowerBudget | None = Field(None, description="Whole-cluster IT power limit.")
    model_fits: ModelFitsBudget | None = Field(None, description=ModelFitsBudget.__doc__)
    cost_per_pflop_day: CostBudget | None = Field(None, description=CostBudget.__doc__)
    sharp_gain: SharpGainBudget | None = Field(None, description=SharpGainBudget.__doc__)

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        chosen = [k for k in type(self).model_fields if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "each budget entry has exactly one kind "
                f"({', '.join(type(self).model_fields)}); got {len(chosen)}"
            )
        return self

    @property
    def kind(self) -> str:
        """The budget's key, e.g. ``all_reduce``."""
        return next(k for k in type(self).model_fields if getattr(self, k) is not None)
