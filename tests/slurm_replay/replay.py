"""Replay a compressed job trace on real Slurm and on railplan's model; compare job starts.

`run_case` starts a `SlurmCluster` for the case's spec, submits the trace's jobs at their
submit times (`sbatch`, a job that sleeps its run time under its time limit), waits for
jobcomp/filetxt to record every job, then replays the same jobs in `railplan simulate`'s
engine (`analyse`). What the jobs and the machine did is the input: each job submitted when
Slurm recorded its submission and holding its nodes from the pass that started it to its
epilog's completion, slurmctld's threads waking when its log shows them
(`SimPolicy.backfill_wakes_s`, `sched_wakes_s`), a backfill cycle taking as long as the log
says. What the scheduler decided, each job's start, is the prediction. `compare` reports,
side by side, the mean queueing delay (start less submit) of both, the per-job start-time
error, and how many jobs start in the same order: a job does when no other job started at
least `TIE_S` earlier than it in Slurm starts at least `TIE_S` later than it in railplan, or
the other way round. The "plain" figures predict from the trace alone (sleep times, the
model's own one-second clocks).

Traces are synthetic and seeded (`compressed_trace`): seconds instead of hours, sizes of 1
to 24 GPUs on 8-GPU nodes, time limits in whole minutes as Slurm keeps them.
"""

from __future__ import annotations

import bisect
import math
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.catalog import load_catalog
from infra.progress import quiet
from infra.simulate.agent_clock import AgentClock
from infra.simulate.engine import Replay
from infra.simulate.jobs import Job, Trace
from infra.simulate.policy import SimPolicy
from infra.spec import load_spec_text
from infra.topology import expand
from tests.slurm_replay.cluster import Plans, SlurmCluster

__all__ = ["CASES", "Case", "compare", "compressed_trace", "run_case"]

TIE_S = 1.0

SPEC = """name: replay
site: {{management_cidr: 10.0.0.0/24, bmc_cidr: 10.1.0.0/24}}
node_groups: [{{name: gpu, node: dgx-a100-640gb, count: {nodes}, hostname: "node{{index:02d}}"}}]
scheduler:
  kind: slurm
  backfill: {{interval: {interval}, resolution: 1s}}
"""


PASS_S = 0.05
"""Longest a scheduling pass took from its beginning to a job's start line in the logs
(backfill cycles and epilog-triggered passes: 0 to 7 ms)."""


@dataclass(frozen=True)
class Case:
    """One comparison: a trace drawn with ``seed`` on ``nodes`` DGX A100."""

    name: str
    jobs: int
    seed: int
    nodes: int = 4
    interval: str = "2s"
    load: float = 0.9
    sizes: tuple[tuple[int, float], ...] = ((1, 0.3), (2, 0.2), (4, 0.2), (8, 0.2), (16, 0.1))
    durations_s: tuple[int, int] = (5, 40)


CASES = {
    "steady": Case("steady", 220, seed=11),
    "wide": Case(
        "wide",
        200,
        seed=23,
        sizes=((1, 0.25), (2, 0.15), (4, 0.15), (8, 0.3), (16, 0.1), (24, 0.05)),
        durations_s=(5, 50),
        load=0.95,
    ),
    "smoke": Case("smoke", 8, seed=5, nodes=2, durations_s=(1, 3), load=2.0),
}


def compressed_trace(case: Case) -> list[Job]:
    """The case's jobs: Poisson arrivals at ``load`` of the GPUs, whole-second times."""
    rng = random.Random(case.seed)
    sizes, weights = zip(*case.sizes, strict=True)
    low, high = case.durations_s
    mean_work = sum(s * w for s, w in case.sizes) / sum(weights) * (low + high) / 2
    rate = case.load * case.nodes * 8 / mean_work  # jobs a second
    jobs, t = [], 0.0
    for i in range(case.jobs):
        t += rng.expovariate(rate)
        gpus = rng.choices(sizes, weights)[0]
        duration = rng.randint(low, high)
        limit = math.ceil(duration / 60) * 60
        jobs.append(
            Job(
                f"j{i:03d}",
                float(round(t)),
                float(duration),
                gpus,
                line=i + 2,
                limit_s=float(limit),
            )
        )
    return jobs


