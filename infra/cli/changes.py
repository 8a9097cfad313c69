"""Commands that produce or compare deployments: `render`, `report` and `diff`.

`render` writes the deployment tree, `report` one self-contained HTML page, `diff` the day-2
change plan between two specs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from infra.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Format,
    ProgressBar,
    app,
    complain,
    error_objects,
    lint_plan_or_fail,
    planned_or_raise,
    progress_bar,
    read_spec,
    say,
    with_addresses_file,
    write_output,
)
from infra.errors import InputError, RailplanError, escape_controls
from infra.wording import plural

if TYPE_CHECKING:
    from infra.catalog import Catalog
    from infra.progress import Progress
    from infra.simulate import Trace
    from infra.simulate.compare import MigComparison
    from infra.simulate.result import SimResult
    from infra.spec import LoadedSpec, Spec
    from infra.topology.model import Plan


@app.command()
def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="Spec as deployed.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="Spec to change to.")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Show the day-2 change plan from OLD to NEW: devices, cables, addresses, rolling order.

    Exits 0 when nothing changes, 1 when something does (or a spec cannot be planned), 2 for
    unreadable or invalid input. With --format json stdout holds one document, errors too.
    """
    from infra.catalog import load_catalog
    from infra.day2.diff import plan_diff
    from infra.day2.diff_format import diff_json, diff_text
    from infra.topology import PlanError

    json_errors = output_format is Format.JSON
    try:
        before, after = read_spec(old), read_spec(new)
    except RailplanError as exc:
        _fail_diff(exc, EXIT_USAGE, json_errors)
    try:
        catalog = load_catalog()
        with progress_bar() as bar:
            old_plan = planned_or_raise(before, bar.task(f"plan {old}"))
            new_plan = planned_or_raise(after, bar.task(f"plan {new}"))
            result = plan_diff(
                before.spec, old_plan, after.spec, new_plan, catalog, files=(old, new)
            )
    except PlanError as exc:
        _fail_diff(exc, EXIT_FAILED, json_errors)
    say(diff_json(result) if json_errors else diff_text(result))
    raise typer.Exit(EXIT_FAILED if result.changed else EXIT_OK)


def _fail_diff(error: RailplanError, code: int, json_errors: bool) -> NoReturn:
    """One line per problem on stderr, or for JSON the problems as the document (once, as lint)."""
    if not json_errors:
        complain(error)
    else:
        problems = error_objects(error)
        say(json.dumps({"changed": None, "errors": problems}, indent=2, sort_keys=True))
    raise typer.Exit(code)


@app.command()
def render(
    spec: Annotated[str | None, typer.Argument(metavar="SPEC", help="Spec file.")] = None,
    root: Annotated[str, typer.Option(help="Directory to render the tree into.")] = ".",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files edited since the last render.")
    ] = False,
    recover: Annotated[
        bool,
        typer.Option(
            "--recover",
            help="Only finish what a killed render left under --root (roll its swap back, "
            "or forward if it committed), then exit. Every render does this first.",
        ),
    ] = False,
    addresses: Annotated[
        str | None,
        typer.Option(
            metavar="FILE.json",
            help="Management addresses assigned outside railplan: {hostname: ip}, e.g. "
            "`pulumi stack output hosts --json` of the AWS target.",
        ),
    ] = None,
) -> None:
    """Render the deployment tree: ansible.cfg, inventory, entry playbook, roles and files.

    Refuses (exit 1, nothing written) a spec with lint errors, a plan that breaks a rack
    budget, or a tree whose rendered files were edited since the last render (unless --force).
    """
    from infra.render.writer import RenderConflict, recover_tree, write_tree

    if not root:
        raise RailplanError("--root needs a directory", hint="e.g. --root deploy")
    if recover:
        _recover_alone(spec, force, addresses)
        say(f"{escape_controls(root)}: {escape_controls(recover_tree(Path(root)))}")
        return
    if spec is None:
        raise RailplanError("render needs a SPEC", hint="railplan render SPEC --root DIR")
    loaded, files = _rendered_files(spec, addresses)
    try:
        report = write_tree(Path(root), files, force=force)
    except RenderConflict as exc:
        complain(exc)
        raise typer.Exit(EXIT_FAILED) from None
    say(
        f"{escape_controls(root)}: {len(report.written)} files written, {len(report.unchanged)} unchanged, "
        f"{len(report.removed)} removed (inventory inventories/{loaded.spec.name}, "
        f"playbook playbooks/{loaded.spec.name}.yml)"
    )
    if report.replaced:
        shown = ", ".join(report.replaced[:5]) + (" ..." if len(report.replaced) > 5 else "")
        say(f"{plural(len(report.replaced), 'edited file')} replaced (--force): {shown}")


def _recover_alone(spec: str | None, force: bool, addresses: str | None) -> None:
    """--recover renders nothing: a SPEC, --force or --addresses with it would be ignored."""
    given = {"SPEC": spec is not None, "--force": force, "--addresses": addresses is not None}
    ignored = [name for name, present in given.items() if present]
    if ignored:
        raise InputError(
            f"--recover takes no {' or '.join(ignored)}: it only finishes what a killed render "
            "left under --root, and renders nothing",
            path="--recover",
            hint="railplan render --recover --root DIR; or railplan render SPEC --root DIR, "
            "which recovers first",
        )


