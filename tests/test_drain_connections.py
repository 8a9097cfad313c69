"""A batch's hosts never open more connections to the scheduler's host at once than sshd takes.

Every host of a roll-out batch delegates its drain, power and resume steps to one host (the
Slurm controller, or the kubectl host), and the rendered ``ansible.cfg`` runs 100 forks. sshd's
default ``MaxStartups 10:30:100`` drops new connections while 10 are still authenticating: on
the cluster twin's SU (19 hosts in a batch) sshd logged ``drop connection #10 ... past
MaxStartups`` and three hosts were marked unreachable and left out of the install. This reads
the role's task files (a static check: the twin's SU run is the behavioural one): each
delegated task either runs at most ``drain_controller_connections`` hosts at a time, or is a
long wait that comes after a throttled task to the same host in its file, so it shares the
connection that task opened (``ControlMaster`` in ansible.cfg).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "playbooks" / "roles" / "drain" / "tasks"
DEFAULTS = ROOT / "playbooks" / "roles" / "drain" / "defaults" / "main.yml"
MAX_STARTUPS_START = 10  # sshd_config(5): the default "10:30:100" starts dropping at 10
THROTTLE = "{{ drain_controller_connections | int }}"


def _tasks(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every task of a task file, blocks and rescues opened, in file order."""
    for item in items:
        if "block" in item:
            yield from _tasks(item["block"])
            yield from _tasks(item.get("rescue", []))
            yield from _tasks(item.get("always", []))
        else:
            yield item


def _delegated(path: Path) -> list[dict[str, Any]]:
    tasks = _tasks(yaml.safe_load(path.read_text()) or [])
    return [t for t in tasks if t.get("delegate_to", "localhost") != "localhost"]


def _is_long_wait(task: dict[str, Any]) -> bool:
    argv = str(task.get("ansible.builtin.command", {}).get("argv", ""))
    return "until" in task or "'drain'" in argv


def test_the_default_stays_below_sshds_maxstartups() -> None:
    defaults = yaml.safe_load(DEFAULTS.read_text())
    assert 1 <= defaults["drain_controller_connections"] < MAX_STARTUPS_START


def test_every_delegated_step_is_throttled_or_a_wait_on_an_open_connection() -> None:
    files = sorted(TASKS.glob("*.yml"))
    checked = 0
    for path in files:
        opened: set[str] = set()
        for task in _delegated(path):
            target = task["delegate_to"]
            checked += 1
            if task.get("throttle") == THROTTLE:
                opened.add(target)
                continue
            if task.get("run_once"):  # one host of the batch asks: one connection
                opened.add(target)
                continue
            assert _is_long_wait(task), f"{path.name}: {task['name']!r} is not throttled"
            assert target in opened, f"{path.name}: {task['name']!r} waits on no open connection"
    assert checked >= 15  # the role's delegated steps: a refactor that hides them fails here
