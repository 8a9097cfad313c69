"""Run the drain role for real with ansible-playbook against stand-in schedulers.

``kubectl`` (tests/fake_kubectl.py), ``scontrol`` and ``sinfo`` (tests/fake_slurm.py) are
stand-ins: no Kubernetes or Slurm cluster exists here, so small scripts on PATH keep the nodes
in a JSON file, log every call and report the states the real tools would. Every inventory
host uses ``ansible_connection=local`` (the role only runs those stand-ins); forks=1, since
the stand-ins share one state file. The playbook is the rendered one's shape: drain in
pre_tasks, a disruptive change (a reboot for Slurm), resume in post_tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "playbooks" / "roles"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
REASON = "railplan rolling update"

PLAYBOOK = """\
- name: Roll a disruptive change through the nodes.
  hosts: nodes
  gather_facts: false
  pre_tasks:
    - name: Drain.
      ansible.builtin.import_role: {name: drain, tasks_from: drain}
  tasks:
    - name: The disruptive change (Slurm sees the node reboot).
      ansible.builtin.command: "scontrol --test-reboot {{ inventory_hostname }}"
      changed_when: true
      when: drain_scheduler == 'slurm' and not (drain_green_field | bool)
  post_tasks:
    - name: Resume.
      ansible.builtin.import_role: {name: drain, tasks_from: resume}
"""


def _stand_in(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    fake = ROOT / "tests" / script
    path.write_text(f'#!/bin/sh\nFAKE_SLURM_PROG={name} exec "{sys.executable}" "{fake}" "$@"\n')
    path.chmod(0o755)


def _run(
    tmp_path: Path,
    scheduler: str,
    state: dict[str, Any],
    *more: str,
    playbook: str = PLAYBOOK,
    **extra: Any,
) -> dict[str, Any]:
    """Run the playbook on the nodes of ``state`` and hosts ``more``; the json report."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _stand_in(bin_dir, "kubectl", "fake_kubectl.py")
    _stand_in(bin_dir, "scontrol", "fake_slurm.py")
    _stand_in(bin_dir, "sinfo", "fake_slurm.py")
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    group_vars = {"railplan_scheduler": scheduler, "drain_poll_interval": 1, **extra}
    inventory = {
        "nodes": {"hosts": {n: host for n in [*state["nodes"], *more]}, "vars": group_vars}
    }
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "site.yml").write_text(playbook)
    (tmp_path / "state.json").write_text(json.dumps({"calls": [], **state}))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_KUBE_STATE": str(tmp_path / "state.json"),
        "FAKE_SLURM_STATE": str(tmp_path / "state.json"),
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_FORKS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "site.yml")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdout.startswith("{"), proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    report["state"] = json.loads((tmp_path / "state.json").read_text())
    return report


def _failed(report: dict[str, Any]) -> dict[str, str]:
    """Failed host -> the message of the task that failed it."""
    stats = report["stats"]
    messages: dict[str, str] = {}
    for task in report["plays"][0]["tasks"]:
        for host, result in task["hosts"].items():
            if result.get("failed") and not result.get("ignored"):
                messages[host] = result.get("msg", "")
    return {h: messages.get(h, "") for h, s in stats.items() if s["failures"]}


def _slurm_node(jobs: int = 0, drain: bool = False, reason: str = "none") -> dict[str, Any]:
    return {"jobs": jobs, "drain": drain, "down": False, "reason": reason, "down_reads": 0}


def _slurm_calls(report: dict[str, Any], node: str) -> list[list[str]]:
    return [c for c in report["state"]["calls"] if c[0] == "scontrol" and f"nodename={node}" in c]


