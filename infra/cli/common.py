"""What every command shares: the app, exit codes, formats, stdout and error lines, planning.

The typer app and its `mig` group, the output formats, writing to stdout (a full, closed or
broken stdout raises instead of failing at exit), and how library errors become lines on
stderr: one per problem, located in the spec where known, marked RP000 when inside the file.
Then the planning steps several commands take (expand a spec and locate its errors, take the
plan lint built, apply an address file) and the progress bars on stderr for long work. This
is the CLI's one shared module: command modules import public names from it and nothing
from each other (tests/test_imports.py).

Every command's options are built on every start (`railplan --help` lists them all), so the
command modules import at the top only typer and this module; what a command runs (the spec
loader, lint, the renderer, the simulator) is imported in the command, when it runs.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from infra.digits import ascii_digits, ascii_float, ascii_spelling, foreign_character
from infra.errors import InputError, RailplanError
from infra.progress import Progress as ProgressFn
from infra.progress import quiet

if TYPE_CHECKING:
    from ipaddress import IPv4Network

    from infra.lint import LintContext
    from infra.lint.finding import Finding
    from infra.spec import LoadedSpec
    from infra.topology import Plan

_N = TypeVar("_N", int, float)  # an option's number: whole or real

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
        say(f"railplan {tool_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Show version."),
    ] = None,
) -> None:
    """Turn one YAML cluster spec into a validated, budget-checked NVIDIA GPU cluster plan."""


def integer_option(
    *param_decls: str, min: int | None = None, max: int | None = None, **kwargs: Any
) -> Any:
    """`typer.Option` of an integer written in ASCII digits (and a leading '-'), in [min, max].

    typer reads an ``int`` option as Pydantic does, which also takes ``1_0``, ``+5``,
    ``1.0`` and ``7<U+00A0>``; every integer option is built here, so all of them read
    numbers alike (a bad one is a usage error, exit 2, as any bad option value is).
    """

    def parse(value: object) -> int:
        if isinstance(value, int):  # a default
            return value
        text = str(value)
        if not ascii_digits(text.removeprefix("-")):
            raise ValueError("not a whole number")
        return _within(int(text), min, max, str)

    return typer.Option(*param_decls, parser=parse, min=min, max=max, **kwargs)


def number_option(
    *param_decls: str, min: float | None = None, max: float | None = None, **kwargs: Any
) -> Any:
    """`typer.Option` of a finite number written in ASCII (``0.8``, ``1e3``), in [min, max].

    typer reads a ``float`` option as Pydantic does: ``nan`` passes as a number and then
    fails the range check as "must be at most 100", and a fullwidth ``０.5`` is "not a
    number" with no word of why. Every float option is built here, so all of them say both.
    """

    def parse(value: object) -> float:
        if isinstance(value, float | int):  # a default
            return float(value)
        text = str(value)
        found = foreign_character(text)
        if found is not None:
            spelt = ascii_spelling(text)
            raise ValueError(f"holds {found}" + (f": write {spelt}" if spelt else ""))
        try:
            number = ascii_float(text)
        except ValueError:
            raise ValueError("not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"must be a finite number, not {text.strip()}")
        return _within(number, min, max, lambda bound: f"{bound:g}")

    return typer.Option(*param_decls, parser=parse, min=min, max=max, **kwargs)


def _within(number: _N, low: _N | None, high: _N | None, show: Callable[[_N], str]) -> _N:
    """``number`` when it lies in [low, high]; else a ValueError naming the bound broken."""
    if low is not None and number < low:
        raise ValueError(f"must be at least {show(low)}")
    if high is not None and number > high:
        raise ValueError(f"must be at most {show(high)}")
    return number


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
    SENDRECV = "sendrecv"


class Format(StrEnum):
    """Output formats of the other commands."""

    TEXT = "text"
    JSON = "json"


def tool_version() -> str:
    """The installed railplan's version (0.0.0 from a source tree without install)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("railplan")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0"


class BrokenPipe(Exception):
    """Standard output's reader has gone (``railplan rules | head -1``)."""


