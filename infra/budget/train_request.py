"""What a `railplan train` request asks, and the checks it passes before a spec is read.

This module owns the request (`TrainRequest`: GPUs, model, batch and any layout choices the
user fixed, with the software stack), the model shape it names (a preset or explicit
dimensions, `model_shape`) and the bounds every option must keep (`train_request_checks`,
`check_split`). `infra.budget.train_plan` answers it on a planned cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.budget.memory import TRAINING_PRECISIONS
from infra.budget.train_model import PRESETS, ModelShape, Recompute
from infra.budget.train_stack import DEFAULT_STACK, STACKS, Stack
from infra.errors import InputError, spelling_hint
from infra.spec.base import Precision

__all__ = [
    "TrainRequest",
    "check_split",
    "check_stack",
    "model_shape",
    "train_request_checks",
]

MAX_LAYERS = 10_000
"""Most layers (and heads) a request may name: 80x the largest published dense model."""
MAX_WIDTH = 1_000_000
"""Most hidden units (and 10x that for sequence and vocabulary)."""
MAX_BATCH = 2**30
"""Most sequences per step a request may name."""


MAX_CP = 1024
"""Largest --cp a request may name: 64x the CP 16 of Llama 3's 131,072-token run; the ring
passes K/V cp - 1 times per layer, so far beyond that the exchange is all a step does."""


@dataclass(frozen=True)
class TrainRequest:
    """What the user asked: GPUs, model, batch and any layout choices they fixed."""

    gpus: int
    shape: ModelShape
    global_batch: int
    micro_batch: int | None = None
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    recompute: Recompute | None = None
    zero: int | None = None
    precision: Precision = Precision.BF16
    group: str | None = None
    virtual: int | None = None  # interleaved stages per GPU (searched when None)
    stack: Stack = STACKS[DEFAULT_STACK]  # the software that runs the job (`train_stack`)


def model_shape(
    preset: str | None,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    path: str = "--model",
) -> ModelShape:
    """The preset, or an explicit shape (``seq`` and ``vocab`` default to GPT-3's).

    Raises:
        InputError: unknown preset, neither or both forms given, or a shape that is no
            transformer.
    """
    for name, value, most in (
        ("--layers", layers, MAX_LAYERS), ("--hidden", hidden, MAX_WIDTH),
        ("--heads", heads, MAX_LAYERS), ("--seq", seq, MAX_WIDTH * 10),
        ("--vocab", vocab, MAX_WIDTH * 10),
    ):  # fmt: skip
        if value is not None and not 1 <= value <= most:
            raise InputError(
                f"{name} must be between 1 and {most:,}",
                path=name,
                hint="a transformer of published size",
            )
    explicit = (layers, hidden, heads)
    given = [
        n
        for n, v in zip(("--layers", "--hidden", "--heads"), explicit, strict=True)
        if v is not None
    ]
    if preset is not None and given:  # the preset's shape would win silently
        raise InputError(
            f"a preset ({preset}) and a shape ({', '.join(given)}) both give the model",
            path=path,
            hint=f"leave out {', '.join(given)} to train {preset}, or the preset to train "
            "that shape (--seq and --vocab may change a preset)",
        )
    if preset is not None:
        if preset not in PRESETS:
            hint = spelling_hint(preset, PRESETS) or "one of " + ", ".join(PRESETS)
            raise InputError(f"unknown model preset {preset!r}", path=path, hint=hint)
        base = PRESETS[preset]
        return replace(base, seq=seq or base.seq, vocab=vocab or base.vocab)
    if None in explicit:
        raise InputError(
            "name a model: a preset, or layers, hidden and heads",
            path=path,
            hint="e.g. --model gpt3-175b, or --layers 96 --hidden 12288 --heads 96",
        )
    try:
        return ModelShape(
            "custom", layers or 0, hidden or 0, heads or 0, seq or 2048, vocab or 50257
        )
    except ValueError as exc:
        raise InputError(str(exc), path="--hidden", hint="hidden must split into heads") from None


def train_request_checks(request: TrainRequest, precision: str) -> None:
    """Reject option values no layout can use, before the spec is read.

    Raises:
        InputError: the first bad option, with a hint.
    """
    checks = [
        (
            precision in {p.value for p in TRAINING_PRECISIONS},
            "--precision",
            f"{precision!r} is not a training precision",
            "use bf16, fp16, fp8 or fp32",
        ),
        (request.gpus >= 1, "--gpus", "--gpus needs at least 1 GPU", "e.g. --gpus 1024"),
        (
            1 <= request.global_batch <= MAX_BATCH,
            "--global-batch",
            f"--global-batch must be between 1 and {MAX_BATCH:,} sequences",
            "e.g. --global-batch 1536",
        ),
        (
            request.micro_batch is None or 1 <= request.micro_batch <= request.global_batch,
            "--micro-batch",
            "--micro-batch must be between 1 and the global batch",
            "e.g. --micro-batch 1",
        ),
        (request.tp is None or request.tp >= 1, "--tp", "--tp must be at least 1", "e.g. --tp 8"),
        (
            request.virtual is None or 1 <= request.virtual <= MAX_LAYERS,
            "--virtual",
            f"--virtual must be between 1 and {MAX_LAYERS:,}",
            "e.g. --virtual 2 (interleaved stages per GPU)",
        ),
        (request.pp is None or request.pp >= 1, "--pp", "--pp must be at least 1", "e.g. --pp 8"),
        (
            request.cp is None or 1 <= request.cp <= MAX_CP,
            "--cp",
            f"--cp must be between 1 and {MAX_CP:,}",
            "e.g. --cp 2 (context parallelism for long sequences)",
        ),
        (
            (request.tp is None) == (request.pp is None),
            "--tp",
            "give both --tp and --pp, or neither to search",
            "e.g. --tp 8 --pp 8",
        ),
        (
            request.zero is None or request.zero in (0, 1, 2, 3),
            "--zero",
            "ZeRO stage must be 0, 1, 2 or 3",
            "e.g. --zero 1",
        ),
    ]
    for ok, path, message, hint in checks:
        if not ok:
            raise InputError(message, path=path, hint=hint)
    check_stack(request)
    check_split(request)


def check_stack(request: TrainRequest) -> None:
    """Refuse a CP or ZeRO stage the named software stack cannot run (`train_stack`).

    Called by `train_request_checks` and by the planner itself, since a `scaling_efficiency`
    budget names ``stack``, ``cp`` and ``zero`` without passing the CLI's checks.
    """
    stack, zero = request.stack, request.zero
    if request.cp not in (None, 1) and not stack.pipeline.context_parallel:
        # Megatron-LM 2021 has no --context-parallel-size (it came with Megatron-Core, 2023)
        raise InputError(
            f"software stack {stack.name} has no context parallelism, so CP {request.cp} "
            f"cannot run ({stack.pipeline.source} has no --context-parallel-size)",
            path="--cp",
            hint="use --cp 1, or a stack with context parallelism (--stack megatron-core-2024)",
        )
    if zero is not None and zero in (0, 1, 2, 3) and zero not in stack.zero_supported:
        runs = ", ".join(f"ZeRO-{z}" for z in stack.zero_supported)
        nearest = max(z for z in stack.zero_supported if z < zero)  # 0 is always there
        raise InputError(
            f"software stack {stack.label} has no ZeRO-{zero} ({stack.zero_note})",
            path="--zero",
            hint=f"{stack.name} runs {runs}: use --zero {nearest}, or "
            "--stack deepspeed-zero (ZeRO-0 to ZeRO-3)",
        )


def check_split(request: TrainRequest) -> None:
    """Refuse a fixed TP x CP x PP that does not split ``--gpus`` into whole replicas.

    Checked on the arguments alone, before any layout arithmetic: a product larger than the
    job would leave zero data-parallel replicas, and every rule after that divides by DP.
    """
    cp = request.cp or 1
    if request.tp is None or request.pp is None:
        if cp > request.gpus:
            raise InputError(
                f"--cp {cp} exceeds the {request.gpus} GPUs of the job",
                path="--cp",
                hint="CP ranks are GPUs: at most --gpus, e.g. --cp 2",
            )
        return
    if request.gpus % (request.tp * cp * request.pp):
        raise InputError(
            f"{request.gpus} GPUs do not split into TP {request.tp} x CP {cp} x PP "
            f"{request.pp} replicas",
            path="--gpus",
            hint="TP x CP x PP must divide --gpus, e.g. --gpus 16 --tp 8 --pp 2",
        )
