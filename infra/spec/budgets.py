"""Spec models of the budgets a cluster must meet (evaluated by `infra.budget`).

Each budget names one prediction (all-reduce time, scaling efficiency, checkpoint time, rack
and cluster power, model fit, SHARP gain, cost, and a trace replay's utilisation and
queueing delay) and the limit it must stay within; `Budget`
is the one-key entry a spec lists: a discriminated union of one entry model per kind.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, TypeGuard

from pydantic import AfterValidator, BaseModel, Discriminator, Field, Tag, model_validator
from pydantic.json_schema import SkipJsonSchema

from infra.bounds import MAX_BUDGET_GPUS
from infra.errors import HintedValueError
from infra.spec.base import ONE_LINE, Precision, StrictModel, TextRule
from infra.spec.units import ByteSize, Count

MAX_BUDGETS = 100
"""Most budgets a spec may declare: each is evaluated by lint, budget, report and diff, and a
training budget runs a layout search (about 0.3 s); ten times what a real cluster declares."""


class BudgetFields(StrictModel):
    """What every budget kind has besides its own parameters."""

    bound: Literal["conservative", "central", "optimistic"] = Field(
        "conservative",
        description=(
            "Which edge of the prediction's error band the verdict tests: `conservative` "
            "(the worse edge: longest time, highest power, lowest efficiency), `central` (the "
            "prediction itself) or `optimistic`. Bands come from held-out published rows "
            "(docs/accuracy.md); arithmetic figures (memory, trace replays) have none and are "
            "tested as they are."
        ),
    )

    claim: Annotated[str, Field(pattern=ONE_LINE), TextRule] | None = Field(
        None,  # one line: it is echoed in every output format
        min_length=1,
        max_length=200,
        description=(
            "Whose claim this budget tests (e.g. a vendor article), when it is not a target of "
            "this cluster: a missed claim is reported, as a warning, and fails nothing."
        ),
    )


class AllReduceBudget(BudgetFields):
    """NCCL all-reduce of `bytes` over `gpus` GPUs must finish within `max_ms`."""

    bytes: ByteSize = Field(description="Message size, e.g. `1GiB`.")
    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs taking part.")
    max_ms: float = Field(gt=0, le=86_400_000, description="Limit, milliseconds (at most a day).")
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


# Parameter counts of published models a budget can name instead of `model_params`.
# The shapes behind them (layers, hidden, heads, ...) live in infra/budget/train_model.py.
MODEL_PRESETS = {
    "gpt3-175b": 175e9,  # Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
    "mt-nlg-530b": 530e9,  # Smith et al. 2022, "Using DeepSpeed and Megatron to Train MT-NLG"
    "llama2-70b": 70e9,  # Touvron et al. 2023, "Llama 2", Table 1
    "llama3-405b": 405e9,  # Llama Team 2024, "The Llama 3 Herd of Models", Table 3
    "gpt-1t": 1008e9,  # Narayanan et al. 2021, Megatron-LM on GPU clusters, Table 1
}
StackName = Literal["megatron-2021", "megatron-core-2024", "nemo-2024", "deepspeed-zero"]
"""The presets of `infra.budget.train_stack.STACKS` (a test keeps the two the same)."""
ModelPreset = Literal["gpt3-175b", "mt-nlg-530b", "llama2-70b", "llama3-405b", "gpt-1t"]


def _positive_int(value: object) -> TypeGuard[int]:
    """A whole number above 0 (not a bool): the validator leaves other values to Pydantic."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class ScalingEfficiencyBudget(BudgetFields):
    """Training must keep at least `min` of linear scaling at `gpus` GPUs.

    With `model` (a preset) or `layers`/`hidden`/`heads`, railplan's training model times
    the step on the best layout that fits (or the one given by `tp`/`pp`) and compares
    per-GPU throughput with one model replica's; otherwise the older data-parallel model
    with an assumed `mfu` and `overlap` answers.
    """

    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs in the job.")
    min: float = Field(gt=0, le=1, description="Minimum efficiency, 0-1 (0.89 = 89 %).")
    model: ModelPreset | None = Field(
        None, description="A published model (shape and batch) to train, or give a shape."
    )
    model_params: Count = Field(
        0, description="Model parameters, e.g. `175e9` (implied by `model` or a shape)."
    )
    layers: int | None = Field(None, ge=1, le=10_000, description="Transformer layers.")
    hidden: int | None = Field(None, ge=1, le=1_000_000, description="Hidden size.")
    heads: int | None = Field(None, ge=1, le=10_000, description="Attention heads.")
    seq: int | None = Field(None, ge=1, le=10_000_000, description="Sequence length.")
    vocab: int | None = Field(None, ge=1, le=10_000_000, description="Vocabulary size.")
    global_batch: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET_GPUS * 1024,
        description="Sequences per step; default the preset's published batch, else "
        "`tokens_per_gpu` x `gpus` / `seq`.",
    )
    tp: int | None = Field(None, ge=1, le=64, description="Tensor-parallel size (with `pp`).")
    pp: int | None = Field(None, ge=1, le=1024, description="Pipeline-parallel size.")
    cp: int | None = Field(
        None, ge=1, le=1024, description="Context-parallel size; default searched for long seq."
    )
    micro_batch: int | None = Field(None, ge=1, le=1024, description="Micro-batch size.")
    recompute: Literal["none", "selective", "full"] | None = Field(
        None, description="Activation recomputation; default searched."
    )
    zero: Literal[0, 1, 2, 3] | None = Field(None, description="ZeRO stage; default searched.")
    stack: StackName | None = Field(
        None,
        description="Software stack that runs the job (`railplan train --stack`); default "
        "megatron-core-2024.",
    )
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
        """`model: gpt3-175b` stands for its parameter count (an explicit count wins).

        A shape gives a GPT estimate (12·layers·hidden² + vocab·hidden) for display.
        """
        if not isinstance(data, dict):
            return data  # not a mapping: the schema's message says so
        preset = data.get("model")
        if isinstance(preset, str) and preset in MODEL_PRESETS:  # a list: the schema's message
            return {"model_params": MODEL_PRESETS[preset], **data}
        if "model_params" not in data:
            layers, hidden = data.get("layers"), data.get("hidden")
            vocab = data.get("vocab") or 50257
            if _positive_int(layers) and _positive_int(hidden) and _positive_int(vocab):
                return {"model_params": 12 * layers * hidden**2 + vocab * hidden, **data}
        return data

    @model_validator(mode="after")
    def _some_model(self) -> ScalingEfficiencyBudget:
        if not self.model_params:
            raise ValueError("name a model: `model`, `layers`/`hidden`/`heads` or `model_params`")
        shape = [k for k in ("layers", "hidden", "heads") if getattr(self, k) is not None]
        if self.model is not None and shape:
            # the preset's shape would win silently: the budget would time another model
            raise HintedValueError(
                f"`model: {self.model}` and `{'`/`'.join(shape)}` both give the model's shape",
                hint=f"remove `{'`, `'.join(shape)}` to train {self.model}, or `model` to "
                "train that shape (`seq` and `vocab` may change a preset)",
            )
        return self

    @property
    def uses_train_model(self) -> bool:
        """Whether the budget names a model shape (so the training model answers)."""
        return self.model is not None or self.layers is not None


