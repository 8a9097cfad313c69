"""Where the replay runs a tenant's jobs under Kueue: its ClusterQueue's flavors, in order.

railplan renders one ResourceFlavor per node group and each tenant's ClusterQueue quota per
flavor (`infra.topology.tenant_quota.shares`); Kueue gives a workload the first flavor, in the
ClusterQueue's order, whose quota and nodes hold it, and never one where the tenant has no
quota and may borrow none. The replay of `examples/k8s-tenants.yaml` with ``batch: kueue``
must do the same: serving (64 GPUs, all on the inference group) never runs on the training
nodes, and research (448 GPUs on the training group, borrowing on the inference group) runs
on the training group first. The Kubernetes twin compares the same with Kueue itself
(`tests/test_k8s_twin_simulate.py`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from infra.simulate.cluster import Allocation
from infra.simulate.engine import Replay
from infra.simulate.flavors import kueue_flavors
from infra.simulate.jobs import Job
from infra.spec import Spec, load_spec_text
from infra.topology import expand
from tests.cli_run import run_cli
from tests.conftest import ROOT
from tests.k8s_twin import joblist
from tests.sim_helpers import catalog, job, replay, starts

NIGHT = 21 * 3600.0 + 20 * 60  # 21:20, the 21:00 change to whole GPUs done on the one SU
HOUR = 3600.0


def tenants_spec(batch: str = "kueue") -> Spec:
    text = (ROOT / "examples" / "k8s-tenants.yaml").read_text()
    return load_spec_text(text.replace("batch: volcano", f"batch: {batch}")).spec


class Placed(Replay):
    """A replay that records the node group each start lands on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.groups: dict[str, str] = {}
        super().__init__(*args, **kwargs)

    def _start(self, index: int, alloc: Allocation) -> None:
        groups = {self.cluster.nodes[part.node].group for part in alloc}
        self.groups[self.jobs[index].id] = ",".join(sorted(groups))
        super()._start(index, alloc)


def placed(spec: Spec, jobs: list[Job]) -> Placed:
    run, _ = replay(spec, jobs, cls=Placed)
    assert isinstance(run, Placed)
    return run


def test_the_flavors_are_the_rendered_cluster_queues() -> None:
    spec = tenants_spec()
    assert kueue_flavors(spec, expand(spec, catalog())) == {
        "research": ("train", "infer"),
        "serving": ("infer",),
    }
    volcano = tenants_spec("volcano")
    assert kueue_flavors(volcano, expand(volcano, catalog())) == {}


def test_a_tenant_never_runs_where_its_queue_has_no_quota() -> None:
    """By day the inference group is all MIG slices: serving's whole-GPU job waits for the
    night (Kueue: no quota on the training flavor, no whole GPU on the inference nodes), and
    research then fills its 448 GPUs of the training group at once."""
    run = placed(
        tenants_spec(),
        [
            job("s-gpu", HOUR, 30 * HOUR, 8, tenant="serving"),
            job("r-fill", HOUR + 60, 30 * HOUR, 448, tenant="research"),
        ],
    )
    got = starts(run)
    assert got["r-fill"] == HOUR + 60
    assert got["s-gpu"] is not None and got["s-gpu"] > 21 * HOUR
    assert run.groups == {"r-fill": "train", "s-gpu": "infer"}


def test_research_runs_on_its_own_flavor_first() -> None:
    """By night a 64-GPU job of research fits the inference group's one SU exactly; best fit
    alone would put it there, Kueue puts it on the training flavor, research's own quota."""
    run = placed(tenants_spec(), [job("r-64", NIGHT, HOUR, 64, tenant="research")])
    assert starts(run)["r-64"] == NIGHT
    assert run.groups == {"r-64": "train"}


def test_volcano_specs_are_replayed_as_before() -> None:
    """Volcano's queues are not per node group: serving's whole-GPU job by day runs on the
    training nodes (its queue bounds its GPUs, not where they are), as before."""
    run = placed(tenants_spec("volcano"), [job("s-gpu", HOUR, HOUR, 8, tenant="serving")])
    assert starts(run)["s-gpu"] == HOUR
    assert run.groups == {"s-gpu": "train"}


# The job list the Kubernetes twin submits to Kueue (tests/k8s_twin/joblist.py): what the
# replay predicts, step by step; tests/test_k8s_twin_simulate.py checks Kueue against it.
PREDICTED = [
    (["r-train-a@train"], []),
    (["s-mig-a@infer"], []),
    (["s-mig-b@infer"], []),
    (["r-mig-a@infer"], []),
    ([], []),  # s-gpu-a: whole GPUs by day only on serving's inference group, which has none
    (["r-train-b@train"], []),
    ([], []),  # r-over: research may borrow 32 of serving's GPUs, not 64
    ([], []),  # the MIG jobs end
    (["s-gpu-a@infer"], []),  # the 21:00 change: whole GPUs on the inference group
    (["s-mig-night@infer"], []),  # a fraction on a whole GPU (the twin's Job waits instead)
    (["r-borrow@infer"], []),  # research's own group is full: it borrows
    (["s-reclaim@infer"], ["r-borrow"]),  # serving (critical) reclaims from research (high)
    (["r-borrow@infer"], []),  # s-reclaim ends: research borrows again
]


def test_the_twins_job_list_as_the_replay_predicts_it() -> None:
    got = [(c["admitted"], c["evicted"]) for c in joblist.step_changes(joblist.simulated())]
    assert got == PREDICTED


def test_railplan_simulate_replays_the_twins_job_list_alike(tmp_path: Path) -> None:
    """The CLI (`railplan simulate --jobs-csv`) on the same list starts each job when the
    engine's log says (the replay runs on past the list: later evictions are not the list's)."""
    spec, trace, out = tmp_path / "spec.yaml", tmp_path / "jobs.csv", tmp_path / "out.csv"
    spec.write_text(joblist.spec_text())
    trace.write_text(joblist.csv_text())
    result = run_cli("simulate", str(spec), "--trace", str(trace), "--jobs-csv", str(out))
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in csv.DictReader(out.read_text().splitlines())}
    starts = {n: float(r["start_s"]) for n, r in rows.items()}
    submits = {n: float(r["submit_s"]) for n, r in rows.items()}
    late = {n: at for n, at in starts.items() if at != submits[n]}
    assert late == {"s-gpu-a": 21 * HOUR + 660, "r-over": 41 * HOUR}  # after the change; later
    assert int(rows["r-borrow"]["evictions"]) >= 1
