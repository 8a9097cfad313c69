"""`railplan lint`: every rule over one or more specs.

Text, JSON, SARIF or GitHub annotations; schema problems are findings of rule RP000,
printed once in the format asked for (on stderr in text, in the document otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infra.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    LintFormat,
    app,
    complain,
    read_spec,
    say,
    schema_findings,
    tool_version,
)
from infra.errors import RailplanError

if TYPE_CHECKING:
    from infra.lint.finding import Finding
    from infra.spec import LoadedSpec


@app.command()
def lint(
    specs: Annotated[
        list[str], typer.Argument(metavar="SPEC...", help="Spec files to lint.", show_default=False)
    ],
    output_format: Annotated[LintFormat, typer.Option("--format", "-f")] = LintFormat.TEXT,
    select: Annotated[
        list[str] | None, typer.Option(help="Only these rules (ids, prefixes, names); repeatable.")
    ] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip these rules; repeatable.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Describe each spec.")] = False,
) -> None:
    """Check specs against the catalog and every lint rule (`railplan rules`)."""
    from infra.catalog import load_catalog
    from infra.lint import check_rule_keys, documented_rules, lint_loaded
    from infra.lint.finding import Severity
    from infra.lint.formats import format_github, format_json, format_sarif, format_text

    check_rule_keys(select or (), ignore or ())  # a typo must not select nothing
    findings: list[Finding] = []
    sources: dict[str, Sequence[str]] = {}
    unreadable = False
    for path in specs:
        try:
            loaded = read_spec(path)
        except RailplanError as exc:
            unreadable = True
            if output_format is LintFormat.TEXT:
                complain(exc)  # machine formats carry it in the document, once
            findings += schema_findings(exc)
            continue
        sources[loaded.file] = loaded.source.lines
        found = lint_loaded(loaded, load_catalog(), select or (), ignore or ())
        findings += found
        if verbose and output_format is LintFormat.TEXT:
            say(_describe(loaded, found))
    if output_format is LintFormat.TEXT:
        if sources:  # RP000 problems are already on stderr, one line each
            shown = [f for f in findings if f.rule != "RP000"]
            say(format_text(shown, sources, len(sources)))
    elif output_format is LintFormat.JSON:
        say(format_json(findings))
    elif output_format is LintFormat.SARIF:
        # absolute spec paths become %SRCROOT%-relative URIs for code scanning
        say(format_sarif(findings, documented_rules(), tool_version(), root=str(Path.cwd())))
    elif findings:
        say(format_github(findings))
    failed = any(f.severity is Severity.ERROR for f in findings)
    raise typer.Exit(EXIT_USAGE if unreadable else EXIT_FAILED if failed else EXIT_OK)


def _describe(loaded: LoadedSpec, findings: Sequence[Finding]) -> str:
    """One line saying what a spec describes and how it fared, for `lint --verbose`."""
    from infra.catalog import load_catalog
    from infra.lint.finding import Severity

    spec, cat = loaded.spec, load_catalog()
    groups = ", ".join(f"{g.name} {g.count} × {g.node}" for g in spec.node_groups)
    gpus = sum(g.count * cat.nodes[g.node].gpus for g in spec.node_groups if g.node in cat.nodes)
    parts = [f"{groups} ({gpus:,} GPUs)"]
    if spec.fabrics.compute:
        c = spec.fabrics.compute
        parts.append(f"compute {c.switch} SU {c.su_size}" + (" + SHARP" if c.sharp else ""))
    mig = sorted(spec.mig_layouts)
    parts.append(f"{spec.scheduler.kind}" + (f", MIG {'/'.join(mig)}" if mig else ""))
    count = {s: sum(f.severity is s for f in findings) for s in Severity}
    errors, warnings, infos = count[Severity.ERROR], count[Severity.WARNING], count[Severity.INFO]
    verdict = "ok" if not errors + warnings else f"{errors} errors, {warnings} warnings"
    verdict += f" ({infos} info)" if infos else ""
    return f"{loaded.file}: {spec.name}: {'; '.join(parts)} — {verdict}"