def test_slurm_drains_waits_for_jobs_and_resumes_only_what_it_drained(tmp_path: Path) -> None:
    nodes = {
        "busy": _slurm_node(jobs=2),
        "admin": _slurm_node(drain=True, reason="bad DIMM"),
        "leftover": _slurm_node(drain=True, reason=REASON),  # an earlier run stopped halfway
    }
    report = _run(tmp_path, "slurm", {"nodes": nodes}, "not-in-slurm")
    assert _failed(report) == {}
    state = report["state"]["nodes"]
    busy = _slurm_calls(report, "busy")
    assert busy == [
        ["scontrol", "update", "nodename=busy", "state=drain", f"reason={REASON}"],
        ["scontrol", "update", "nodename=busy", "state=resume"],
    ]
    assert state["busy"] == _slurm_node()  # the jobs finished before the reboot; back to idle
    # the node was down ('*') after the reboot: resume waited for slurmd to answer
    sinfo_reads = [c for c in report["state"]["calls"] if c[0] == "sinfo" and "busy" in c]
    assert len(sinfo_reads) >= 3 + 2
    assert _slurm_calls(report, "admin") == []
    assert state["admin"]["drain"] and state["admin"]["reason"] == "bad DIMM"
    assert _slurm_calls(report, "leftover") == [
        ["scontrol", "update", "nodename=leftover", "state=resume"]
    ]
    assert _slurm_calls(report, "not-in-slurm") == []  # a node Slurm doesn't know runs no job


@pytest.mark.slow
def test_slurm_drain_that_times_out_fails_the_host_and_gives_the_node_back(
    tmp_path: Path,
) -> None:
    state = {"nodes": {"stuck": _slurm_node(jobs=-1), "idle": _slurm_node()}}
    report = _run(tmp_path, "slurm", state, drain_timeout=2)
    failed = _failed(report)
    assert list(failed) == ["stuck"]
    assert "did not drain within 2 s" in failed["stuck"] and "resumed again" in failed["stuck"]
    assert report["state"]["nodes"]["stuck"]["drain"] is False
    reboots = [c for c in report["state"]["calls"] if "--test-reboot" in c]
    assert reboots == [["scontrol", "--test-reboot", "idle"]]  # never the stuck node


def _kube_node(cordoned: bool = False, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"labels": {}, "annotations": annotations or {}, "unschedulable": cordoned}


def _kube_calls(report: dict[str, Any], node: str) -> list[list[str]]:
    calls = report["state"]["calls"]
    return [c for c in calls if node in c or f"node/{node}" in c]


@pytest.mark.slow
def test_kubernetes_drains_and_uncordons_only_what_it_cordoned(tmp_path: Path) -> None:
    state = {
        "nodes": {"idle": _kube_node(), "admin": _kube_node(cordoned=True)},
        "pods": [
            {"namespace": "ml", "name": "train-0", "node": "idle", "phase": "Running"},
            {"namespace": "ml", "name": "train-1", "node": "admin", "phase": "Running"},
        ],
    }
    report = _run(tmp_path, "kubernetes", state, "not-in-cluster")
    assert _failed(report) == {}
    assert [c[0] for c in _kube_calls(report, "not-in-cluster")] == ["get"]  # NotFound: no pods
    verbs = [c[0] for c in _kube_calls(report, "idle")]
    assert verbs == ["get", "annotate", "drain", "wait", "uncordon", "annotate"]
    drain = next(c for c in _kube_calls(report, "idle") if c[0] == "drain")
    assert drain[2:4] == ["--ignore-daemonsets", "--delete-emptydir-data"]
    after = report["state"]
    assert after["nodes"]["idle"] == _kube_node()  # uncordoned, mark removed
    assert after["pods"] == []  # both pods evicted, also from the admin's node
    assert after["nodes"]["admin"]["unschedulable"] is True
    assert [c[0] for c in _kube_calls(report, "admin")] == ["get", "drain"]


