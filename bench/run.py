"""Benchmarks: wall time and peak memory of linting and planning specs of growing size.

Not a test: numbers are printed, never asserted. Each case runs in a fresh Python process
so its peak RSS (``ru_maxrss``) is its own; wall time covers the work only (spec parse and
catalog load excluded). Planning cost should grow linearly with the GPU count.

    make bench            # all cases
    python bench/run.py --case plan:8192:1   # one case (servers, planes)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN_CASES = [(128, 1), (2048, 1), (8192, 1), (16384, 8)]  # DGX H100 servers, planes
LINT_GROUPS = [10, 100, 400]


def plan_spec(servers: int, planes: int) -> str:
    """A DGX H100 cluster with compute (SHARP), storage and management networks."""
    return f"""name: bench
site: {{rack: {{power_kw: 44}}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups: [{{name: gpu, node: dgx-h100, count: {servers}, hostname: "n{{index:06d}}"}}]
fabrics:
  compute: {{switch: qm9700, su_size: 32, sharp: true, subnet_manager: opensm, planes: {planes}}}
  storage: {{switch: qm9700}}
  management: {{}}
"""


def lint_spec(groups: int) -> str:
    """``groups`` node groups of 32 DGX H100 each, half of them MIG-split."""
    lines = [
        "name: bench",
        "site: {management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8, address_block_bits: 9}",
        "scheduler: {mig_strategy: mixed}",
        "mig_layouts:",
        '  balanced: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}',
        "fabrics: {compute: {switch: qm9700, subnet_manager: opensm, planes: 8}}",
        "node_groups:",
    ]
    for i in range(groups):
        mig = "balanced" if i % 2 else "disabled"
        lines.append(
            f"  - {{name: g{i}, node: dgx-h100, count: 32, "
            f"hostname: 'g{i}-{{index:03d}}', mig: {mig}}}"
        )
    return "\n".join(lines) + "\n"


def run_case(case: str) -> dict[str, float]:
    """Run one case in this process; return seconds and peak RSS in MiB."""
    from infra.catalog import load_catalog
    from infra.lint import lint_loaded
    from infra.spec import load_spec_text
    from infra.topology import expand

    kind, *args = case.split(":")
    catalog = load_catalog()
    if kind == "plan":
        spec = load_spec_text(plan_spec(int(args[0]), int(args[1]))).spec
        start = time.perf_counter()
        plan = expand(spec, catalog)
        seconds = time.perf_counter() - start
        extra = {"cables": len(plan.cables), "switches": len(plan.switches)}
    else:
        loaded = load_spec_text(lint_spec(int(args[0])))
        start = time.perf_counter()
        findings = lint_loaded(loaded, catalog)
        seconds = time.perf_counter() - start
        extra = {"findings": len(findings)}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 3), "peak_mib": round(peak, 1), **extra}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    cases = [
        (f"plan {s * 8:,} GPUs" + (f" in {p} planes" if p > 1 else ""), f"plan:{s}:{p}")
        for s, p in PLAN_CASES
    ]
    cases += [(f"lint {g} groups ({g * 256:,} GPUs)", f"lint:{g}") for g in LINT_GROUPS]
    print(f"{'case':<36} {'wall s':>8} {'peak MiB':>9}  detail")
    for label, case in cases:
        out = subprocess.run(
            [sys.executable, __file__, "--case", case],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        result = json.loads(out.stdout)
        detail = ", ".join(
            f"{k} {v:,}" for k, v in result.items() if k not in ("seconds", "peak_mib")
        )
        print(f"{label:<36} {result['seconds']:>8.2f} {result['peak_mib']:>9.1f}  {detail}")


if __name__ == "__main__":
    main()
