"""The rendered tree of every example passes the real tools a CI would run on it.

`ansible-playbook --syntax-check` (roles resolved from the tree's own roles_path, inventory
parsed) and `ansible-lint` with the production profile, offline, from the tree's root with
the `.ansible-lint` railplan renders there. Nothing here needs a target host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.spec import load_spec

from .cli_run import run_cli

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
# claims-h100-8k (1,000 servers) gets a root of its own (a whole-tree lint, about 25 s): the
# syntax checks leave it out for time, since the H100 SuperPOD example covers its node,
# fabric and scheduler kinds.
LARGE = ROOT / "examples/claims-h100-8k.yaml"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if p != LARGE)
GOLDEN_INPUTS = sorted((ROOT / "tests/golden/inputs").glob("*.yaml"))
# one spec per cluster name (a golden input may copy an example)
SPECS = list({load_spec(str(p)).spec.name: p for p in EXAMPLES + GOLDEN_INPUTS}.values())
# `make test`'s whole-tree ansible-lint: a Kubernetes cluster with MIG and a Slurm one with
# opensm share a root, so every role and both kinds of inventory are linted (about 55 s of
# CPU; every spec in one root is about 85 s, `make test-slow`'s).
SMOKE = [
    ROOT / "tests/golden/inputs/a100-lab-mig.yaml",
    ROOT / "tests/golden/inputs/h100-slurm-opensm.yaml",
]


def _env(tree: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(tree / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tree / ".cache/tmp"),
        "ANSIBLE_HOME": str(tree / ".cache/ansible"),
        "NO_COLOR": "1",
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every example and golden input rendered into one root, as a GitOps repo holds them."""
    return _render_into(tmp_path_factory.mktemp("tree"), SPECS)


def _render_into(root: Path, specs: list[Path]) -> Path:
    for spec_file in specs:
        result = run_cli("render", str(spec_file), "--root", str(root))  # in-process
        assert result.returncode == 0, result.stderr
    return root


def test_every_example_shares_the_root(tree: Path) -> None:
    assert len(list((tree / "inventories").iterdir())) == len(SPECS)


# `make test` checks the smoke pair's playbooks with their inventories (a Kubernetes one with
# MIG, a Slurm one with opensm; about 2.5 s of CPU each); the other specs' are `make test-slow`'s,
# beside the whole-tree lint of every spec, which syntax-checks each playbook again.
SYNTAX = [pytest.param(p, id=p.stem, marks=[] if p in SMOKE else [pytest.mark.slow]) for p in SPECS]


@pytest.mark.parametrize("spec_file", SYNTAX)
def test_syntax_check_passes(tree: Path, spec_file: Path) -> None:
    name = load_spec(str(spec_file)).spec.name
    result = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "--syntax-check",
            "-i",
            f"inventories/{name}",
            f"playbooks/{name}.yml",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
        env=_env(tree),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr


def test_ansible_lint_production_profile_passes(tmp_path: Path) -> None:
    """The whole tree, as its `.ansible-lint` says CI runs it: no path, from the root.

    Every playbook, the roles, and every inventory whole: hosts.yml, group_vars, host_vars
    and files/ (Kubernetes manifests and Helm values are YAML that yamllint checks too).
    """
    _assert_lint_passes(_render_into(tmp_path, SMOKE))


@pytest.mark.slow
def test_ansible_lint_passes_on_every_example_in_one_root(tree: Path) -> None:
    """Every example and golden input's tree (but the largest's, below) in one root."""
    _assert_lint_passes(tree)


@pytest.mark.slow
def test_ansible_lint_passes_on_the_largest_example(tmp_path: Path) -> None:
    """The 1,000-server example's whole tree (1,000 host_vars files) lints clean too."""
    result = run_cli("render", str(LARGE), "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    _assert_lint_passes(tmp_path)


def _assert_lint_passes(tree: Path) -> None:
    result = subprocess.run(
        [str(BIN / "ansible-lint")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
        env=_env(tree),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Passed: 0 failure(s), 0 warning(s)" in output, output
    assert "Profile 'production' was required, and it passed" in output