@pytest.mark.slow
def test_kubernetes_drain_that_times_out_fails_the_host_and_uncordons(tmp_path: Path) -> None:
    state = {
        "nodes": {"guarded": _kube_node()},
        "pods": [{"namespace": "ml", "name": "db", "node": "guarded", "pdb_refusals": -1}],
    }
    report = _run(tmp_path, "kubernetes", state, drain_timeout=5)
    failed = _failed(report)
    assert list(failed) == ["guarded"]
    assert "global timeout reached: 5s" in failed["guarded"]
    assert report["state"]["nodes"]["guarded"] == _kube_node()


def test_a_green_field_build_needs_no_scheduler(tmp_path: Path) -> None:
    """No kubectl answers (here: it refuses every call): green field runs, otherwise fails."""
    state = {"nodes": {"new": _kube_node()}, "pods": []}
    report = _run(tmp_path, "kubernetes", state, drain_kubectl="/nonexistent/kubectl")
    assert "railplan_green_field=true" in _failed(report)["new"]
    green = _run(
        tmp_path,
        "kubernetes",
        state,
        drain_kubectl="/nonexistent/kubectl",
        railplan_green_field=True,
    )
    assert _failed(green) == {} and green["state"]["calls"] == []


# The rendered playbook's shape around power saving: each play powers its hosts on (and holds
# them off power saving) before facts; the last play gives them back.
POWER_PLAYBOOK = """\
- name: Configure the nodes.
  hosts: nodes
  gather_facts: false
  pre_tasks:
    - name: Power on and hold.
      ansible.builtin.import_role: {name: drain, tasks_from: power_on}
  tasks:
    - name: What slurmctld excludes while the run works on the nodes.
      ansible.builtin.command: cp state.json during.json
      run_once: true
      changed_when: false
- name: Give the hosts back.
  hosts: nodes
  gather_facts: false
  tasks:
    - name: Release.
      ansible.builtin.import_role: {name: drain, tasks_from: power_release}
"""


def _power_run(tmp_path: Path, version: str | None, **more: Any) -> dict[str, Any]:
    """Nodes a, b, c (slurm.conf keeps c on) and a host Slurm does not know."""
    (tmp_path / "slurm.conf").write_text("SuspendTime=1800\nSuspendExcNodes=c\n")
    nodes = {n: _slurm_node() for n in ("a", "b", "c")}
    state: dict[str, Any] = {"nodes": nodes, "suspend_exc_nodes": ["c"], **more}
    state |= {"version": version} if version else {"no_slurm": True}
    return _run(
        tmp_path,
        "slurm",
        state,
        "not-in-slurm",
        playbook=POWER_PLAYBOOK,
        drain_slurm_conf=str(tmp_path / "slurm.conf"),
    )


# `make test` runs the hold and its release on Slurm 23.02+, where the tasks change something
# (about 17 s of CPU); the runs where they hold nothing (Slurm 21.08, no Slurm, slurmctld down:
# 13-17 s each) are `make test-slow`'s.


def _exc_updates(report: dict[str, Any]) -> list[str]:
    return [c[2] for c in report["state"]["calls"] if c[:2] == ["scontrol", "update"] and
            c[2].startswith("SuspendExcNodes")]  # fmt: skip


def test_a_run_holds_its_hosts_off_power_saving_and_gives_back_only_what_it_held(
    tmp_path: Path,
) -> None:
    """Slurm 23.02+: the run's Slurm nodes are excluded while it runs (a host Slurm does not
    know is left out: one unknown name makes slurmctld ignore the whole list); at the end
    only what the run added is removed, so slurm.conf's own exclusion (c) stays."""
    report = _power_run(tmp_path, "slurm 23.11.4")
    assert report["stats"]["a"]["failures"] == 0 and not _failed(report), report["stats"]
    assert _exc_updates(report) == ["SuspendExcNodes+=a,b,c", "SuspendExcNodes-=a,b"]
    during = json.loads((tmp_path / "during.json").read_text())
    assert during["suspend_exc_nodes"] == ["a", "b", "c"]
    assert report["state"]["suspend_exc_nodes"] == ["c"]
    # a hold is not a change: a re-run that changed nothing still says changed=0
    assert all(s["changed"] == 0 for s in report["stats"].values()), report["stats"]


