"""Day 2: what changes between two specs and in what order to roll it (`railplan diff`).

`diff` compares two plans (and the specs and budgets they came from) into a `PlanDiff`;
`diff_format` writes it as text and JSON; `rolling` orders the change by scalable unit with drain and cabling steps;
`recabling` finds the servers whose leaves' uplinks move; `setting_changes` lists the
cluster-wide settings that differ. Pure functions over plans: nothing here writes the tree.
"""
