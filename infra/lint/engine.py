"""The lint engine: a registry of small named rules and the loop that runs them over a subject.

A rule is a function ``check(subject) -> Iterable[Violation]`` registered with `rule(...)` (a
spec rule, over a `LintContext`) or `subject_rule(...)` (over any other `Subject`, such as a
mig-parted file) under a stable id (``RP`` + three digits), a slug name, a default severity,
a one-line summary and a doc (its function docstring, or an explicit text: why the rule
matters, how to fix a violation). Rules speak in paths only; the engine turns each
`Violation` into a `Finding` (`make_finding`) with the file, line and column of that path in
the subject's source, so rules never handle positions. Rules are pure: same input, same
findings.

The engine imports no rule module: rule modules import the engine and register into it, and
`infra.lint.catalog_of_rules` imports them all (importing the `infra.lint` package does), so
`all_rules()` lists every rule once `infra.lint` is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from infra.gc_pause import paused_gc
from infra.lint.context import LintContext
from infra.lint.finding import Finding, Severity, Violation, make_finding
from infra.spec.yamlpos import SourceMap

__all__ = [
    "LintContext",
    "Rule",
    "Subject",
    "Violation",
    "all_rules",
    "every_rule",
    "find_rule",
    "rule",
    "run_only",
    "run_rules",
    "select_rules",
    "subject_rule",
]


class Subject(Protocol):
    """What rules can check: anything with the source map its paths are located in."""

    @property
    def source(self) -> SourceMap:
        """Positions of the subject's paths, and the file they are in."""
        ...


S = TypeVar("S", bound=Subject)

Check = Callable[[LintContext], Iterable[Violation]]


@dataclass(frozen=True)
class Rule(Generic[S]):
    """A registered lint rule over one kind of subject (a spec's `LintContext` by default)."""

    id: str
    name: str
    severity: Severity
    summary: str
    check: Callable[[S], Iterable[Violation]] = field(compare=False, repr=False)
    subject: type[S] = field(compare=False, repr=False)
    needs_plan: bool = False
    explanation: str = field(default="", compare=False, repr=False)

    @property
    def doc(self) -> str:
        """The rule's documentation: why it matters and how to fix it."""
        return self.explanation or inspect.cleandoc(self.check.__doc__ or self.summary)

    @property
    def fix(self) -> str:
        """The doc's ``Fix:`` paragraph on one line: the hint of a violation that gives none.

        Every finding then says what to do, as every error line does; without a ``Fix:``
        paragraph, where ``railplan explain`` says more.
        """
        _, found, rest = self.doc.partition("Fix:")
        text = " ".join(rest.split("\n\n", 1)[0].split()) if found else ""
        return text or f"`railplan explain {self.id}` says why and how to fix it"


_REGISTRY: dict[str, Rule[Any]] = {}


def subject_rule(
    subject: type[S],
    rule_id: str,
    name: str,
    severity: Severity,
    summary: str,
    *,
    needs_plan: bool = False,
    doc: str = "",
) -> Callable[[Callable[[S], Iterable[Violation]]], Callable[[S], Iterable[Violation]]]:
    """Register a check over ``subject`` as rule ``rule_id``; ids and names must be unique.

    ``needs_plan`` rules look at the planned topology; they run only when the other rules of
    their subject found no error, so one root cause gives one finding. ``doc`` replaces the
    check's docstring as the rule's documentation.
    """

    def register(check: Callable[[S], Iterable[Violation]]) -> Callable[[S], Iterable[Violation]]:
        if rule_id in _REGISTRY or any(r.name == name for r in _REGISTRY.values()):
            raise ValueError(f"duplicate lint rule {rule_id} / {name}")
        _REGISTRY[rule_id] = Rule(
            rule_id, name, severity, summary, check, subject, needs_plan, inspect.cleandoc(doc)
        )
        return check

    return register


def rule(
    rule_id: str, name: str, severity: Severity, summary: str, *, needs_plan: bool = False
) -> Callable[[Check], Check]:
    """Register ``check`` as spec rule ``rule_id`` (over a `LintContext`); see `subject_rule`."""
    return subject_rule(LintContext, rule_id, name, severity, summary, needs_plan=needs_plan)


def every_rule() -> list[Rule[Any]]:
    """Every registered rule of every subject, sorted by id."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def all_rules(subject: type[Any] = LintContext) -> list[Rule[Any]]:
    """Every registered rule over ``subject`` (default: the spec rules), sorted by id."""
    return [r for r in every_rule() if r.subject is subject]


def find_rule(key: str) -> Rule[Any] | None:
    """Look a rule up by id (``RP011``, case-insensitive) or by name."""
    for r in every_rule():
        if key.upper() == r.id or key == r.name:
            return r
    return None


def select_rules(
    select: Sequence[str] = (), ignore: Sequence[str] = (), subject: type[Any] = LintContext
) -> list[Rule[Any]]:
    """Rules enabled by ``--select``/``--ignore`` (ids, id prefixes like ``RP0``, or names)."""

    def matches(r: Rule[Any], keys: Sequence[str]) -> bool:
        return any(r.id.startswith(k.upper()) or r.name == k for k in keys)

    rules = all_rules(subject)
    if select:
        rules = [r for r in rules if matches(r, select)]
    return [r for r in rules if not matches(r, ignore)]


def run_rules(subject: S, rules: Iterable[Rule[S]]) -> list[Finding]:
    """Run ``rules`` over one subject and return its findings, sorted.

    Rules without ``needs_plan`` run first (all of the subject's, so a deselected rule's
    error still holds the plan rules back); plan rules only if those found no error.
    """
    chosen = list(rules)
    first = _run(subject, [r for r in all_rules(type(subject)) if not r.needs_plan])
    findings = [f for f in first if f.rule in {r.id for r in chosen}]
    if not any(f.severity is Severity.ERROR for f in first):
        findings += _run(subject, [r for r in chosen if r.needs_plan])
    return sorted(set(findings))


def run_only(subject: S, rules: Iterable[Rule[S]]) -> list[Finding]:
    """Run exactly ``rules`` over one subject, sorted: no other rule holds a plan rule back."""
    return sorted(set(_run(subject, rules)))


def _run(subject: S, rules: Iterable[Rule[S]]) -> list[Finding]:
    with paused_gc():  # the plan rules read a plan of millions of objects
        return _findings(subject, rules)


def _findings(subject: S, rules: Iterable[Rule[S]]) -> list[Finding]:
    source = subject.source
    return [
        make_finding(
            r.id,
            v.severity or r.severity,
            v.message,
            file=source.file,
            path=v.path,
            hint=v.hint or r.fix,
            source=source,
        )
        for r in rules
        for v in r.check(subject)
    ]
