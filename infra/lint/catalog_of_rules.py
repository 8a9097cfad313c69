"""The catalog of rules: imports every rule module so each registers with the engine.

The engine stays generic (it imports no rule); this module is the one place that knows which
modules hold rules: the spec rules (`infra.lint.rules`, one module per domain) and the
mig-parted file checks (`infra.lint.migparted`). `infra.lint` imports it, so importing any part
of the lint package registers every rule before a rule list is asked for.
"""

from __future__ import annotations

from typing import Any

from infra.lint import migparted, rules
from infra.lint.engine import Rule, every_rule

__all__ = ["RULE_MODULES", "all_of_them"]

RULE_MODULES = (rules, migparted)
"""The packages and modules whose import registers rules."""


def all_of_them() -> list[Rule[Any]]:
    """Every rule railplan has, of every subject, sorted by id."""
    return every_rule()
