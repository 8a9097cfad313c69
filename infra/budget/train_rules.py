"""The rules a training layout must pass: Megatron's for every stack, then the stack's own.

This module owns `check_layout`, which gates a layout the user fixes and every layout the
search times (so the search never picks one a stack refuses): TP inside the NVLink domain
and dividing the heads, whole pipeline chunks (`stages_fit`), CP splitting the sequence,
the GPUs and the batch splitting into replicas and micro-batches, the ZeRO stage the stack
runs with pipelining; and the pipeline layouts each training stack's own code refuses
(`pipeline_rules`). `train_stack.PipelineRules` says what a stack refuses (read from its
source, cited there: [MLM21], [MCORE-PP], [NEMO-PP], [DS-PP]); this module turns that into
rules of the form `check_layout` asks, ``(ok, option, message, hint)``, each message naming
the stack and the reason, each hint the nearest value the stack accepts.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from infra.budget.train_job import Job, Layout
from infra.budget.train_layout import micro_batches
from infra.errors import InputError

__all__ = ["Rule", "StackRules", "check_layout", "pipeline_rules", "stages_fit"]

Rule = tuple[bool, str, str, str]
"""Whether the layout passes, the option at fault, the message, the hint."""

SEARCH_HINT = "or leave --tp/--pp out to search"


class StackRules(NamedTuple):
    """The stack's own rules on one layout's pipeline (`pipeline_rules`)."""

    no_interleaving: Rule  # a stack without an interleaved schedule
    interleave_min_pp: Rule  # the least PP the stack interleaves
    even_stages: Rule  # every stage the same number of layers, where the stack needs it
    micro_batches: Rule  # the micro-batches a step needs to interleave


def pipeline_rules(job: Job, layout: Layout) -> StackRules:
    """The rules of ``job``'s stack (`Job.pipeline`) on ``layout``."""
    return StackRules(
        _no_interleaving(job, layout),
        _interleave_min_pp(job, layout),
        _even_stages(job, layout),
        _interleaved_micro_batches(job, layout),
    )


def _no_interleaving(job: Job, layout: Layout) -> Rule:
    """A stack without an interleaved schedule (DeepSpeed's PipelineEngine) runs virtual 1."""
    rules = job.pipeline
    return (
        rules.interleaving or layout.virtual == 1,
        "--virtual",
        (
            f"software stack {rules.stack} has no interleaved pipeline schedule, so "
            f"{layout.virtual} virtual stages per GPU cannot run (its PipelineEngine runs plain "
            f"1F1B over one block of layers per stage; {rules.source})"
        ),
        "use --virtual 1, or a Megatron stack to interleave (--stack megatron-core-2024)",
    )


def _interleave_min_pp(job: Job, layout: Layout) -> Rule:
    """Megatron-LM 2021 interleaves only PP > 2 (PP 1 has its own rule in `check_layout`)."""
    rules = job.pipeline
    least = rules.interleave_min_pp
    ok = layout.virtual == 1 or layout.pp == 1 or layout.pp >= least
    nearest = _pipeline_at_least(job, layout, least) if not ok else None
    to = f"--pp {nearest}" if nearest else f"--pp {least} or more"
    return (
        ok,
        "--virtual",
        (
            f"software stack {rules.stack} interleaves only with PP {least} or more, and the "
            f"layout has PP {layout.pp} x {layout.virtual} virtual stages ({rules.source}: "
            '"pipeline-model-parallel size should be greater than 2 with interleaved schedule")'
        ),
        f"use --virtual 1 with --pp {layout.pp}, or {to} to interleave, {SEARCH_HINT}",
    )


def _even_stages(job: Job, layout: Layout) -> Rule:
    """Megatron-LM 2021 and NeMo 24.07 give every stage the same number of layers."""
    rules, layers = job.pipeline, job.shape.layers
    ok = not rules.even_stages or layers % layout.pp == 0
    below, above = (None, None) if ok else _dividing_pipelines(job, layout)
    found = " or ".join(f"--pp {p}" for p in (below, above) if p)
    return (
        ok,
        "--pp",
        (
            f"software stack {rules.stack} needs PP to divide the layers, and PP {layout.pp} "
            f"cuts {layers} layers into uneven stages ({rules.source}: "
            '"num_layers must be divisible by pipeline_model_parallel_size")'
        ),
        (f"nearest PP that divides them: {found}, or " if found else "use ")
        + f"a stack with uneven stages (--stack megatron-core-2024), {SEARCH_HINT}",
    )