class CheckpointBudget(BudgetFields):
    """Saving a checkpoint of `bytes` must take at most `max_s` seconds."""

    bytes: ByteSize = Field(description="Checkpoint size, e.g. `2.8TB`.")
    max_s: float = Field(gt=0, le=604_800, description="Limit, seconds (at most a week).")
    writers: Literal["all", "replica"] = Field(
        "all",
        description="Who writes: `all` GPUs their shard (sharded checkpoints: Megatron-Core "
        "and NeMo distributed checkpointing, DeepSpeed ZeRO), or `replica`: data-parallel rank "
        "0 of each model shard, the `model_parallel` GPUs of one replica (Megatron-LM's "
        "torch.save checkpoints).",
    )
    model_parallel: int = Field(
        8,
        ge=1,
        le=MAX_BUDGET_GPUS,
        description="GPUs holding one model replica (TP x PP), for `writers: replica`.",
    )
    gpus: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET_GPUS,
        description="GPUs of the job that checkpoints; default every GPU of the main group.",
    )


class PowerBudget(BudgetFields):
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


class ModelFitsBudget(BudgetFields):
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
    tp: int = Field(1, ge=1, le=64, description="Tensor-parallel size (weights split over TP).")
    pp: int = Field(1, ge=1, le=1024, description="Pipeline-parallel size (layers split).")
    cp: int = Field(1, ge=1, le=1024, description="Context-parallel size (sequence split).")
    activations: ActivationSpec | None = Field(
        None,
        description="Add activation memory for this transformer shape (`layers` per pipeline "
        "stage); default none.",
    )
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


class SharpGainBudget(BudgetFields):
    """SHARP must cut all-reduce time of `bytes` over `gpus` GPUs by at least `min`."""

    bytes: ByteSize = Field(description="Message size, e.g. `64KiB` for a latency claim.")
    gpus: int = Field(ge=2, le=MAX_BUDGET_GPUS, description="GPUs taking part.")
    min: float = Field(gt=0, lt=1, description="Minimum reduction, 0-1 (0.4 = 40 % faster).")
    group: str | None = Field(
        None, description="Node group the job runs on; default the largest group without MIG."
    )


