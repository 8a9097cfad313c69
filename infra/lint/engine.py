"""The lint engine: a registry of small named rules and the loop that runs them over a spec.

A rule is a function ``check(ctx) -> Iterable[Violation]`` registered with `rule(...)` under a
stable id (``RP`` + three digits), a slug name, a default severity, a one-line summary and a
doc (its function docstring: why the rule matters, how to fix a violation). Rules speak in spec
paths only; the engine turns each `Violation` into a `Finding` with the file, line and column
of that path, so rules never handle positions. Rules are pure: same spec, same findings.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.catalog import Catalog
from infra.lint.finding import Finding, Severity
from infra.spec import LoadedSpec
from infra.topology import Plan, PlanError, expand


@dataclass(frozen=True)
class Violation:
    """What a rule reports: where (spec path), what rule was broken, and a hint."""

    path: str
    message: str
    hint: str = ""
    severity: Severity | None = None  # None: the rule's default severity


class LintContext:
    """Everything a rule may look at; the plan and the budgets are computed once, on use."""

    def __init__(self, loaded: LoadedSpec, catalog: Catalog) -> None:
        self.loaded = loaded
        self.catalog = catalog
        self._planned: tuple[Plan | None, PlanError | None] | None = None

    def _plan(self) -> tuple[Plan | None, PlanError | None]:
        if self._planned is None:
            try:
                self._planned = (expand(self.loaded.spec, self.catalog), None)
            except PlanError as exc:
                self._planned = (None, exc)
        return self._planned

    @property
    def plan(self) -> Plan | None:
        """The planned cluster, or None when the spec cannot be planned (see plan_error)."""
        return self._plan()[0]

    @property
    def plan_error(self) -> PlanError | None:
        """Why the spec cannot be planned, or None."""
        return self._plan()[1]

    @functools.cached_property
    def budgets(self) -> list[BudgetResult]:
        """The spec's declared budgets, evaluated once on the plan."""
        return evaluate_budgets(self.loaded.spec, self.catalog, self.plan)


Check = Callable[[LintContext], Iterable[Violation]]


@dataclass(frozen=True)
class Rule:
    """A registered lint rule."""

    id: str
    name: str
    severity: Severity
    summary: str
    check: Check = field(compare=False, repr=False)
    needs_plan: bool = False

    @property
    def doc(self) -> str:
        """The rule's documentation: why it matters and how to fix it."""
        return inspect.cleandoc(self.check.__doc__ or self.summary)


_REGISTRY: dict[str, Rule] = {}


def rule(
    rule_id: str, name: str, severity: Severity, summary: str, *, needs_plan: bool = False
) -> Callable[[Check], Check]:
    """Register ``check`` as rule ``rule_id``; ids and names must be unique.

    ``needs_plan`` rules look at the planned topology; they run only when the spec-level
    rules found no error, so one root cause gives one finding.
    """

    def register(check: Check) -> Check:
        if rule_id in _REGISTRY or any(r.name == name for r in _REGISTRY.values()):
            raise ValueError(f"duplicate lint rule {rule_id} / {name}")
        _REGISTRY[rule_id] = Rule(rule_id, name, severity, summary, check, needs_plan)
        return check

    return register


def all_rules() -> list[Rule]:
    """Every registered rule, sorted by id."""
    import infra.lint.rules  # noqa: F401  (registers the rules on import)

    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def find_rule(key: str) -> Rule | None:
    """Look a rule up by id (``RP011``, case-insensitive) or by name."""
    for r in all_rules():
        if key.upper() == r.id or key == r.name:
            return r
    return None


def select_rules(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[Rule]:
    """Rules enabled by ``--select``/``--ignore`` (ids, id prefixes like ``RP0``, or names)."""

    def matches(r: Rule, keys: Sequence[str]) -> bool:
        return any(r.id.startswith(k.upper()) or r.name == k for k in keys)

    rules = all_rules()
    if select:
        rules = [r for r in rules if matches(r, select)]
    return [r for r in rules if not matches(r, ignore)]


def run_rules(ctx: LintContext, rules: Iterable[Rule]) -> list[Finding]:
    """Run ``rules`` over one loaded spec and return its findings, sorted.

    Spec-level rules run first; plan rules only if those found no error.
    """
    chosen = list(rules)
    spec_findings = _run(ctx, [r for r in all_rules() if not r.needs_plan])
    findings = [f for f in spec_findings if f.rule in {r.id for r in chosen}]
    if not any(f.severity is Severity.ERROR for f in spec_findings):
        findings += _run(ctx, [r for r in chosen if r.needs_plan])
    return sorted(set(findings))


def _run(ctx: LintContext, rules: Iterable[Rule]) -> list[Finding]:
    findings: list[Finding] = []
    for r in rules:
        for v in r.check(ctx):
            pos = ctx.loaded.source.position(v.path)
            findings.append(
                Finding(
                    file=ctx.loaded.file,
                    line=pos.line,
                    column=pos.column,
                    rule=r.id,
                    severity=v.severity or r.severity,
                    message=v.message,
                    path=v.path,
                    hint=v.hint,
                )
            )
    return findings
