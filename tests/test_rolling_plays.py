"""The rolling plays of the rendered entry playbook drain, roll in the right order, resume.

The playbook is parsed as YAML (what Ansible reads), and the host patterns are resolved by
the real ``ansible --list-hosts`` against the rendered inventory. One Kubernetes example
(no OpenSM), one Slurm spec with ``subnet_manager: opensm`` (a subnet-manager play) and one
with NVIDIA's OpenSM and SHARP (the aggregation manager rolls with the subnet managers).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.spec import load_spec

from .cli_run import run_cli

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
KUBERNETES = ROOT / "examples/a100-lab-mig.yaml"
SLURM_OPENSM = ROOT / "tests/golden/inputs/h100-slurm-opensm.yaml"
SHARP = ROOT / "tests/golden/inputs/a100-nvidia-opensm-sharp.yaml"
DRAIN = {"name": "drain", "tasks_from": "drain"}
RESUME = {"name": "drain", "tasks_from": "resume"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for spec_file in (KUBERNETES, SLURM_OPENSM, SHARP):
        result = run_cli("render", str(spec_file), "--root", str(root))
        assert result.returncode == 0, result.stderr
    return root


def _plays(tree: Path, spec_file: Path) -> list[dict[str, Any]]:
    name = load_spec(str(spec_file)).spec.name
    plays = yaml.safe_load((tree / f"playbooks/{name}.yml").read_text())
    assert isinstance(plays, list)
    return plays


def _hosts(tree: Path, spec_file: Path, pattern: str) -> list[str]:
    """The hosts a play on ``pattern`` runs on, as Ansible resolves it."""
    name = load_spec(str(spec_file)).spec.name
    out = subprocess.run(
        [str(BIN / "ansible"), "-i", f"inventories/{name}", pattern, "--list-hosts"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return [line.strip() for line in out.stdout.splitlines()[1:] if line.strip()]


def _role_steps(play: dict[str, Any]) -> list[str]:
    """Every role a play runs, in order: pre_tasks, roles, post_tasks (drain/resume named so)."""
    steps = []
    for section in ("pre_tasks", "roles", "post_tasks"):
        for item in play.get(section, []):
            if "role" in item:
                steps.append(item["role"])
                continue
            role = item.get("ansible.builtin.import_role") or item.get(
                "ansible.builtin.include_role"
            )
            if role is not None:
                steps.append(role.get("tasks_from", role["name"]))
            elif "ansible.builtin.meta" in item:
                steps.append(item["ansible.builtin.meta"])
    return steps


@pytest.mark.parametrize("spec_file", [KUBERNETES, SLURM_OPENSM], ids=["kubernetes", "slurm"])
def test_every_rolling_play_drains_first_and_resumes_last(tree: Path, spec_file: Path) -> None:
    rolling = [p for p in _plays(tree, spec_file) if "serial" in p]
    assert rolling
    for play in rolling:
        assert play["pre_tasks"][0]["ansible.builtin.import_role"] == DRAIN
        assert play["post_tasks"][-1]["ansible.builtin.import_role"] == RESUME
        steps = _role_steps(play)
        assert steps[0] == "drain" and steps[-2:] == ["flush_handlers", "resume"], steps
        # rdma loads nvidia-peermem, which the driver brings
        order = [steps.index(r) for r in ("os_tuning", "nvidia_driver", "rdma")]
        assert order == sorted(order), steps
        # Fabric Manager and MIG run after the roles (their reboot), before the resume
        for late in ("fabric_manager", "mig"):
            if late in steps:
                assert steps.index("rdma") < steps.index(late) < steps.index("resume")


@pytest.mark.parametrize("spec_file", [KUBERNETES, SLURM_OPENSM], ids=["kubernetes", "slurm"])
def test_the_drain_role_follows_the_specs_scheduler(tree: Path, spec_file: Path) -> None:
    spec = load_spec(str(spec_file)).spec
    values = yaml.safe_load((tree / f"inventories/{spec.name}/group_vars/all.yml").read_text())
    assert values["railplan_scheduler"] == spec.scheduler.kind
    defaults = yaml.safe_load((ROOT / "playbooks/roles/drain/defaults/main.yml").read_text())
    assert defaults["drain_scheduler"] == "{{ railplan_scheduler | default('none') }}"


@pytest.mark.parametrize("spec_file", [SLURM_OPENSM, SHARP], ids=["opensm", "nvidia-opensm"])
def test_subnet_managers_roll_alone_one_host_at_a_time_before_the_sus(
    tree: Path, spec_file: Path
) -> None:
    plays = _plays(tree, spec_file)
    rolling = [p for p in plays if "serial" in p]
    sm_play = rolling[0]
    assert sm_play["hosts"] == "subnet_managers" and sm_play["serial"] == 1
    assert plays.index(sm_play) == 0  # before any SU play uses a link
    # the aggregation manager runs there when SHARP is on (upstream OpenSM cannot: RP082)
    sharp = load_spec(str(spec_file)).spec.fabrics.compute.sharp  # type: ignore[union-attr]
    assert ("sharp" in _role_steps(sm_play)) == sharp
    managers = _hosts(tree, spec_file, "subnet_managers")
    assert len(managers) == 2
    everyone: set[str] = set()
    for play in rolling[1:]:
        hosts = _hosts(tree, spec_file, play["hosts"])
        assert not set(hosts) & set(managers), play["hosts"]
        everyone |= set(hosts)
    assert everyone | set(managers) == set(_hosts(tree, spec_file, "gpu_servers"))


def test_without_opensm_the_node_groups_roll_every_host(tree: Path) -> None:
    plays = _plays(tree, KUBERNETES)
    assert all(p["hosts"] != "subnet_managers" for p in plays)
    rolling = [p["hosts"] for p in plays if "serial" in p]
    covered = {h for pattern in rolling for h in _hosts(tree, KUBERNETES, pattern)}
    assert covered == set(_hosts(tree, KUBERNETES, "gpu_servers"))
