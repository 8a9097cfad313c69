"""The bench's replay with the simulator's hot modules compiled by mypyc, in a copy of the tree.

Not a test, and not how railplan is installed: an experiment toward the replay's speed target
(a million jobs on 10,000 GPUs in 60 s, docs/simulate.md "Speed"). It copies the repository (without ``.git`` and ``.venv``) to
``--dir``, compiles `MODULES` there with mypyc (the same type annotations mypy checks; needs a
C compiler and the Python headers), and runs `bench/sim_cpu.py` in the copy, which prints the
replay's CPU seconds, peak RSS and the SHA-256 of its results: equal to the interpreted
build's where the compiled modules behave the same.

    python bench/sim_mypyc.py 100000
    python bench/sim_mypyc.py 1000000 --dir /tmp/railplan-mypyc --reuse
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = [
    f"infra/simulate/{name}.py"
    for name in (
        "cluster",
        "engine",
        "fragment",
        "metrics",
        "migrun",
        "place",
        "power",
        "preempt",
        "retry",
        "score",
        "shapes",
        "state",
        "tenants",
    )
]
"""The replay's inner loop; `livelock` stays interpreted (mypyc cannot compile a class that
inherits from ``RuntimeError``)."""


def build(into: Path) -> None:
    """Copy the tree to ``into`` and compile `MODULES` there."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(ROOT, into, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.so"))
    subprocess.run([sys.executable, "-m", "mypyc", *MODULES], cwd=into, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("--dir", default="/tmp/railplan-mypyc", help="where to build the copy")
    parser.add_argument("--reuse", action="store_true", help="run the copy built before")
    parser.add_argument("--mig", default="daynight", choices=("none", "static", "daynight"))
    args = parser.parse_args()
    into = Path(args.dir)
    if not args.reuse:
        build(into)
    command = [sys.executable, "bench/sim_cpu.py", str(args.jobs), "--mig", args.mig]
    subprocess.run(command, cwd=into, check=True)


if __name__ == "__main__":
    main()
