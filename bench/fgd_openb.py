"""The FGD paper's inflation experiment on the openb cluster: Random, BestFit, FGD side by side.

Weng et al. (USENIX ATC '23, Fig. 9a; their simulator repository's expected results, means of
10 seeds) place 87.47 % (Random), 93.08 % (BestFit) and 95.39 % (FGD) of the openb cluster's
GPUs when the openb pods, inflated to 130 % of its GPUs, arrive and nothing departs. This
replays the same procedure (`railplan simulate --inflate 1.3 --placement P --seed S`) on
``bench/openb-cluster.yaml`` (the published node list as generic shapes) for each seed and
placement, on a synthetic openb-like trace (`infra.simulate.openb`: pods drawn from the
published pod list's histogram of requests, a new draw per seed) or, with ``--trace``, on a
local copy of the pod list itself (it stays out of the repository). Prints one row per
placement: the mean, lowest and highest share of GPUs allocated, the paper's figure, the
difference in points, and the mean wall time of a replay (each seed's share goes to stderr as
it comes). Measured, never asserted.

    .venv/bin/python bench/fgd_openb.py [--seeds 10] [--trace openb_pod_list_default.csv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.catalog import catalog_for
from infra.simulate.engine import simulate
from infra.simulate.jobs import Trace
from infra.simulate.openb import OPENB_SHAPES, openb_like
from infra.simulate.policy import SimPolicy
from infra.simulate.traces import read_trace
from infra.spec import load_spec
from infra.topology import expand

PAPER = {"random": 87.47, "best-fit": 93.08, "fgd": 95.39}
"""Share of GPUs allocated at 130 % requested (Weng et al., ATC '23, Fig. 9a), percent."""

CLUSTER = ROOT / "bench" / "openb-cluster.yaml"
PODS = sum(OPENB_SHAPES.values())


def _trace(path: str | None, seed: int) -> Trace:
    if path is not None:
        return read_trace(path)
    jobs = tuple(openb_like(PODS, seed))
    return Trace("openb-like", "synthetic", len(jobs), jobs)


def run(placements: list[str], seeds: int, path: str | None, factor: float) -> None:
    """Print the table (see the module docstring)."""
    spec = load_spec(CLUSTER).spec
    catalog = catalog_for(spec)
    plan = expand(spec, catalog)
    print(
        f"{'placement':<10} {'mean %':>7} {'min %':>7} {'max %':>7} {'paper':>6} {'diff':>6} {'s':>5}"
    )
    for placement in placements:
        shares, took = [], []
        for seed in range(1, seeds + 1):
            policy = SimPolicy(placement=placement, seed=seed, inflate=factor)
            start = time.perf_counter()
            result = simulate(spec, plan, catalog, _trace(path, seed), policy=policy)
            took.append(time.perf_counter() - start)
            assert result.inflation is not None
            shares.append(100 * result.inflation.allocation)
            print(f"  {placement} seed {seed}: {shares[-1]:.2f} %", file=sys.stderr, flush=True)
        mean = statistics.fmean(shares)
        paper = PAPER.get(placement)
        diff = f"{mean - paper:+6.2f}" if paper is not None else "     -"
        shown = f"{paper:6.2f}" if paper is not None else "     -"
        print(
            f"{placement:<10} {mean:7.2f} {min(shares):7.2f} {max(shares):7.2f} {shown} {diff} "
            f"{statistics.fmean(took):5.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trace", help="the openb pod list (default: openb-like, synthetic)")
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--placements", default="random,best-fit,fgd,packing")
    args = parser.parse_args()
    run(args.placements.split(","), args.seeds, args.trace, args.inflate)


if __name__ == "__main__":
    main()
