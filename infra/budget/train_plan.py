"""A `railplan train` request on a planned cluster: the job, the layout search, the answer.

This module owns what sits between the CLI (or a budget) and the step model, once the
request (`infra.budget.train_request`) passed its checks: the job on the spec's node group
(`cluster.comm_topology`), the layouts the request allows, each checked by the rules a
layout must pass (`train_rules.check_layout`), and the search for a layout that fits in
memory when the request fixes no TP/PP (ranked by the conservative bound of its error band,
calibrated layouts first: `train_search`) (context parallelism too, for sequences long
enough to split), like Calculon's optimal-execution search, bounded to a few thousand
candidates; and the nearest global batches some layout divides.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from infra.budget import train_layout
from infra.budget.cluster import BudgetError, comm_topology, main_group
from infra.budget.collectives import CommTopology
from infra.budget.memory import TRAINING_PRECISIONS
from infra.budget.train_bands import TrainBand, train_band
from infra.budget.train_job import Job, Layout
from infra.budget.train_layout import StepResult
from infra.budget.train_model import Recompute
from infra.budget.train_request import TrainRequest, check_split, check_stack
from infra.budget.train_rules import check_layout, stages_fit
from infra.budget.train_search import Candidate, Ranking
from infra.budget.train_stack import DEFAULT_STACK
from infra.catalog import Catalog
from infra.catalog.models import Gpu
from infra.errors import InputError
from infra.spec import Spec
from infra.spec.base import Precision

__all__ = [
    "TrainAnswer",
    "build_job",
    "search",
    "train",
]

MAX_MICRO_BATCH = 16
"""Largest micro-batch the search tries (bigger ones only add activation memory)."""
CP_SIZES = (1, 2, 4, 8, 16, 32)
"""Context-parallel sizes the search tries: powers of two (Megatron-Core's ring splits each
sequence into 2·cp chunks); Llama 3 405B ran CP 16 at 131,072 tokens."""
MIN_CP_CHUNK = 2048
"""Fewest tokens per CP rank the search tries: shorter chunks leave too little attention to
hide the K/V exchange behind (NeMo runs CP 2 at 8,192 tokens: 4,096 per rank)."""


@dataclass(frozen=True)
class TrainAnswer:
    """The chosen layout's step, its scaling efficiency, and what the search did.

    ``band`` holds the chosen layout's error band and calibration; ``other`` is the layout
    shown beside it (`train_search.Ranking.other`): the best calibrated one when the choice
    is extrapolated, else a faster extrapolated one the search passed over.
    """

    result: StepResult
    scaling_efficiency: float
    group: str
    node: str
    gpus_per_node: int
    candidates: int
    search_s: float
    seq: int
    stack: str = DEFAULT_STACK  # the stack's label: its name and any switch the user changed
    global_batch: int = 0  # the batch the step was timed for
    band: TrainBand | None = None
    other: Candidate | None = None

    @property
    def nodes(self) -> int:
        """Nodes the job spans."""
        return -(-self.result.layout.gpus // self.gpus_per_node)


def build_job(spec: Spec, catalog: Catalog, request: TrainRequest) -> tuple[Job, str, str]:
    """The job on the spec's node group: (job, group name, node name).

    Raises:
        BudgetError: the group has too few GPUs, is MIG-split, or lacks the precision.
    """
    group, node = main_group(spec, catalog, request.group)
    gpu = catalog.gpus[node.gpu]
    if not gpu.supports(request.precision) or request.precision not in TRAINING_PRECISIONS:
        raise BudgetError(
            f"{gpu.name} cannot train in {request.precision}",
            path="--precision",
            hint="use bf16 (or fp8 on Hopper)",
        )
    if request.precision is Precision.FP8 and not request.stack.fp8:
        raise InputError(
            f"software stack {request.stack.name} has no FP8 training",
            path="--precision",
            hint="use bf16, or a stack with Transformer Engine (--stack megatron-core-2024)",
        )
    comm = comm_topology(spec, catalog, request.gpus, path="--gpus", group=request.group)
    return stack_job(request, gpu, comm), group.name, node.name


def stack_job(request: TrainRequest, gpu: Gpu, comm: CommTopology) -> Job:
    """The job of ``request`` on ``comm``, with its stack's attention and DP overlap.

    The accuracy harness builds its rows' jobs here too (one path from a stack to the model).
    """
    stack = request.stack
    return Job(
        request.shape,
        gpu,
        request.precision,
        request.global_batch,
        comm,
        dp_overlap=stack.dp_overlap,
        flash_attention=stack.fused_attention,
        tp_overlap=stack.tp_overlap,
        pipeline_zero=stack.pipeline_zero,
        pipeline=stack.pipeline,
    )


def _divisors(n: int, at_most: int | None = None) -> list[int]:
    """Divisors of ``n`` (up to ``at_most``), ascending, in O(sqrt n)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    every = sorted(set(small + [n // d for d in small]))
    return [d for d in every if at_most is None or d <= at_most]


def _context_sizes(request: TrainRequest) -> list[int]:
    """CP sizes to try: the one asked, else powers of two leaving `MIN_CP_CHUNK` tokens each.

    A request that fixes TP and PP fixes the layout: with no ``cp`` it means CP 1, never a
    split the search picked (a published TP x PP layout is reproduced as given); so does a
    stack without context parallelism.
    """
    if request.cp:
        return [request.cp]
    if (request.tp and request.pp) or not request.stack.pipeline.context_parallel:
        return [1]  # a stack without CP (Megatron-LM 2021) never splits a sequence
    seq = request.shape.seq
    return [c for c in CP_SIZES if c == 1 or (seq % (2 * c) == 0 and seq // c >= MIN_CP_CHUNK)]


def _pipeline_sizes(layers: int) -> list[int]:
    """PP sizes to try: divisors of the layers, and powers of two with uneven stages.

    Llama 3 405B ran its 126 layers on PP 16 (stages of 7 and 8); a power-of-two pipeline
    keeps the DP and batch arithmetic of a 2^k-node cluster whole.
    """
    powers = [1 << k for k in range(1, layers.bit_length()) if stages_fit(layers, 1 << k, 1)]
    return sorted(set(_divisors(layers)) | set(powers))


def _candidates(job: Job, request: TrainRequest) -> Iterator[Layout]:
    """Every layout the request allows, inside Megatron's rules."""
    gpus, shape = request.gpus, job.shape
    tps = [request.tp] if request.tp else _divisors(job.comm.gpus_per_node)
    pps = [request.pp] if request.pp else _pipeline_sizes(shape.layers)
    stack = request.stack
    default: list[Recompute] = [stack.recompute] if stack.recompute else ["selective", "full"]
    modes: list[Recompute] = [request.recompute] if request.recompute else default
    zeros = [request.zero] if request.zero is not None else list(stack.zero_stages)
    for tp, cp, pp in itertools.product(tps, _context_sizes(request), pps):
        if gpus % (tp * cp * pp):
            continue
        dp = gpus // (tp * cp * pp)
        if request.global_batch % dp:
            continue
        per_dp = request.global_batch // dp
        bs = [request.micro_batch] if request.micro_batch else _divisors(per_dp, MAX_MICRO_BATCH)
        vs = [request.virtual] if request.virtual else _virtual_sizes(shape.layers, pp)
        for b, v, mode, zero in itertools.product(bs, vs, modes, zeros):
            # Megatron-LM and NeMo turn sequence parallelism off at TP 1 ("Disabling sequence
            # parallelism because tensor model parallelism is disabled"): the layout says so
            yield Layout(tp, pp, dp, b, v, mode, zero, stack.sequence_parallel and tp > 1, cp)


def _virtual_sizes(layers: int, pp: int) -> list[int]:
    """Interleaving the search tries: none, and 2 or 4 chunks per GPU where they fit."""
    return [v for v in (1, 2, 4) if v == 1 or (pp > 1 and stages_fit(layers, pp, v))]


def search(job: Job, request: TrainRequest) -> tuple[Ranking, int]:
    """The layouts that fit, ranked (`train_search.Ranking`), and how many were timed."""
    ranking = Ranking()
    count = 0
    for layout in _candidates(job, request):
        try:
            check_layout(job, layout)
        except InputError:
            continue
        count += 1
        result = train_layout.step(job, layout)
        if result.memory.fits:
            ranking.add(Candidate(result, train_band(job, layout, request.stack.name)))
    return ranking, count


def train(spec: Spec, catalog: Catalog, request: TrainRequest) -> TrainAnswer:
    """Search the layout that fits within what the request fixes (`train_search.Ranking`).

    With ``tp`` and ``pp`` fixed the search still picks micro-batch, interleaving,
    recompute and ZeRO stage where they are not given; if no variant fits, the answer is
    the plain variant, whose memory then says it does not fit.

    Raises:
        InputError: a fixed layout breaks a rule.
        BudgetError: nothing fits, or the cluster cannot run the job.
    """
    check_stack(request)  # budgets reach here without `train_request_checks`
    check_split(request)
    job, group, node = build_job(spec, catalog, request)
    started = time.perf_counter()
    ranking, count = search(job, request)
    chosen = ranking.chosen
    best = chosen.result if chosen else None
    if best is None and request.tp and request.pp:
        # the fixed layout fits in no variant: show its default one (and why, if invalid)
        cp = request.cp or 1
        layout = Layout(
            request.tp,
            request.pp,
            request.gpus // (request.tp * cp * request.pp),
            request.micro_batch or 1,
            request.virtual or 1,
            request.recompute or request.stack.recompute or "selective",
            request.stack.zero_stages[0] if request.zero is None else request.zero,
            request.stack.sequence_parallel and request.tp > 1,
            cp,
        )
        try:
            check_layout(job, layout)
        except InputError as exc:
            if exc.path == "--global-batch":
                exc.hint = nearest_batches_hint(request, job.comm.gpus_per_node)
            raise
        best, count = train_layout.step(job, layout), count + 1
        chosen = Candidate(best, train_band(job, layout, request.stack.name))
    if best is None or chosen is None:
        if not count:
            raise BudgetError(
                f"no layout splits {request.gpus} GPUs into TP x CP x PP x DP with PP dividing "
                f"{request.shape.layers} layers and DP dividing the global batch "
                f"{request.global_batch}",
                path="--global-batch",
                hint=nearest_batches_hint(request, job.comm.gpus_per_node),
            )
        raise BudgetError(
            f"no layout of {request.shape.name} on {request.gpus} GPUs fits in memory "
            f"({count} tried)",
            path="--gpus",
            hint="more GPUs, full recompute, or ZeRO-3",
        )
    return TrainAnswer(
        best,
        train_layout.scaling_efficiency(job, best),
        group,
        node,
        job.comm.gpus_per_node,
        count,
        time.perf_counter() - started,
        request.shape.seq,
        request.stack.label,
        request.global_batch,
        chosen.band,
        ranking.other,
    )


def valid_batch(request: TrainRequest, batch: int, per_node: int) -> bool:
    """Whether some TP x CP x PP x DP split of the request's GPUs divides ``batch``.

    The same rules `_candidates` and `check_layout` ask (TP inside a node of ``per_node``
    GPUs and dividing the heads, DP x micro-batch dividing the batch), without timing any
    layout.
    """
    shape = request.shape
    tps = [request.tp] if request.tp else _divisors(per_node)
    tps = [t for t in tps if shape.heads % t == 0 and shape.kv_heads_or_heads % t == 0]
    pps = [request.pp] if request.pp else _pipeline_sizes(request.shape.layers)
    for tp, cp, pp in itertools.product(tps, _context_sizes(request), pps):
        if request.gpus % (tp * cp * pp) == 0:
            dp = request.gpus // (tp * cp * pp)
            if batch % (dp * (request.micro_batch or 1)) == 0:
                return True
    return False


def nearest_batches(
    request: TrainRequest, per_node: int, limit: int = 1 << 16
) -> tuple[int | None, int | None]:
    """The nearest global batches below and above the request's that some layout divides."""
    batch = request.global_batch
    lower = range(batch - 1, max(0, batch - limit), -1)
    below = next((b for b in lower if valid_batch(request, b, per_node)), None)
    upper = range(batch + 1, batch + limit)
    above = next((b for b in upper if valid_batch(request, b, per_node)), None)
    return below, above


def fitting_batch(spec: Spec, catalog: Catalog, request: TrainRequest) -> int:
    """The request's batch if some layout divides it, else the nearest that one does.

    Only for a batch nobody stated (a budget naming a preset without ``global_batch``):
    a stated batch is never changed. Ties go to the larger batch; none found keeps it (the
    search then says why).
    """
    per_node = build_job(spec, catalog, request)[0].comm.gpus_per_node
    if valid_batch(request, request.global_batch, per_node):
        return request.global_batch
    below, above = nearest_batches(request, per_node)
    batch = request.global_batch
    choices = [c for c in (above, below) if c is not None]
    return min(choices, key=lambda c: abs(c - batch)) if choices else batch


def nearest_batches_hint(request: TrainRequest, per_node: int) -> str:
    """``nearest valid global batches: 1,504 or 1,600`` (or whichever exists)."""
    found = [f"{b:,}" for b in nearest_batches(request, per_node) if b is not None]
    if not found:
        return "a global batch with more divisors, or a GPU count of 2^k nodes"
    return "nearest valid global batches: " + " or ".join(found)
