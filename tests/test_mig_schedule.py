"""The MIG schedule objects (infra.k8s.mig_schedule) and the script their CronJobs run.

The script runs for real under sh and bash, but against tests/fake_kubectl.py, a stand-in
`kubectl` on PATH that keeps nodes and pods in a JSON file: no cluster exists here. The two
kubectl output templates the script relies on are checked against the real kubectl (offline,
`kubectl label --local`) when one is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog
from infra.errors import SpecError
from infra.k8s.mig_schedule import (
    FAILED_LABEL,
    MIG_TIMEOUT_S,
    SCRIPT_PATH,
    SERVICE_ACCOUNT,
    mig_schedule,
)
from infra.spec import load_spec_text
from infra.spec.scheduling import duration_seconds
from infra.topology import expand
from infra.topology.migconfig import mig_config_name
from tests.cli_run import run_cli

TESTS = Path(__file__).resolve().parent
SPEC = """
name: mig-lab
node_groups:
  - name: train
    node: dgx-a100-640gb
    count: 4
  - name: infer_a
    node: dgx-a100-640gb
    count: 6
    mig: day
    mig_schedule:
      timezone: Europe/Berlin
      drain_timeout: 20m
      changes:
        - {at: "0 8 * * 1-5", mig: day}
        - {at: "0 20 * * *", mig: disabled}
        - at: "@weekly"
          mig: [{gpus: [0, 1], layout: day}, {gpus: [2, 3, 4, 5, 6, 7], layout: disabled}]
fabrics:
  compute: {switch: qm8790, su_size: 2}
scheduler: {kind: kubernetes, mig_strategy: mixed}
mig_layouts:
  day: {profiles: {"1g.10gb": 7}}
