"""One small job list, replayed by `railplan simulate` and submitted to the twin's Kueue.

The list runs on the Kueue variant of ``examples/k8s-tenants.yaml`` with ``preemption.reclaim:
lower_priority`` (so that serving, ``critical``, takes back from research, ``high``, what it
lent): research trains on whole GPUs and fills its 448 on the training group, serving runs
MIG inference jobs by day, a whole-GPU job of serving waits for the night, research borrows
32 of serving's whole GPUs by night and is reclaimed when serving asks for them, a job over
what research may borrow waits throughout. `STEPS` is the list as events at trace times
(seconds from Monday 00:00 in the MIG schedule's zone, the replay's time 0): a submission, the
end of jobs (the twin deletes their Jobs), or the 21:00 change to whole GPUs (the twin runs the
rendered change). After each step both sides are read the same way: which jobs hold
resources, on which node group (`Snapshot`); what was admitted and evicted follows from two
snapshots in a row (`changes`).

`simulated` replays the list with `railplan simulate`'s engine (``infra.simulate``) and reads
its snapshot at the end of each step (just before the next one); `csv_text` is the same list
as a trace file, for the CLI. ``tests/test_simulate_kueue_flavors.py`` checks the replay's
answer without a cluster; ``tests/test_k8s_twin_simulate.py`` checks Kueue's against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.simulate.cluster import Allocation
from infra.simulate.engine import Replay
from infra.simulate.jobs import Job, Trace
from infra.simulate.policy import SimPolicy
from infra.spec import Spec, load_spec_text
from infra.topology import expand

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600.0
LONG = 40 * HOUR  # longer than the list: the job runs to its end
SLICE_MILLI = 100  # a tenth of a GPU: one 1g slice (ceil(7 x 0.1) = 1 of 7), `1g.10gb` here


@dataclass(frozen=True)
class ListJob:
    """A job of the list: its tenant, whole GPUs (8 a pod) or one MIG slice."""

    name: str
    tenant: str
    gpus: int  # whole GPUs; 0: one nvidia.com/mig-1g.10gb slice
    ends_s: float | None = None  # when a `finish` step ends it; None: it runs on

    @property
    def pods(self) -> int:
        return max(1, self.gpus // 8)


@dataclass(frozen=True)
class Step:
    """One event of the list at trace time `at_s`: ``submit``, ``finish`` or ``night``."""

    at_s: float
    kind: str
    jobs: tuple[ListJob, ...] = ()

    def label(self) -> str:
        clock = f"{int(self.at_s // 3600):02d}:{int(self.at_s % 3600 // 60):02d}"
        if self.kind == "night":
            return f"{clock} the 21:00 MIG change (all-disabled)"
        names = ", ".join(j.name for j in self.jobs)
        if self.kind == "finish":
            return f"{clock} {names} end"
        (job,) = self.jobs
        ask = f"{job.gpus} GPUs" if job.gpus else "1 slice"
        return f"{clock} {job.tenant} submits {job.name} ({ask})"


DAY_END = 20 * HOUR
S_MIG_A = ListJob("s-mig-a", "serving", 0, DAY_END)
S_MIG_B = ListJob("s-mig-b", "serving", 0, DAY_END)
R_MIG_A = ListJob("r-mig-a", "research", 0, DAY_END)
S_RECLAIM = ListJob("s-reclaim", "serving", 48, 22 * HOUR)
STEPS = (
    Step(1 * HOUR, "submit", (ListJob("r-train-a", "research", 192),)),
    Step(1 * HOUR + 60, "submit", (S_MIG_A,)),
    Step(1 * HOUR + 120, "submit", (S_MIG_B,)),
    Step(1 * HOUR + 180, "submit", (R_MIG_A,)),
    Step(1 * HOUR + 240, "submit", (ListJob("s-gpu-a", "serving", 8),)),
    Step(1 * HOUR + 300, "submit", (ListJob("r-train-b", "research", 256),)),
    Step(1 * HOUR + 360, "submit", (ListJob("r-over", "research", 64),)),
    Step(DAY_END, "finish", (S_MIG_A, S_MIG_B, R_MIG_A)),
    Step(21 * HOUR, "night"),
    Step(21 * HOUR + 1200, "submit", (ListJob("s-mig-night", "serving", 0),)),
    Step(21 * HOUR + 1260, "submit", (ListJob("r-borrow", "research", 32),)),
    Step(21 * HOUR + 1320, "submit", (S_RECLAIM,)),
    Step(22 * HOUR, "finish", (S_RECLAIM,)),
)
END_S = 22 * HOUR + 600  # the last snapshot: ten minutes after the last step

Snapshot = dict[str, str]
"""Job name -> the node group it holds resources on (admitted and not evicted)."""


def jobs() -> list[ListJob]:
    return [j for s in STEPS if s.kind == "submit" for j in s.jobs]


def spec_text() -> str:
    """The Kueue variant of the example with ``reclaim: lower_priority``."""
    text = (ROOT / "examples" / "k8s-tenants.yaml").read_text()
    for old, new in (
        ("batch: volcano", "batch: kueue"),
        ("reclaim: never", "reclaim: lower_priority"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    return text


def spec() -> Spec:
    return load_spec_text(spec_text()).spec


def _submit_of(job: ListJob) -> float:
    return next(s.at_s for s in STEPS if s.kind == "submit" and job in s.jobs)


def trace_jobs() -> list[Job]:
    """The list as the replay's jobs (trace line = place in the list + 2, as in the CSV)."""
    out = []
    for line, j in enumerate(jobs(), start=2):
        submit = _submit_of(j)
        duration = (j.ends_s or submit + LONG) - submit
        gpus, milli = (j.gpus, 1000) if j.gpus else (1, SLICE_MILLI)
        out.append(Job(j.name, submit, duration, gpus, milli, j.tenant, "normal", None, line))
    return out


