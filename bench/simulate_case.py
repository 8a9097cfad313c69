"""Bench case `simulate:N`: `railplan simulate`'s replay of N synthetic jobs on 10,000 GPUs.

The plan is 1,250 DGX A100 (SUs of 20) in two groups: 1,170 training nodes and 80 inference
nodes split into 1g.10gb + 2g.20gb + 4g.40gb per GPU by day and whole by night, three tenants with
quotas that borrow from each other. The trace is generated here (bench only, not a model of
any published workload): exponential inter-arrivals at about 80 % offered load, sizes mostly
1-8 GPUs with a tail to 1,024 (a third of the 1-GPU jobs are fractions of 0.1, 0.25 or 0.5), lognormal durations
(median 30 min). Wall time covers the replay only (trace text parsing excluded).
"""

from __future__ import annotations

import random
import resource
import time
from typing import Any

SERVERS = 1250
SIZES = [
    (1, 50),
    (2, 10),
    (4, 10),
    (8, 20),
    (16, 4),
    (32, 2.5),
    (64, 1.5),
    (128, 1),
    (256, 0.5),
    (512, 0.3),
    (1024, 0.2),
]  # (GPUs, percent of jobs)


_SCHEDULE = """    mig: day
    mig_schedule:
      timezone: UTC
      drain_timeout: 20m
      changes: [{at: "0 7 * * *", mig: day}, {at: "0 21 * * *", mig: disabled}]
"""
MIG_VARIANTS = {"none": "no MIG", "static": "static MIG", "daynight": "day/night MIG"}
"""The inference group without MIG, split all the time, or split by day (docs/simulate.md):
the variants `railplan simulate --compare-mig` replays (`infra.simulate.variants`)."""


def simulate_spec() -> str:
    """1,250 DGX A100 on Kubernetes with Kueue, three tenants and an inference group."""
    return f"""name: bench
site: {{rack: {{power_kw: 28, units: 42}}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups:
  - {{name: train, node: dgx-a100-640gb, count: 1170, hostname: "t{{index:04d}}"}}
  - name: infer
    node: dgx-a100-640gb
    count: 80
    hostname: "i{{index:04d}}"
{_SCHEDULE}fabrics:
  compute: {{switch: qm8790, su_size: 20, subnet_manager: ufm}}
scheduler:
  mig_strategy: mixed
  batch: kueue
  tenants:
    - {{name: research, gpus: 6000, priority: high, borrowing_limit: null}}
    - {{name: product, gpus: 3000, priority: normal, borrowing_limit: null}}
    - {{name: serving, gpus: 1000, priority: critical, borrowing_limit: 0}}
mig_layouts: {{day: {{profiles: {{"1g.10gb": 1, "2g.20gb": 1, "4g.40gb": 1}}}}}}
"""


def synthetic_trace(jobs: int, seed: int = 7) -> str:
    """A railplan CSV trace of ``jobs`` jobs (see the module docstring)."""
    rng = random.Random(seed)
    sizes = [s for s, _ in SIZES]
    weights = [w for _, w in SIZES]
    rows = ["id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model"]
    t = 0.0
    for i in range(jobs):
        t += rng.expovariate(1 / 5.2)
        gpus = rng.choices(sizes, weights)[0]
        milli = rng.choice((100, 250, 500)) if gpus == 1 and rng.random() < 0.33 else 1000
        tenant = "serving" if milli < 1000 else rng.choice(("research", "research", "product"))
        duration = min(rng.lognormvariate(7.5, 1.2), 7 * 86_400)
        priority = rng.choice(("low", "normal", "normal", "high"))
        rows.append(f"j{i},{t:.1f},{duration:.1f},{gpus},{milli},{tenant},{priority},")
    return "\n".join(rows) + "\n"


def simulate_case(jobs: int, mig: str = "daynight") -> dict[str, float | str]:
    """Replay ``jobs`` synthetic jobs on the 10,000-GPU plan; wall time, peak RSS, figures."""
    from infra.catalog import load_catalog
    from infra.simulate.engine import simulate
    from infra.simulate.traces import trace_from_text
    from infra.simulate.variants import mig_variants
    from infra.spec import load_spec_text
    from infra.topology import expand

    catalog = load_catalog()
    spec = mig_variants(load_spec_text(simulate_spec()).spec, catalog)[MIG_VARIANTS[mig]]
    plan = expand(spec, catalog)
    trace = trace_from_text(synthetic_trace(jobs), "bench.csv")
    start = time.perf_counter()
    cpu0 = time.process_time()
    result = simulate(spec, plan, catalog, trace)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "cpu_s": round(time.process_time() - cpu0, 2),
        "gpus": result.gpus,
        "allocation": round(result.allocation_mean, 3),
        "p95_65_512_s": _p95(result.queueing_by_size, "65-512"),
        "p95_over_512_s": _p95(result.queueing_by_size, ">512"),
        "fragmentation": round(result.fragmentation, 3),
        "infer_allocation": round(result.allocation_by_group["infer"], 3),
        "preemptions": result.preemptions,
        "lost_gpu_hours": round(result.lost_gpu_hours),
        "repartition_gpu_hours": round(sum(r.lost_gpu_hours for r in result.repartitions), 1),
        "repartitions": len(result.repartitions),
        "repartition_su_hours": round(
            sum(r.drain_s + r.reconfigure_s for r in result.repartitions) / 3600, 1
        ),
        **{f"p95_{t}_s": d.p95_s for t, d in sorted(result.queueing.items())},
    }


def _p95(table: dict[str, Any], bucket: str) -> float:
    return table[bucket].p95_s if bucket in table else 0.0