def _rendered_files(spec: str, addresses: str | None) -> tuple[LoadedSpec, dict[str, bytes]]:
    """The spec and its rendered tree's files; lint errors are printed and exit 1."""
    from infra.catalog import load_catalog
    from infra.lint import LintContext, lint_context
    from infra.lint.finding import Severity
    from infra.lint.formats import format_text
    from infra.render.tree import render_tree

    loaded = read_spec(spec)
    catalog = load_catalog()
    with progress_bar() as bar:
        lint_step = bar.task("lint")
        lint_step("rules", 0, 1)
        context = LintContext(loaded, catalog, progress=bar.task("plan"))  # lint plans once
        errors = [f for f in lint_context(context) if f.severity is Severity.ERROR]
        lint_step("done", 1, 1)
        files = None
        if not errors:  # lint planned, and found no error (an overfull rack is RP055)
            planned = lint_plan_or_fail(loaded, context)
            if addresses is not None:
                subnet = loaded.spec.site.management_cidr
                planned = with_addresses_file(planned, addresses, subnet)
            files = render_tree(loaded.spec, catalog, planned, bar.task("render"))
    if errors or files is None:
        sys.stderr.write(format_text(errors))
        sys.stderr.write(f"{loaded.file}: not rendered: {plural(len(errors), 'lint error')}\n")
        raise typer.Exit(EXIT_FAILED)
    return loaded, files


@app.command()
def report(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE.html", help="Page to write.")
    ],
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            metavar="FILE",
            help="Job trace to replay on the plan (as `railplan simulate`): adds its section "
            "(for a spec with MIG, beside the same trace without MIG and with MIG held static).",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML page: plan, racks, fabric, MIG, budgets, lint.

    The page is written whenever the spec can be planned, lint errors or not (they are in
    it, for review); the command then exits 1 if lint found errors (a missed budget or an
    overfull rack among them), else 0. An unreadable or invalid spec or trace exits 2 and a
    spec that cannot be planned exits 1, both writing nothing. Same spec, same bytes.
    """
    from infra.catalog import load_catalog
    from infra.files import check_outputs
    from infra.lint import LintContext, lint_context
    from infra.lint.finding import Severity
    from infra.report.report import report_html
    from infra.simulate.traces import read_trace

    check_outputs({"--output": output}, inputs=[spec, *([trace] if trace else [])])
    loaded = read_spec(spec)
    jobs = read_trace(trace) if trace else None  # a bad row is exit 2 before any work
    catalog = load_catalog()
    with progress_bar() as bar:
        step = bar.task("report")
        step("lint", 0, 3)
        context = LintContext(loaded, catalog)  # the plan and budgets lint builds, reused
        findings = lint_context(context)
        step("plan", 1, 3)
        planned = lint_plan_or_fail(loaded, context)
        step("page", 2, 3)
        simulation, comparison = None, None
        if jobs is not None:
            simulation, comparison = _replays(loaded.spec, planned, catalog, jobs, bar)
        page = report_html(
            loaded.spec, catalog, planned, findings, context.budgets, simulation, comparison
        )
        step("written", 3, 3)
    write_output(output, page)
    errors = sum(f.severity is Severity.ERROR for f in findings)
    say(
        f"{escape_controls(str(output))}: report of {planned.name} ({len(planned.servers):,} servers, "
        f"{len(planned.racks):,} racks)" + (f"; {plural(errors, 'lint error')}" if errors else "")
    )
    raise typer.Exit(EXIT_FAILED if errors else EXIT_OK)


def _replays(
    spec: Spec, plan: Plan, catalog: Catalog, trace: Trace, bar: ProgressBar
) -> tuple[SimResult, MigComparison | None]:
    """The trace on the spec as declared and, for a spec with MIG, on each of its MIG variants.

    The spec as declared is one of its variants: replayed once, its result is both the
    section's and its column of the comparison.
    """
    from infra.cli.simulation import replay_variants
    from infra.simulate.compare import MigComparison
    from infra.simulate.variants import mig_variants, split_groups

    variants = mig_variants(spec, catalog)
    if not variants:
        return _replay(spec, plan, catalog, trace, bar.task("simulate")), None

    def run(variant: Spec, planned: Plan, progress: Progress) -> SimResult:
        return _replay(variant, planned, catalog, trace, progress)

    results = replay_variants(variants, catalog, bar, (spec, plan), run)
    declared = next(name for name, variant in variants.items() if variant is spec)
    return results[declared], MigComparison(results, split_groups(spec, catalog))


def _replay(
    spec: Spec, plan: Plan, catalog: Catalog, trace: Trace, progress: Progress
) -> SimResult:
    """``trace`` replayed on ``plan`` for the report's simulation section.

    With the policy `railplan simulate` uses (`sim_policy`: the checkpoint write time from the
    spec's `checkpoint` budget), so the report and `simulate` print the same figures.
    """
    from infra.budget.sim_policy import sim_policy
    from infra.simulate.engine import simulate

    policy = sim_policy(spec, catalog, plan)
    return simulate(spec, plan, catalog, trace, policy=policy, progress=progress)