def _interleaved_micro_batches(job: Job, layout: Layout) -> Rule:
    """Interleaving needs PP micro-batches a step: a multiple of PP, or at least PP.

    Megatron-LM 2021 and NeMo 24.07's Megatron-Core raise unless the step's micro-batches
    are a multiple of PP. Megatron-Core since core_v0.10.0 runs them in groups of N from PP
    to M and raises unless M % N is 0 or at least PP: some N does exactly when M >= PP
    (N = M; the default N = PP still needs a multiple), so the step model allows it.
    """
    rules, m, pp = job.pipeline, micro_batches(job, layout), layout.pp
    if rules.micro_batches_divisible:
        ok = layout.virtual == 1 or m % pp == 0
        need = f"a multiple of PP {pp} micro-batches a step"
        quote = '"number of microbatches is not divisible by pipeline-parallel size"'
    else:
        ok = layout.virtual == 1 or m >= pp
        need = f"at least PP {pp} micro-batches a step"
        quote = '"should range in [PP, M]"'
    per = layout.dp * layout.micro_batch
    batches = _batches_with_micro_multiple(job.global_batch, per, pp)
    found = " or ".join(f"{b:,}" for b in batches)
    return (
        ok,
        "--virtual",
        (
            f"software stack {rules.stack}: {layout.virtual} interleaved stages need {need}, "
            f"and global batch {job.global_batch} / DP {layout.dp} / micro-batch "
            f"{layout.micro_batch} gives {m} ({rules.source}: {quote})"
        ),
        f"use --virtual 1, or global batch {found} (nearest that give {pp} x k micro-batches), "
        + SEARCH_HINT,
    )


def _batches_with_micro_multiple(batch: int, per: int, pp: int) -> list[int]:
    """The nearest global batches below and above ``batch`` with a multiple of ``pp`` micro-batches."""
    step = max(1, per) * pp
    below = batch // step * step
    above = below + step if below != batch else batch + step
    return [b for b in (below, above) if b > 0 and b != batch]


def _fits_gpus(job: Job, layout: Layout, pp: int) -> bool:
    """Whether ``pp`` stages split the job's GPUs into whole TP x CP x PP replicas."""
    return job.comm.ranks % (layout.tp * layout.cp * pp) == 0


