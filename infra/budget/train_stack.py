"""Named training software stacks: what a run's framework does, as the step model's switches.

A published run is only reproducible if the model is told what software ran it: Megatron-LM
in 2021 had no fused attention, no sequence parallelism and no distributed optimizer, and
reduced gradients after the pipeline flush; Megatron-Core and NeMo in 2024 do all four.
This module owns the presets (each setting cited), and `resolve`, the ONE function that
turns a stack name plus the user's individual switches into the settings the step model
uses: `railplan train --stack`, the `scaling_efficiency` budget's ``stack`` and the
accuracy harness (`train_accuracy.row_settings`) all call it, so a row of docs/accuracy.md
is reproduced by the command printed next to it. The default stack is today's behaviour of
`railplan train` (Megatron-Core 2024).

Sources:

[SC21] D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
    Using Megatron-LM", SC 2021 (arXiv:2104.04473): unfused attention (FlashAttention is Dao
    et al. 2022, arXiv:2205.14135); tensor parallelism all-reduces replicated norms and
    dropouts (sequence parallelism is Korthikanti et al. 2022, arXiv:2205.05198); plain
    data-parallel all-reduce of gradients after the pipeline flush (§2.2, Figure 4: the
    optimizer step follows the flush); every Table 1 run recomputes activations (§3.5, eq.
    3 counts the fourth forward pass); A100 has no FP8 (Transformer Engine came with H100).
[MCORE] NVIDIA Megatron-Core developer guide (docs.nvidia.com/megatron-core), 2024:
    Transformer Engine fused attention, ``--sequence-parallel``,
    ``--use-distributed-optimizer``, ``--overlap-grad-reduce``/``--overlap-param-gather``,
    ``--fp8-format hybrid`` (linear layers in FP8), ``--recompute-granularity
    selective|full``.
[MCORE-DO] Megatron-Core developer guide, "Distributed Optimizer"
    (docs.nvidia.com/megatron-core/developer-guide/latest/distrib_optimizer.html): it
    distributes the optimizer state ("[yes]"), not model gradients nor parameters ("[no]"),
    so it is ZeRO-1 (bf16 parameters with fp32 gradients: 18 bytes a parameter against
    6 + 12/d); there is no ZeRO-2 stage to ask for. Megatron-LM v2.6 [MLM21] has no
    distributed optimizer at all (no ``--use-distributed-optimizer``; [SC21] §2.2).
[NEMO] NVIDIA NeMo Framework user guide 24.07, "Parallelisms" (docs.nvidia.com/
    nemo-framework/user-guide/24.07/nemotoolkit/features/parallelisms.html): the
    distributed optimizer shards optimizer states and master weights over data-parallel
    GPUs and reduce-scatters gradients; sequence parallelism with TP; and the 24.07
    "Performance Benchmarks" recipes (FP8, selective recomputation, Megatron-Core).
[NEMO-FSDP] NVIDIA NeMo Framework user guide, "Fully Sharded Data Parallel (FSDP)"
    (docs.nvidia.com/nemo-framework/user-guide/latest/llms/gpt/fsdp.html): ``fsdp: True``
    with ``fsdp_sharding_strategy`` 'grad' (PyTorch FSDP's SHARD_GRAD_OP: gradients and
    optimizer state, ZeRO-2) or 'full' (parameters too, ZeRO-3), with ``fused_adam``
    (not the distributed optimizer) and without ``megatron_amp_O2``: so NeMo runs every
    ZeRO stage, where Megatron-Core alone has no ZeRO-2 [MCORE-DO].
[NEMO-UB] NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/175b.yaml (commit
    056a90ed): ``ub_tp_comm_overlap: True``, Transformer Engine's userbuffers pipelining of
    the tensor-parallel all-gather / reduce-scatter with the GEMMs that consume and produce
    them. NVIDIA's MLPerf Training v4.0 GPT-3 configs run it too (training_results_v4.0
    NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_64x8x128x4x8_mbs2.sh:
    ``TP_COMM_OVERLAP=True``). Not every recipe does (that launcher's llama2_70b.yaml at
    d24f8efb says false), so it is the preset's assumption for NeMo.
[DS] DeepSpeed ZeRO configuration (deepspeed.ai/docs/config-json, "ZeRO Optimizations"):
    ``stage`` 1/2/3 shards optimizer states, gradients, parameters; ``overlap_comm``
    overlaps gradient reduction with the backward pass (on for ZeRO-3); activation
    checkpointing (deepspeed.ai/docs/activation-checkpointing) recomputes whole layers;
    ZeRO itself fuses no attention and has no sequence parallelism or FP8 GEMMs.

Pipeline rules (`PipelineRules`, what each stack's own code refuses; `check_layout` applies
them to a layout the user fixes and to every layout the search times):

[MLM21] Megatron-LM tag v2.6 (commit 3860e995, 2021-08-27; interleaving since commit
    182841f7, 2021-03-20): megatron/arguments.py:126 asserts
    ``pipeline_model_parallel_size > 2`` with the interleaved schedule;
    megatron/model/transformer.py:545 asserts ``num_layers %
    pipeline_model_parallel_size == 0``; megatron/schedules.py:34 asserts
    ``get_num_microbatches() % pipeline_model_parallel_size == 0`` when interleaving.
[MCORE-PP] Megatron-Core, checked at tags core_v0.8.0 and core_v0.10.0 to core_v0.19.0:
    interleaving needs PP > 1 when ``overlap_p2p_comm`` is on, which is the default
    (``--no-overlap-p2p-communication`` is ``store_false``; commit 3ee489d9, 2024-05-31,
    "Enable virtual pipelining and P2P communication overlap at PP=2",
    megatron/training/arguments.py:255 at core_v0.8.0). The interleaved schedule runs its
    micro-batches in groups of N (``--microbatch-group-size-per-virtual-pipeline-stage``,
    default PP) and raises unless PP <= N <= M and M % N is 0 or at least PP
    (megatron/core/pipeline_parallel/schedules.py, commit 4295be1a of 2024-11-01, first
    released in core_v0.10.0): some N exists exactly when M >= PP (N = M). The releases
    before it (core_v0.9.0 and earlier) raised unless M % PP == 0. Stages may be uneven
    (``--decoder-first/last-pipeline-num-layers``, commit fa8bb592, 2024-09-05;
    ``--num-virtual-stages-per-pipeline-rank`` or ``--pipeline-model-parallel-layout`` with
    interleaving at core_v0.19.0).
[NEMO-PP] NeMo 24.07 (tag r2.0.0rc1, commit 579983fb) on its pinned Megatron-Core
    commit 338af514 (2024-07-23, Dockerfile.ci ``MCORE_TAG``): megatron_gpt_model.py:2041
    (``build_transformer_config``) raises unless ``num_layers %
    pipeline_model_parallel_size == 0``; Megatron-Core's schedules.py:566 raises unless the
    micro-batches are a multiple of PP when interleaving; parallel_state.py:447 needs PP > 1
    (NeMo does not go through Megatron-LM's arguments.py and its PP > 2 check).
[DS-PP] DeepSpeed tags v0.14.0 and v0.16.4: ``PipelineEngine.train_batch``
    (deepspeed/runtime/pipe/engine.py:386 at v0.16.4) always runs
    ``schedule.TrainSchedule``, plain 1F1B over one contiguous block of layers per stage
    (``PipelineModule._partition_layers``, deepspeed/runtime/pipe/module.py:405-424, which
    partitions uniformly or by parameters, so stages may be uneven): no interleaved schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.budget.train_model import Recompute
from infra.errors import InputError, spelling_hint

__all__ = [
    "DEFAULT_STACK",
    "MEGATRON_CORE_PIPELINE",
    "STACKS",
    "PipelineRules",
    "Stack",
    "resolve",
]


@dataclass(frozen=True)
class PipelineRules:
    """What one stack's pipeline code refuses (module docstring, "Pipeline rules").

    ``interleaving``: whether it has an interleaved (virtual-stage) schedule at all;
    ``interleave_min_pp``: the smallest PP it interleaves; ``even_stages``: every stage must
    hold the same number of layers (``layers % pp == 0``); ``micro_batches_divisible``:
    interleaving needs the step's micro-batches to be a multiple of PP (else at least PP);
    ``context_parallel``: whether it can split a sequence over GPUs (CP) at all. ``stack`` and ``source`` name the stack and the code each rule is read from.
    """

    stack: str = "megatron-core-2024"
    interleaving: bool = True
    interleave_min_pp: int = 2
    even_stages: bool = False
    micro_batches_divisible: bool = False
    source: str = "[MCORE-PP] Megatron-Core core_v0.10.0+ schedules.py, arguments.py"
    # Context parallelism (--context-parallel-size) came with Megatron-Core in 2023: Megatron-LM
    # v2.6 has no such option, so a 2021 stack cannot split a sequence over GPUs.
    context_parallel: bool = True


MEGATRON_CORE_PIPELINE = PipelineRules()
MEGATRON_2021_PIPELINE = PipelineRules(
    "megatron-2021",
    interleave_min_pp=3,
    even_stages=True,
    micro_batches_divisible=True,
    source="[MLM21] Megatron-LM v2.6",
    context_parallel=False,
)
NEMO_2024_PIPELINE = PipelineRules(
    "nemo-2024",
    even_stages=True,
    micro_batches_divisible=True,
    source="[NEMO-PP] NeMo 24.07 on Megatron-Core 338af514",
)
DEEPSPEED_PIPELINE = PipelineRules(
    "deepspeed-zero",
    interleaving=False,
    source="[DS-PP] DeepSpeed v0.16.4 PipelineEngine",
)


@dataclass(frozen=True)
class Stack:
    """The step model's switches for one framework.

    ``zero_stages`` are the ZeRO stages the layout search tries when ``--zero`` is not
    given (stage 0 is a plain all-reduce, 1 Megatron's distributed optimizer); ``recompute``
    is the mode it uses when ``--recompute`` is not given (None: search selective and full).
    """

    name: str
    fused_attention: bool
    sequence_parallel: bool
    distributed_optimizer: bool
    dp_overlap: bool
    fp8: bool
    recompute: Recompute | None
    zero_stages: tuple[int, ...]
    source: str
    overrides: tuple[str, ...] = ()  # the switches the user set against the preset
    tp_overlap: bool = False  # TP collectives pipelined with the GEMMs (userbuffers)
    # The highest ZeRO stage the framework runs with pipeline parallelism: DeepSpeed's
    # PipelineEngine asserts stage < 2 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline
    # parallelism", deepspeed/runtime/pipe/engine.py); Megatron shards with PP too.
    pipeline_zero: int = 3
    pipeline: PipelineRules = MEGATRON_CORE_PIPELINE  # what its pipeline code refuses
    # The ZeRO stages the framework can run at all (``--zero`` outside them is refused), and
    # why the others are missing: the layout search tries ``zero_stages``, a subset.
    zero_supported: tuple[int, ...] = (0, 1, 2, 3)
    zero_note: str = ""

    @property
    def label(self) -> str:
        """The name, with the switches the user changed (``megatron-2021 + sequence-parallel``)."""
        return " + ".join((self.name, *self.overrides))


STACKS: dict[str, Stack] = {
    s.name: s
    for s in (
        Stack(
            "megatron-2021",
            fused_attention=False,
            sequence_parallel=False,
            distributed_optimizer=False,
            dp_overlap=False,
            fp8=False,
            recompute="full",
            zero_stages=(0,),
            source="[SC21] Narayanan et al. 2021 (arXiv:2104.04473) §2.2, §3.5, Table 1; "
            "[MLM21] Megatron-LM v2.6 (pipeline rules)",
            pipeline=MEGATRON_2021_PIPELINE,
            zero_supported=(0,),
            zero_note="Megatron-LM v2.6 has no --use-distributed-optimizer [SC21] [MLM21]",
        ),
        Stack(
            "megatron-core-2024",
            fused_attention=True,
            sequence_parallel=True,
            distributed_optimizer=True,
            dp_overlap=True,
            fp8=True,
            recompute=None,
            zero_stages=(1, 3),
            source="[MCORE] Megatron-Core developer guide, 2024; [MCORE-PP] pipeline rules",
            zero_supported=(0, 1, 3),
            zero_note="its distributed optimizer shards optimizer state (ZeRO-1), not gradients "
            "[MCORE-DO]",
        ),
        Stack(
            "nemo-2024",
            fused_attention=True,
            sequence_parallel=True,
            distributed_optimizer=True,
            dp_overlap=True,
            fp8=True,
            recompute="selective",
            zero_stages=(1,),
            source="[NEMO] NeMo Framework 24.07 user guide, Parallelisms; Performance Benchmarks; "
            "[NEMO-UB] gpt3/175b.yaml ub_tp_comm_overlap; [NEMO-PP] NeMo 24.07 (pipeline rules); "
            "[NEMO-FSDP] ZeRO-2/3 through torch FSDP",
            tp_overlap=True,
            pipeline=NEMO_2024_PIPELINE,
        ),
        Stack(
            "deepspeed-zero",
            fused_attention=False,
            sequence_parallel=False,
            distributed_optimizer=True,
            dp_overlap=True,
            fp8=False,
            recompute="full",
            zero_stages=(1, 2, 3),
            source="[DS] DeepSpeed config-json 'ZeRO Optimizations', activation checkpointing; "
            "deepspeed/runtime/pipe/engine.py (ZeRO-2/3 refused with pipeline parallelism); "
            "[DS-PP] no interleaved schedule",
            pipeline_zero=1,
            pipeline=DEEPSPEED_PIPELINE,
        ),
    )
}
DEFAULT_STACK = "megatron-core-2024"
"""What `railplan train` assumed before stacks could be named (its outputs are unchanged)."""


def resolve(
    name: str | None = None,
    *,
    fused_attention: bool | None = None,
    sequence_parallel: bool | None = None,
    distributed_optimizer: bool | None = None,
    dp_overlap: bool | None = None,
    path: str = "--stack",
) -> Stack:
    """The preset ``name`` (default `DEFAULT_STACK`) with each switch that is not None set.

    Turning the distributed optimizer off leaves ZeRO stage 0 to search; turning it on for a
    stack without one searches stage 1 (Megatron's distributed optimizer).

    Raises:
        InputError: an unknown stack name.
    """
    name = name or DEFAULT_STACK
    if name not in STACKS:
        hint = spelling_hint(name, STACKS) or "one of " + ", ".join(STACKS)
        raise InputError(f"unknown software stack {name!r}", path=path, hint=hint)
    stack = STACKS[name]
    asked = {
        "fused_attention": fused_attention,
        "sequence_parallel": sequence_parallel,
        "distributed_optimizer": distributed_optimizer,
        "dp_overlap": dp_overlap,
    }
    changed = {k: v for k, v in asked.items() if v is not None and getattr(stack, k) != v}
    if not changed:
        return stack
    stages, supported, note = stack.zero_stages, stack.zero_supported, stack.zero_note
    if "distributed_optimizer" in changed:
        on = changed["distributed_optimizer"]
        stages = (tuple(z for z in stages if z) or (1,)) if on else (0,)
        # the user's switch is the stack they run: a distributed optimizer is ZeRO-1
        supported = tuple(sorted({*supported, 1})) if on else (0,)
        note = "the distributed optimizer is switched off" if not on else stack.zero_note
    labels = tuple(("" if asked[k] else "no-") + k.replace("_", "-") for k in changed)
    return replace(
        stack,
        fused_attention=changed.get("fused_attention", stack.fused_attention),
        sequence_parallel=changed.get("sequence_parallel", stack.sequence_parallel),
        distributed_optimizer=changed.get("distributed_optimizer", stack.distributed_optimizer),
        dp_overlap=changed.get("dp_overlap", stack.dp_overlap),
        zero_stages=stages,
        zero_supported=supported,
        zero_note=note,
        overrides=labels,
    )
