"""Rules about numeric precisions the spec asks of its GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups


@rule(
    "RP020",
    "precision-unsupported",
    Severity.ERROR,
    "A budget asks for a precision the cluster's GPUs lack (e.g. fp8 on A100).",
)
def precision_unsupported(ctx: LintContext) -> Iterator[Violation]:
    """A budget's `precision` must be supported by every GPU model in the cluster.

    Why: A100 (compute capability 8.0) has no FP8 tensor cores — Transformer Engine needs 8.9
    or later — so an FP8 throughput claim on A100 is wrong by construction and every budget
    derived from it is fiction.
    Fix: use bf16 or fp16 on Ampere, or plan Hopper nodes (H100/H200) for FP8.
    """
    gpus = {gpu.name: gpu for _, _, _, gpu in known_groups(ctx)}
    for j, budget in enumerate(ctx.loaded.spec.budgets):
        precision = getattr(getattr(budget, budget.kind), "precision", None)
        if precision is None:
            continue
        lacking = sorted(name for name, gpu in gpus.items() if not gpu.supports(precision))
        if lacking:
            have = sorted(gpus[lacking[0]].dense_tflops)
            yield Violation(
                f"budgets[{j}].{budget.kind}.precision",
                f"{precision} is not supported by {', '.join(lacking)}",
                f"supported: {', '.join(have)}",
            )
