"""The HTML report (`railplan report`): one self-contained page, the human view of a plan.

`report` builds the page from the plan, budgets, lint's findings and a replay; `fabric`,
`racks`, `mig` and `simulation` (with `simulation_svg`) draw its sections from `svg`'s
escaped elements. It reads the rendered tree's sheets and templates (`infra.render`), so it
sits on the floor after render; nothing but the CLI reads it.
"""
