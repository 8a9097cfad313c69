"""The cluster twin's playbook runner says where a killed run stopped.

Cluster twin run 30's green-field install ran over its 3,600 s limit on a loaded machine and
left an empty log: the JSON stdout callback prints only at the end. `run_playbook` now enables
the twin's progress callback (tests/cluster_twin/callbacks) and, on a timeout, writes and
raises the running task and each host's last result. Real `ansible-playbook` on two local
hosts (connection local; no SSH, no twin hosts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cluster_twin.ansible_run import run_playbook, where_it_stopped
from tests.cluster_twin.proc import TwinError, tool

pytestmark = pytest.mark.skipif(tool("ansible-playbook") is None, reason="no ansible-playbook")

PLAY = [
    {
        "name": "A play that outlives its limit.",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {"name": "Quick one", "ansible.builtin.debug": {"msg": "fast"}},
            {"name": "Wait for the rack", "ansible.builtin.command": "sleep 120"},
        ],
    }
]


def _tree(tmp_path: Path) -> tuple[Path, Path, Path, tuple[Path, Path]]:
    tree = tmp_path / "tree"
    (tree / "playbooks").mkdir(parents=True)
    (tree / "ansible.cfg").write_text("[defaults]\ninterpreter_python = auto_silent\n")
    hosts = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "lab.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"n1": hosts, "n2": hosts}}}))
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(json.dumps({"all": {"hosts": {}}}))
    (tree / "playbooks" / "lab.yml.yml").write_text(json.dumps(PLAY))
    vault = (tmp_path / "vault.yml", tmp_path / "vault-password")
    vault[0].write_text("{}\n")
    vault[1].write_text("unused\n")
    return tree, inventory, overrides, vault


def test_a_run_killed_at_its_limit_says_which_task_each_host_was_in(tmp_path: Path) -> None:
    tree, inventory, overrides, vault = _tree(tmp_path)
    log = tmp_path / "logs" / "install.log"
    log.parent.mkdir()
    with pytest.raises(TwinError) as raised:
        run_playbook(tree, inventory, overrides, vault, log, [], timeout=20)
    message = str(raised.value)
    assert "ran over its 20 s limit" in message, message
    assert "running 'Wait for the rack'" in message, message
    assert "n1 ok 'Quick one'" in message and "n2 ok 'Quick one'" in message, message
    assert "running 'Wait for the rack'" in log.read_text()


def test_where_it_stopped_reads_an_empty_or_missing_progress_file(tmp_path: Path) -> None:
    assert where_it_stopped(tmp_path / "none") == "no task had started"
    progress = tmp_path / "p"
    progress.write_text("12:00:00\tplay\tInstall.\n12:00:01\ttask\tGather\n")
    assert where_it_stopped(progress) == (
        "running 'Gather' since 12:00:01; last result per host: none"
    )
