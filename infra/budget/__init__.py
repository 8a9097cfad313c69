"""Budgets: performance models (NCCL collectives, training step, memory, checkpoint, power)
and the evaluation of the `budgets:` a spec declares.
"""
