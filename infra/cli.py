"""The `railplan` command line: the only module that prints, reads arguments or exits.

Exit codes everywhere: 0 ok (warnings allowed), 1 the input is understood and fails a check,
2 usage error or unreadable/invalid input, 3 an internal error (a railplan bug). Library code
raises `RailplanError`; this module turns it into one line per problem on stderr and exit 2,
never a traceback (set ``RAILPLAN_DEBUG=1`` to see one for internal errors).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from infra.budget.cluster import comm_topology, main_group
from infra.budget.collectives import predict_table, table_rows
from infra.budget.evaluate import evaluate_budgets
from infra.catalog import load_catalog
from infra.errors import InputError, RailplanError, cut_long_values, escape_controls, shorten
from infra.files import check_outputs, write_atomic
from infra.lint import (
    SCHEMA_RULE,
    check_rule_keys,
    documented_rules,
    find_documented_rule,
    lint_loaded,
)
from infra.lint.finding import Finding, Severity
from infra.lint.formats import format_github, format_json, format_sarif, format_text
from infra.lint.migparted import check_mig_parted
from infra.progress import Progress as ProgressFn
from infra.progress import quiet
from infra.render.diff import diff_json, diff_text, plan_diff
from infra.render.fabric import plan_json, plan_text
from infra.render.report import report_html
from infra.render.sheets import bom_csv, cabling_csv, hosts_csv
from infra.render.tables import budgets_json, budgets_text, predict_json, predict_text
from infra.render.tree import render_tree
from infra.render.writer import RenderConflict, write_tree
from infra.signals import Interrupted, raising_on_signals
from infra.spec import LoadedSpec, SpecValidationError, join_path, load_spec, read_yaml_file
from infra.spec.budgets import MAX_BUDGET_GPUS
from infra.spec.models import MAX_VERSION
from infra.spec.schema import spec_json_schema_text
from infra.spec.units import parse_bytes
from infra.topology import Plan, PlanError, expand
from infra.topology.addresses import AddressesError, with_addresses

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    name="railplan",
    help="Turn one YAML cluster spec into a validated, budget-checked NVIDIA GPU cluster plan.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
mig_app = typer.Typer(help="Check MIG configuration files.", no_args_is_help=True)
app.add_typer(mig_app, name="mig")


def _print_version(value: bool) -> None:
    if value:
        _say(f"railplan {_tool_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show version."),
    ] = None,
) -> None:
    """Turn one YAML cluster spec into a validated, budget-checked NVIDIA GPU cluster plan."""


PROGRESS_DELAY_S = 1.0  # work shorter than this shows no bar at all


class _ProgressBar:
    """Rich progress bars on stderr for long work; silent unless stderr is a terminal.

    Off in CI (``CI`` set), on a dumb terminal and when stderr is not a tty;
    ``RAILPLAN_PROGRESS=always|never`` overrides. The bar appears only once the work has
    run for `PROGRESS_DELAY_S` and is gone when it ends (transient), so output stays clean.
    """

    def __init__(self) -> None:
        mode = os.environ.get("RAILPLAN_PROGRESS", "auto")
        tty = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self.enabled = mode == "always" or (mode == "auto" and tty and "CI" not in os.environ)
        self.bars: Any = None
        self.timer: threading.Timer | None = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

            columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
            console = Console(file=sys.stderr, force_terminal=mode == "always")
            self.bars = Progress(*columns, console=console, transient=True)
            delay = 0.0 if mode == "always" else PROGRESS_DELAY_S
            self.timer = threading.Timer(delay, self.bars.start)
            self.timer.daemon = True
            self.timer.start()

    def task(self, title: str) -> ProgressFn:
        """A progress callback that drives one bar titled ``title``."""
        if self.bars is None:
            return quiet
        bars, task = self.bars, self.bars.add_task(title, total=None)

        def report(what: str, done: int, total: int) -> None:
            bars.update(task, description=f"{title}: {what}", completed=done, total=total)

        return report

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.bars is not None:
            self.bars.stop()


@contextmanager
def _progress_bar() -> Iterator[_ProgressBar]:
    bar = _ProgressBar()
    try:
        yield bar
    finally:
        bar.close()


class LintFormat(StrEnum):
    """Output formats of `railplan lint`."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    GITHUB = "github"


