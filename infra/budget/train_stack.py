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
[NEMO] NVIDIA NeMo Framework user guide 24.07, "Parallelisms" (docs.nvidia.com/
    nemo-framework/user-guide/24.07/nemotoolkit/features/parallelisms.html): the
    distributed optimizer shards optimizer states and master weights over data-parallel
    GPUs and reduce-scatters gradients; sequence parallelism with TP; and the 24.07
    "Performance Benchmarks" recipes (FP8, selective recomputation, Megatron-Core).
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
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.budget.train_model import Recompute
from infra.errors import InputError, spelling_hint

__all__ = ["DEFAULT_STACK", "STACKS", "Stack", "resolve"]


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
            source="[SC21] Narayanan et al. 2021 (arXiv:2104.04473) §2.2, §3.5, Table 1",
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
            source="[MCORE] Megatron-Core developer guide, 2024",
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
            "[NEMO-UB] gpt3/175b.yaml ub_tp_comm_overlap",
            tp_overlap=True,
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
            "deepspeed/runtime/pipe/engine.py (ZeRO-2/3 refused with pipeline parallelism)",
            pipeline_zero=1,
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
    stages = stack.zero_stages
    if "distributed_optimizer" in changed:
        on = changed["distributed_optimizer"]
        stages = (tuple(z for z in stages if z) or (1,)) if on else (0,)
    labels = tuple(("" if asked[k] else "no-") + k.replace("_", "-") for k in changed)
    return replace(
        stack,
        fused_attention=changed.get("fused_attention", stack.fused_attention),
        sequence_parallel=changed.get("sequence_parallel", stack.sequence_parallel),
        distributed_optimizer=changed.get("distributed_optimizer", stack.distributed_optimizer),
        dp_overlap=changed.get("dp_overlap", stack.dp_overlap),
        zero_stages=stages,
        overrides=labels,
    )
