"""What every command shares: the app, exit codes, formats, stdout and error lines.

The typer app and its `mig` group, the output formats, writing to stdout (a full, closed or
broken stdout raises instead of failing at exit), and how library errors become lines on
stderr: one per problem, located in the spec where known, marked RP000 when inside the file.

Every command's options are built on every start (`railplan --help` lists them all), so the
command modules import at the top only typer and this module; what a command runs (the spec
loader, lint, the renderer, the simulator) is imported in the command, when it runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infra.digits import ascii_digits
from infra.errors import RailplanError

if TYPE_CHECKING:
    from infra.lint.finding import Finding
    from infra.spec import LoadedSpec

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
        number = int(text)
        if min is not None and number < min:
            raise ValueError(f"must be at least {min}")
        if max is not None and number > max:
            raise ValueError(f"must be at most {max}")
        return number

    return typer.Option(*param_decls, parser=parse, min=min, max=max, **kwargs)


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


def _tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

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


class _Failed(Exception):
    """A located problem that fails a check (exit 1); `process._run` reports it as asked."""

    def __init__(self, error: RailplanError) -> None:
        super().__init__(error.message)
        self.error = error


def _problems(error: RailplanError) -> list[RailplanError]:
    """The problems ``error`` stands for: a spec's validation errors each, else itself."""
    from infra.spec import SpecValidationError

    return list(error.errors) if isinstance(error, SpecValidationError) else [error]


def _complain(error: RailplanError) -> None:
    for e in _problems(error):
        sys.stderr.write(e.one_line() + "\n")


def _error_objects(error: RailplanError) -> list[dict[str, object]]:
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


def _load_spec(path: str) -> LoadedSpec:
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


def _write_output(path: str, text: str) -> None:
    """``text`` to the file ``path`` (atomically, see `infra.files`) or to stdout for ``-``."""
    from infra.files import write_atomic

    if path == "-":
        _say(text)
    else:
        write_atomic(path, text.encode("utf-8"))


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
