"""Options a command would ignore in the mode another option picks are refused, not dropped.

`render SPEC --recover` ignored SPEC (and --force and --addresses) silently: --recover only
finishes what a killed render left under --root (docs/design.md), so a user who meant
"recover, then render this spec" got no render and exit 0. `simulate --compare-mig
--jobs-csv F` never wrote F. Each such combination is one line, exit 2, before any work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli_run import ROOT, run_cli

LAB = str(ROOT / "examples/a100-lab-mig.yaml")
TRACE = str(ROOT / "examples/traces/synthetic-alibaba-3k.csv")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([LAB], "SPEC"),
        (["--force"], "--force"),
        (["--addresses", "hosts.json"], "--addresses"),
        ([LAB, "--force"], "SPEC"),
    ],
)
def test_render_recover_refuses_what_it_would_ignore(
    tmp_path: Path, extra: list[str], named: str
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    result = run_cli("render", "--recover", "--root", str(root), *extra, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert "--recover" in result.stderr and named in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
    assert not any(root.iterdir())


def test_render_recover_alone_still_recovers(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    result = run_cli("render", "--recover", "--root", str(tmp_path / "tree"))
    assert result.returncode == 0 and "nothing to recover" in result.stdout, result.stderr


def test_simulate_compare_mig_refuses_jobs_csv_it_would_not_write(tmp_path: Path) -> None:
    out = tmp_path / "jobs.csv"
    result = run_cli("simulate", LAB, "--trace", TRACE, "--compare-mig", "--jobs-csv", str(out))
    assert result.returncode == 2, result.stdout
    assert "--jobs-csv" in result.stderr and "--compare-mig" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
