"""Rules about the budgets a spec declares, evaluated on the planned cluster."""

from __future__ import annotations

from collections.abc import Iterator

from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity


@rule(
    "RP060",
    "budget-not-met",
    Severity.ERROR,
    "A declared budget is not met by the planned cluster.",
    needs_plan=True,
)
def budget_not_met(ctx: LintContext) -> Iterator[Violation]:
    """Every declared budget must hold for the planned cluster; met ones report headroom.

    Why: budgets are the targets the cluster is bought for (all-reduce time, scaling
    efficiency, checkpoint time, power, cost, model fit); finding a miss in a spec costs
    an edit, finding it after cabling costs a redesign. A met budget is reported as info with
    its headroom, so a shrinking margin is visible in review.
    Fix: change the spec (fabric, SHARP, storage throughput, racks) or the budget; `railplan
    budget SPEC` shows the predicted value, the limit and what limits it.
    """
    for r in ctx.budgets:
        if r.error:
            continue  # RP061
        op = "<=" if r.better == "lower" else ">="
        unit = f" {r.unit}" if r.unit else ""
        text = f"{r.kind}: predicted {_num(r.predicted)}{unit}, limit {op} {_num(r.limit)}{unit}"
        if r.passed:
            yield Violation(r.path, f"{text}, headroom {r.margin:+.1%}", r.detail, Severity.INFO)
        else:
            yield Violation(r.path, f"{text}, missed by {-r.margin:.1%}", r.detail)


@rule(
    "RP061",
    "budget-unevaluable",
    Severity.ERROR,
    "A declared budget cannot be evaluated on this spec.",
    needs_plan=True,
)
def budget_unevaluable(ctx: LintContext) -> Iterator[Violation]:
    """A budget must be answerable from the spec.

    Why: a budget over more GPUs than the cluster has, a checkpoint budget without a storage
    fabric or a precision the GPUs lack cannot be checked, so it silently protects nothing.
    Fix: follow the message (GPU count, `fabrics.storage`, precision).
    """
    for r in ctx.budgets:
        if r.error:
            yield Violation(r.path, f"{r.kind}: cannot evaluate: {r.error}")


def _num(value: float) -> str:
    """Thousands with separators, smaller values with 4 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