@pytest.mark.slow
def test_slurm_before_23_02_holds_nothing_and_says_so(tmp_path: Path) -> None:
    """Slurm 21.08 has no run-time SuspendExcNodes: no update is tried, the run goes on and
    says a long run may lose idle hosts."""
    report = _power_run(tmp_path, "slurm-wlm 21.08.5")
    assert not _failed(report), report["stats"]
    assert _exc_updates(report) == []
    said = [r.get("msg", "") for t in report["plays"][0]["tasks"] for r in t["hosts"].values()]
    assert any("cannot exclude nodes from power saving" in m and "21.08" in m for m in said), said


@pytest.mark.slow
def test_a_green_field_has_no_slurm_to_hold_anything(tmp_path: Path) -> None:
    report = _power_run(tmp_path, None)
    assert not _failed(report), report["stats"]
    assert _exc_updates(report) == []


@pytest.mark.slow
def test_a_controller_that_does_not_answer_holds_nothing_and_fails_nothing(tmp_path: Path) -> None:
    """Slurm installed, slurmctld down (a first run that stopped before starting it): the run
    must go on to start it, so the hold and the release fail no host."""
    report = _power_run(tmp_path, "slurm 23.11.4", no_controller=True)
    assert not _failed(report), report["stats"]
    assert _exc_updates(report) == []


def test_a_node_still_powering_down_is_powered_on_once_it_is_off(tmp_path: Path) -> None:
    """The SU twin's roll-out reached a node 10 s after Slurm began powering it down: Slurm
    21.08 took `state=power_up` (rc 0) and ignored it, and the play waited out its whole
    timeout for a node nobody powered on. The role now waits for the power-down to finish
    (``%``), then asks; a node already off (``~``) is asked at once."""
    nodes = {
        "a": _slurm_node() | {"power": "powering_down", "power_reads": 2},
        "b": _slurm_node() | {"power": "off"},
        "c": _slurm_node(),
    }
    state = {"nodes": nodes, "version": "slurm-wlm 21.08.5"}
    report = _run(tmp_path, "slurm", state, playbook=POWER_PLAYBOOK, drain_power_on_timeout=8)
    assert not _failed(report), _failed(report)
    assert {n: s.get("power", "on") for n, s in report["state"]["nodes"].items()} == dict.fromkeys(
        "abc", "on"
    )
    asked = [c[2] for c in report["state"]["calls"] if c[-1:] == ["state=power_up"]]
    assert sorted(asked) == ["nodename=a", "nodename=b"], asked


def test_a_node_off_with_a_power_down_pending_is_powered_on_again_when_slurm_turns_it_off(
    tmp_path: Path,
) -> None:
    """The SU twin's roll-out (Ubuntu 24.04, Slurm 23.11) met a node an operator had asked
    to power down while it was already off: sinfo showed only ``idle~``, the role powered it
    on, and Slurm powered it off again once it was idle (the request is a flag only a
    power-down clears, and SuspendExcNodes does not hold it back). The role waited out its
    whole timeout for a node that was off. Each poll that finds the node off asks again."""
    nodes = {"a": _slurm_node() | {"power": "off", "pending_power_down": True}, "b": _slurm_node()}
    state = {"nodes": nodes, "version": "slurm 23.11.4"}
    report = _run(tmp_path, "slurm", state, playbook=POWER_PLAYBOOK, drain_power_on_timeout=8)
    assert not _failed(report), _failed(report)
    a = report["state"]["nodes"]["a"]
    assert (a["power"], a["pending_power_down"]) == ("on", False), a
    asked = [c[2] for c in report["state"]["calls"] if c[-1:] == ["state=power_up"]]
    assert asked == ["nodename=a", "nodename=a"], asked
