"""The replay's checkpoint assumptions from the spec: `railplan simulate`'s `SimPolicy`.

When the spec declares a `checkpoint` budget, a preempted or drained job's checkpoint takes
as long as the budget stage predicts for that checkpoint size (`checkpoint_estimate`: the
slowest stage between the servers and the filesystem); the interval stays the documented
default (`infra.simulate.policy`). Without such a budget, or when the estimate cannot be made
(no storage fabric), the defaults apply. This lives in `infra.budget` because the simulator
must not import the budget stage (the utilisation budgets import the simulator).
"""

from __future__ import annotations

import math
from dataclasses import replace

from infra.budget.storage import checkpoint_estimate
from infra.catalog import Catalog
from infra.simulate.policy import SimPolicy
from infra.spec import Spec
from infra.spec.budgets import CheckpointEntry
from infra.topology.model import Plan

__all__ = ["sim_policy"]


def sim_policy(
    spec: Spec, catalog: Catalog, plan: Plan, *, seed: int = 0, placement: str | None = None
) -> SimPolicy:
    """The `SimPolicy` of a replay of ``spec``: checkpoint write time from its budget, if any."""
    base = SimPolicy(seed=seed, placement=placement)
    entry = next((b for b in spec.budgets if isinstance(b, CheckpointEntry)), None)
    if entry is None:
        return base
    try:
        seconds = checkpoint_estimate(entry.checkpoint.bytes, spec, catalog, plan).seconds
    except ValueError:
        return base
    if not math.isfinite(seconds):
        return base
    return replace(base, checkpoint_write_s=round(seconds, 3))
