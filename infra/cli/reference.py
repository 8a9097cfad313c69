"""Commands that read no spec: `rules`, `explain`, `schema`, `catalog` and `mig check`.

`mig check` validates a mig-parted file against the catalog's GPUs.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from infra.cli.common import EXIT_FAILED, EXIT_OK, Format, app, mig_app, say
from infra.digits import ASCII_HINT, ascii_digits
from infra.errors import InputError, RailplanError, escape_controls, shorten
from infra.wording import plural


@app.command()
def rules(output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT) -> None:
    """List every rule: id, name, severity and summary."""
    from infra.lint import documented_rules

    docs = documented_rules()
    if output_format is Format.JSON:
        say(
            json.dumps(
                [
                    {"id": r.id, "name": r.name, "severity": str(r.severity), "summary": r.summary}
                    for r in docs
                ],
                indent=2,
            )
        )
        return
    width = max(len(r.name) for r in docs)
    for r in docs:
        say(f"{r.id}  {r.name:<{width}}  {r.severity!s:<7}  {r.summary}")


@app.command()
def explain(rule_id: Annotated[str, typer.Argument(metavar="RULE", help="Id or name.")]) -> None:
    """Show one rule's documentation: why it matters and how to fix it."""
    from infra.lint import find_documented_rule

    doc = find_documented_rule(rule_id)
    if doc is None:  # one line made like every other error: a long id is cut, not echoed
        raise RailplanError(f"unknown rule {rule_id!r}", hint="`railplan rules` lists them")
    say(f"{doc.id} {doc.name} ({doc.severity})\n\n{doc.summary}\n\n{doc.doc}")


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (for yaml-language-server and CI)."""
    from infra.spec.schema import spec_json_schema_text

    say(spec_json_schema_text())


@app.command()
def catalog(output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT) -> None:
    """List the catalog's GPUs, nodes and switches."""
    from infra.catalog import load_catalog

    cat = load_catalog()
    if output_format is Format.JSON:
        say(cat.model_dump_json(indent=2))
        return
    for key, gpu in cat.gpus.items():
        say(f"gpu     {key:<20} {gpu.name}, {gpu.memory_gb:g} GB, {gpu.tdp_w:g} W")
    for key, node in cat.nodes.items():
        say(
            f"node    {key:<20} {node.name}: {node.gpus}x {node.gpu}, {node.compute_nics}x "
            f"{node.compute_nic_gbps:g} Gb/s"
        )
    for key, sw in cat.switches.items():
        say(f"switch  {key:<20} {sw.name}: {sw.ports}x {sw.port_gbps:g} Gb/s {sw.kind}")


@mig_app.command("check")
def mig_check(
    file: Annotated[str, typer.Argument(help="mig-parted `version: v1` config file.")],
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU id; default every GPU.")] = None,
    config: Annotated[str | None, typer.Option(help="Only this named config.")] = None,
    driver: Annotated[str | None, typer.Option(help="Driver version the nodes run.")] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Validate a mig-parted config (MIG manager / GPU Operator format) against the catalog."""
    from infra.catalog import load_catalog
    from infra.lint.finding import Severity
    from infra.lint.formats import format_json, format_text
    from infra.lint.migparted import check_mig_parted
    from infra.spec import read_yaml_file

    gpus = load_catalog().gpus
    branch = _driver_branch(driver)
    data, source = read_yaml_file(file)
    if data is None:  # as the spec loader says of an empty spec: nothing was checked
        raise InputError(
            "the file is empty",
            file=source.file,
            position=source.position(""),
            hint="a mig-parted file holds `version: v1` and `mig-configs:`, "
            "as NVIDIA's default config does",
        )
    findings = check_mig_parted(data, source, gpus, gpu_id=gpu, config=config, driver_branch=branch)
    if output_format is Format.JSON:
        say(format_json(findings))
    else:
        count = _configs_checked(data, config)
        say(
            f"{escape_controls(source.file)}: checked {plural(count, 'config')} against "
            f"{plural(1 if gpu else len(gpus), 'catalog GPU')}"
        )
        say(format_text(findings, {source.file: source.lines}, 1))
    failed = any(f.severity is Severity.ERROR for f in findings)
    raise typer.Exit(EXIT_FAILED if failed else EXIT_OK)


def _configs_checked(data: object, config: str | None) -> int:
    """How many of the file's configs were checked: all, the one --config names, or none."""
    configs = data.get("mig-configs") if isinstance(data, dict) else None
    if not isinstance(configs, dict):
        return 0
    return len(configs) if config is None else int(config in configs)


def _driver_branch(driver: str | None) -> int | None:
    from infra.spec.models import MAX_VERSION

    if driver is None:
        return None
    parts = driver.split(".")
    # ASCII digits only (isdigit() and int() take "٥٥٠" and "²"); short, so int() never sees
    # 4,300 digits
    if len(driver) > MAX_VERSION or not all(ascii_digits(part) for part in parts):
        hint = "e.g. --driver 550.90.07" if driver.isascii() else f"e.g. 550.90.07: {ASCII_HINT}"
        raise RailplanError(
            f"--driver {shorten(repr(driver))} is not a driver version",
            hint=hint,
        )
    return int(parts[0])
