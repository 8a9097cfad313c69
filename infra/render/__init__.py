"""The deployment tree (`railplan render`): pure functions from a plan (and spec) to files.

`tree` assembles the whole tree (Ansible inventory and playbook, scheduler and fabric files,
Kubernetes manifests, CSV sheets, the runbook) and `writer` writes it atomically. The HTML
report (`infra.report`), the day-2 change plan (`infra.day2`) and the text of `plan`,
`predict`, `budget` and `train` (next to their stages) live elsewhere. No printing.
"""
