"""Run the `railplan` CLI in-process, as a test would run the command, without a new Python.

Each subprocess start costs about 0.45 s (interpreter, imports, catalog), and most CLI tests
assert only exit codes and output text, which `infra.cli.main` produces the same in-process.
`run_cli` calls `main(argv)` with stdout and stderr captured as text, in a given directory and
environment, and puts everything back afterwards: the working directory, the environment,
sys.stdout/sys.stderr, and the signal handlers `main` installs (it must run in the main
thread, which pytest's is). The few true end-to-end tests of the installed console script
use `run_installed`.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from infra.cli import main

ROOT = Path(__file__).resolve().parent.parent
RAILPLAN = Path(sys.executable).parent / "railplan"
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


@contextlib.contextmanager
def _environment(cwd: Path, env: Mapping[str, str | None]) -> Iterator[None]:
    """Run in ``cwd`` with ``env`` applied (None removes a variable); restore both after."""
    old_cwd, saved = Path.cwd(), {k: os.environ.get(k) for k in env}
    os.chdir(cwd)
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        os.chdir(old_cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_cli(
    *args: str, cwd: Path = ROOT, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``railplan ARGS`` in-process; the result has returncode, stdout and stderr.

    Progress bars are off (``RAILPLAN_PROGRESS=never``) unless ``env`` says otherwise; they
    would be off anyway, as the captured stderr is no terminal.
    """
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with (
        _environment(cwd, {"RAILPLAN_PROGRESS": "never", **(env or {})}),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    leaked = {s: h for s, h in handlers.items() if signal.getsignal(s) != h}
    assert not leaked, f"railplan {args} left signal handlers installed: {leaked}"
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    result = subprocess.CompletedProcess(
        ["railplan", *args], returncode, out.getvalue(), err.getvalue()
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def run_installed(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the installed ``railplan`` console script as a real process (end-to-end tests)."""
    result = subprocess.run(
        [str(RAILPLAN), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result
