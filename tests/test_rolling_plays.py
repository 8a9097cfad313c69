"""The rolling plays of the rendered entry playbook drain, roll in the right order, resume.

The playbook is parsed as YAML (what Ansible reads), and the host patterns are resolved by
Ansible's own inventory manager against the rendered inventory: every pattern of a spec in
one process (`get_hosts`, what ``ansible --list-hosts`` and a play call; one real
``ansible --list-hosts`` run checks the two agree). One Kubernetes example
(no OpenSM, no control hosts), one Slurm spec with ``subnet_manager: opensm`` (the Slurm
controller and both subnet managers roll last, one at a time) and one with NVIDIA's OpenSM
and SHARP (the aggregation manager rolls with the subnet managers).
"""

from __future__ import annotations

import configparser
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand

from .cli_run import run_cli

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
KUBERNETES = ROOT / "examples/a100-lab-mig.yaml"
SLURM_OPENSM = ROOT / "tests/golden/inputs/h100-slurm-opensm.yaml"
SHARP = ROOT / "tests/golden/inputs/a100-nvidia-opensm-sharp.yaml"
POWER_ON = {"name": "drain", "tasks_from": "power_on"}
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
    resolved = _resolved_hosts(tree, spec_file)
    if pattern not in resolved:  # a pattern no play names: its own `ansible --list-hosts`
        return list(_listed_hosts(tree, spec_file, pattern))
    return list(resolved[pattern])


_GET_HOSTS = """
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
inventory = InventoryManager(loader=DataLoader(), sources=[sys.argv[1]])
print(json.dumps({p: [h.name for h in inventory.get_hosts(p)] for p in sys.argv[2:]}))
"""
GROUPS = ("control_hosts", "subnet_managers", "slurm_controllers", "gpu_servers")


