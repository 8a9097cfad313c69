"""`make slurm-replay`: each case on real Slurm and on railplan's model, side by side.

    python -m tests.slurm_replay [CASE ...] [--out results.json] [--keep DIR]

Cases are `tests.slurm_replay.replay.CASES` (default: steady and wide). Prints one table row
per case and writes every figure, per job too, as JSON. Exits 2 when the machine lacks what
the cluster needs (root, iproute2, munge, slurmctld, slurmd, slurm-client), 1 when a case
misses the issue's target (mean queueing delay within 10 %, 90 % of jobs in the same order),
0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.slurm_replay.cluster import missing_tools
from tests.slurm_replay.replay import CASES, run_case

TARGET_QUEUE_ERROR = 0.10
TARGET_SAME_ORDER = 0.90


def main(argv: list[str] | None = None) -> int:
    """Run the cases; the exit code (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tests.slurm_replay")
    # no `choices`: Python 3.11's argparse checks an empty or default list against them whole
    parser.add_argument(
        "cases", nargs="*", help=f"of {', '.join(sorted(CASES))} (default: steady wide)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep each case's files (logs) under this directory"
    )
    args = parser.parse_args(argv)
    cases = args.cases or ["steady", "wide"]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)} (choose from {', '.join(sorted(CASES))})")
    missing = missing_tools()
    if missing:
        print(f"slurm-replay: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    results = []
    print(
        "case    jobs waited  mean queue Slurm  railplan  error  start error mean/p95  same order"
        "  backfill plans same"
    )
    for name in cases:
        if args.keep is not None:  # logs and jobcomp stay for `replay.analyse`
            result = run_case(CASES[name], args.keep / name)
        else:
            with tempfile.TemporaryDirectory(prefix=f"slurm-replay-{name}-") as tmp:
                result = run_case(CASES[name], Path(tmp))
        results.append(result)
        q, e, plans = result["mean_queue_s"], result["start_error_s"], result["plans_same"]
        print(
            f"{name:<7} {result['jobs']:>4} {result['waited']:>6} {q['slurm']:>11.1f} s"
            f" {q['railplan']:>7.1f} s {result['mean_queue_error'] * 100:>5.1f} %"
            f" {e['mean']:>9.1f} / {e['p95']:.1f} s {result['same_order'] * 100:>9.1f} %"
            f" {plans['same']:>8} of {plans['cycles']} cycles",
            flush=True,
        )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    met = all(
        r["mean_queue_error"] <= TARGET_QUEUE_ERROR and r["same_order"] >= TARGET_SAME_ORDER
        for r in results
    )
    print(f"target (queue within 10 %, 90 % same order): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