class CostBudget(BudgetFields):
    """Cost per PFLOP-day (energy, plus amortised hardware if priced) must stay within `max_usd`."""

    max_usd: float = Field(gt=0, le=1e9, description="Limit, USD per PFLOP-day.")
    price_per_kwh: float = Field(gt=0, le=1000, description="Electricity price, USD per kWh.")
    pue: float = Field(1.3, ge=1.0, le=3.0, description="Power usage effectiveness.")
    precision: Precision = Field(
        Precision.BF16, strict=False, description="Precision the PFLOPs are counted at."
    )
    mfu: float = Field(0.4, gt=0, le=1, description="Model FLOPs utilisation assumed.")
    price_per_node_usd: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description="Purchase price of one server, USD; adds its amortised cost to energy.",
    )
    amortize_years: float = Field(
        4.0, gt=0, le=30, description="Years the hardware cost is spread over (straight line)."
    )


def _inside_spec_directory(path: str) -> str:
    """A trace is named relative to the spec's directory and stays inside it.

    An absolute path or one whose ``..`` climbs out would let a spec read any file the user can
    (``/etc/shadow``) and echo it in a message; a symlink out of the directory is refused when
    the trace is read (`infra.budget.simulation.Replays`).
    """
    normal = posixpath.normpath(path)
    if path.startswith("/") or normal == ".." or normal.startswith("../"):
        raise ValueError(
            f"trace {path[:80]!r} must be a path inside the spec's directory, relative to it "
            "(no leading '/', no '..' that leaves it); copy the trace there"
        )
    return path


TracePath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4096,
        pattern=ONE_LINE,
        description="Job trace file, relative to the spec's directory (formats: docs/simulate.md).",
    ),
    TextRule,
    AfterValidator(_inside_spec_directory),
]


class UtilizationBudget(BudgetFields):
    """Replaying `trace` on the plan, running jobs must hold at least `min` of the GPUs."""

    trace: TracePath
    min: float = Field(gt=0, le=1, description="Least time-weighted allocated share, 0-1.")
    group: str | None = Field(None, description="Count only this node group's GPUs.")
    tenant: str | None = Field(
        None, description="Count only this tenant's jobs (its share of all the GPUs)."
    )


class QueueingDelayBudget(BudgetFields):
    """Replaying `trace` on the plan, a percentile of queueing delay must stay within `max_s`."""

    trace: TracePath
    max_s: float = Field(gt=0, le=31_536_000, description="Limit, seconds (at most a year).")
    percentile: Literal[50, 95, 99] = Field(95, description="Which percentile: 50, 95 or 99.")
    tenant: str | None = Field(
        None, description="Only this tenant's jobs; default every tenant (the worst one counts)."
    )


def _about(kind: str, model: type[StrictModel]) -> str:
    """The schema description of an entry's one key.

    Not the kind's own doc: the JSON Schema generator drops a description equal to the
    referenced model's, which would leave the property undocumented.
    """
    return f"`{kind}` budget: {model.__doc__}"


class AllReduceEntry(StrictModel):
    """An `all_reduce` budget entry."""

    kind: ClassVar[Literal["all_reduce"]] = "all_reduce"
    all_reduce: AllReduceBudget = Field(description=_about("all_reduce", AllReduceBudget))


class ScalingEfficiencyEntry(StrictModel):
    """A `scaling_efficiency` budget entry."""

    kind: ClassVar[Literal["scaling_efficiency"]] = "scaling_efficiency"
    scaling_efficiency: ScalingEfficiencyBudget = Field(
        description=_about("scaling_efficiency", ScalingEfficiencyBudget)
    )


class CheckpointEntry(StrictModel):
    """A `checkpoint` budget entry."""

    kind: ClassVar[Literal["checkpoint"]] = "checkpoint"
    checkpoint: CheckpointBudget = Field(description=_about("checkpoint", CheckpointBudget))


class RackPowerEntry(StrictModel):
    """A `rack_power` budget entry."""

    kind: ClassVar[Literal["rack_power"]] = "rack_power"
    rack_power: PowerBudget = Field(description="Per-rack power limit.")


class ClusterPowerEntry(StrictModel):
    """A `cluster_power` budget entry."""

    kind: ClassVar[Literal["cluster_power"]] = "cluster_power"
    cluster_power: PowerBudget = Field(description="Whole-cluster IT power limit.")


class ModelFitsEntry(StrictModel):
    """A `model_fits` budget entry."""

    kind: ClassVar[Literal["model_fits"]] = "model_fits"
    model_fits: ModelFitsBudget = Field(description=_about("model_fits", ModelFitsBudget))


