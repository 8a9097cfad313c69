"""Write a synthetic job trace (railplan's CSV) from `infra.simulate.synthetic`.

Usage: ``python bench/make_trace.py OUT.csv --jobs 3000 --gpus 512 --days 2 --seed 1
--tenants research,inference``: `generate`, ``--jobs`` jobs over ``--days``. With ``--load L``
it is `generate_load` instead, the generator behind ``railplan trace``: ``--jobs`` jobs over
the window that makes them offer load L of ``--gpus`` GPUs (``--days`` is then ignored), sizes
from the measured mix. The distributions and their sources are in the generator's docstring
and docs/simulate.md ("Traces"). For a spec's cluster use ``railplan trace SPEC``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.simulate.synthetic import (
    FRACTIONAL_SHARE,
    MULTI_GPU_SHARE,
    generate,
    generate_load,
    write_csv,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="CSV file to write ('-' for standard output)")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--days", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tenants", default="default", help="comma-separated tenant names")
    parser.add_argument(
        "--fractional-share",
        type=float,
        default=FRACTIONAL_SHARE,
        help="share of jobs asking for part of one GPU (default: measured on Alibaba v2023)",
    )
    parser.add_argument(
        "--multi-gpu-share",
        type=float,
        default=MULTI_GPU_SHARE,
        help="share of jobs asking for several GPUs (default: measured on Alibaba v2023)",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=None,
        help="offered load (GPU-hours over the cluster's in the window); sets the window",
    )
    args = parser.parse_args(argv)
    if args.load is not None:
        jobs = generate_load(
            args.load,
            gpus=args.gpus,
            seed=args.seed,
            jobs=args.jobs,
            mix="measured",
            tenants=args.tenants.split(","),
        ).jobs
    else:
        jobs = generate(
            args.jobs,
            gpus=args.gpus,
            seed=args.seed,
            tenants=args.tenants.split(","),
            days=args.days,
            fractional_share=args.fractional_share,
            multi_gpu_share=args.multi_gpu_share,
        )
    if args.out == "-":
        write_csv(jobs, sys.stdout)
    else:
        with Path(args.out).open("w", encoding="utf-8", newline="") as out:
            write_csv(jobs, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
