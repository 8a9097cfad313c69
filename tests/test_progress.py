"""Progress bars: stages report their steps; the CLI draws them only on a terminal.

The terminal is a real pseudo-terminal (os.openpty) standing in for the user's; the bar
itself is rich's. Timing is not asserted: ``RAILPLAN_PROGRESS=always`` removes the delay.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra.catalog import load_catalog
from infra.render.tree import RENDER_STEPS, render_tree
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.plan import PLAN_STEPS

from .test_cli import railplan

ROOT = Path(__file__).resolve().parents[1]
SPEC = "examples/dgx-a100-superpod.yaml"


def _recorder() -> tuple[list[tuple[str, int, int]], object]:
    calls: list[tuple[str, int, int]] = []

    def record(what: str, done: int, total: int) -> None:
        calls.append((what, done, total))

    return calls, record


def test_planning_reports_every_step_in_order() -> None:
    calls, record = _recorder()
    expand(load_spec(ROOT / SPEC).spec, load_catalog(), record)  # type: ignore[arg-type]
    assert [what for what, _, _ in calls] == [*PLAN_STEPS, "planned"]
    assert [done for _, done, _ in calls] == list(range(len(PLAN_STEPS) + 1))
    assert {total for _, _, total in calls} == {len(PLAN_STEPS)}


def test_rendering_reports_every_step_in_order() -> None:
    loaded = load_spec(ROOT / SPEC)
    catalog = load_catalog()
    calls, record = _recorder()
    render_tree(loaded.spec, catalog, expand(loaded.spec, catalog), record)  # type: ignore[arg-type]
    assert [what for what, _, _ in calls] == [*RENDER_STEPS, "rendered"]
    assert calls[-1][1] == calls[-1][2] == len(RENDER_STEPS)


def _plan_on_terminal(**env: str) -> tuple[int, str, str]:
    """Run `railplan plan` with stderr on a pseudo-terminal; (exit code, stdout, terminal)."""
    master, slave = os.openpty()
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "RAILPLAN_PROGRESS")}
    result = subprocess.run(
        [sys.executable, "-m", "infra", "plan", SPEC],
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        cwd=ROOT,
        env={**clean, "TERM": "xterm-256color", "COLUMNS": "120", **env},
        timeout=120,
        check=False,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return result.returncode, result.stdout, b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_bar_that_leaves_stdout_alone() -> None:
    code, stdout, terminal = _plan_on_terminal(RAILPLAN_PROGRESS="always")
    assert code == 0
    assert "plan: " in terminal  # the bar's title and the step it is on
    assert stdout.startswith("a100-superpod: 140 servers")
    assert "\x1b" not in stdout


def test_ci_and_never_keep_the_terminal_silent() -> None:
    for env in ({"CI": "true"}, {"RAILPLAN_PROGRESS": "never"}):
        code, stdout, terminal = _plan_on_terminal(**env)
        assert (code, terminal) == (0, ""), env
        assert stdout.startswith("a100-superpod: 140 servers")


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    result = railplan("render", SPEC, "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith(f"{tmp_path}: ")
