"""The trace-replay budgets: `utilization` and `queueing_delay`, answered by `infra.simulate`.

Both name a job trace (a path relative to the spec's directory, which it must not leave: the
spec refuses an absolute path or ``..``, `Replays.path` a symlink out of the directory, and
`read_trace` a file its reader adds, such as a PAI job table beside the trace, that links out,
so a spec cannot make lint read ``/etc/shadow``); the trace is read once and
replayed once per evaluation of a spec's budgets, however many budgets name it, with the
policy `railplan simulate` uses (`sim_policy`: the checkpoint write time from the spec's
`checkpoint` budget). `utilization` compares the time-weighted allocated share (of the
cluster, of a node group, or held by one tenant) with its minimum; `queueing_delay` compares
a percentile of one tenant's queueing delay, or the worst tenant's, with its limit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from infra.budget.cluster import BudgetError
from infra.catalog import Catalog
from infra.errors import RailplanError, spelling_hint
from infra.simulate.result import Delays, SimResult
from infra.spec import Spec
from infra.spec.budgets import QueueingDelayBudget, UtilizationBudget
from infra.topology import Plan
from infra.wording import plural

__all__ = ["Measured", "Replays", "queueing_delay", "utilization"]


class Measured(NamedTuple):
    """A replay budget's answer: the fields of its `BudgetResult`."""

    predicted: float
    limit: float
    unit: str
    better: Literal["lower", "higher"]
    detail: str


@dataclass
class Replays:
    """Replays of the traces a spec's budgets name, each run once (keyed by resolved path)."""

    spec_file: str | None = None
    done: dict[str, SimResult | RailplanError] = field(default_factory=dict)

    def path(self, trace: str) -> str:
        """``trace`` resolved against the spec's directory (the current one without a file).

        Raises:
            BudgetError: the path leaves that directory, once symlinks are resolved.
        """
        base = Path(self.spec_file).parent if self.spec_file else Path()
        # joined as written, resolved as the kernel does: the spec ``link/../spec.yaml`` was
        # read beside the link's target, and so is its trace (normpath would drop ``link/..``
        # and read the one in the current directory)
        inside = os.path.realpath(base)
        path = str(base / trace)  # pathlib keeps ".." as written
        if os.path.commonpath([inside, os.path.realpath(path)]) != inside:
            raise BudgetError(
                f"trace {trace[:80]!r} leads out of the spec's directory {str(base)!r} "
                "(an absolute path, '..' or a symlink)",
                hint="copy the trace into the spec's directory and name it relative to it",
            )
        return path

    def result(self, trace: str, spec: Spec, catalog: Catalog, plan: Plan) -> SimResult:
        """The replay of ``trace`` on ``plan``; raises what reading or replaying it raised."""
        path = self.path(trace)
        key = os.path.realpath(path)
        if key not in self.done:
            base = Path(self.spec_file).parent if self.spec_file else Path()
            self.done[key] = _replay(path, spec, catalog, plan, os.path.realpath(base))
        answer = self.done[key]
        if isinstance(answer, RailplanError):
            raise answer
        return answer


def _replay(
    path: str, spec: Spec, catalog: Catalog, plan: Plan, within: str
) -> SimResult | RailplanError:
    # imported here: the engine and the trace readers load only for a spec that names a trace
    from infra.budget.sim_policy import sim_policy
    from infra.simulate.engine import simulate
    from infra.simulate.traces import read_trace

    try:
        trace = read_trace(path, within=within)
    except RailplanError as exc:
        return BudgetError(exc.one_line(), hint="budgets name a trace relative to the spec")
    return simulate(spec, plan, catalog, trace, policy=sim_policy(spec, catalog, plan))


def _share(result: SimResult, b: UtilizationBudget) -> tuple[float, str]:
    """The allocated share the budget counts, and what it is the share of."""
    if b.group is not None:
        if b.group not in result.allocation_by_group:
            hint = spelling_hint(b.group, result.allocation_by_group, "groups")
            raise BudgetError(f"no node group {b.group!r} in the plan", hint=hint)
        return result.allocation_by_group[b.group], f"group {b.group}"
    if b.tenant is not None:
        if b.tenant not in result.allocation_by_tenant:
            hint = spelling_hint(b.tenant, result.allocation_by_tenant, "tenants in the trace")
            raise BudgetError(f"no job of tenant {b.tenant!r} in the trace", hint=hint)
        return result.allocation_by_tenant[b.tenant], f"tenant {b.tenant}"
    return result.allocation_mean, "the cluster"


def utilization(
    b: UtilizationBudget, spec: Spec, cat: Catalog, plan: Plan, runs: Replays
) -> Measured:
    """The time-weighted allocated share of the replay against ``b.min``."""
    result = runs.result(b.trace, spec, cat, plan)
    share, of = _share(result, b)
    return Measured(
        predicted=share,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"{_about(result)}, over the {result.window_s / 3600:,.1f} h the trace spans: "
        f"{of} {share:.1%} allocated (cluster p95 {result.allocation_p95:.1%}, fragmentation "
        f"{result.fragmentation:.1%}); {_waits(result)}",
    )


def _waits(result: SimResult) -> str:
    """Whether jobs waited: when none did, demand, not the cluster, set the allocation."""
    if not result.queueing:
        return "no job started"
    tenant, worst = max(result.queueing.items(), key=lambda kv: (kv[1].p95_s, kv[0]))
    if worst.p95_s == 0:
        return "no job waited, so the trace's demand, not placement, sets the figure"
    return f"p95 wait {worst.p95_s:,.0f} s (tenant {tenant})"


def _delays(result: SimResult, b: QueueingDelayBudget) -> tuple[str, Delays]:
    """The tenant the budget holds and its delays: the named one, else the worst."""
    if not result.queueing:
        raise BudgetError("no job of the trace started on this cluster")
    if b.tenant is not None:
        if b.tenant not in result.queueing:
            hint = spelling_hint(b.tenant, result.queueing, "tenants in the trace")
            raise BudgetError(f"no job of tenant {b.tenant!r} started in the replay", hint=hint)
        return b.tenant, result.queueing[b.tenant]
    return max(result.queueing.items(), key=lambda kv: (_pick(kv[1], b.percentile), kv[0]))


def _pick(delays: Delays, percentile: int) -> float:
    return {50: delays.p50_s, 95: delays.p95_s, 99: delays.p99_s}[percentile]


def queueing_delay(
    b: QueueingDelayBudget, spec: Spec, cat: Catalog, plan: Plan, runs: Replays
) -> Measured:
    """A percentile of queueing delay in the replay against ``b.max_s``."""
    result = runs.result(b.trace, spec, cat, plan)
    tenant, delays = _delays(result, b)
    value = _pick(delays, b.percentile)
    return Measured(
        predicted=value,
        limit=b.max_s,
        unit="s",
        better="lower",
        detail=f"{_about(result)}: tenant {tenant}, p{b.percentile} of "
        f"{plural(delays.jobs, 'job')} {value:,.0f} s (p50 {delays.p50_s:,.0f} s, mean {delays.mean_s:,.0f} s)",
    )


def _about(result: SimResult) -> str:
    trace = result.trace
    return f"{plural(trace.used, 'job')} of {Path(trace.source).name} on {result.gpus:,} GPUs"
