"""What a replay assumes beyond the spec: checkpoint cadence, seed, horizon, power figures.

`SimPolicy` holds the knobs `railplan simulate` fills (the CLI maps the spec's `checkpoint`
budget to ``checkpoint_write_s`` through the budget stage's checkpoint-time estimate; this
package never imports `infra.budget`, which imports it). Defaults are documented per field;
every one is an assumption the user can override, not a sourced fact.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL_S",
    "DEFAULT_CHECKPOINT_WRITE_S",
    "DEFAULT_IDLE_POWER_SHARE",
    "SimPolicy",
]

DEFAULT_CHECKPOINT_INTERVAL_S = 1800.0
"""A checkpoint every 30 minutes when the spec declares none: a common training default
(e.g. Megatron-LM and NeMo examples save every few hundred steps, tens of minutes)."""

DEFAULT_CHECKPOINT_WRITE_S = 60.0
"""Seconds a checkpoint takes to become durable when the spec has no `checkpoint` budget."""

DEFAULT_IDLE_POWER_SHARE = 0.25
"""An idle node's draw as a share of its catalog maximum power. An assumption, not a sourced
figure: the catalog holds maximum power only; idle GPU servers draw a fraction of it (fans,
CPUs, idle GPUs at tens of watts each). Override it with `SimPolicy.idle_power_share`."""


@dataclass(frozen=True, slots=True)
class SimPolicy:
    """Assumptions of one replay.

    Attributes:
        checkpoint_interval_s: seconds between checkpoint starts of a running job; work since
            the last completed checkpoint is lost when the job is evicted.
        checkpoint_write_s: seconds a checkpoint takes to complete (it counts only once done).
        seed: seeds every random choice: the node `placement` ``random`` picks, the order
            that breaks ties between equally scored nodes, an inflated trace's draws.
        placement: how a job picks its nodes (`infra.simulate.cluster.PLACEMENTS`:
            ``best-fit``, ``first-fit``, ``random``, ``packing``, ``fgd``); None: the
            spec's scheduler's own,
            first fit for Slurm (`select/cons_tres` takes the lowest-numbered nodes with
            room, as a real slurmctld showed: tests/slurm_replay), best fit for Kubernetes.
        horizon_s: stop the replay at this trace time (None: run until every job ends).
        power_saving: model Slurm power saving when the spec declares it.
        idle_power_share: idle draw of a node over its catalog maximum (energy figures).
        preempt_retry_s: a queue head that could not preempt tries again after this long
            (0: at every scheduling pass). Kueue and Volcano evaluate preemption once per
            scheduling cycle for a head that stays inadmissible; a minute keeps the replay
            linear in events on busy clusters, at the price of a head waiting up to that
            long for a victim that appeared meanwhile.
        progress_every: events between two progress reports.
        preemptions_per_job: the replay's preemption budget, per job of the trace: past it the replay stops with a `LivelockError` naming the job
            (`infra.simulate.livelock`). Schedulers evict a job a few times at most; a
            hundred times per job on average is a model that evicts in circles.
        backfill_wakes_s: Slurm specs: wake-ups of the backfill agent seen in a running
            slurmctld's log, trace seconds (`infra.simulate.agent_clock`; empty: once a second
            from the first submission); a comparison with a running slurmctld sets it.
        backfill_took_s: Slurm specs: how long the cycle at each of `backfill_wakes_s`
            took (elsewhere, and when empty, none). The agent counts `bf_interval` from the
            second a cycle ends in; a running slurmctld's log gives each cycle's time (1 to
            8 ms on the test machine).
        inflate: replay the trace inflated to this many times the cluster's GPUs, nothing
            departing (`infra.simulate.inflate`, the FGD paper's procedure); None: as is.
        sched_wakes_s: Slurm specs: wake-ups of slurmctld's background loop, likewise: a
            submission's main-scheduler pass and the periodic full pass come at one of them
            (`infra.simulate.slurm.BATCH_SCHED_DELAY_S`).
        sched_start_s: Slurm specs: when slurmctld started, in trace seconds (usually
            negative; None: at the first submission): its full pass every `sched_interval`
            counts from then.
        sched_last_s: Slurm specs: the background loop's last main-scheduler pass before
            the trace, in trace seconds (None: long before): the first submission's pass
            comes `batch_sched_delay` whole seconds after it at the earliest.
    """

    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    checkpoint_write_s: float = DEFAULT_CHECKPOINT_WRITE_S
    seed: int = 0
    placement: str | None = None
    horizon_s: float | None = None
    power_saving: bool = True
    idle_power_share: float = DEFAULT_IDLE_POWER_SHARE
    preempt_retry_s: float = 60.0
    progress_every: int = 20_000
    preemptions_per_job: float = 100.0
    backfill_wakes_s: tuple[float, ...] = ()
    backfill_took_s: tuple[float, ...] = ()
    sched_wakes_s: tuple[float, ...] = ()
    sched_start_s: float | None = None
    sched_last_s: float | None = None
    inflate: float | None = None

    def saved_s(self, ran_s: float) -> float:
        """Work (seconds of run time) kept by the last checkpoint completed after ``ran_s``."""
        if self.checkpoint_interval_s <= 0:
            return 0.0
        done = int((ran_s - self.checkpoint_write_s) // self.checkpoint_interval_s)
        return max(0, done) * self.checkpoint_interval_s
