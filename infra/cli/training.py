"""`railplan train`: the training step of a GPT-style model on the planned cluster.

Argument checks, the layout search and the formatting live in `infra.budget.train_plan` and
`infra.budget.train_table`; this module only maps options to a `TrainRequest` and prints.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from infra.cli.common import Format, app, integer_option, located_in, read_spec, say


class RecomputeMode(StrEnum):
    """Activation recomputation modes."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


@app.command()
def train(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    gpus: Annotated[int, integer_option(help="GPUs in the job.")],
    global_batch: Annotated[int, integer_option(help="Sequences per step.")],
    model: Annotated[str | None, typer.Option(help="Model preset, e.g. gpt3-175b.")] = None,
    layers: Annotated[int | None, integer_option(help="Transformer layers.")] = None,
    hidden: Annotated[int | None, integer_option(help="Hidden size.")] = None,
    heads: Annotated[int | None, integer_option(help="Attention heads.")] = None,
    seq: Annotated[int | None, integer_option(help="Sequence length (default 2048).")] = None,
    vocab: Annotated[int | None, integer_option(help="Vocabulary (default 50257).")] = None,
    micro_batch: Annotated[int | None, integer_option(help="Micro-batch size.")] = None,
    tp: Annotated[int | None, integer_option(help="Tensor-parallel size.")] = None,
    pp: Annotated[int | None, integer_option(help="Pipeline-parallel size.")] = None,
    cp: Annotated[
        int | None, integer_option(help="Context-parallel size (each sequence split over CP GPUs).")
    ] = None,
    recompute: Annotated[RecomputeMode | None, typer.Option(help="Recomputation.")] = None,
    zero: Annotated[int | None, integer_option(help="ZeRO stage 0-3.")] = None,
    precision: Annotated[str, typer.Option(help="Training precision.")] = "bf16",
    virtual: Annotated[
        int | None, integer_option(help="Interleaved pipeline stages per GPU (default searched).")
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            help="Software stack: megatron-2021, megatron-core-2024 (default), nemo-2024, "
            "deepspeed-zero."
        ),
    ] = None,
    fused_attention: Annotated[
        bool | None,
        typer.Option("--fused-attention/--no-fused-attention", help="Override the stack."),
    ] = None,
    sequence_parallel: Annotated[
        bool | None,
        typer.Option("--sequence-parallel/--no-sequence-parallel", help="Override the stack."),
    ] = None,
    distributed_optimizer: Annotated[
        bool | None,
        typer.Option(
            "--distributed-optimizer/--no-distributed-optimizer", help="Override the stack."
        ),
    ] = None,
    dp_overlap: Annotated[
        bool | None,
        typer.Option("--dp-overlap/--no-dp-overlap", help="Override the stack."),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(help="Node group to run on (default: the largest group without MIG)."),
    ] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Time a training step of a GPT-style model; without --tp/--pp, search one (conservative bound, calibrated first)."""
    from infra.budget.train_plan import train as train_model
    from infra.budget.train_request import TrainRequest, model_shape, train_request_checks
    from infra.budget.train_stack import resolve as resolve_stack
    from infra.budget.train_table import train_json, train_text
    from infra.catalog import load_catalog
    from infra.spec.base import Precision

    shape = model_shape(model, layers, hidden, heads, seq, vocab)
    software = resolve_stack(
        stack,
        fused_attention=fused_attention,
        sequence_parallel=sequence_parallel,
        distributed_optimizer=distributed_optimizer,
        dp_overlap=dp_overlap,
    )
    request = TrainRequest(
        gpus=gpus,
        shape=shape,
        global_batch=global_batch,
        micro_batch=micro_batch,
        tp=tp,
        pp=pp,
        cp=cp,
        recompute=recompute.value if recompute else None,
        zero=zero,
        precision=Precision(precision) if precision in set(Precision) else Precision.BF16,
        group=group,
        virtual=virtual,
        stack=software,
    )
    train_request_checks(request, precision)
    loaded = read_spec(spec)
    with located_in(loaded):  # an error naming a spec path points into the spec
        answer = train_model(loaded.spec, load_catalog(), request)
    say(train_json(answer) if output_format is Format.JSON else train_text(answer, shape.name))