def say(text: str) -> None:
    """Write ``text`` (and a newline) to stdout; a full, closed or broken stdout raises.

    A character stdout's encoding cannot hold (``×`` with ``PYTHONIOENCODING=ascii``) is
    written as an escape (`_escaped`), not a crash.
    """
    out = sys.stdout
    if out is None:  # started with stdout closed (`railplan lint x >&-`)
        raise RailplanError(
            "cannot write: standard output is closed",
            file="<stdout>",
            hint="redirect it instead, e.g. > /dev/null",
        )
    line = text if text.endswith("\n") else text + "\n"
    try:
        try:
            out.write(line)
        except UnicodeEncodeError:  # an ASCII stdout (PYTHONIOENCODING, a C locale): escape
            out.write(_escaped(line, out.encoding or "ascii"))
    except BrokenPipeError:
        raise BrokenPipe from None
    except OSError as exc:
        raise stdout_error(exc) from None


def _escaped(text: str, encoding: str) -> str:
    r"""``text`` with each character ``encoding`` cannot hold written ``\uXXXX``.

    A surrogate pair above U+FFFF: the escape reads in text and is valid inside a JSON
    string (``--format json`` stays one JSON document), unlike Python's ``\xd7``.

    >>> _escaped("2 \u00d7 \U0001f680", "ascii")
    '2 \\u00d7 \\ud83d\\ude80'
    """
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x80 or ch.encode(encoding, "ignore"):
            out.append(ch)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def stdout_error(exc: OSError) -> RailplanError:
    """The located error for a stdout that failed with ``exc``; stdout is detached first."""
    detach_stdout()  # what stdout could not take must not fail again at exit
    return RailplanError(
        f"cannot write: {exc.strerror or exc}",
        file="<stdout>",
        hint="free space where standard output goes, or redirect it elsewhere",
    )


class Failed(Exception):
    """A located problem that fails a check (exit 1); `process._run` reports it as asked."""

    def __init__(self, error: RailplanError) -> None:
        super().__init__(error.message)
        self.error = error


def _problems(error: RailplanError) -> list[RailplanError]:
    """The problems ``error`` stands for: a spec's validation errors each, else itself."""
    from infra.spec import SpecValidationError

    return list(error.errors) if isinstance(error, SpecValidationError) else [error]


MAX_SHOWN = 20  # problems of one input printed; the rest are counted in one more line


def complain(error: RailplanError) -> None:
    """One line on stderr per problem ``error`` stands for, the first `MAX_SHOWN` of them.

    A file of 10,000 unknown keys is reported in 21 lines, not 10,000: the last says how
    many more there are (``--format json`` lists every one).
    """
    problems = _problems(error)
    for e in problems[:MAX_SHOWN]:
        sys.stderr.write(e.one_line() + "\n")
    if len(problems) > MAX_SHOWN:
        first = problems[MAX_SHOWN]
        more = RailplanError(
            f"{len(problems) - MAX_SHOWN:,} more problems not shown",
            file=first.file,
            position=first.position,
            hint="fix the ones above and run again; --format json lists every one",
        )
        sys.stderr.write(more.one_line() + "\n")


def error_objects(error: RailplanError) -> list[dict[str, object]]:
    """The problems of ``error`` as JSON objects, for ``--format json`` instead of stderr.

    Each has file, line, column, rule, message, path and hint (null where unknown).
    """
    return [
        {
            "file": e.file,
            "line": e.position.line if e.position else None,
            "column": e.position.column if e.position else None,
            "rule": e.rule,
            "message": e.message,
            "path": e.path,
            "hint": e.hint or "",
        }
        for e in _problems(error)
    ]


def read_spec(path: str) -> LoadedSpec:
    """`load_spec`; a problem inside the file (not YAML, not the schema) is marked RP000.

    JSON, SARIF and text then name the same rule; a file that cannot be read at all (missing,
    a device) has no rule to break and keeps a plain ``error:``.
    """
    from infra.lint import SCHEMA_RULE
    from infra.spec import load_spec

    try:
        return load_spec(path)
    except RailplanError as exc:
        for e in _problems(exc):
            if e.position is not None:
                e.rule = e.rule or SCHEMA_RULE.id
        raise


