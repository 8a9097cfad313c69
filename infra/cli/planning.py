"""`railplan plan`: expand a spec, print the plan and check each rack against its budget.

The planning steps other commands share (expand and locate errors in the spec, take the
plan lint built, apply an address file) are in `infra.cli.common`; the rack check is lint's
RP055.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from infra.cli.common import (
    EXIT_FAILED,
    Format,
    app,
    plan_or_fail,
    progress_bar,
    read_spec,
    say,
    write_outputs,
)


@app.command()
def plan(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
    cabling: Annotated[str | None, typer.Option(help="Write the cabling plan (CSV).")] = None,
    bom: Annotated[str | None, typer.Option(help="Write the bill of materials (CSV).")] = None,
    hosts: Annotated[str | None, typer.Option(help="Write the address plan (CSV).")] = None,
) -> None:
    """Expand a spec into racks, NVSwitch domains and fabrics; print the plan.

    Exits 1 (and writes no file) when a planned rack breaks its class's budget.
    """
    from infra.catalog import catalog_for
    from infra.files import check_outputs
    from infra.lint import rack_budget_findings
    from infra.lint.formats import format_text
    from infra.render.sheets import bom_csv, cabling_csv, hosts_csv
    from infra.topology.plan_output import plan_json, plan_text

    outputs = {"--cabling": cabling, "--bom": bom, "--hosts": hosts}
    chosen = {option: path for option, path in outputs.items() if path is not None}
    check_outputs(chosen, inputs=[spec])
    loaded = read_spec(spec)
    with progress_bar() as bar:
        planned = plan_or_fail(loaded, bar.task("plan"))
    say(plan_json(planned) if output_format is Format.JSON else plan_text(planned))
    broken = rack_budget_findings(loaded, catalog_for(loaded.spec), planned)
    if broken:
        sys.stderr.write(format_text(broken))
        raise typer.Exit(EXIT_FAILED)
    sheets = {
        "--cabling": lambda: cabling_csv(planned),
        "--bom": lambda: bom_csv(planned, catalog_for(loaded.spec)),
        "--hosts": lambda: hosts_csv(planned),
    }
    # all files or none: a full disk under --bom leaves --cabling as it was
    write_outputs([(path, sheets[option]()) for option, path in chosen.items()])
