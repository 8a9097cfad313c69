"""`LintContext`: what a spec lint rule may look at (the loaded spec, the catalog, the plan).

The plan and the evaluated budgets are computed once, on first use, and shared by every rule
that asks, so a rule costs only what it reads. A command that plans anyway hands its plan
(and budgets) in, or reads back the ones lint built, so each command plans a spec once.
Rules never see a half-built context: a spec that cannot be planned shows as ``plan is None``
with the reason in ``plan_error``.
"""

from __future__ import annotations

import functools

from infra.budget.evaluate import BudgetResult, evaluate_budgets
from infra.catalog import Catalog
from infra.progress import Progress, quiet
from infra.spec import LoadedSpec
from infra.spec.yamlpos import SourceMap
from infra.topology import Plan, PlanError, expand
from infra.topology.facts_model import GroupMig
from infra.topology.groups import group_migs

__all__ = ["LintContext"]


class LintContext:
    """Everything a rule may look at; the plan and the budgets are computed once, on use."""

    def __init__(
        self,
        loaded: LoadedSpec,
        catalog: Catalog,
        *,
        plan: Plan | None = None,
        budgets: list[BudgetResult] | None = None,
        progress: Progress = quiet,
    ) -> None:
        """A context over one spec; ``plan`` and ``budgets`` are given if already built.

        Otherwise they are built on first use, the plan reporting to ``progress``.
        """
        self.loaded = loaded
        self.catalog = catalog
        self._planned: tuple[Plan | None, PlanError | None] | None = (
            (plan, None) if plan is not None else None
        )
        self._budgets = budgets
        self._progress = progress

    @property
    def source(self) -> SourceMap:
        """Where the spec's paths are, for locating findings (the engine's `Subject`)."""
        return self.loaded.source

    def _plan(self) -> tuple[Plan | None, PlanError | None]:
        if self._planned is None:
            try:
                self._planned = (expand(self.loaded.spec, self.catalog, self._progress), None)
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
    def migs(self) -> tuple[GroupMig, ...]:
        """Each node group's MIG states, in spec order (`infra.topology.groups` owns them).

        The plan's when it is already built; otherwise the same owner's answer from the spec,
        so rules that run before planning (and on specs that cannot be planned) read the
        same states without planning.
        """
        planned = self._planned[0] if self._planned is not None else None
        if planned is not None and len(planned.groups) == len(self.loaded.spec.node_groups):
            return tuple(g.mig for g in planned.groups.values())
        return group_migs(self.loaded.spec, self.catalog)

    @property
    def budgets(self) -> list[BudgetResult]:
        """The spec's declared budgets, evaluated once on the plan."""
        if self._budgets is None:
            self._budgets = evaluate_budgets(
                self.loaded.spec, self.catalog, self.plan, spec_file=self.loaded.file
            )
        return self._budgets
