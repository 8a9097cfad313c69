"""The process around the app: exit codes, usage errors and signals.

`main` maps every outcome to an exit code (0 ok, 1 check failed, 2 bad input or usage, 3 a
railplan bug), turns click's usage box into one line, and ends the process as a signal would
on SIGINT, SIGTERM or SIGHUP or when stdout's reader has gone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer

from infra.cli.common import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    BrokenPipe,
    Failed,
    app,
    complain,
    detach_stdout,
    error_objects,
    say,
    stdout_error,
)
from infra.errors import RailplanError, cut_long_values, escape_controls
from infra.signals import Interrupted, raised_signal, raising_on_signals, swallowed_signal


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
    problem = _BOUND.sub(lambda m: f"{m[1]}{int(m[2]):,}", problem)  # 1048576 -> 1,048,576
    # a group run bare (`railplan`, `railplan mig`) prints its help and raises no words
    problem = problem.rstrip(".") or "no command given"
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
# a bound as typer prints it, to get thousands separators as the spec's bounds have
_BOUND = re.compile(r"(must be (?:at most|at least|below|above) )(\d{5,20})\b")


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point: run the app and map errors to exit codes.

    SIGINT exits 130 and SIGTERM/SIGHUP end the process by that signal, each after one line
    and after every temp file is removed; a stdout whose reader went away ends it by SIGPIPE,
    silently, as other Unix tools do. Started with stderr closed (``2>&-``), the lines go
    nowhere but the exit code is the same (a lost line made exit 2 an exit 1).
    """
    if sys.stderr is None:
        sys.stderr = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115 (for the process)
    try:
        with raising_on_signals():
            code = _run(argv)
            signum = swallowed_signal()
            if signum is not None:  # raised in a callback, where Python only printed it
                raise Interrupted(signum)
            _flush_stdout()
    except Interrupted as exc:
        _die_of_signal(exc.signum, exc.after)
    except BrokenPipe:
        _die_of_signal(signal.SIGPIPE)
    except RailplanError as exc:  # stdout full at the last flush
        complain(exc)
        code = EXIT_USAGE
    sys.exit(code)


def _run(argv: Sequence[str] | None) -> int:
    """Run the app; the exit code for every outcome but signals and a broken stdout.

    With ``--format json`` an error is one JSON document on stdout (`_report`).
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        # Without standalone mode click returns a command's exit code instead of exiting.
        code = app(args=args, standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except RailplanError as exc:
        return _report(args, exc)
    except Failed as exc:
        return _report(args, exc.error, EXIT_FAILED)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("railplan: aborted\n")
        return 130
    except BrokenPipe:
        raise  # main ends the process by SIGPIPE
    except Exception as exc:
        if _is_usage_error(exc):  # bad option or argument: one line, exit 2
            return _report_line(args, _usage_line(exc), EXIT_USAGE)
        signum = raised_signal()
        if signum is not None:  # a library wrapped the Interrupted our handler raised
            raise Interrupted(signum) from None
        if os.environ.get("RAILPLAN_DEBUG"):
            raise
        line = (
            f"railplan: internal error: {type(exc).__name__}: {exc} "
            "(a bug in railplan; rerun with RAILPLAN_DEBUG=1 and report it)"
        )
        return _report_line(args, line, EXIT_INTERNAL)
    return code if isinstance(code, int) else EXIT_OK


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for ``--format json`` (``-f json``, ``--format=json``)."""
    # each argument with the next ("" after the last); none at all for a bare `railplan`
    return any(
        (a in ("--format", "-f") and b == "json") or a in ("--format=json", "-fjson")
        for a, b in itertools.pairwise([*args, ""])
    )


def _report_line(args: Sequence[str], line: str, code: int) -> int:
    """`_report` for a problem that has its own stderr line (usage errors, railplan bugs)."""
    if not _wants_json(args):
        sys.stderr.write(line + "\n")
        return code
    return _report(args, RailplanError(line.removeprefix("railplan: ")), code)


def _report(args: Sequence[str], error: RailplanError, code: int = EXIT_USAGE) -> int:
    """Tell of ``error`` and return ``code``.

    One line per problem on stderr, or with ``--format json`` the document ``{"errors":
    [...], "exit_code": N}`` on stdout instead, as lint and diff do (DESIGN.md: stdout holds
    exactly one JSON document, errors included). A problem with stdout goes to stderr.
    """
    if not _wants_json(args) or error.file == "<stdout>" or sys.stdout is None:
        complain(error)
        return code
    doc = {"errors": error_objects(error), "exit_code": code}
    try:
        say(json.dumps(doc, indent=2, sort_keys=True))
    except RailplanError as exc:  # stdout failed now: say both on stderr
        complain(error)
        complain(exc)
    return code


def _flush_stdout() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise BrokenPipe from None
    except OSError as exc:
        raise stdout_error(exc) from None


def _die_of_signal(signum: int, after: str = "") -> NoReturn:
    """Exit as a signal would: 130 for SIGINT (one line), else by the signal itself.

    ``after``: what was done before the signal was delivered, said on that line.
    """
    if signum != signal.SIGPIPE and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()  # what was printed before the signal still arrives
    detach_stdout()
    if signum != signal.SIGPIPE:
        done = f" {escape_controls(after)}" if after else ""
        sys.stderr.write(f"railplan: interrupted by {signal.Signals(signum).name}{done}\n")
        sys.stderr.flush()
    if signum == signal.SIGINT:
        sys.exit(130)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)  # not reached: the default action ends the process
