"""Replay CPU of the bench's `simulate:N` case, with a digest that proves results unchanged.

Not a test. Builds the plan and trace exactly as ``bench/run.py --case simulate:N`` does
(`bench/simulate_case.py`), replays them, and prints one JSON line: the replay's process CPU
seconds (``time.process_time``: steadier than wall time on a shared machine), peak RSS, and a
SHA-256 over the result JSON (``railplan simulate --format json``) and the per-job table
(first start, end and evictions of every job, at full float precision), so two versions of
the engine can be shown to give byte-identical results.

    python bench/sim_cpu.py 100000                # the bench's 100k case
    python bench/sim_cpu.py 20000 --mig none      # a MIG variant (none|static|daynight)
    python bench/sim_cpu.py 100000 --profile out.prof   # cProfile the replay alone
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.simulate_case import MIG_VARIANTS, simulate_spec, synthetic_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("--mig", default="daynight", choices=sorted(MIG_VARIANTS))
    parser.add_argument("--profile", help="write a cProfile of the replay to this file")
    args = parser.parse_args()

    from infra.catalog import load_catalog
    from infra.simulate.engine import Replay
    from infra.simulate.policy import SimPolicy
    from infra.simulate.summary import summarise
    from infra.simulate.text import result_json
    from infra.simulate.traces import trace_from_text
    from infra.simulate.variants import mig_variants
    from infra.spec import load_spec_text
    from infra.topology import expand

    catalog = load_catalog()
    spec = mig_variants(load_spec_text(simulate_spec()).spec, catalog)[MIG_VARIANTS[args.mig]]
    plan = expand(spec, catalog)
    trace = trace_from_text(synthetic_trace(args.jobs), "bench.csv")
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    # what `infra.simulate.engine.simulate` does without inflation
    replay = Replay(spec, plan, catalog, trace, SimPolicy(), workload=trace.jobs)
    from infra.progress import quiet

    replay.run(quiet)
    result = summarise(replay)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    digest = hashlib.sha256(result_json(result).encode())
    digest.update(repr((replay.first_start, replay.end_at, replay.evictions)).encode())
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "mig": args.mig,
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "preemptions": result.preemptions,
                "sha256": digest.hexdigest()[:16],
            }
        )
    )


if __name__ == "__main__":
    main()