class CostEntry(StrictModel):
    """A `cost_per_pflop_day` budget entry."""

    kind: ClassVar[Literal["cost_per_pflop_day"]] = "cost_per_pflop_day"
    cost_per_pflop_day: CostBudget = Field(description=_about("cost_per_pflop_day", CostBudget))


class SharpGainEntry(StrictModel):
    """A `sharp_gain` budget entry."""

    kind: ClassVar[Literal["sharp_gain"]] = "sharp_gain"
    sharp_gain: SharpGainBudget = Field(description=_about("sharp_gain", SharpGainBudget))


class UtilizationEntry(StrictModel):
    """A `utilization` budget entry."""

    kind: ClassVar[Literal["utilization"]] = "utilization"
    utilization: UtilizationBudget = Field(description=_about("utilization", UtilizationBudget))


class QueueingDelayEntry(StrictModel):
    """A `queueing_delay` budget entry."""

    kind: ClassVar[Literal["queueing_delay"]] = "queueing_delay"
    queueing_delay: QueueingDelayBudget = Field(
        description=_about("queueing_delay", QueueingDelayBudget)
    )


_ENTRIES: tuple[type[StrictModel], ...] = (
    AllReduceEntry,
    ScalingEfficiencyEntry,
    CheckpointEntry,
    RackPowerEntry,
    ClusterPowerEntry,
    ModelFitsEntry,
    CostEntry,
    SharpGainEntry,
    UtilizationEntry,
    QueueingDelayEntry,
)
BUDGET_KINDS: tuple[str, ...] = tuple(next(iter(e.model_fields)) for e in _ENTRIES)
"""Every budget kind, in the order the schema and error messages list them."""


class BudgetEntry(StrictModel):
    """What an entry that is not one known key is checked as, so its error says what is wrong.

    Never valid: an unknown key fails as an unknown key (with a did-you-mean hint), no key or
    several keys fail `_exactly_one`. Hidden from the JSON Schema. Messages about a value that
    is no mapping at all name it (``instance of BudgetEntry``).
    """

    all_reduce: AllReduceBudget | None = None
    scaling_efficiency: ScalingEfficiencyBudget | None = None
    checkpoint: CheckpointBudget | None = None
    rack_power: PowerBudget | None = None
    cluster_power: PowerBudget | None = None
    model_fits: ModelFitsBudget | None = None
    cost_per_pflop_day: CostBudget | None = None
    sharp_gain: SharpGainBudget | None = None
    utilization: UtilizationBudget | None = None
    queueing_delay: QueueingDelayBudget | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> BudgetEntry:
        chosen = [k for k in BUDGET_KINDS if getattr(self, k) is not None]
        raise ValueError(
            f"each budget entry has exactly one kind ({', '.join(BUDGET_KINDS)}); got {len(chosen)}"
        )


def _budget_kind(value: object) -> str:
    """The entry's kind: its one key, when that is a budget kind (else the misshapen tag)."""
    if isinstance(value, BaseModel):
        return str(getattr(value, "kind", _MISSHAPEN))
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        if key in BUDGET_KINDS and value[key] is not None:  # `kind: null` is no kind at all
            return str(key)
    return _MISSHAPEN


_MISSHAPEN = "misshapen"

BudgetKind = (
    AllReduceEntry
    | ScalingEfficiencyEntry
    | CheckpointEntry
    | RackPowerEntry
    | ClusterPowerEntry
    | ModelFitsEntry
    | CostEntry
    | SharpGainEntry
    | UtilizationEntry
    | QueueingDelayEntry
)
"""A budget entry that passed validation: one model per kind."""

if TYPE_CHECKING:
    Budget = BudgetKind  # what validation yields: BudgetEntry never validates
else:
    Budget = Annotated[
        Annotated[AllReduceEntry, Tag("all_reduce")]
        | Annotated[ScalingEfficiencyEntry, Tag("scaling_efficiency")]
        | Annotated[CheckpointEntry, Tag("checkpoint")]
        | Annotated[RackPowerEntry, Tag("rack_power")]
        | Annotated[ClusterPowerEntry, Tag("cluster_power")]
        | Annotated[ModelFitsEntry, Tag("model_fits")]
        | Annotated[CostEntry, Tag("cost_per_pflop_day")]
        | Annotated[SharpGainEntry, Tag("sharp_gain")]
        | Annotated[UtilizationEntry, Tag("utilization")]
        | Annotated[QueueingDelayEntry, Tag("queueing_delay")]
        | Annotated[BudgetEntry, Tag(_MISSHAPEN), SkipJsonSchema()],
        Discriminator(_budget_kind),
    ]
"""One declared budget: a mapping of exactly one budget kind to its parameters.

A discriminated union on that one key, so each kind validates as its own model (and the
evaluators in `infra.budget.evaluate` are typed per kind); the YAML is ``- kind: {...}``.
"""