class CollectiveName(StrEnum):
    """Collectives `railplan predict` models."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    ALLTOALL = "alltoall"


class Format(StrEnum):
    """Output formats of the other commands."""

    TEXT = "text"
    JSON = "json"


def _tool_version() -> str:
    try:
        return version("railplan")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0"


class _BrokenPipe(Exception):
    """Standard output's reader has gone (``railplan rules | head -1``)."""


def _say(text: str) -> None:
    """Write ``text`` (and a newline) to stdout; a full, closed or broken stdout raises."""
    out = sys.stdout
    if out is None:  # started with stdout closed (`railplan lint x >&-`)
        raise RailplanError(
            "cannot write: standard output is closed",
            file="<stdout>",
            hint="redirect it instead, e.g. > /dev/null",
        )
    try:
        out.write(text if text.endswith("\n") else text + "\n")
    except BrokenPipeError:
        raise _BrokenPipe from None
    except OSError as exc:
        raise _stdout_error(exc) from None


def _stdout_error(exc: OSError) -> RailplanError:
    _detach_stdout()  # what stdout could not take must not fail again at exit
    return RailplanError(
        f"cannot write: {exc.strerror or exc}",
        file="<stdout>",
        hint="free space where standard output goes, or redirect it elsewhere",
    )


def _complain(error: RailplanError) -> None:
    errors = error.errors if isinstance(error, SpecValidationError) else [error]
    for e in errors:
        sys.stderr.write(e.one_line() + "\n")


def _load_spec(path: str) -> LoadedSpec:
    """`load_spec`; a problem inside the file (not YAML, not the schema) is marked RP000.

    JSON, SARIF and text then name the same rule; a file that cannot be read at all (missing,
    a device) has no rule to break and keeps a plain ``error:``.
    """
    try:
        return load_spec(path)
    except RailplanError as exc:
        for e in exc.errors if isinstance(exc, SpecValidationError) else [exc]:
            if e.position is not None:
                e.rule = e.rule or SCHEMA_RULE.id
        raise


@contextmanager
def _located_in(loaded: LoadedSpec) -> Iterator[None]:
    """Errors naming a spec path (not an option such as ``--gpus``) get the spec's location."""
    try:
        yield
    except RailplanError as exc:
        if exc.file is None and exc.path and not exc.path.startswith("-"):
            exc.file, exc.position = loaded.file, loaded.source.position(exc.path)
        raise


def _schema_findings(error: RailplanError) -> list[Finding]:
    """Spec errors as RP000 findings, so machine formats (SARIF, GitHub) show them too."""
    errors = error.errors if isinstance(error, SpecValidationError) else [error]
    return [
        Finding(
            file=e.file or "<input>",
            line=e.position.line if e.position else 0,
            column=e.position.column if e.position else 0,
            rule=e.rule or SCHEMA_RULE.id,
            severity=Severity.ERROR,
            message=e.message,
            path=e.path,
            hint=e.hint or "",
        )
        for e in errors
    ]


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
    check_rule_keys(select or (), ignore or ())  # a typo must not select nothing
    findings: list[Finding] = []
    sources: dict[str, Sequence[str]] = {}
    unreadable = False
    for path in specs:
        try:
            loaded = _load_spec(path)
        except RailplanError as exc:
            unreadable = True
            if output_format is LintFormat.TEXT:
                _complain(exc)  # machine formats carry it in the document, once
            findings += _schema_findings(exc)
            continue
        sources[loaded.file] = loaded.source.lines
        found = lint_loaded(loaded, load_catalog(), select or (), ignore or ())
        findings += found
        if verbose and output_format is LintFormat.TEXT:
            _say(_describe(loaded, found))
    if output_format is LintFormat.TEXT:
        if sources:  # RP000 problems are already on stderr, one line each
            shown = [f for f in findings if f.rule != "RP000"]
            _say(format_text(shown, sources, len(sources)))
    elif output_format is LintFormat.JSON:
        _say(format_json(findings))
    elif output_format is LintFormat.SARIF:
        # absolute spec paths become %SRCROOT%-relative URIs for code scanning
        _say(format_sarif(findings, documented_rules(), _tool_version(), root=str(Path.cwd())))
    elif findings:
        _say(format_github(findings))
    failed = any(f.severity is Severity.ERROR for f in findings)
    raise typer.Exit(EXIT_USAGE if unreadable else EXIT_FAILED if failed else EXIT_OK)


