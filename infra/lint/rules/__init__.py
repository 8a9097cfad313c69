"""Lint rules, one module per domain; importing this package registers all of them.

Ids are stable and grouped by domain: RP00x catalog references and names, RP01x MIG, RP02x
precisions, RP03x node software, RP04x fabrics, RP05x site (racks, power, cooling, addresses).
RP1xx belong to `railplan mig check` (infra.lint.migparted).
"""

from infra.lint.rules import catalog, fabric, mig, precision, site, software

__all__ = ["catalog", "fabric", "mig", "precision", "site", "software"]
