"""One evaluated budget: the predicted value, its band, the bound the verdict tests, the verdict.

A budget's figure is a prediction with an error band (`infra.budget.bands`) or an arithmetic
fact with none (memory, a trace replay). The verdict tests the bound the spec asks for
(``bound:`` on each budget; default ``conservative``): for a figure where lower is better
(time, power, cost) the band's high edge, for one where higher is better (scaling, SHARP
gain) its low edge; ``optimistic`` tests the other edge, ``central`` the prediction itself.
Power budgets' bands run from typical to maximum draw (`power_cost`).

>>> r = BudgetResult(0, "all_reduce", "p", 10.0, 11.0, "ms", "lower", "", band_low=8.0,
...                  band_high=12.0)
>>> r.tested, r.passed, replace(r, bound="central").passed
(12.0, False, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from infra.budget.bands import Fit

__all__ = ["Bound", "BudgetResult", "replace"]

Bound = Literal["conservative", "central", "optimistic"]


@dataclass(frozen=True)
class BudgetResult:
    """One evaluated budget.

    ``margin`` is the headroom of the tested bound as a fraction of the limit (negative: the
    shortfall). ``better`` says which direction passes: ``lower`` (time, power, cost, memory)
    or ``higher`` (scaling efficiency, SHARP gain). ``band_low``/``band_high`` bound the
    prediction (NaN: an arithmetic figure without a band); ``fit`` says whether published
    rows cover it (None: nothing was fitted, the figure is arithmetic on the spec).
    """

    index: int
    kind: str
    path: str
    predicted: float
    limit: float
    unit: str
    better: Literal["lower", "higher"]
    detail: str
    error: str = ""
    claim: str = ""  # whose claim this is: a miss is reported, not a failure
    band_low: float = math.nan
    band_high: float = math.nan
    band_regime: str = ""
    bound: Bound = "conservative"
    fit: Fit | None = None
    error_hint: str = ""  # how to make an unevaluable budget evaluable (lint's hint line)

    @property
    def error_text(self) -> str:
        """Why the budget cannot be evaluated, with the hint, for outputs that have one line."""
        return self.error + (f" ({self.error_hint})" if self.error_hint else "")

    @property
    def has_band(self) -> bool:
        """Whether the figure has an error band (else it is arithmetic, tested as is)."""
        return not (math.isnan(self.band_low) or math.isnan(self.band_high))

    @property
    def tested(self) -> float:
        """The value the verdict compares with the limit: the bound the budget asks for."""
        if self.bound == "central" or not self.has_band:
            return self.predicted
        worse_high = (self.better == "lower") == (self.bound == "conservative")
        return self.band_high if worse_high else self.band_low

    @property
    def verdict(self) -> Literal["pass", "miss", "fail", "error"]:
        """``miss`` is a missed claim: someone else's number, tested and reported, not failed."""
        if self.error:
            return "error"
        if self.passed:
            return "pass"
        return "miss" if self.claim else "fail"

    @property
    def fails(self) -> bool:
        """Whether this result fails the check: a missed requirement or an unevaluable budget."""
        return self.verdict in ("fail", "error")

    @property
    def passed(self) -> bool:
        """Whether the tested bound meets the limit (False when it could not be evaluated)."""
        if self.error:
            return False
        if self.better == "lower":
            return self.tested <= self.limit
        return self.tested >= self.limit

    @property
    def margin(self) -> float:
        """Headroom of the tested bound relative to the limit: positive when met."""
        if self.error or not self.limit:
            return math.nan
        value = self.tested
        gap = self.limit - value if self.better == "lower" else value - self.limit
        return gap / self.limit

    @property
    def bound_label(self) -> str:
        """What the verdict tests, in words: ``conservative bound`` or ``exact (arithmetic)``."""
        if self.has_band:
            return f"{self.bound} bound"
        if self.fit is not None:
            return "central (no band: too few held-out published rows)"
        return "exact (arithmetic, no band)"
