"""mig-change.sh under hostile input and kills: numbers, globbing, cordon records.

Like tests/test_mig_schedule.py, the script runs for real under every POSIX shell here (sh,
bash, dash) against tests/fake_kubectl.py, a stand-in `kubectl` keeping nodes and pods in a
JSON file: no cluster exists here. Each test is an attack that broke the script before: a
number `$(( ))` cannot read failing only after the first cordon, a `*` in SUS expanding to the
working directory's file names, and a run killed mid-drain whose cordon the next run took for
an administrator's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from infra.k8s.mig_schedule import FAILED_LABEL, SCRIPT_PATH
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.mig import MAX_DRAIN_S
from tests.test_mig_schedule import (
    CONFIG_LABEL,
    CORDONED,
    SHELLS,
    SHELLS_FIRST,
    SPEC,
    STATE_LABEL,
    node,
    pod,
    script_env,
)


def _setup(tmp_path: Path, nodes: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, str]:
    """The script's environment over the fake kubectl (tests/test_mig_schedule.script_env)."""
    return script_env(tmp_path, nodes, pods)


def _state(env: dict[str, str]) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(Path(env["FAKE_KUBE_STATE"]).read_text())
    return state


def _run(shell: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shell, str(SCRIPT_PATH)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


TOO_BIG = "1" + "0" * 20  # 10^20: past a 64-bit $(( ))


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DRAIN_TIMEOUT", "08"),  # octal to $(( )): dash "Illegal number", bash "value too great"
        ("DRAIN_TIMEOUT", "010"),  # would silently be 8 seconds in bash
        ("DRAIN_TIMEOUT", TOO_BIG),
        ("DRAIN_TIMEOUT", "0"),
        ("DRAIN_TIMEOUT", "86401"),
        ("MIG_TIMEOUT", "09"),
        ("MIG_TIMEOUT", TOO_BIG),
        ("POLL_SECONDS", "007"),
    ],
)
def test_numbers_are_checked_before_any_cordon(
    tmp_path: Path, shell: str, name: str, value: str
) -> None:
    env = _setup(tmp_path, {"n": node("infer_a", "su1", config="all-disabled")}, [])
    result = _run(shell, env | {name: value}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert name in result.stderr
    state = _state(env)
    assert state["calls"] == []  # not even a read: refused before any kubectl call
    assert state["nodes"]["n"]["unschedulable"] is False


@pytest.mark.parametrize("shell", SHELLS)
def test_bounds_themselves_are_accepted(tmp_path: Path, shell: str) -> None:
    env = _setup(tmp_path, {"n": node("infer_a", "su1", config="day")}, [])
    result = _run(shell, env | {"DRAIN_TIMEOUT": "86400", "MIG_TIMEOUT": "1"}, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_star_in_sus_is_not_a_glob(tmp_path: Path, shell: str) -> None:
    # The job's working directory holds a file named like an SU: `*` must not become it.
    work = tmp_path / "work"
    work.mkdir()
    (work / "su1").write_text("")
    env = _setup(tmp_path, {"n": node("infer_a", "su1", config="all-disabled")}, [])
    result = _run(shell, env | {"SUS": "*"}, work)
    assert result.returncode == 2, result.stderr
    assert "'*'" in result.stderr
    state = _state(env)
    assert state["calls"] == []
    assert state["nodes"]["n"]["labels"][CONFIG_LABEL] == "all-disabled"


def _wait_for(env: dict[str, str], done: Any, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(env)
        if done(state):
            return state
        time.sleep(0.05)
    raise AssertionError(f"the script never got there: {_state(env)['calls']}")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_rerun_lifts_the_cordon_of_a_killed_run(tmp_path: Path, shell: str) -> None:
    nodes = {
        "mine": node("infer_a", "su1", config="all-disabled"),
        "admins": node("infer_a", "su1", config="all-disabled", unschedulable=True),
    }
    # a PDB that refuses for ever keeps the first run draining until it is killed
    pods = [pod("guarded", "mine", "nvidia.com/gpu", refusals=-1)]
    env = _setup(tmp_path, nodes, pods)
    first = subprocess.Popen(
        [shell, str(SCRIPT_PATH)],
        env=env | {"DRAIN_TIMEOUT": "600"},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(env, lambda s: any(c[:1] == ["create"] for c in s["calls"]))  # draining
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the script and its kubectl, like a node loss
        first.wait()
    killed = _state(env)
    assert killed["nodes"]["mine"]["unschedulable"] is True
    assert CORDONED in killed["nodes"]["mine"]["annotations"]
    assert CORDONED not in killed["nodes"]["admins"]["annotations"]
    killed["pods"] = []  # the guarded workload ends; the next scheduled run goes ahead
    Path(env["FAKE_KUBE_STATE"]).write_text(json.dumps(killed))
    result = _run(shell, env, tmp_path)
    assert result.returncode == 0, result.stderr
    out = _state(env)["nodes"]
    assert out["mine"]["labels"][CONFIG_LABEL] == "day"
    assert out["mine"]["unschedulable"] is False  # its own cordon, lifted
    assert CORDONED not in out["mine"]["annotations"]
    assert out["admins"]["labels"][CONFIG_LABEL] == "day"
    assert out["admins"]["unschedulable"] is True  # an administrator's cordon stays


@pytest.mark.parametrize("shell", SHELLS_FIRST)
def test_killed_after_the_config_applied_is_uncordoned_next_time(
    tmp_path: Path, shell: str
) -> None:
    # Killed between the MIG manager's success and the uncordon: the node is at the config.
    mine = node("infer_a", "su1", config="day", unschedulable=True)
    mine["annotations"][CORDONED] = "20260101T000000Z"
    admins = node("infer_a", "su1", config="day", unschedulable=True)
    env = _setup(tmp_path, {"mine": mine, "admins": admins}, [])
    result = _run(shell, env, tmp_path)
    assert result.returncode == 0, result.stderr
    out = _state(env)["nodes"]
    assert out["mine"]["unschedulable"] is False
    assert CORDONED not in out["mine"]["annotations"]
    assert out["admins"]["unschedulable"] is True


@pytest.mark.parametrize("shell", SHELLS_FIRST)
def test_a_failed_node_keeps_its_failure_mark_not_the_cordon_record(
    tmp_path: Path, shell: str
) -> None:
    nodes = {"n": node("infer_a", "su1", config="all-disabled", mig_result="failed")}
    env = _setup(tmp_path, nodes, [])
    result = _run(shell, env, tmp_path)
    assert result.returncode == 1, result.stderr
    n = _state(env)["nodes"]["n"]
    assert n["unschedulable"] is True
    assert n["labels"][FAILED_LABEL] == "failed"
    assert CORDONED not in n["annotations"]
    assert STATE_LABEL in n["labels"]


def test_the_spec_bounds_drain_timeout_as_the_script_does() -> None:
    assert MAX_DRAIN_S == 86400  # the script's bound for DRAIN_TIMEOUT (checked above)
    load_spec_text(SPEC.replace("drain_timeout: 20m", "drain_timeout: 24h"))
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(SPEC.replace("drain_timeout: 20m", "drain_timeout: 25h"))
    (error,) = caught.value.errors
    assert error.path == "node_groups[1].mig_schedule.drain_timeout"
    assert error.position is not None
    assert "longer than 24h" in str(error)