def run_case(case: Case, root: Path) -> dict[str, Any]:
    """Run the case on real Slurm and on the model; the comparison (`compare`)."""
    catalog = load_catalog()
    spec = load_spec_text(SPEC.format(nodes=case.nodes, interval=case.interval)).spec
    plan = expand(spec, catalog)
    jobs = compressed_trace(case)
    with SlurmCluster(spec, plan, catalog, root) as cluster:
        t0 = math.ceil(time.time()) + 2
        for job in jobs:
            time.sleep(max(0.0, t0 + job.submit_s - time.time()))
            cluster.submit(job.id, job.gpus, 8, int((job.limit_s or 60) // 60), job.duration_s)
        deadline = time.time() + sum(j.duration_s for j in jobs) + 600
        while len(cluster.finished()) < len(jobs) and time.time() < deadline:
            time.sleep(1)
        records = {r["Name"]: r for r in cluster.finished()}
        log = cluster.log_times()
        planned = cluster.plans()
    return analyse(case, spec, plan, jobs, records, log, planned)


def analyse(
    case: Case,
    spec: Any,
    plan: Any,
    jobs: list[Job],
    records: dict[str, dict[str, str]],
    log: dict[str, dict[int, float]],
    planned: Plans | None = None,
) -> dict[str, Any]:
    """The comparison of one finished run (its jobcomp records and slurmctld's log times,
    and its backfill plans when given: ``plans_same``)."""
    catalog = load_catalog()
    if len(records) < len(jobs):
        raise RuntimeError(f"Slurm finished {len(records)} of {len(jobs)} jobs in time")
    ids = {name: int(r["JobId"]) for name, r in records.items()}
    unended = sorted(i for i in ids.values() if i not in log["end"])
    if unended:  # e.g. requeued when slurmstepd could not start (the slurmd logs say why)
        raise RuntimeError(f"slurmctld's log has no completion for jobs {unended[:10]}")
    # a job holds its nodes until its epilog completes (COMPLETING), when Slurm's main
    # scheduler runs; logs without epilog lines fall back to the job's end
    freed = {i: log["epilog"].get(i, log["end"][i]) for i in ids.values()}
    real = {n: (log["submit"][i], log["start"][i], freed[i]) for n, i in ids.items()}
    origin = min(submit for submit, _, _ in real.values())
    decided = _decided(log, {n: real[n][1] for n in real}, freed)
    # what the jobs did is the input (when each arrived, how long it held its nodes); what
    # the scheduler decided (when each started) is what the model predicts
    # (and from its end to its epilog's completion: slurmctld has freed its GPUs then)
    ended = {n: log["end"][i] for n, i in ids.items()}
    submitted = [
        replace(
            j,
            submit_s=real[j.id][0] - origin,
            duration_s=real[j.id][2] - decided[j.id],
            epilog_s=max(0.0, real[j.id][2] - ended[j.id]),
        )
        for j in jobs
    ]
    # the threads' wake-ups are the machine's (each sleep ends a little late), so they are
    # read from the log too; which of them run a cycle or a pass is the model's decision
    backfill = tuple(at - origin for _, at in sorted(log["cycles"].items()))
    took = tuple(log["cycle_s"].get(k, 0.0) for k in sorted(log["cycles"]))
    loop = tuple(sorted(at - origin for at in _loop_wakeups(log, freed).values()))
    slurmctld = {k: log[k][0] - origin for k in ("ctld", "loop") if 0 in log[k]}
    plan_log: list[tuple[int, str, int, tuple[int, ...]]] = []
    predicted = _predict(
        spec, plan, catalog, submitted, origin, (backfill, took), loop, slurmctld, plan_log
    )
    starts = {name: start - origin for name, (_, start, _) in real.items()}
    out = compare(submitted, starts, predicted)
    if planned is not None:
        out["plans_same"] = same_plans(planned, plan_log, ids)
    out["case"] = case.name
    out["origin_unix_s"] = origin
    out["backfill_clock_s"] = _clock(backfill)
    out["backfill_cycle_s"] = round(sum(took) / len(took), 6) if took else 0.0
    out["loop_clock_s"] = _clock(loop)
    out["epilog_s"] = _epilog_delays(log)
    plain = _predict(
        spec,
        plan,
        catalog,
        [
            replace(j, duration_s=o.duration_s, epilog_s=0.0)
            for j, o in zip(submitted, jobs, strict=True)
        ],
        origin,
        ((), ()),
        (),
        {},
    )
    out["plain"] = {k: v for k, v in compare(submitted, starts, plain).items() if k != "per_job"}
    out["per_job"] = [
        [j.id, j.gpus, j.duration_s, j.submit_s, starts[j.id], round(predicted.get(j.id, -1), 2)]
        for j in submitted
    ]
    return out


def _clock(wakes: tuple[float, ...]) -> dict[str, float]:
    """A thread's wake-ups seen in the log: how many, the first (trace seconds) and the
    length of its one-second sleeps (`AgentClock.sleep`), whose excess is the drift."""
    if not wakes:
        return {}
    sleep = AgentClock(wakes, 0.0).sleep
    return {"seen": len(wakes), "first": round(wakes[0], 3), "sleep": round(sleep, 5)}


def _decided(
    log: dict[str, dict[int, float]], starts: dict[str, float], freed: dict[int, float]
) -> dict[str, float]:
    """When the pass that started each job began: the backfill cycle's beginning or the
    epilog completion just before its start line, else the start line itself.

    A job holds its nodes from that pass on; counted from its start line instead, each job
    a pass starts at an epilog ends a millisecond or two early in the model, and along a
    chain of such jobs the shortfall added up until an end fell into the second before
    Slurm's, a whole-second `bf_interval` check came out the other way, and a cycle ran a
    second early."""
    passes = sorted([*log["cycles"].values(), *freed.values()])
    out = {}
    for name, start in starts.items():
        before = bisect.bisect_right(passes, start)
        began = passes[before - 1] if before else -math.inf
        out[name] = began if start - began <= PASS_S else start
    return out


def _loop_wakeups(log: dict[str, dict[int, float]], freed: dict[int, float]) -> dict[int, float]:
    """Wake-ups of slurmctld's background loop seen in the log: its first main-scheduler
    pass, and the passes that started a job with no epilog completing just before (those
    come from the epilog's `schedule()`, not from the loop)."""
    ends = sorted(freed.values())
    lag = 0.1 if log["epilog"] else 2.0  # without epilog lines a job's end is all we see
    out = dict(log["loop"])
    for at in log["main"].values():
        before = bisect.bisect_right(ends, at)
        if before == 0 or at - ends[before - 1] > lag:
            out[len(out)] = at
    return out


def _epilog_delays(log: dict[str, dict[int, float]]) -> dict[str, float]:
    """From a job's end to its epilog's completion: mean, p95 and max, seconds."""
    delays = sorted(log["epilog"][i] - log["end"][i] for i in log["epilog"] if i in log["end"])
    if not delays:
        return {}
    p95 = delays[min(len(delays) - 1, math.ceil(0.95 * len(delays)) - 1)]
    return {
        "mean": round(sum(delays) / len(delays), 3),
        "p95": round(p95, 3),
        "max": round(delays[-1], 3),
    }


def _predict(
    spec: Any,
    plan: Any,
    catalog: Any,
    jobs: list[Job],
    origin: float,
    backfill: tuple[tuple[float, ...], tuple[float, ...]],
    loop: tuple[float, ...],
    slurmctld: dict[str, float],
    plan_log: list[tuple[int, str, int, tuple[int, ...]]] | None = None,
) -> dict[str, float]:
    """Each job's predicted start (and, into ``plan_log``, each backfill plan).

    ``origin``: the wall clock of trace time 0; ``backfill``: the backfill agent's cycles
    seen in the log (trace seconds) and how long each took; ``loop``: the background loop's
    wake-ups seen (empty: unknown); ``slurmctld``: its start (``ctld``) and its loop's pass
    before the trace (``loop``), trace seconds, where the log has them.
    """
    ordered = tuple(sorted(jobs, key=lambda j: (j.submit_s, j.line)))
    trace = Trace("slurm-replay", "railplan-csv", len(ordered), ordered, {}, origin)
    policy = SimPolicy(
        backfill_wakes_s=backfill[0],
        backfill_took_s=backfill[1],
        sched_wakes_s=loop,
        sched_start_s=slurmctld.get("ctld"),
        sched_last_s=slurmctld.get("loop"),
    )
    run = Replay(spec, plan, catalog, trace, policy)
    if run.slurm is not None:
        run.slurm.plan_log = plan_log
    run.run(quiet)
    return {j.id: s for j, s in zip(run.jobs, run.first_start, strict=True) if s is not None}


def same_plans(
    planned: Plans, plan_log: list[tuple[int, str, int, tuple[int, ...]]], ids: dict[str, int]
) -> dict[str, Any]:
    """Backfill cycles whose every plan (job, start second, nodes) is the same in both.

    Cycles are matched by the wall second they began in: every cycle the log shows, and
    those in which the model planned a job (it logs no other). A cycle with plans on one
    side only counts as different, as does one where a plan differs. ``first`` is the
    first that differs (its wall second), or None.
    """
    model: Plans = {}
    for begun, name, start, nodes in plan_log:
        model.setdefault(begun, {})[ids.get(name, -1)] = (start, nodes)
    cycles = sorted(set(planned) | set(model))
    differ = [c for c in cycles if planned.get(c, {}) != model.get(c, {})]
    same = len(cycles) - len(differ)
    return {"cycles": len(cycles), "same": same, "first": differ[0] if differ else None}


def compare(jobs: list[Job], real: dict[str, float], predicted: dict[str, float]) -> dict[str, Any]:
    """Mean queueing delay of both, per-job start error, and jobs starting in the same order."""
    submit = {j.id: j.submit_s for j in jobs}
    names = [j.id for j in jobs if j.id in real and j.id in predicted]
    waits_real = [real[n] - submit[n] for n in names]
    waits_pred = [predicted[n] - submit[n] for n in names]
    errors = sorted(abs(predicted[n] - real[n]) for n in names)
    mean_real = sum(waits_real) / len(names)
    mean_pred = sum(waits_pred) / len(names)
    same = sum(1 for n in names if not _inverted(n, names, real, predicted))
    return {
        "jobs": len(names),
        "mean_queue_s": {"slurm": round(mean_real, 2), "railplan": round(mean_pred, 2)},
        "mean_queue_error": round(abs(mean_pred - mean_real) / mean_real, 4) if mean_real else 0.0,
        "start_error_s": {
            "mean": round(sum(errors) / len(errors), 2),
            "p50": errors[len(errors) // 2],
            "p95": errors[min(len(errors) - 1, math.ceil(0.95 * len(errors)) - 1)],
            "max": errors[-1],
        },
        "same_order": round(same / len(names), 4),
        "waited": sum(1 for w in waits_real if w > TIE_S),
    }


def _inverted(name: str, names: list[str], real: dict[str, float], pred: dict[str, float]) -> bool:
    r, p = real[name], pred[name]
    for other in names:
        dr, dp = real[other] - r, pred[other] - p
        if (dr < -TIE_S and dp > TIE_S) or (dr > TIE_S and dp < -TIE_S):
            return True
    return False
