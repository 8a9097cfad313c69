"""Each `railplan` command loads only what it uses.

A command line builds every command's options, but a command's work (the renderer, the
simulator, Pulumi, networkx, Jinja) is imported by that command when it runs: `railplan
--version` used to import all of it (1.6 s of a 2 s start), which every subprocess paid.
Each case runs a fresh interpreter and reads `sys.modules` after the command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

PROBE = """
import json, sys
from infra.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
"""Runs the CLI in-process and prints the loaded modules' names on stderr (its last line)."""

STAGES = ("infra.spec", "infra.catalog", "infra.topology", "infra.lint", "infra.budget")
STAGES += ("infra.simulate",)
"""What every command that reads a spec loads."""

WORK = ("infra.render", "infra.provision", "infra.verify", "infra.k8s", "infra.simulate.engine")
WORK += ("infra.day2", "infra.report", "pulumi", "networkx", "jinja2")
"""What a command that reads a spec loads only if it is that command's work."""

NOT_RENDER = ("infra.provision", "infra.verify", "infra.day2", "infra.report", "pulumi")
"""What `railplan render` does not load (the Pulumi program, verify, diff, the report)."""

SPEC = str(ROOT / "examples" / "a100-lab-mig.yaml")


def _loaded(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "RAILPLAN_PROGRESS": "never", "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return set(json.loads(done.stderr.splitlines()[-1]))


def _within(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in packages))


def test_version_and_help_load_no_stage() -> None:
    assert _within(_loaded("--version"), (*STAGES, *WORK, "pydantic", "yaml")) == []
    # parsing a command's options brings pydantic (typer checks values with it), nothing more
    assert _within(_loaded("lint", "--help"), (*STAGES, *WORK, "yaml")) == []


@pytest.mark.parametrize(
    ("args", "theirs"),
    [
        (["lint", SPEC], WORK),
        (["render", SPEC, "--root", "{tmp}"], NOT_RENDER),
    ],
    ids=["lint", "render"],
)
def test_a_command_loads_none_of_the_others_work(
    args: list[str], theirs: tuple[str, ...], tmp_path: Path
) -> None:
    loaded = _loaded(*(a.format(tmp=tmp_path) for a in args))
    assert _within(loaded, (*theirs, "networkx", "infra.simulate.engine")) == []
