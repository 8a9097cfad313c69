"""One layout search per spec and distinct training request, however often it is asked.

A spec may declare the same scaling budget many times, and `lint`, `budget`, `report` and
`diff` each evaluate a spec's budgets (the report twice: the verdicts and the step drawings);
a layout search takes about 0.3 s, so 300 identical budgets took minutes. `train_cached` runs
`train_plan.train` once per (spec object, catalog object, request) and hands out the same
answer, or raises the same error, again. A spec is frozen but not hashable (it holds lists),
so the memo is keyed by the spec's identity, checked through a weak reference (an id is only
reused once its object is gone), and keeps the answers of a few specs only.
"""

from __future__ import annotations

import weakref

from infra.budget.train_plan import TrainAnswer, train
from infra.budget.train_request import TrainRequest
from infra.catalog import Catalog
from infra.errors import RailplanError
from infra.spec import Spec

__all__ = ["MAX_SPECS", "train_cached"]

MAX_SPECS = 8
"""Specs whose answers are kept (a CLI run reads one or two; tests read many)."""

_Answers = dict[TrainRequest, TrainAnswer | RailplanError]
_memo: dict[int, tuple[weakref.ref[Spec], Catalog, _Answers]] = {}


def _answers(spec: Spec, catalog: Catalog) -> _Answers:
    """The answers kept for this spec and catalog (a fresh table for new ones)."""
    kept = _memo.get(id(spec))
    if kept is not None and kept[0]() is spec and kept[1] is catalog:
        return kept[2]
    while len(_memo) >= MAX_SPECS:
        del _memo[next(iter(_memo))]  # the oldest
    table: _Answers = {}
    _memo[id(spec)] = (weakref.ref(spec), catalog, table)
    return table


def train_cached(spec: Spec, catalog: Catalog, request: TrainRequest) -> TrainAnswer:
    """`train(spec, catalog, request)`, searched once per distinct request.

    Raises:
        RailplanError: what `train` raised for this request (InputError, BudgetError).
    """
    answers = _answers(spec, catalog)
    if request not in answers:
        try:
            answers[request] = train(spec, catalog, request)
        except RailplanError as exc:
            answers[request] = exc
    outcome = answers[request]
    if isinstance(outcome, RailplanError):
        raise outcome.with_traceback(None)  # no frames pile up on a re-raised error
    return outcome
