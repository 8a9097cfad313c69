"""`railplan plan` and the planning steps other commands share.

Expand a spec into a plan and locate its errors in the spec (or take the plan lint built),
apply an address file, and check each rack against its class's budget (lint's RP055).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from infra.cli.common import (
    EXIT_FAILED,
    Format,
    _Failed,
    _load_spec,
    _say,
    _write_output,
    app,
)
from infra.cli.progress_bar import _progress_bar
from infra.errors import InputError
from infra.progress import Progress as ProgressFn
from infra.progress import quiet

if TYPE_CHECKING:
    from ipaddress import IPv4Network

    from infra.lint import LintContext
    from infra.spec import LoadedSpec
    from infra.topology import Plan


def _plan_or_fail(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and exits 1."""
    from infra.topology import PlanError

    try:
        return _planned_or_raise(loaded, progress)
    except PlanError as exc:
        raise _Failed(exc) from None


def _with_addresses_file(planned: Plan, file: str, subnet: IPv4Network | None = None) -> Plan:
    """The plan with the addresses in ``file`` (a bare mapping or the whole stack output).

    ``subnet`` is the spec's management network, which racked servers' addresses must lie in.
    """
    from infra.spec import join_path, read_yaml_file
    from infra.topology.addresses import AddressesError, with_addresses

    data, source = read_yaml_file(file)
    prefix = ""
    if isinstance(data, dict) and isinstance(data.get("hosts"), dict):
        data, prefix = data["hosts"], "hosts"  # `pulumi stack output --json`: every output
    if not isinstance(data, dict):
        raise InputError(
            "expected a mapping of hostname to IPv4 address",
            file=file,
            hint="write it with: pulumi stack output hosts --json > hosts.json",
        )
    try:
        return with_addresses(planned, data, subnet)
    except AddressesError as exc:
        where = join_path(prefix, exc.path) if prefix else join_path("", exc.path)
        exc.file, exc.position, exc.path = file, source.position(where), where
        raise


def _lint_plan_or_fail(loaded: LoadedSpec, context: LintContext) -> Plan:
    """The plan lint built (or is handed), else its PlanError located in the spec (exit 1)."""
    if context.plan is None:
        error = context.plan_error
        assert error is not None  # a context without a plan holds the reason
        error.file, error.position = loaded.file, loaded.source.position(error.path)
        raise _Failed(error)
    return context.plan


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
    loaded = _load_spec(spec)
    with _progress_bar() as bar:
        planned = _plan_or_fail(loaded, bar.task("plan"))
    _say(plan_json(planned) if output_format is Format.JSON else plan_text(planned))
    broken = rack_budget_findings(loaded, catalog_for(loaded.spec), planned)
    if broken:
        sys.stderr.write(format_text(broken))
        raise typer.Exit(EXIT_FAILED)
    if cabling is not None:
        _write_output(cabling, cabling_csv(planned))
    if bom is not None:
        _write_output(bom, bom_csv(planned, catalog_for(loaded.spec)))
    if hosts is not None:
        _write_output(hosts, hosts_csv(planned))


def _planned_or_raise(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and raised."""
    from infra.catalog import catalog_for
    from infra.topology import PlanError, expand

    try:
        return expand(loaded.spec, catalog_for(loaded.spec), progress)
    except PlanError as exc:
        exc.file = loaded.file
        exc.position = loaded.source.position(exc.path)
        raise