def _describe(loaded: LoadedSpec, findings: Sequence[Finding]) -> str:
    """One line saying what a spec describes and how it fared, for `lint --verbose`."""
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


def _write_output(path: str, text: str) -> None:
    """``text`` to the file ``path`` (atomically, see `infra.files`) or to stdout for ``-``."""
    if path == "-":
        _say(text)
    else:
        write_atomic(path, text.encode("utf-8"))


def _plan_or_fail(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and exits 1."""
    try:
        return _planned_or_raise(loaded, progress)
    except PlanError as exc:
        _complain(exc)
        raise typer.Exit(EXIT_FAILED) from None


def _with_addresses_file(planned: Plan, file: str) -> Plan:
    """The plan with the addresses in ``file`` (a bare mapping or the whole stack output)."""
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
        return with_addresses(planned, data)
    except AddressesError as exc:
        where = join_path(prefix, exc.path) if prefix else join_path("", exc.path)
        exc.file, exc.position, exc.path = file, source.position(where), where
        raise


def _rack_budget_errors(loaded: LoadedSpec, planned: Plan) -> list[str]:
    """One located error line per rack class whose racks the plan overfills."""
    lines: list[str] = []
    seen: set[str] = set()
    for rack in planned.racks:
        over_kw = rack.power_kw > rack.power_budget_kw + 1e-9
        if rack.rack_class in seen or not (over_kw or rack.units_used > rack.units):
            continue
        seen.add(rack.rack_class)
        path = (
            "site.rack" if rack.rack_class == "default" else f"site.rack_classes.{rack.rack_class}"
        )
        what = (
            f"would draw {rack.power_kw:g} kW of a {rack.power_budget_kw:g} kW budget"
            if over_kw
            else f"would need {rack.units_used}U of {rack.units}U"
        )
        error = RailplanError(
            f"rack {rack.name} {what}", path=path, hint="raise the rack class's budget"
        )
        error.file, error.position = loaded.file, loaded.source.position(path)
        lines.append(error.one_line())
    return lines


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
    outputs = {"--cabling": cabling, "--bom": bom, "--hosts": hosts}
    chosen = {option: path for option, path in outputs.items() if path is not None}
    check_outputs(chosen, inputs=[spec])
    loaded = _load_spec(spec)
    with _progress_bar() as bar:
        planned = _plan_or_fail(loaded, bar.task("plan"))
    _say(plan_json(planned) if output_format is Format.JSON else plan_text(planned))
    broken = _rack_budget_errors(loaded, planned)
    if broken:
        sys.stderr.write("".join(f"{line}\n" for line in broken))
        raise typer.Exit(EXIT_FAILED)
    if cabling is not None:
        _write_output(cabling, cabling_csv(planned))
    if bom is not None:
        _write_output(bom, bom_csv(planned, load_catalog()))
    if hosts is not None:
        _write_output(hosts, hosts_csv(planned))


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
    json_errors = output_format is Format.JSON
    try:
        before, after = _load_spec(old), _load_spec(new)
    except RailplanError as exc:
        _fail_diff(exc, EXIT_USAGE, json_errors)
    try:
        catalog = load_catalog()
        with _progress_bar() as bar:
            old_plan = _planned_or_raise(before, bar.task(f"plan {old}"))
            new_plan = _planned_or_raise(after, bar.task(f"plan {new}"))
            result = plan_diff(before.spec, old_plan, after.spec, new_plan, catalog)
    except PlanError as exc:
        _fail_diff(exc, EXIT_FAILED, json_errors)
    _say(diff_json(result) if json_errors else diff_text(result))
    raise typer.Exit(EXIT_FAILED if result.changed else EXIT_OK)


def _planned_or_raise(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and raised."""
    try:
        return expand(loaded.spec, load_catalog(), progress)
    except PlanError as exc:
        exc.file = loaded.file
        exc.position = loaded.source.position(exc.path)
        raise


def _fail_diff(error: RailplanError, code: int, json_errors: bool) -> NoReturn:
    """One line per problem on stderr and, for JSON, the same problems as the document."""
    _complain(error)
    if json_errors:
        errors = error.errors if isinstance(error, SpecValidationError) else [error]
        problems = [
            {
                "file": e.file,
                "line": e.position.line if e.position else None,
                "column": e.position.column if e.position else None,
                "message": e.message,
                "path": e.path,
                "hint": e.hint or "",
            }
            for e in errors
        ]
        _say(json.dumps({"changed": None, "errors": problems}, indent=2, sort_keys=True))
    raise typer.Exit(code)


@app.command()
def render(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    root: Annotated[str, typer.Option(help="Directory to render the tree into.")] = ".",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files edited since the last render.")
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
    if not root:
        raise RailplanError("--root needs a directory", hint="e.g. --root deploy")
    loaded = _load_spec(spec)
    catalog = load_catalog()
    with _progress_bar() as bar:
        lint_step = bar.task("lint")
        lint_step("rules", 0, 1)
        errors = [f for f in lint_loaded(loaded, catalog) if f.severity is Severity.ERROR]
        lint_step("done", 1, 1)
        planned = None if errors else _plan_or_fail(loaded, bar.task("plan"))
        broken = _rack_budget_errors(loaded, planned) if planned is not None else []
        files = None
        if planned is not None and not broken:
            if addresses is not None:
                planned = _with_addresses_file(planned, addresses)
            files = render_tree(loaded.spec, catalog, planned, bar.task("render"))
    if errors:
        sys.stderr.write(format_text(errors))
        sys.stderr.write(f"{loaded.file}: not rendered: {len(errors)} lint error(s)\n")
        raise typer.Exit(EXIT_FAILED)
    if files is None:
        sys.stderr.write("".join(f"{line}\n" for line in broken))
        raise typer.Exit(EXIT_FAILED)
    try:
        report = write_tree(Path(root), files, force=force)
    except RenderConflict as exc:
        _complain(exc)
        raise typer.Exit(EXIT_FAILED) from None
    _say(
        f"{root}: {len(report.written)} files written, {len(report.unchanged)} unchanged, "
        f"{len(report.removed)} removed (inventory inventories/{loaded.spec.name}, "
        f"playbook playbooks/{loaded.spec.name}.yml)"
    )


@app.command()
def report(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE.html", help="Page to write.")
    ],
) -> None:
    """Write one self-contained HTML page: plan, racks, fabric, MIG, budgets, lint.

    The page is written whenever the spec can be planned, lint errors or not (they are in
    it, for review); the command then exits 1 if lint found errors (a missed budget or an
    overfull rack among them), else 0. An unreadable or invalid spec exits 2 and a spec
    that cannot be planned exits 1, both writing nothing. Same spec, same bytes.
    """
    check_outputs({"--output": output}, inputs=[spec])
    loaded = _load_spec(spec)
    catalog = load_catalog()
    with _progress_bar() as bar:
        step = bar.task("report")
        step("lint", 0, 3)
        findings = lint_loaded(loaded, catalog)
        step("plan", 1, 3)
        planned = _plan_or_fail(loaded)
        step("page", 2, 3)
        page = report_html(loaded.spec, catalog, planned, findings)
        step("written", 3, 3)
    _write_output(output, page)
    errors = sum(f.severity is Severity.ERROR for f in findings)
    _say(
        f"{output}: report of {planned.name} ({len(planned.servers):,} servers, "
        f"{len(planned.racks):,} racks)" + (f"; {errors} lint error(s)" if errors else "")
    )
    raise typer.Exit(EXIT_FAILED if errors else EXIT_OK)


@app.command()
def predict(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    collective: Annotated[CollectiveName, typer.Option(help="Collective to predict.")],
    gpus: Annotated[
        int, typer.Option(min=2, max=MAX_BUDGET_GPUS, help="GPUs in the communicator.")
    ],
    min_bytes: Annotated[str, typer.Option(help="Smallest size, e.g. 8 or 1MiB.")] = "8",
    max_bytes: Annotated[str, typer.Option(help="Largest size, e.g. 8GiB.")] = "8GiB",
    step_factor: Annotated[float, typer.Option(help="Size multiplier per row.")] = 2.0,
    group: Annotated[
        str | None,
        typer.Option(help="Node group to run on (default: the largest group without MIG)."),
    ] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Predict nccl-tests results (time, algbw, busbw) for a collective on the cluster."""
    loaded = _load_spec(spec)
    catalog = load_catalog()
    low, high = _size_option("--min-bytes", min_bytes), _size_option("--max-bytes", max_bytes)
    table_rows(low, high, step_factor)  # finite factor, bounded rows: refuse before planning
    with _located_in(loaded):
        topo = comm_topology(loaded.spec, catalog, gpus, path="--gpus", group=group)
        rows = predict_table(topo, collective.value, low, high, step_factor)
        chosen, node = main_group(loaded.spec, catalog, group)
    if output_format is Format.JSON:
        _say(predict_json(collective.value, topo, rows))
    else:
        _say(predict_text(collective.value, f"{chosen.name} ({node.name})", topo, rows))


def _size_option(option: str, value: str) -> int:
    try:
        return parse_bytes(value)
    except ValueError as exc:
        raise RailplanError(f"{option}: {exc}", hint="e.g. 8, 64KiB, 1GiB") from None


@app.command()
def budget(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Evaluate each declared budget: predicted value, limit, pass/fail and headroom."""
    loaded = _load_spec(spec)
    planned = _plan_or_fail(loaded)
    with _located_in(loaded):
        results = evaluate_budgets(loaded.spec, load_catalog(), planned)
    _say(budgets_json(results) if output_format is Format.JSON else budgets_text(results))
    raise typer.Exit(EXIT_OK if all(r.passed for r in results) else EXIT_FAILED)


@app.command()
def rules(output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT) -> None:
    """List every rule: id, name, severity and summary."""
    docs = documented_rules()
    if output_format is Format.JSON:
        _say(
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
        _say(f"{r.id}  {r.name:<{width}}  {r.severity!s:<7}  {r.summary}")


@app.command()
def explain(rule_id: Annotated[str, typer.Argument(metavar="RULE", help="Id or name.")]) -> None:
    """Show one rule's documentation: why it matters and how to fix it."""
    doc = find_documented_rule(rule_id)
    if doc is None:  # one line made like every other error: a long id is cut, not echoed
        raise RailplanError(f"unknown rule {rule_id!r}", hint="`railplan rules` lists them")
    _say(f"{doc.id} {doc.name} ({doc.severity})\n\n{doc.summary}\n\n{doc.doc}")


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (for yaml-language-server and CI)."""
    _say(spec_json_schema_text())


@app.command()
def catalog(output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT) -> None:
    """List the catalog's GPUs, nodes and switches."""
    cat = load_catalog()
    if output_format is Format.JSON:
        _say(cat.model_dump_json(indent=2))
        return
    for key, gpu in cat.gpus.items():
        _say(f"gpu     {key:<20} {gpu.name}, {gpu.memory_gb:g} GB, {gpu.tdp_w:g} W")
    for key, node in cat.nodes.items():
        _say(
            f"node    {key:<20} {node.name}: {node.gpus}x {node.gpu}, {node.compute_nics}x "
            f"{node.compute_nic_gbps:g} Gb/s"
        )
    for key, sw in cat.switches.items():
        _say(f"switch  {key:<20} {sw.name}: {sw.ports}x {sw.port_gbps:g} Gb/s {sw.kind}")


@mig_app.command("check")
def mig_check(
    file: Annotated[str, typer.Argument(help="mig-parted `version: v1` config file.")],
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU id; default every GPU.")] = None,
    config: Annotated[str | None, typer.Option(help="Only this named config.")] = None,
    driver: Annotated[str | None, typer.Option(help="Driver version the nodes run.")] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
) -> None:
    """Validate a mig-parted config (MIG manager / GPU Operator format) against the catalog."""
    gpus = load_catalog().gpus
    branch = _driver_branch(driver)
    data, source = read_yaml_file(file)
    findings = check_mig_parted(data, source, gpus, gpu_id=gpu, config=config, driver_branch=branch)
    if output_format is Format.JSON:
        _say(format_json(findings))
    else:
        configs = data.get("mig-configs") if isinstance(data, dict) else None
        count = len(configs) if isinstance(configs, dict) and config is None else 1
        _say(
            f"{source.file}: checked {count} config(s) against "
            f"{1 if gpu else len(gpus)} catalog GPU(s)"
        )
        _say(format_text(findings, {source.file: source.lines}, 1))
    failed = any(f.severity is Severity.ERROR for f in findings)
    raise typer.Exit(EXIT_FAILED if failed else EXIT_OK)


def _driver_branch(driver: str | None) -> int | None:
    if driver is None:
        return None
    head = driver.split(".")[0]
    if not head.isdigit() or len(driver) > MAX_VERSION:  # and int() never sees 4,300 digits
        raise RailplanError(
            f"--driver {shorten(repr(driver))} is not a driver version",
            hint="e.g. --driver 550.90.07",
        )
    return int(head)


def _is_usage_error(exc: Exception) -> bool:
    # typer vendors click, so match its exceptions by shape, not by import path
    return callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int)


def _usage_line(exc: Exception) -> str:
    """Click's 4-9 line usage box as ``railplan: lint: <problem> (see railplan lint --help)``."""
    words: list[str] = []
    ctx = getattr(exc, "ctx", None)
    while ctx is not None and ctx.parent is not None:  # the root's name is the program's
        words.insert(0, str(ctx.info_name))
        ctx = ctx.parent
    formatted = getattr(exc, "format_message", None)
    problem = " ".join(str(formatted() if callable(formatted) else exc).split())
    for theirs, ours in _USAGE_WORDS:
        problem = problem.replace(theirs, ours)
    problem = problem.rstrip(".")
    if problem[1:2].islower():  # "No such option" -> "no such option", keep "SPEC ..."
        problem = problem[:1].lower() + problem[1:]
    command = " ".join(["railplan", *words])
    where = f"{' '.join(words)}: " if words else ""
    line = f"railplan: {where}{cut_long_values(problem)} (see {command} --help)"
    return escape_controls(line)


# typer checks option values with Pydantic's messages; say them as the spec's errors do
_USAGE_WORDS = (
    ("Value error, ", ""),
    ("Input should be a valid integer, unable to parse string as an integer", "not a whole number"),
    ("Input should be a valid number, unable to parse string as a number", "not a number"),
    ("Input should be less than or equal to ", "must be at most "),
    ("Input should be greater than or equal to ", "must be at least "),
    ("Input should be less than ", "must be below "),
    ("Input should be greater than ", "must be above "),
    ("Input should be ", "must be "),
)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point: run the app and map errors to exit codes.

    SIGINT exits 130 and SIGTERM/SIGHUP end the process by that signal, each after one line
    and after every temp file is removed; a stdout whose reader went away ends it by SIGPIPE,
    silently, as other Unix tools do.
    """
    try:
        with raising_on_signals():
            code = _run(argv)
            _flush_stdout()
    except Interrupted as exc:
        _die_of_signal(exc.signum)
    except _BrokenPipe:
        _die_of_signal(signal.SIGPIPE)
    except RailplanError as exc:  # stdout full at the last flush
        _complain(exc)
        code = EXIT_USAGE
    sys.exit(code)


def _run(argv: Sequence[str] | None) -> int:
    """Run the app; the exit code for every outcome but signals and a broken stdout."""
    try:
        # Without standalone mode click returns a command's exit code instead of exiting.
        code = app(args=list(argv) if argv is not None else None, standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except RailplanError as exc:
        _complain(exc)
        return EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("railplan: aborted\n")
        return 130
    except _BrokenPipe:
        raise  # main ends the process by SIGPIPE
    except Exception as exc:
        if _is_usage_error(exc):  # bad option or argument: one line, exit 2
            sys.stderr.write(_usage_line(exc) + "\n")
            return EXIT_USAGE
        if os.environ.get("RAILPLAN_DEBUG"):
            raise
        sys.stderr.write(
            f"railplan: internal error: {type(exc).__name__}: {exc} "
            "(a bug in railplan; rerun with RAILPLAN_DEBUG=1 and report it)\n"
        )
        return EXIT_INTERNAL
    return code if isinstance(code, int) else EXIT_OK


def _flush_stdout() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise _BrokenPipe from None
    except OSError as exc:
        raise _stdout_error(exc) from None


def _detach_stdout() -> None:
    """Point stdout at /dev/null so Python's flush at exit has nothing to fail on."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no file descriptor (a test's capture): nothing to fail at exit


def _die_of_signal(signum: int) -> NoReturn:
    """Exit as a signal would: 130 for SIGINT (one line), else by the signal itself."""
    if signum != signal.SIGPIPE and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()  # what was printed before the signal still arrives
    _detach_stdout()
    if signum != signal.SIGPIPE:
        sys.stderr.write(f"railplan: interrupted by {signal.Signals(signum).name}\n")
        sys.stderr.flush()
    if signum == signal.SIGINT:
        sys.exit(130)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)  # not reached: the default action ends the process


__all__ = ["app", "main"]