"""
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
REASON = "railplan.dev/mig-change-reason"
CORDONED = "railplan.dev/mig-change-cordoned"


@pytest.fixture(scope="module")
def built(catalog: Catalog) -> tuple[Any, list[dict[str, Any]]]:
    spec = load_spec_text(SPEC).spec
    return spec, mig_schedule(spec, expand(spec, catalog))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_every_object_validates_strictly(built: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "mig.yaml"
    manifest.write_text(yaml.safe_dump_all(built[1]))
    result = subprocess.run(
        [sys.executable, str(TESTS / "schemas" / "validate_crs.py"), str(manifest)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_shared_substructure(built: Any) -> None:
    # a dict used twice becomes a YAML anchor in rendered manifests
    text = yaml.safe_dump_all(built[1])
    assert "&id" not in text and "*id" not in text


def test_one_cronjob_per_change(built: Any, catalog: Catalog) -> None:
    spec, objects = built
    group = spec.node_groups[1]
    jobs = of_kind(objects, "CronJob")
    assert [j["metadata"]["name"] for j in jobs] == [
        "mig-infer-a-1",
        "mig-infer-a-2",
        "mig-infer-a-3",
    ]
    plan = expand(spec, catalog)
    sus = [su.name for su in plan.sus if su.group == "infer_a"]
    assert len(sus) == 3
    for k, job in enumerate(jobs):
        cron = job["spec"]
        assert cron["schedule"] == group.mig_schedule.changes[k].at
        assert cron["timeZone"] == "Europe/Berlin"
        assert cron["concurrencyPolicy"] == "Forbid"
        assert cron["startingDeadlineSeconds"] > 0
        job_spec = cron["jobTemplate"]["spec"]
        assert job_spec["backoffLimit"] == 0
        drain = duration_seconds("20m")
        assert job_spec["activeDeadlineSeconds"] >= len(sus) * (drain + MIG_TIMEOUT_S)
        pod = job_spec["template"]["spec"]
        assert pod["serviceAccountName"] == SERVICE_ACCOUNT
        assert pod["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["containers"]
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+", container["image"])
        ctx = container["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}
        assert set(container["resources"]) == {"requests", "limits"}
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["GROUP"] == "infer_a"
        assert env["CONFIG"] == mig_config_name(group, change=k)
        assert env["SUS"].split() == sus
        assert env["DRAIN_TIMEOUT"] == str(drain)
        # spec values reach the script through env only, never its text
        assert "infer" not in json.dumps(container["command"])
    configs = [j["metadata"]["annotations"]["railplan.dev/mig-config"] for j in jobs]
    assert configs == ["day", "all-disabled", "group-infer-a-change3"]


def test_rbac_is_exactly_what_the_script_needs(built: Any) -> None:
    objects = built[1]
    (role,) = of_kind(objects, "ClusterRole")
    assert "*" not in json.dumps(role["rules"])
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "patch"),
        ("", "pods", "list"),
        ("", "pods/eviction", "create"),
    }
    assert all(set(rule) == {"apiGroups", "resources", "verbs"} for rule in role["rules"])
    (binding,) = of_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": "railplan-system"}
    ]
    (cm,) = of_kind(objects, "ConfigMap")
    assert cm["data"]["mig-change.sh"] == SCRIPT_PATH.read_text()
    assert [o["metadata"]["name"] for o in of_kind(objects, "Namespace")] == ["railplan-system"]


def test_alerts(built: Any) -> None:
    (rule,) = of_kind(built[1], "PrometheusRule")
    assert rule["metadata"]["name"] == "railplan-mig-schedule"
    exprs = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert 'label_railplan_dev_mig_change="failed"' in exprs["RailplanMigChangeFailed"]
    assert FAILED_LABEL == "railplan.dev/mig-change"
    assert (
        'kube_job_status_failed{namespace="railplan-system"} > 0'
        in (exprs["RailplanMigScheduleJobFailed"])
    )


def test_nothing_without_a_schedule(catalog: Catalog) -> None:
    spec = load_spec_text(
        "name: plain\nnode_groups: [{name: g, node: dgx-a100-640gb, count: 2}]\n"
    ).spec
    assert mig_schedule(spec, expand(spec, catalog)) == []


# --- the script, against the stand-in kubectl ------------------------------------------------


def node(group: str, su: str | None, config: str | None = None, **extra: Any) -> dict[str, Any]:
    labels = {"railplan.dev/node-group": group}
    if su:
        labels["railplan.dev/su"] = su
    if config:
        labels[CONFIG_LABEL] = config
        labels[STATE_LABEL] = "success"
    return {
        "labels": labels,
        "annotations": {},
        "unschedulable": extra.pop("unschedulable", False),
        "mig_result": extra.pop("mig_result", "success"),
    }


def pod(name: str, on: str, *resources: str, refusals: int = 0) -> dict[str, Any]:
    return {
        "namespace": "team",
        "name": name,
        "node": on,
        "phase": "Running",
        "resources": ["cpu", "memory", *resources],
        "pdb_refusals": refusals,
    }


def script_env(
    tmp_path: Path,
    nodes: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    sus: str = "su1",
    config: str = "day",
    drain_timeout: int = 5,
) -> dict[str, str]:
    """The fake cluster's state file and a PATH with the fake kubectl (no API server here);
    the environment the CronJob gives the script."""
    state = tmp_path / "kube.json"
    state.write_text(json.dumps({"nodes": nodes, "pods": pods, "calls": []}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{TESTS / "fake_kubectl.py"}" "$@"\n')
    kubectl.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_KUBE_STATE": str(state),
        "GROUP": "infer_a",
        "CONFIG": config,
        "SUS": sus,
        "DRAIN_TIMEOUT": str(drain_timeout),
        "MIG_TIMEOUT": "5",
        "POLL_SECONDS": "0",
    }


def run_script(
    tmp_path: Path,
    shell: str,
    nodes: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    sus: str,
    config: str = "day",
    drain_timeout: int = 5,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = script_env(tmp_path, nodes, pods, sus=sus, config=config, drain_timeout=drain_timeout)
    result = subprocess.run(
        [shell, str(SCRIPT_PATH)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return result, json.loads(Path(env["FAKE_KUBE_STATE"]).read_text())


def touched(state: dict[str, Any], name: str) -> list[list[str]]:
    return [c for c in state["calls"] if name in c and c[0] != "get"]


def _shells(every_program: bool = True) -> list[Any]:
    """sh, bash and dash, those installed. A shell that is the same program as one before it
    (Debian's /bin/sh is dash) is `make test-slow`'s: here its run would repeat that one's.
    Without ``every_program``, only the first shell (sh) runs in `make test` and the others are
    `make test-slow`'s: a scenario whose other shells `SHELLS` runs elsewhere in `make test`."""
    params, seen = [], set()
    for name in ("sh", "bash", "dash"):
        path = shutil.which(name)
        if path is None:
            continue
        real = os.path.realpath(path)
        slow = real in seen or (not every_program and bool(seen))
        params.append(pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else []))
        seen.add(real)
    return params


