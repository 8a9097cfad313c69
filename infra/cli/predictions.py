"""`railplan predict` and `railplan budget`: the model's numbers for a spec.

`predict` prints nccl-tests-style rows for one collective (or a point-to-point sendrecv); `budget` evaluates each declared
budget: predicted value, limit, pass/fail and headroom.
"""

from __future__ import annotations

from typing import Annotated

import typer

from infra.bounds import MAX_BUDGET_GPUS
from infra.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CollectiveName,
    Format,
    app,
    integer_option,
    located_in,
    number_option,
    plan_or_fail,
    read_spec,
    say,
)
from infra.errors import RailplanError


@app.command()
def predict(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    collective: Annotated[CollectiveName, typer.Option(help="Collective to predict.")],
    gpus: Annotated[
        int,
        integer_option(
            min=2,
            max=MAX_BUDGET_GPUS,
            help="GPUs in the communicator (sendrecv: between the first and last of them).",
        ),
    ],
    min_bytes: Annotated[str, typer.Option(help="Smallest size, e.g. 8 or 1MiB.")] = "8",
    max_bytes: Annotated[str, typer.Option(help="Largest size, e.g. 8GiB.")] = "8GiB",
    step_factor: Annotated[float, number_option(help="Size multiplier per row.")] = 2.0,
    group: Annotated[
        str | None,
        typer.Option(help="Node group to run on (default: the largest group without MIG)."),
    ] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Predict nccl-tests results (time, algbw, busbw) for a collective on the cluster."""
    from infra.budget.cluster import comm_topology, main_group
    from infra.budget.collectives import predict_table, table_rows
    from infra.budget.tables import predict_json, predict_text
    from infra.catalog import load_catalog

    loaded = read_spec(spec)
    catalog = load_catalog()
    low, high = _size_option("--min-bytes", min_bytes), _size_option("--max-bytes", max_bytes)
    table_rows(low, high, step_factor)  # finite factor, bounded rows: refuse before planning
    with located_in(loaded):
        topo = comm_topology(loaded.spec, catalog, gpus, path="--gpus", group=group)
        rows = predict_table(topo, collective.value, low, high, step_factor)
        chosen, node = main_group(loaded.spec, catalog, group)
    if output_format is Format.JSON:
        say(predict_json(collective.value, topo, rows))
    else:
        say(predict_text(collective.value, f"{chosen.name} ({node.name})", topo, rows))


def _size_option(option: str, value: str) -> int:
    from infra.spec.units import parse_bytes

    try:
        return parse_bytes(value)
    except ValueError as exc:
        hint = getattr(exc, "hint", None) or "e.g. 8, 64KiB, 1GiB"  # HintedValueError's own
        raise RailplanError(f"{option}: {exc}", hint=hint) from None


@app.command()
def budget(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Evaluate each declared budget: predicted value, limit, pass/fail and headroom."""
    from infra.budget.evaluate import evaluate_budgets
    from infra.budget.tables import budgets_json, budgets_text
    from infra.catalog import load_catalog

    loaded = read_spec(spec)
    planned = plan_or_fail(loaded)
    with located_in(loaded):
        results = evaluate_budgets(loaded.spec, load_catalog(), planned, spec_file=loaded.file)
    say(budgets_json(results) if output_format is Format.JSON else budgets_text(results))
    raise typer.Exit(EXIT_FAILED if any(r.fails for r in results) else EXIT_OK)
