"""railplan: one YAML cluster spec to a validated, budget-checked GPU cluster plan."""
