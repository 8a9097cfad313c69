"""Benchmarks: wall time and peak memory of loading and linting specs of growing size.

Not a test: numbers are printed, never asserted. Each case runs in this process after a
warm-up; peak memory is tracemalloc's peak for the case (Python allocations), wall time the
best of three runs. Cost should grow linearly with the number of node groups.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from infra.catalog import load_catalog
from infra.lint import lint_loaded
from infra.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parent.parent


def synthetic_spec(groups: int) -> str:
    """A spec with ``groups`` node groups of 32 DGX H100 each, half of them MIG-split."""
    lines = [
        "name: bench",
        "site: {management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}",
        "scheduler: {mig_strategy: mixed}",
        "mig_layouts:",
        '  balanced: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}',
        "fabrics: {compute: {switch: qm9700, sharp: true}}",
        "node_groups:",
    ]
    for i in range(groups):
        mig = "balanced" if i % 2 else "disabled"
        lines.append(
            f"  - {{name: g{i}, node: dgx-h100, count: 32, hostname: 'g{i}-{{index:03d}}', "
            f"mig: {mig}}}"
        )
    return "\n".join(lines) + "\n"


def measure(label: str, work: Callable[[], object]) -> None:
    work()  # warm-up: imports, catalog cache
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:<44} {best * 1000:9.1f} ms {peak / 2**20:9.1f} MiB")


def main() -> None:
    catalog = load_catalog()
    print(f"{'case':<44} {'wall':>12} {'peak':>13}")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        measure(f"lint {path.name}", lambda p=path: lint_loaded(load_spec(p), catalog))
    for groups in (10, 100, 1000):
        text = synthetic_spec(groups)
        gpus = groups * 32 * 8
        measure(
            f"lint {groups} groups ({gpus:,} GPUs)",
            lambda t=text: lint_loaded(load_spec_text(t), catalog),
        )


if __name__ == "__main__":
    main()