@contextmanager
def located_in(loaded: LoadedSpec) -> Iterator[None]:
    """Errors naming a spec path (not an option such as ``--gpus``) get the spec's location."""
    try:
        yield
    except RailplanError as exc:
        if exc.file is None and exc.path and not exc.path.startswith("-"):
            exc.file, exc.position = loaded.file, loaded.source.position(exc.path)
        raise


def schema_findings(error: RailplanError) -> list[Finding]:
    """Spec errors as RP000 findings, so machine formats (SARIF, GitHub) show them too."""
    from infra.lint import SCHEMA_RULE
    from infra.lint.finding import Severity, make_finding

    return [
        make_finding(
            e.rule or SCHEMA_RULE.id,
            Severity.ERROR,
            e.message,
            file=e.file or "<input>",
            path=e.path,
            hint=e.hint or "",
            position=e.position,
        )
        for e in _problems(error)
    ]


def write_output(path: str, text: str) -> None:
    """``text`` to the file ``path`` (atomically, see `infra.files`) or to stdout for ``-``."""
    write_outputs([(path, text)])


def write_outputs(outputs: Sequence[tuple[str, str]]) -> None:
    """Each ``(path, text)`` as `write_output` does; the files all replaced or none of them.

    The files are staged whole before the first is renamed into place (`write_atomic_all`),
    so an output that cannot be written (no space) leaves every other as it was; ``-``
    outputs go to stdout after the files, in order.
    """
    from infra.files import write_atomic_all

    write_atomic_all([(path, text.encode("utf-8")) for path, text in outputs if path != "-"])
    for path, text in outputs:
        if path == "-":
            say(text)


def detach_stdout() -> None:
    """Point stdout at /dev/null so Python's flush at exit has nothing to fail on."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no file descriptor (a test's capture): nothing to fail at exit


# --- planning steps the commands share ---------------------------------------------------


def planned_or_raise(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and raised."""
    from infra.catalog import catalog_for
    from infra.topology import PlanError, expand

    try:
        return expand(loaded.spec, catalog_for(loaded.spec), progress)
    except PlanError as exc:
        exc.file = loaded.file
        exc.position = loaded.source.position(exc.path)
        exc.rule = exc.rule or "RP049"  # lint's plan-failed: the same finding, the same id
        raise


def plan_or_fail(loaded: LoadedSpec, progress: ProgressFn = quiet) -> Plan:
    """Expand a loaded spec; a PlanError is located in the spec and exits 1."""
    from infra.topology import PlanError

    try:
        return planned_or_raise(loaded, progress)
    except PlanError as exc:
        raise Failed(exc) from None


def lint_plan_or_fail(loaded: LoadedSpec, context: LintContext) -> Plan:
    """The plan lint built (or is handed), else its PlanError located in the spec (exit 1)."""
    if context.plan is None:
        error = context.plan_error
        assert error is not None  # a context without a plan holds the reason
        error.file, error.position = loaded.file, loaded.source.position(error.path)
        error.rule = error.rule or "RP049"
        raise Failed(error)
    return context.plan


def with_addresses_file(planned: Plan, file: str, subnet: IPv4Network | None = None) -> Plan:
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
            "the file is empty"
            if data is None
            else "expected a mapping of hostname to IPv4 address",
            file=file,
            position=source.position(prefix),
            hint="write it with: pulumi stack output hosts --json > hosts.json",
        )
    try:
        return with_addresses(planned, data, subnet)
    except AddressesError as exc:
        where = join_path(prefix, exc.path) if prefix else join_path("", exc.path)
        exc.file, exc.position, exc.path = file, source.position(where), where
        raise


# --- progress bars on stderr for long work (plan, render, report) ---------------------------

PROGRESS_DELAY_S = 1.0  # work shorter than this shows no bar at all


class ProgressBar:
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
        """Stop the timer and the bars (the bars vanish: they are transient)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.bars is not None:
            self.bars.stop()


@contextmanager
def progress_bar() -> Iterator[ProgressBar]:
    """A `ProgressBar` for the ``with`` block, closed when it ends (also on an error)."""
    bar = ProgressBar()
    try:
        yield bar
    finally:
        bar.close()
