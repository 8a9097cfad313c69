"""Lint: rules over a loaded spec, and the documentation of every rule id railplan reports.

`lint_loaded` runs the selected rules over one spec; `lint_context` over a `LintContext` the
caller keeps, to reuse the plan and budgets lint built (or handed in) instead of building
them again, and `rack_budget_findings` runs RP055 alone over a plan (`railplan plan`). `documented_rules` lists every id a user
can meet — RP000 (the spec does not match the schema), the spec rules, and the RP1xx rules of
`railplan mig check` (rules over a mig-parted file) — so `railplan rules`, `railplan explain`
and the SARIF rule table agree. Importing this package registers every rule
(`infra.lint.catalog_of_rules`); the engine itself imports none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.errors import RailplanError, spelling_hint
from infra.lint import catalog_of_rules
from infra.lint.context import LintContext
from infra.lint.engine import find_rule, run_only, run_rules, select_rules
from infra.lint.finding import Finding, Severity
from infra.spec import LoadedSpec
from infra.topology import Plan

__all__ = [
    "LintContext",
    "RuleDoc",
    "check_rule_keys",
    "documented_rules",
    "find_documented_rule",
    "lint_context",
    "lint_loaded",
    "rack_budget_findings",
]


@dataclass(frozen=True)
class RuleDoc:
    """What `railplan rules`/`explain` and SARIF show about one rule id."""

    id: str
    name: str
    severity: Severity
    summary: str
    doc: str


SCHEMA_RULE = RuleDoc(
    "RP000",
    "spec-invalid",
    Severity.ERROR,
    "The spec is not valid YAML or does not match the spec schema.",
    "The file must be one UTF-8 YAML document whose keys and values match the spec schema "
    "(`railplan schema`): known keys only, values of the right type and range, names that are "
    "safe in hostnames, paths and shell commands.\n\nWhy: nothing else can be checked about a "
    "spec that cannot be read; railplan stops with exit code 2 and one line per problem.\n"
    "Fix: follow the message and hint (misspelled keys get a 'did you mean'); point your editor "
    "at the JSON Schema for completion.",
)


def lint_loaded(
    loaded: LoadedSpec, catalog: Catalog, select: Sequence[str] = (), ignore: Sequence[str] = ()
) -> list[Finding]:
    """Run the rules chosen by ``select``/``ignore`` over one loaded spec.

    Raises:
        RailplanError: a key of ``select`` or ``ignore`` names no rule (see `check_rule_keys`).
    """
    return lint_context(LintContext(loaded, catalog), select, ignore)


def lint_context(
    context: LintContext, select: Sequence[str] = (), ignore: Sequence[str] = ()
) -> list[Finding]:
    """`lint_loaded` over ``context``, whose plan and budgets the caller may read afterwards.

    Raises:
        RailplanError: a key of ``select`` or ``ignore`` names no rule.
    """
    check_rule_keys(select, ignore)
    return run_rules(context, select_rules(select, ignore))


def rack_budget_findings(loaded: LoadedSpec, catalog: Catalog, plan: Plan) -> list[Finding]:
    """RP055 (a rack over its class's power or units) over ``plan``, whatever else lint finds.

    The one rack-budget check: `railplan plan` exits 1 on these findings.
    """
    check = find_rule("RP055")
    assert check is not None  # registered by infra.lint.rules.topology
    return run_only(LintContext(loaded, catalog, plan=plan), [check])


def check_rule_keys(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> None:
    """Refuse a ``--select``/``--ignore`` key that matches no rule id, id prefix or name.

    A misspelled key would otherwise select nothing and hide every error (exit 0).

    Raises:
        RailplanError: for the first unknown key, with a did-you-mean hint.
    """
    docs = documented_rules()
    for option, keys in (("--select", select), ("--ignore", ignore)):
        for key in keys:
            upper = key.strip().upper()
            if upper and any(d.id.startswith(upper) or d.name == key for d in docs):
                continue
            choices = [d.id for d in docs] + [d.name for d in docs]
            hint = spelling_hint(upper if upper.startswith("RP") else key, choices, "rules")
            raise RailplanError(
                f"{option} {key[:80]!r} matches no rule id, id prefix or rule name",
                hint=hint if hint.startswith("did you mean") else "see `railplan rules`",
            )


def documented_rules() -> list[RuleDoc]:
    """Every rule id railplan can report, sorted by id."""
    docs = [SCHEMA_RULE]
    docs += [
        RuleDoc(r.id, r.name, r.severity, r.summary, r.doc) for r in catalog_of_rules.all_of_them()
    ]
    return sorted(docs, key=lambda d: d.id)


def find_documented_rule(key: str) -> RuleDoc | None:
    """Look a rule up by id (case-insensitive) or name."""
    return next((d for d in documented_rules() if d.id == key.upper() or d.name == key), None)
