"""Lint rules, one module per domain; importing this package registers all of them.

Ids are stable and grouped by domain: RP00x catalog references and names, RP01x MIG (and MIG
schedules), RP02x precisions, RP03x node software, RP04x fabrics, RP05x site (racks, power,
cooling, power feeds, addresses); RP045-RP049 and RP055-RP057 check the planned topology
(infra.lint.rules.topology); RP06x the declared budgets; RP07x the scheduler (tenants' GPU
quotas, the batch scheduler); RP08x the compute fabric's subnet manager (routing engine, SHARP,
GUID inputs); RP09x Slurm power saving.
RP1xx belong to `railplan mig check` (infra.lint.migparted).
"""

from infra.lint.rules import (
    budgets,
    catalog,
    fabric,
    mig,
    nccl,
    power,
    power_saving,
    precision,
    scheduler,
    site,
    software,
    subnet,
    topology,
)

__all__ = [
    "budgets",
    "catalog",
    "fabric",
    "mig",
    "nccl",
    "power",
    "power_saving",
    "precision",
    "scheduler",
    "site",
    "software",
    "subnet",
    "topology",
]