@functools.cache
def _resolved_hosts(tree: Path, spec_file: Path) -> dict[str, tuple[str, ...]]:
    """Every play's pattern and the groups above, resolved in one Ansible process (each
    ``ansible`` run is about 1.5 s of CPU): the inventory manager's `get_hosts`, which
    ``ansible --list-hosts`` and a play both call, from the tree's root (its ansible.cfg)."""
    name = load_spec(str(spec_file)).spec.name
    patterns = sorted({*GROUPS, *(str(play["hosts"]) for play in _plays(tree, spec_file))})
    out = subprocess.run(
        [sys.executable, "-c", _GET_HOSTS, f"inventories/{name}", *patterns],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return {p: tuple(hosts) for p, hosts in json.loads(out.stdout).items()}


@functools.cache
def _listed_hosts(tree: Path, spec_file: Path, pattern: str) -> tuple[str, ...]:
    """``ansible --list-hosts``, run once per pattern: the module's tree is only read."""
    name = load_spec(str(spec_file)).spec.name
    out = subprocess.run(
        [str(BIN / "ansible"), "-i", f"inventories/{name}", pattern, "--list-hosts"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return tuple(line.strip() for line in out.stdout.splitlines()[1:] if line.strip())


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
def test_every_rolling_play_powers_on_drains_first_and_resumes_last(
    tree: Path, spec_file: Path
) -> None:
    rolling = [p for p in _plays(tree, spec_file) if "serial" in p]
    assert rolling
    for play in rolling:
        # facts only after a host that power saving switched off is back
        assert play["gather_facts"] is False
        assert play["pre_tasks"][0]["ansible.builtin.import_role"] == POWER_ON
        assert "ansible.builtin.setup" in play["pre_tasks"][1]
        assert play["pre_tasks"][2]["ansible.builtin.import_role"] == DRAIN
        assert play["post_tasks"][-1]["ansible.builtin.import_role"] == RESUME
        steps = _role_steps(play)
        assert steps[:2] == ["power_on", "drain"], steps
        assert steps[-2:] == ["flush_handlers", "resume"], steps
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


def test_the_one_process_resolution_is_ansible_list_hosts(tree: Path) -> None:
    """The ordered group the controller comes last in, as the ``ansible`` CLI lists it."""
    resolved = _resolved_hosts(tree, SLURM_OPENSM)["control_hosts"]
    assert len(resolved) > 1
    assert resolved == _listed_hosts(tree, SLURM_OPENSM, "control_hosts")


@pytest.mark.parametrize("spec_file", [SLURM_OPENSM, SHARP], ids=["opensm", "nvidia-opensm"])
def test_control_hosts_roll_last_one_at_a_time_the_controller_last(
    tree: Path, spec_file: Path
) -> None:
    plays = _plays(tree, spec_file)
    rolling = [p for p in plays if "serial" in p]
    control_play = rolling[-1]
    assert control_play["hosts"] == "control_hosts"
    assert control_play["serial"] == "{{ railplan_rolling_batch | default(1) }}"
    # the aggregation manager runs there when SHARP is on (upstream OpenSM cannot: RP082)
    sharp = load_spec(str(spec_file)).spec.fabrics.compute.sharp  # type: ignore[union-attr]
    assert ("sharp" in _role_steps(control_play)) == sharp
    control = _hosts(tree, spec_file, "control_hosts")
    managers = _hosts(tree, spec_file, "subnet_managers")
    assert len(managers) == 2 and set(managers) <= set(control)
    kind = load_spec(str(spec_file)).spec.scheduler.kind
    if kind == "slurm":
        controller = _hosts(tree, spec_file, "slurm_controllers")
        assert control[-1:] == controller  # slurmctld drains every other host first
    everyone: set[str] = set()
    for play in rolling[:-1]:
        hosts = _hosts(tree, spec_file, play["hosts"])
        assert not set(hosts) & set(control), play["hosts"]
        everyone |= set(hosts)
    assert everyone | set(control) == set(_hosts(tree, spec_file, "gpu_servers"))


@pytest.mark.parametrize(
    "spec_file", [KUBERNETES, SLURM_OPENSM, SHARP], ids=["k8s", "opensm", "sharp"]
)
def test_each_batch_of_a_node_group_play_is_one_su(tree: Path, spec_file: Path) -> None:
    """``serial`` lists each SU's hosts without the control hosts, so no batch straddles two
    SUs (it did with opensm: a fixed SU size over a list missing its subnet managers)."""
    spec = load_spec(str(spec_file)).spec
    plan = expand(spec, load_catalog())
    su_of = {s.name: s.su for s in plan.servers}
    for play in [p for p in _plays(tree, spec_file) if "serial" in p]:
        if play["hosts"] == "control_hosts":
            continue
        hosts = _hosts(tree, spec_file, play["hosts"])
        default = yaml.safe_load(play["serial"].split("default(")[1].rsplit(")", 1)[0])
        sizes = default if isinstance(default, list) else [default]
        batches, start = [], 0
        while start < len(hosts):
            size = sizes[min(len(batches), len(sizes) - 1)]
            batches.append(hosts[start : start + size])
            start += size
        assert all(len({su_of[h] for h in batch}) == 1 for batch in batches), batches
        assert len(batches) == len({su_of[h] for h in hosts})


def test_the_acceptance_play_runs_in_step(tree: Path) -> None:
    """The bandwidth tests pair hosts: the tree's default free strategy let one host's client
    reach a peer still busy in dcgmi diag, which then skipped its own measurement."""
    for spec_file in (KUBERNETES, SLURM_OPENSM):
        acceptance = [p for p in _plays(tree, spec_file) if "acceptance" in p.get("tags", [])]
        assert [p["strategy"] for p in acceptance] == ["linear"]


def test_without_opensm_the_node_groups_roll_every_host(tree: Path) -> None:
    plays = _plays(tree, KUBERNETES)
    assert all(p["hosts"] not in ("subnet_managers", "control_hosts") for p in plays)
    rolling = [p["hosts"] for p in plays if "serial" in p]
    covered = {h for pattern in rolling for h in _hosts(tree, KUBERNETES, pattern)}
    assert covered == set(_hosts(tree, KUBERNETES, "gpu_servers"))


def test_every_play_is_linear_so_an_unreachable_host_cannot_crash_the_run(tree: Path) -> None:
    """ansible-core 2.19's free strategy raised IndexError when hosts Slurm powered off became
    unreachable mid-run (ansible#87027, cluster twin run 26): the tree defaults to linear."""
    config = configparser.ConfigParser()
    config.read(tree / "ansible.cfg")
    assert config["defaults"]["strategy"] == "linear"
    for spec_file in (KUBERNETES, SLURM_OPENSM):
        assert all(p.get("strategy", "linear") == "linear" for p in _plays(tree, spec_file))


def test_a_slurm_run_gives_the_hosts_it_held_back_to_power_saving_last(tree: Path) -> None:
    """Each play holds its hosts off power saving (drain, power_on); the last play, tagged
    always, gives them back. Kubernetes has no power saving and no such play."""
    last = _plays(tree, SLURM_OPENSM)[-1]
    assert last["tags"] == ["always"] and last["hosts"] == "gpu_servers"
    assert last["tasks"][0]["ansible.builtin.import_role"]["tasks_from"] == "power_release"
    assert not any("power_release" in str(p) for p in _plays(tree, KUBERNETES))
