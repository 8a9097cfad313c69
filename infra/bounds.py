"""Bounds on what a user may ask for that a stage enforces and a command's options state.

The command line builds every command's options on every start (`railplan --help` lists them
all), before any stage is imported; a bound that both a stage and an option state lives here,
where reading it imports nothing.
"""

from __future__ import annotations

MAX_BUDGET_GPUS = 2**20
"""Most GPUs a budget can name: above any plannable cluster (32,768 servers of 8 GPUs), and
small enough that memory estimates stay ordinary floats (``10**400`` would overflow them)."""

MAX_JOBS = 2_000_000
"""The most jobs `infra.simulate.synthetic.generate_load` draws for a window (``days``): a trace
it writes stays readable by `railplan simulate` in seconds to minutes; a larger one is a --jobs
away."""
