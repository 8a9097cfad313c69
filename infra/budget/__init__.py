"""Budgets: performance models and the evaluation of the `budgets:` a spec declares.

Models: NCCL collectives (`collectives`), training step and scaling (`training`), memory fit
(`memory`), checkpoint time (`storage`), power and cost (`power_cost`). `evaluate` turns each
declared budget into a predicted value, its limit and a pass/fail verdict. `tables` and
`train_table` write `predict`, `budget` and `train` answers as text and JSON.
"""