def _pipeline_at_least(job: Job, layout: Layout, least: int) -> int | None:
    """The smallest PP >= ``least`` the stack could interleave ``layout.virtual`` ways."""
    layers, v = job.shape.layers, layout.virtual
    for pp in range(least, layers // v + 1):
        even = layers % pp == 0 or not job.pipeline.even_stages
        if even and _fits_gpus(job, layout, pp) and -(-layers // pp) % v == 0:
            return pp
    return None


def _dividing_pipelines(job: Job, layout: Layout) -> tuple[int | None, int | None]:
    """The nearest PP below and above ``layout.pp`` that divides the layers and the GPUs."""
    layers = job.shape.layers
    small = [d for d in range(1, math.isqrt(layers) + 1) if layers % d == 0]
    divisors = set(small) | {layers // d for d in small}
    fits = sorted(p for p in divisors if _fits_gpus(job, layout, p))
    below = max((p for p in fits if p < layout.pp), default=None)
    above = min((p for p in fits if p > layout.pp), default=None)
    return below, above


def check_layout(job: Job, layout: Layout, strict_batch: bool = True) -> None:
    """Raise InputError unless ``layout`` is one the job's software stack could run.

    Megatron's rules for every stack, then the stack's own pipeline rules
    (`train_rules.pipeline_rules`: interleaving at all, its least PP, even stages, the
    micro-batches interleaving needs).

    Raises:
        InputError: the first rule the layout breaks, with a hint.
    """
    shape, per_node = job.shape, job.comm.gpus_per_node
    stack_rules = pipeline_rules(job, layout)  # `train_rules`: what the job's stack refuses
    rules: list[tuple[bool, str, str, str]] = [
        (
            per_node % layout.tp == 0,
            "--tp",
            (
                f"TP {layout.tp} must divide the {per_node} "
                "GPUs of a node (tensor parallelism stays inside the NVLink domain)"
            ),
            SEARCH_HINT,
        ),
        (
            shape.heads % layout.tp == 0 and shape.kv_heads_or_heads % layout.tp == 0,
            "--tp",
            (
                f"TP {layout.tp} must divide the {shape.heads} heads and {shape.kv_heads_or_heads} "
                "key/value heads"
            ),
            SEARCH_HINT,
        ),
        stack_rules.no_interleaving,  # DeepSpeed's pipeline has no interleaved schedule
        (
            # Megatron-LM's parallel_state refuses a virtual pipeline size without PP > 1
            # ("pipeline-model-parallel size should be greater than 1 with interleaved
            # schedule"): with one stage there is nothing to interleave.
            layout.virtual == 1 or layout.pp > 1,
            "--virtual",
            (
                f"{layout.virtual} interleaved (virtual) stages per GPU need pipeline "
                "parallelism, and PP 1 has a single stage (Megatron-LM refuses the interleaved "
                "schedule without it)"
            ),
            "use --virtual 1 with --pp 1, or --pp 2 or more to interleave",
        ),
        stack_rules.interleave_min_pp,
        stack_rules.even_stages,
        (
            stages_fit(shape.layers, layout.pp, layout.virtual),
            "--pp",
            (
                f"PP {layout.pp} x {layout.virtual} virtual stages do not cut "
                f"{shape.layers} layers into whole chunks"
            ),
            SEARCH_HINT,
        ),
        (
            layout.cp == 1 or shape.seq % (2 * layout.cp) == 0,
            "--cp",
            (
                f"CP {layout.cp} must split the {shape.seq}-token sequence into {2 * layout.cp} "
                "equal chunks (two per rank, for causal load balance)"
            ),
            SEARCH_HINT,
        ),
        (
            job.comm.ranks % (layout.tp * layout.cp * layout.pp) == 0,
            "--gpus",
            (
                f"{job.comm.ranks} GPUs do not split into TP {layout.tp} x CP {layout.cp} x PP "
                f"{layout.pp} replicas"
            ),
            SEARCH_HINT,
        ),
        (
            # dp >= 1 first: a layout with no replica must fail here, not divide by zero
            not strict_batch
            or (layout.dp >= 1 and job.global_batch % (layout.dp * layout.micro_batch) == 0),
            "--global-batch",
            (
                f"global batch {job.global_batch} must be a multiple of DP "
                f"{layout.dp} x micro-batch {layout.micro_batch}"
            ),
            SEARCH_HINT,
        ),
        stack_rules.micro_batches,  # interleaving needs PP micro-batches a step
        (
            layout.pp == 1 or layout.zero <= job.pipeline_zero,
            "--zero",
            (
                f"ZeRO-{layout.zero} with PP {layout.pp}: the software stack runs at most "
                f'ZeRO-{job.pipeline_zero} with pipeline parallelism (DeepSpeed: "ZeRO-2 and '
                'ZeRO-3 are incompatible with pipeline parallelism")'
            ),
            f"use --zero {job.pipeline_zero} or lower with --pp 2 or more, or --pp 1, "
            + SEARCH_HINT,
        ),
    ]
    for ok, path, message, hint in rules:
        if not ok:
            raise InputError(message, path=path, hint=hint)


def stages_fit(layers: int, pp: int, virtual: int) -> bool:
    """Whether ``pp`` stages of ``virtual`` chunks each hold whole layers.

    Stages may be uneven (Llama 3 405B ran 126 layers on PP 16, stages of 7 and 8): the step
    model times the fullest stage, ceil(layers / pp) layers, which the virtual chunks of
    interleaved 1F1B must split evenly (Megatron's layers per virtual stage is an integer).

    >>> stages_fit(126, 16, 4), stages_fit(96, 16, 4), stages_fit(80, 128, 1)
    (True, False, False)
    """
    return pp * virtual <= layers and -(-layers // pp) % virtual == 0
