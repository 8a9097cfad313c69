"""Run the slurm role for real with ansible-playbook against this host (connection local).

Two runs, both writing only under ``tmp_path``: in sandbox mode (``railplan_sandbox=true``:
no packages, no munge key, no services) the role installs the rendered files into a temporary
``slurm_conf_dir``; slurm.conf's SlurmctldHost becomes ``slurm_controller_host`` and a second
run changes nothing. Out of sandbox mode without ``slurm_munge_key`` the role must stop before
it installs anything, with a message that says to put the key in Ansible Vault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.catalog import Catalog
from infra.render.slurm_conf import slurm_files
from infra.spec import load_spec_text
from infra.topology import expand

ROOT = Path(__file__).resolve().parent.parent
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
SPEC = ROOT / "tests" / "golden" / "inputs" / "h100-slurm-opensm.yaml"


def _fixture(tmp_path: Path, catalog: Catalog, **extra: object) -> tuple[Path, Path]:
    spec = load_spec_text(SPEC.read_text()).spec
    inventory_dir = tmp_path / "inventory"
    files = inventory_dir / "files" / "slurm"
    files.mkdir(parents=True)
    for name, text in slurm_files(expand(spec, catalog), spec, catalog).items():
        (files / name).write_text(text)
    hosts = {
        "all": {
            "hosts": {"gpu01": {"ansible_connection": "local"}},
            "children": {"slurm_controllers": {"hosts": {"gpu01": {}}}},
            "vars": {
                "ansible_python_interpreter": sys.executable,
                "slurm_conf_dir": str(tmp_path / "etc"),
                **extra,
            },
        }
    }
    (inventory_dir / "hosts.yml").write_text(json.dumps(hosts))
    play = tmp_path / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: true\n  roles:\n    - role: slurm\n")
    return inventory_dir / "hosts.yml", play


def _run(inventory: Path, play: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles"),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCALHOST_WARNING": "false",
    }
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(play)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _changed(result: subprocess.CompletedProcess[str]) -> int:
    stats = json.loads(result.stdout)["stats"]
    return int(sum(host["changed"] for host in stats.values()))


@pytest.mark.slow
def test_sandbox_installs_the_files_with_the_controller_and_is_idempotent(
    tmp_path: Path, catalog: Catalog
) -> None:
    inventory, play = _fixture(
        tmp_path, catalog, railplan_sandbox=True, slurm_controller_host="mgmt01"
    )
    first = _run(inventory, play)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    etc = tmp_path / "etc"
    conf = (etc / "slurm.conf").read_text()
    assert "SlurmctldHost=mgmt01\n" in conf and "SlurmctldHost=gpu01" not in conf
    rendered = (tmp_path / "inventory/files/slurm/slurm.conf").read_text()
    assert conf == rendered.replace("SlurmctldHost=gpu01", "SlurmctldHost=mgmt01")
    for name in ("cgroup.conf", "gres.conf", "nodes.conf", "topology.conf"):
        assert (etc / name).read_text() == (tmp_path / "inventory/files/slurm" / name).read_text()
    script = etc / "railplan-gpu-health.sh"
    assert script.stat().st_mode & 0o777 == 0o755
    second = _run(inventory, play)
    assert second.returncode == 0
    assert _changed(second) == 0


def test_a_missing_munge_key_stops_the_role_with_a_vault_hint(
    tmp_path: Path, catalog: Catalog
) -> None:
    inventory, play = _fixture(tmp_path, catalog, railplan_sandbox=False)
    result = _run(inventory, play)
    assert result.returncode != 0
    assert "slurm_munge_key is undefined" in result.stdout
    assert "ansible-vault encrypt_string" in result.stdout
    assert not (tmp_path / "etc").exists()  # nothing installed before the check
