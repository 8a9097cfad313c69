"""Tenants' priorities and the day/night MIG change, on the Kubernetes twin with Kueue.

The cluster of tests/test_k8s_twin_sched.py (`tests.k8s_twin.scenario`: the Kueue variant of
examples/k8s-tenants.yaml rendered and applied, Kueue v0.17.0 with its webhooks, kwok running
the 64 planned Nodes), on a control plane of its own. Two scheduling scenarios:

- priority preemption between tenants as ``scheduler.preemption`` renders it: a workload runs
  at its tenant's priority (the rendered ValidatingAdmissionPolicies hold its Kueue label and
  its pods' PriorityClass there: `tests.k8s_twin.priorities`); with
  ``reclaim: lower_priority`` the ``critical`` tenant takes back from the ``high`` one what it
  borrowed, not the other way round; with ``reclaim: never`` nobody is evicted;
- the day/night MIG change: the rendered change script, run as its CronJob runs it, with a
  stand-in MIG manager reporting each node's new devices; Kueue admits MIG workloads by day
  and whole-GPU workloads by night, and every whole GPU of the night is usable; and a MIG
  Job that may retry, evicted by the 21:00 change, is evicted by Kueue too (no quota held
  overnight) and runs again after the 07:00 change.

``make k8s-twin`` runs this module (RAILPLAN_K8S_TWIN=1); elsewhere it skips, saying why.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s_twin import apply, gangs, jobs, mig, nodes, priorities, scenario, versions
from tests.k8s_twin.kubectl import kubectl, kubectl_run
from tests.k8s_twin.scenario import GPU, GROUP_LABEL, Cluster

CI_MINUTES = 10  # what the module needs in CI, set-up included (tests/conftest.py)
_missing = versions.skip_module_unless_runnable("k8s-twin", controllers=True)

SPEC = Path("kueue:examples/k8s-tenants.yaml")
TENANTS = ["research", "serving"]
SLICE = "nvidia.com/mig-1g.10gb"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert not _missing, f"binaries not built: {_missing}"
    with scenario.started(SPEC, tmp_path_factory.mktemp("k8s-twin-tenants")) as running:
        yield running


@pytest.fixture
def clean(cluster: Cluster) -> Iterator[Cluster]:
    """No tenant Job before and after; the rendered tree as applied at the start."""
    jobs.delete_all(cluster.kubeconfig, TENANTS)
    yield cluster
    jobs.delete_all(cluster.kubeconfig, TENANTS)
    refused = [r for r in apply.apply_tree(cluster.kubeconfig, cluster.k8s_dir) if not r.accepted]
    assert refused == []


def _create(cluster: Cluster, job: dict[str, Any]) -> tuple[bool, str]:
    """Create a Job as its user does: (accepted, the server's refusal or '')."""
    proc = kubectl_run(cluster.kubeconfig, ["create", "-f", "-"], stdin=yaml.safe_dump(job))
    return proc.returncode == 0, proc.stderr.strip()


# --- (a) priority preemption between tenants -----------------------------------------------------


def test_a_tenants_workloads_run_at_its_priority_and_no_higher(clean: Cluster) -> None:
    """A Job submitted as the rendered README used to say (its LocalQueue label only) must not
    run at priority 0, below every tenant; nor may a `high` tenant's user take `critical`.
    Both are refused, with the server's message naming the class to use; a Job at its
    tenant's class is admitted at that class's value."""
    own, above = clean.priority_class("research"), clean.priority_class("serving")
    wrong = []
    for name, priority in (("plain", None), ("above", above)):
        job = clean.job(name, "research", 1, {GPU: "8"}, priority=priority)
        accepted, said = _create(clean, job)
        if not accepted:
            print(f"research/{name} ({priority or 'no class'}) refused:", said)
            assert f"{jobs.PRIORITY_LABEL}: {own}" in said, said
            continue
        wl = jobs.wait_for(f"research/{name}'s Workload", functools.partial(_workload, clean, name))
        wrong.append(
            f"research/{name} ({priority or f'no {jobs.PRIORITY_LABEL}'}) was accepted: Kueue "
            f"gave it priority {wl['spec'].get('priority')}, though tenant research is {own}"
        )
    assert wrong == [], "\n".join(wrong)
    accepted, said = _create(clean, clean.job("own", "research", 1, {GPU: "8"}))
    assert accepted, said
    wl = jobs.wait_admitted(clean.kubeconfig, "research", "own")
    assert wl["spec"]["priority"] == 100_000
    assert wl["spec"]["priorityClassRef"]["name"] == own


KINDS = ["pod", "job"]


def test_a_tenants_pods_name_its_priority_class_and_no_higher(clean: Cluster) -> None:
    """The pods' own priority (kube-scheduler's preemption on the nodes, Kueue's fallback):
    a bare Pod, and a queued Job at research's WorkloadPriorityClass whose pod template names
    no PriorityClass or serving's higher one, are refused with the server's message naming
    the class to use; at research's own class each is accepted."""
    print(priorities.wait_in_effect(clean, "research"))
    try:
        wrong = priorities.check(clean, KINDS, "research", "serving")
    finally:
        priorities.delete(clean.kubeconfig, TENANTS, KINDS)
    assert wrong == [], "\n".join(wrong)


def _workload(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return jobs.workload(cluster.kubeconfig, "research", name)


def _variant(clean: Cluster, tmp_path: Path, edits: list[tuple[str, str]]) -> Cluster:
    """The spec with `edits` (old -> new text, in order), rendered and applied whole."""
    text = clean.spec.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    spec = tmp_path / "variant.yaml"
    spec.write_text(text)
    k8s_dir = apply.render(spec, tmp_path / "root")
    refused = [r.as_dict() for r in apply.apply_tree(clean.kubeconfig, k8s_dir) if not r.accepted]
    assert refused == [], refused
    variant = dataclasses.replace(
        clean, spec=spec, k8s_dir=k8s_dir, planned=nodes.Planned.load(spec)
    )
    _wait_for_the_priority_policy(variant)
    return variant


def _wait_for_the_priority_policy(cluster: Cluster, timeout_s: float = 120.0) -> None:
    """Wait until the API server admits each tenant's Job at the tenant's (new) priority.

    The admission plugin reads ValidatingAdmissionPolicies through an informer: a policy just
    applied takes effect a moment later (run of 7 December: a variant's first Job, created
    at once, was judged by the policy before it, "it has h100-shared-critical" refused for a
    tenant now `critical`). A server-side dry run goes through the same admission.
    """
    deadline = time.monotonic() + timeout_s
    for tenant in cluster.planned.spec.scheduler.tenants:
        probe = yaml.safe_dump(cluster.job("probe", tenant.name, 1, {"cpu": "1"}))
        while True:
            proc = kubectl_run(
                cluster.kubeconfig, ["create", "--dry-run=server", "-f", "-"], stdin=probe
            )
            if proc.returncode == 0:
                break
            assert time.monotonic() < deadline, (
                f"{tenant.name}'s Job at its priority still refused after {timeout_s:.0f} s: "
                f"{proc.stderr.strip()}"
            )
            time.sleep(1.0)


LOWER = [("reclaim: never", "reclaim: lower_priority")]
# Serving (the lender) `high`, research (the borrower) `critical`.
SWAPPED = [
    *LOWER,
    ("      priority: critical\n", "      priority: high\n"),
    ("priority: high, borrowing_limit", "priority: critical, borrowing_limit"),
]


@pytest.mark.parametrize(
    ("edits", "evicts"),
    [(LOWER, True), (SWAPPED, False), ([], False)],
    ids=[
        "critical-lender-reclaim-lower-priority",
        "high-lender-critical-borrower-reclaim-lower-priority",
        "critical-lender-reclaim-never",
    ],
)
def test_priority_reclaim_between_tenants(
    clean: Cluster, tmp_path: Path, edits: list[tuple[str, str]], evicts: bool
) -> None:
    """Research borrows serving's idle slices up to its limit; serving then asks for its own
    quota, each Job at its tenant's priority. Kueue evicts research's borrowing Job only when
    the rendered `reclaimWithinCohort` allows it and serving is above research."""
    c = _variant(clean, tmp_path, edits) if edits else clean
    want = "LowerPriority" if edits else "Never"
    for cq in c.rendered("ClusterQueue").values():
        assert cq["spec"]["preemption"]["reclaimWithinCohort"] == want
    got = scenario.borrow_up_to_the_limit(c)
    scenario.lender_submits(c, got)
    borrow = jobs.workload(c.kubeconfig, "research", "borrow")
    lender = jobs.wait_for(
        "serving/lender's Workload", lambda: jobs.workload(c.kubeconfig, "serving", "lender")
    )
    case = (
        f"reclaimWithinCohort {want}: research/borrow at priority "
        f"{(borrow or {}).get('spec', {}).get('priority')}, serving/lender at "
        f"{lender['spec'].get('priority')}"
    )
    if evicts:
        jobs.wait_admitted(c.kubeconfig, "serving", "lender")
        borrow = jobs.workload(c.kubeconfig, "research", "borrow")
        evicted = jobs.condition(borrow, "Evicted")
        assert evicted is not None and evicted["status"] == "True", borrow
        print(f"{case}: research/borrow evicted:", evicted["reason"], evicted["message"])
        return
    message = jobs.wait_pending(c.kubeconfig, "serving", "lender")
    time.sleep(5)  # a preemption Kueue decided would have started by now
    print(f"{case}: serving/lender waits:", message)
    borrow = jobs.workload(c.kubeconfig, "research", "borrow")
    assert jobs.admitted(borrow) and jobs.condition(borrow, "Evicted") is None, borrow
    assert not jobs.admitted(jobs.workload(c.kubeconfig, "serving", "lender"))


# --- (b) the day/night MIG change ----------------------------------------------------------------


def _infer_nodes(cluster: Cluster) -> list[str]:
    return sorted(
        n for n, o in cluster.nodes.items() if o["metadata"]["labels"][GROUP_LABEL] == "infer"
    )


def _running_on(cluster: Cluster, tenant: str, name: str, count: int, group: str) -> None:
    def all_running() -> list[dict[str, Any]] | None:
        pods = jobs.running_pods(cluster.kubeconfig, tenant, name)
        return pods if len(pods) == count else None

    for pod in jobs.wait_for(f"{tenant}/{name}: {count} pods running", all_running):
        assert cluster.node_of(pod)["metadata"]["labels"][GROUP_LABEL] == group


def _change(cluster: Cluster, tmp_path: Path, config: str) -> str:
    proc = mig.run_change(tmp_path, cluster.kubeconfig, cluster.k8s_dir, config)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_the_day_night_mig_change_moves_admission_with_the_nodes(
    clean: Cluster, tmp_path: Path
) -> None:
    """By day (infer-day: seven 1g.10gb a GPU) a MIG Job runs, research runs all 448 GPUs
    of the training group, and a whole-GPU Job on the inference group waits unadmitted; the rendered 21:00 change (run as its CronJob runs it)
    drains the group and the MIG manager reports whole GPUs: the waiting Job is admitted
    and runs, a MIG Job now waits, and all 64 night GPUs are usable (serving's 32 it never
    lends plus the 32 research may borrow): all 512 whole GPUs of the cluster run. The 07:00 change brings the slices back."""
    c = clean
    infer = _infer_nodes(c)
    gpus = c.gpus_per_node("infer")
    flavor = c.flavor_of("infer")
    plan_mig = c.planned.plan.groups["infer"].mig
    day, night = plan_mig.now.config, next(s.config for s in plan_mig.changes if not s.splits)
    on_infer = {GROUP_LABEL: "infer"}
    with mig.MigManager(c.kubeconfig, c.planned, "infer") as manager:
        try:
            # Day: MIG slices only.
            assert mig.node_resources(c.kubeconfig, infer[0])[GPU] == "0"
            jobs.submit(c.kubeconfig, c.job("day-mig", "serving", 1, {SLICE: "1"}))
            wl = jobs.wait_admitted(c.kubeconfig, "serving", "day-mig")
            assert jobs.flavors(wl) == {SLICE: flavor}
            _running_on(c, "serving", "day-mig", 1, "infer")
            train = _research_fills_the_training_group(c)
            jobs.submit(c.kubeconfig, c.job("night-gpu", "serving", 1, {GPU: str(gpus)}))
            said = jobs.wait_pending(c.kubeconfig, "serving", "night-gpu")
            print(f"by day ({day}) serving/night-gpu waits:", said)

            # 21:00
            log = _change(c, tmp_path, night)
            print(f"change to {night}:", *log.splitlines()[-4:], sep="\n  ")
            assert manager.error is None, manager.error
            assert {n for n, cfg in manager.applied if cfg == night} == set(infer)
            for name in infer:
                have = mig.node_resources(c.kubeconfig, name)
                assert (have[GPU], have[SLICE]) == (str(gpus), "0"), (name, have)
            assert jobs.running_pods(c.kubeconfig, "serving", "day-mig") == []
            wl = jobs.wait_admitted(c.kubeconfig, "serving", "night-gpu")
            assert jobs.flavors(wl) == {GPU: flavor}
            _running_on(c, "serving", "night-gpu", 1, "infer")
            jobs.submit(c.kubeconfig, c.job("night-mig", "serving", 1, {SLICE: "1"}))
            print(
                f"by night ({night}) serving/night-mig waits:",
                jobs.wait_pending(c.kubeconfig, "serving", "night-mig"),
            )
            night_gpus = _every_night_gpu_is_usable(c, gpus, len(infer), on_infer)
            assert len(jobs.running_pods(c.kubeconfig, "research", "day-train")) == train
            every = sum(int(n["status"]["allocatable"].get(GPU, "0")) for n in c.nodes.values())
            every += night_gpus  # the inference nodes had none when created (by day)
            held = night_gpus + train * c.gpus_per_node("train")
            assert held == every, (held, every)
            print(f"by night: {held} of the cluster's {every} whole GPUs running")

            # 07:00
            log = _change(c, tmp_path, day)
            print(f"change to {day}:", *log.splitlines()[-4:], sep="\n  ")
            assert manager.error is None, manager.error
            for name in infer:
                have = mig.node_resources(c.kubeconfig, name)
                assert (have[GPU], have[SLICE]) == ("0", str(7 * gpus)), (name, have)
            wl = jobs.wait_admitted(c.kubeconfig, "serving", "night-mig")
            assert jobs.flavors(wl) == {SLICE: flavor}
            _running_on(c, "serving", "night-mig", 1, "infer")
        finally:
            jobs.delete_all(c.kubeconfig, TENANTS)
            if any(mig.node_resources(c.kubeconfig, n).get(SLICE) in (None, "0") for n in infer):
                mig.run_change(tmp_path, c.kubeconfig, c.k8s_dir, day)


def _research_fills_the_training_group(c: Cluster) -> int:
    """By day research runs its whole quota of the training group: every whole GPU there
    (none is held back for GPUs the inference group has only by night); its pod count."""
    flavor = c.flavor_of("train")
    nominal = scenario.quota(c.rendered("ClusterQueue")["research"], flavor)["nominalQuota"]
    per_node = c.gpus_per_node("train")
    on_train = [n for n in c.nodes.values() if n["metadata"]["labels"][GROUP_LABEL] == "train"]
    assert nominal == per_node * len(on_train)
    pods = nominal // per_node
    job = c.job(
        "day-train", "research", pods, {GPU: str(per_node)}, node_selector={GROUP_LABEL: "train"}
    )
    jobs.submit(c.kubeconfig, job)
    wl = jobs.wait_admitted(c.kubeconfig, "research", "day-train")
    assert jobs.flavors(wl) == {GPU: flavor}
    _running_on(c, "research", "day-train", pods, "train")
    print(f"by day: research runs {nominal} of the training group's {nominal} GPUs")
    return pods


def _every_night_gpu_is_usable(
    c: Cluster, gpus: int, node_count: int, on_infer: dict[str, str]
) -> int:
    """Serving holds the whole GPUs it never lends (lendingLimit), research borrows the rest
    up to what serving lends: every whole GPU of the inference group runs a pod."""
    serving = scenario.quota(c.rendered("ClusterQueue")["serving"], c.flavor_of("infer"))
    kept = serving["nominalQuota"] - serving["lendingLimit"]
    lent = serving["lendingLimit"]
    assert kept + lent == gpus * node_count
    request = {GPU: str(gpus)}
    more = kept // gpus - 1  # night-gpu already holds one node
    jobs.submit(c.kubeconfig, c.job("night-kept", "serving", more, request, node_selector=on_infer))
    jobs.wait_admitted(c.kubeconfig, "serving", "night-kept")
    jobs.submit(
        c.kubeconfig,
        c.job("night-borrow", "research", lent // gpus, request, node_selector=on_infer),
    )
    wl = jobs.wait_admitted(c.kubeconfig, "research", "night-borrow")
    print("by night research/night-borrow admitted:", json.dumps(jobs.flavors(wl)))
    _running_on(c, "serving", "night-kept", more, "infer")
    _running_on(c, "research", "night-borrow", lent // gpus, "infer")
    held = sum(
        int(p["spec"]["containers"][0]["resources"]["requests"][GPU])
        for t, n in (
            ("serving", "night-gpu"),
            ("serving", "night-kept"),
            ("research", "night-borrow"),
        )
        for p in jobs.running_pods(c.kubeconfig, t, n)
    )
    assert held == gpus * node_count, held
    print(
        f"by night: {held} of {gpus * node_count} inference GPUs running "
        f"(serving {kept} kept, research {lent} borrowed)"
    )
    return held


def _pods(cluster: Cluster, tenant: str, name: str) -> list[dict[str, Any]]:
    """Every pod of Job `name`, whatever its phase."""
    out = kubectl(
        cluster.kubeconfig, ["get", "pods", "-n", tenant, "-l", f"job={name}", "-o", "json"]
    )
    return list(json.loads(out)["items"])


def _state(cluster: Cluster, name: str, evicted: str) -> dict[str, Any]:
    """What became of serving's Job `name` after its pod `evicted` was evicted."""
    job = json.loads(
        kubectl(cluster.kubeconfig, ["get", "job", name, "-n", "serving", "-o", "json"])
    )
    wl = jobs.workload(cluster.kubeconfig, "serving", name)
    conditions = {
        c["type"]: f"{c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        for c in (wl or {}).get("status", {}).get("conditions", [])
    }
    pods = [
        f"{p['metadata']['name']} node={p['spec'].get('nodeName')} "
        f"phase={p['status'].get('phase')} {gangs.pod_condition(p, 'PodScheduled')}"
        for p in _pods(cluster, "serving", name)
        if p["metadata"]["name"] != evicted and "deletionTimestamp" not in p["metadata"]
    ]
    return {
        "suspended": job["spec"].get("suspend"),
        "job": {k: job["status"].get(k, 0) for k in ("active", "failed", "succeeded")},
        "admitted": jobs.admitted(wl),
        "workload": conditions,
        "pods": pods,
    }


def test_a_mig_job_evicted_by_the_21_00_change_runs_again_at_07_00(
    clean: Cluster, tmp_path: Path
) -> None:
    """A serving MIG Job that may retry (``backoffLimit: 2``) runs by day; the rendered 21:00
    change evicts its pod. Kueue evicts the Workload (the cordon's untolerated
    ``node.kubernetes.io/unschedulable`` taint and the pod's termination make the node failed
    for topology-aware scheduling: Kueue 0.17's TASReplaceNodeOnNodeTaints, on by default;
    no replacement node has slices), suspends the Job and requeues it: through the night it holds no quota and has no pod,
    waiting for slices, and the Job has not failed. After the rendered 07:00 change it is
    admitted again and runs on the inference group. (The first run of this test expected the
    Workload to stay admitted with a new pod waiting, as read from Kueue's source before: it
    timed out waiting for that pod.)"""
    c = clean
    infer = _infer_nodes(c)
    plan_mig = c.planned.plan.groups["infer"].mig
    day, night = plan_mig.now.config, next(s.config for s in plan_mig.changes if not s.splits)
    job = c.job("retry-mig", "serving", 1, {SLICE: "1"})
    job["spec"]["backoffLimit"] = 2
    with mig.MigManager(c.kubeconfig, c.planned, "infer") as manager:
        try:
            jobs.submit(c.kubeconfig, job)
            jobs.wait_admitted(c.kubeconfig, "serving", "retry-mig")
            _running_on(c, "serving", "retry-mig", 1, "infer")
            (first,) = jobs.running_pods(c.kubeconfig, "serving", "retry-mig")
            evicted = first["metadata"]["name"]
            started = time.monotonic()
            _change(c, tmp_path, night)
            assert manager.error is None, manager.error
            print(f"change to {night} done after {time.monotonic() - started:.0f} s")
            for wait in (0, 30, 60):  # the Job controller retries after a back-off
                time.sleep(wait)
                state = _state(c, "retry-mig", evicted)
                print(f"{evicted} evicted; {time.monotonic() - started:.0f} s later:", state)
                assert state["job"]["failed"] <= 2 and not state["job"]["succeeded"], state
            assert state["suspended"] and not state["admitted"] and state["pods"] == [], state
            assert state["workload"]["Evicted"].startswith("True "), state
            started = time.monotonic()
            _change(c, tmp_path, day)
            assert manager.error is None, manager.error
            _running_on(c, "serving", "retry-mig", 1, "infer")
            (running,) = jobs.running_pods(c.kubeconfig, "serving", "retry-mig")
            print(
                f"after the change to {day} ({time.monotonic() - started:.0f} s): "
                f"{running['metadata']['name']} runs on {running['spec']['nodeName']};",
                _state(c, "retry-mig", evicted),
            )
        finally:
            jobs.delete_all(c.kubeconfig, TENANTS)
            if any(mig.node_resources(c.kubeconfig, n).get(SLICE) in (None, "0") for n in infer):
                mig.run_change(tmp_path, c.kubeconfig, c.k8s_dir, day)