def csv_text() -> str:
    """The list as railplan's trace CSV (`railplan simulate --trace`)."""
    rows = ["id,submit_s,duration_s,gpus,gpu_milli,tenant,priority"]
    rows += [
        f"{j.id},{j.submit_s:g},{j.duration_s:g},{j.gpus},{j.milli},{j.tenant},{j.priority}"
        for j in trace_jobs()
    ]
    return "\n".join(rows) + "\n"


class _Recording(Replay):
    """The replay, with every start (and the group it lands on) and eviction logged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.log: list[tuple[float, str, str, str]] = []  # (time, start|evict, job, group)
        super().__init__(*args, **kwargs)

    def _start(self, index: int, alloc: Allocation) -> None:
        groups = sorted({self.cluster.nodes[part.node].group for part in alloc})
        self.log.append((self.now, "start", self.jobs[index].id, ",".join(groups)))
        super()._start(index, alloc)

    def evict(self, index: int, *, freed: bool = False) -> float:
        self.log.append((self.now, "evict", self.jobs[index].id, ""))
        return super().evict(index, freed=freed)


def simulated() -> list[Snapshot]:
    """The replay's snapshot at the end of each step (just before the next, or `END_S`)."""
    from infra.catalog import load_catalog
    from infra.progress import quiet

    the_spec = spec()
    catalog = load_catalog()
    plan = expand(the_spec, catalog)
    listed = tuple(sorted(trace_jobs(), key=lambda j: (j.submit_s, j.line)))
    trace = Trace("joblist.csv", "railplan-csv", len(listed), listed, {}, None)
    run = _Recording(the_spec, plan, catalog, trace, SimPolicy())
    run.run(quiet)
    ends = {j.id: j.submit_s + j.duration_s for j in listed}
    bounds = [s.at_s for s in STEPS[1:]] + [END_S]
    out = []
    for bound in bounds:
        held: Snapshot = {}
        for at, what, name, group in run.log:
            if at >= bound:
                break
            if what == "start":
                held[name] = group
            else:
                held.pop(name, None)
        out.append({n: g for n, g in sorted(held.items()) if ends[n] >= bound})
    return out


def changes(before: Snapshot, after: Snapshot, ended: set[str]) -> dict[str, list[str]]:
    """What a step did: jobs admitted (``job@group``) and evicted (held before, not ended)."""
    return {
        "admitted": sorted(f"{n}@{g}" for n, g in after.items() if before.get(n) != g),
        "evicted": sorted(n for n in before if n not in after and n not in ended),
    }


def step_changes(snapshots: list[Snapshot]) -> list[dict[str, list[str]]]:
    """`changes` of every step, from the snapshots after each."""
    out: list[dict[str, list[str]]] = []
    before: Snapshot = {}
    for step, after in zip(STEPS, snapshots, strict=True):
        ended = {j.name for j in step.jobs} if step.kind == "finish" else set()
        out.append(changes(before, after, ended))
        before = after
    return out