# Every distinct shell: the full rollout (test_all_sus_in_order) and one hardening case run the
# script in sh and in bash in `make test`; the other scenarios run it in sh there
# (`SHELLS_FIRST`) and in bash in `make test-slow`.
SHELLS = _shells()
SHELLS_FIRST = _shells(every_program=False)


@pytest.mark.parametrize("shell", SHELLS_FIRST)
def test_failed_node_stays_cordoned_and_stops_the_rollout(tmp_path: Path, shell: str) -> None:
    nodes = {
        "ok": node("infer_a", "su1", config="all-disabled"),
        "done": node("infer_a", "su1", config="day"),
        "bad": node("infer_a", "su1", config="all-disabled", mig_result="failed"),
        "later": node("infer_a", "su2", config="all-disabled"),
        "other": node("train", "su1"),
    }
    pods = [
        pod("trainer", "ok", "nvidia.com/gpu", refusals=2),  # a PDB refuses twice
        pod("sidecar", "ok"),  # no GPU: stays
        pod("server", "bad", "nvidia.com/mig-1g.10gb"),
        pod("on-done", "done", "nvidia.com/gpu"),
    ]
    # the trainer's two refusals cost two stand-in kubectl starts each; on a loaded machine
    # (load 25 on two cores) that outlasted a 5 s drain timeout and failed "ok" as well
    result, state = run_script(tmp_path, shell, nodes, pods, sus="su1 su2", drain_timeout=120)
    assert result.returncode == 1, result.stderr
    out = state["nodes"]
    # succeeded: at the config, schedulable again, no failure mark
    assert out["ok"]["labels"][CONFIG_LABEL] == "day"
    assert out["ok"]["labels"][STATE_LABEL] == "success"
    assert out["ok"]["unschedulable"] is False
    assert FAILED_LABEL not in out["ok"]["labels"]
    # failed: cordoned, marked, with a reason
    assert out["bad"]["unschedulable"] is True
    assert out["bad"]["labels"][FAILED_LABEL] == "failed"
    assert "failed" in out["bad"]["annotations"][REASON]
    # already at the config: not cordoned, not relabelled, its GPU pod kept
    assert touched(state, "done") == []
    assert out["done"]["unschedulable"] is False
    # the SU after the failure, and other groups, are left alone
    assert touched(state, "later") == []
    assert out["later"]["labels"][CONFIG_LABEL] == "all-disabled"
    assert touched(state, "other") == []
    assert sorted(p["name"] for p in state["pods"]) == ["on-done", "sidecar"]
    assert "later SUs are not changed" in result.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_all_sus_in_order(tmp_path: Path, shell: str) -> None:
    nodes = {
        "a1": node("infer_a", "su1", config="day"),
        "b1": node("infer_a", "su2"),
        "b2": node("infer_a", "su2", unschedulable=True),  # an admin's cordon survives
        "c1": node("infer_a", "su3"),
    }
    pods = [pod("p", "b1", "nvidia.com/gpu"), pod("q", "c1", "nvidia.com/mig-3g.40gb")]
    result, state = run_script(
        tmp_path, shell, nodes, pods, sus="su2 su3 su1", config="all-disabled"
    )
    assert result.returncode == 0, result.stderr
    out = state["nodes"]
    assert all(n["labels"][CONFIG_LABEL] == "all-disabled" for n in out.values())
    assert [out[n]["unschedulable"] for n in ("a1", "b1", "b2", "c1")] == [
        False,
        False,
        True,
        False,
    ]
    assert state["pods"] == []
    labelled = [c[2] for c in state["calls"] if c[:2] == ["label", "node"]]
    # SU by SU (within an SU, a node without GPU pods goes first)
    assert sorted(labelled[:2]) == ["b1", "b2"]
    assert labelled[2:] == ["c1", "a1"]
    # the old state label is dropped in the same patch that sets the config
    assert [
        "label",
        "node",
        "c1",
        f"{CONFIG_LABEL}=all-disabled",
        f"{STATE_LABEL}-",
        "--overwrite",
    ] in (state["calls"])


@pytest.mark.parametrize("shell", SHELLS_FIRST)
def test_drain_timeout_fails_without_forcing(tmp_path: Path, shell: str) -> None:
    nodes = {"n": node("infer_a", "su1", config="all-disabled")}
    pods = [pod("guarded", "n", "nvidia.com/gpu", refusals=-1)]  # a PDB that never allows it
    result, state = run_script(tmp_path, shell, nodes, pods, sus="su1", drain_timeout=1)
    assert result.returncode == 1
    n = state["nodes"]["n"]
    assert n["labels"][CONFIG_LABEL] == "all-disabled"  # not applied under a running pod
    assert n["unschedulable"] is True
    assert n["labels"][FAILED_LABEL] == "failed"
    assert "drain timeout" in n["annotations"][REASON]
    assert [p["name"] for p in state["pods"]] == ["guarded"]


def test_earlier_failure_is_cleared_on_success(tmp_path: Path) -> None:
    nodes = {"n": node("infer_a", None, config="all-disabled", unschedulable=True)}
    nodes["n"]["labels"][FAILED_LABEL] = "failed"
    nodes["n"]["annotations"][REASON] = "earlier"
    result, state = run_script(tmp_path, "sh", nodes, [], sus="")  # no SUs: one batch
    assert result.returncode == 0, result.stderr
    n = state["nodes"]["n"]
    assert n["unschedulable"] is False
    assert FAILED_LABEL not in n["labels"]
    assert REASON not in n["annotations"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CONFIG", "day;reboot"),
        ("SUS", "su1 $(id)"),
        ("DRAIN_TIMEOUT", "5m"),
        ("ROLLING_BATCH_SUS", "0"),
        ("ROLLING_BATCH_SUS", "2)"),
        ("ROLLING_BATCH_SUS", "1025"),
    ],
)
def test_bad_inputs_are_refused_before_any_call(tmp_path: Path, name: str, value: str) -> None:
    values = {"CONFIG": "day", "SUS": "su1", "DRAIN_TIMEOUT": "5"} | {name: value}
    state = tmp_path / "kube.json"
    state.write_text(json.dumps({"nodes": {}, "pods": [], "calls": []}))
    env = {"PATH": os.environ["PATH"], "GROUP": "infer_a", "FAKE_KUBE_STATE": str(state)}
    result = subprocess.run(
        ["sh", str(SCRIPT_PATH)], env=env | values, capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert name in result.stderr or "SU" in result.stderr


# --- the output templates, against the real kubectl (offline) ---------------------------------


def script_value(name: str) -> str:
    """The value the script gives ``name``, as sh computes it (some are built in pieces).

    Runs the script's top (its constants, before the first function) in sh, so the test reads
    what the script itself will pass to kubectl.
    """
    text = SCRIPT_PATH.read_text()
    prologue = text[: text.index("\nlog() {")]
    result = subprocess.run(
        ["sh", "-c", f'{prologue}\nprintf %s "${name}"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout, f"{name} is not set by the script"
    return result.stdout


def kubectl_render(tmp_path: Path, obj: dict[str, Any], output: str) -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl installed")
    path = tmp_path / "obj.json"
    path.write_text(json.dumps(obj))
    result = subprocess.run(
        [kubectl, "label", "--local", "-f", str(path), "x=y", "-o", output],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_node_jsonpath_on_real_kubectl(tmp_path: Path) -> None:
    labels = {CONFIG_LABEL: "day", STATE_LABEL: "success", FAILED_LABEL: "failed"}
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}}
    template = "jsonpath=" + script_value("NODE_JSONPATH")
    assert kubectl_render(tmp_path, obj, template) == "day|success||failed|"
    obj["metadata"]["labels"] = {}
    obj["metadata"]["annotations"] = {CORDONED: "20260101T000000Z"}
    obj["spec"] = {"unschedulable": True}
    assert kubectl_render(tmp_path, obj, template) == "||true||20260101T000000Z"


def test_gpu_pod_template_on_real_kubectl(tmp_path: Path) -> None:
    # `label --local` prints one object, so apply the per-item body of the template to a Pod
    template = script_value("GPU_POD_TEMPLATE")
    assert template.startswith("{{range .items}}") and template.endswith("{{end}}")
    body = template.removeprefix("{{range .items}}").removesuffix("{{end}}")
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    init = {"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [container, {"name": "d", "image": "x"}], "initContainers": [init]},
    }
    assert (
        kubectl_render(tmp_path, obj, "go-template=" + body) == "ns p running nvidia.com/gpu cpu\n"
    )
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    del obj["spec"]["initContainers"]
    assert (
        kubectl_render(tmp_path, obj, "go-template=" + body) == "ns p terminating nvidia.com/gpu\n"
    )


# --- the batch size of a scheduled change ------------------------------------------------------


@pytest.mark.parametrize(("batch", "batches"), [(None, 3), (1, 3), (2, 2), (3, 1), (64, 1)])
def test_rolling_batch_sus_sets_the_job_env_and_deadline(
    catalog: Catalog, batch: int | None, batches: int
) -> None:
    """3 SUs of 2 servers: the Job's batches and its deadline follow `rolling_batch_sus`."""
    text = (
        SPEC
        if batch is None
        else SPEC.replace(
            "      drain_timeout: 20m\n",
            f"      drain_timeout: 20m\n      rolling_batch_sus: {batch}\n",
        )
    )
    spec = load_spec_text(text).spec
    jobs = of_kind(mig_schedule(spec, expand(spec, catalog)), "CronJob")
    per_batch = duration_seconds("20m") + MIG_TIMEOUT_S + 600
    for job in jobs:
        job_spec = job["spec"]["jobTemplate"]["spec"]
        assert job_spec["activeDeadlineSeconds"] == batches * per_batch
        (container,) = job_spec["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["ROLLING_BATCH_SUS"] == str(batch or 1)


@pytest.mark.parametrize("value", ["0", "-1", "1025", "1.5", "two", "true", '"2"'])
def test_nonsense_rolling_batch_sus_is_a_located_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        SPEC.replace(
            "      drain_timeout: 20m\n",
            f"      drain_timeout: 20m\n      rolling_batch_sus: {value}\n",
        )
    )
    line = SPEC.splitlines().index("      drain_timeout: 20m") + 2  # the line after it, 1-based
    done = run_cli("lint", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"spec.yaml:{line}:" in err[0] and "rolling_batch_sus" in err[0], err


@pytest.mark.parametrize("shell", SHELLS_FIRST)
def test_a_batch_of_two_sus_changes_them_together(tmp_path: Path, shell: str) -> None:
    nodes = {
        "a1": node("infer_a", "su1"),
        "b1": node("infer_a", "su2"),
        "c1": node("infer_a", "su3"),
    }
    env = script_env(tmp_path, nodes, [], sus="su1 su2 su3") | {"ROLLING_BATCH_SUS": "2"}
    result = subprocess.run(
        [shell, str(SCRIPT_PATH)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    state = json.loads(Path(env["FAKE_KUBE_STATE"]).read_text())
    assert all(n["labels"][CONFIG_LABEL] == "day" for n in state["nodes"].values())
    selectors = [c[c.index("-l") + 1] for c in state["calls"] if c[:2] == ["get", "nodes"]]
    assert selectors == [
        "railplan.dev/node-group=infer_a,railplan.dev/su in (su1,su2)",
        "railplan.dev/node-group=infer_a,railplan.dev/su=su3",
    ]
    # su1 and su2 are one batch: both cordoned before either is relabelled; su3 after both
    order = [
        ("cordon", c[1]) if c[0] == "cordon" else ("label", c[2])
        for c in state["calls"]
        if c[0] == "cordon" or c[:2] == ["label", "node"]
    ]
    assert sorted(order[:2]) == [("cordon", "a1"), ("cordon", "b1")]
    assert order.index(("cordon", "c1")) > max(order.index(("label", n)) for n in ("a1", "b1"))


def test_a_sound_rolling_batch_sus_lints(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        SPEC.replace(
            "      drain_timeout: 20m\n", "      drain_timeout: 20m\n      rolling_batch_sus: 2\n"
        )
    )
    done = run_cli("lint", str(path))
    assert done.returncode in (0, 1), done.stderr
    assert (
        "rolling_batch_sus:" not in done.stderr
        and "[node_groups[1].mig_schedule" not in done.stdout
    )


@pytest.mark.parametrize("zone", ["localtime", "posixrules"])
def test_a_host_zoneinfo_file_is_no_time_zone(zone: str) -> None:
    """Before: `timezone: localtime` passed lint and rendered `timeZone: localtime`, which
    Go's time zone database (the API server's) does not have."""
    text = SPEC.replace("timezone: Europe/Berlin", f"timezone: {zone}")
    assert text != SPEC
    with pytest.raises(SpecError, match="not an IANA time zone name"):
        load_spec_text(text)
