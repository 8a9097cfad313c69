"""Shared fixtures: the catalog, paths, and a helper that lints spec text; CI's deadline for
the long twin modules."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import settings

from infra.catalog import Catalog, load_catalog
from infra.lint import lint_loaded
from infra.lint.finding import Finding
from infra.spec import load_spec_text

# `make test` (and so CI) explores the same examples on every run: a red build must come from
# a change, not from a new seed. `make fuzz` explores fresh random examples, many times over,
# and is how new counterexamples are found (each becomes an explicit @example).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("fuzz", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


# CI has 90 minutes for everything (.ci/run). A long twin module declares `CI_MINUTES`, what
# it needs on a loaded 2-core machine; under RAILPLAN_CI_DEADLINE (epoch seconds, set by
# .ci/run) a module that would not end before the deadline is skipped whole, saying so, when
# its first test would start, so CI runs as many of the twin's modules as fit and never runs
# over. Outside CI nothing is skipped.
_CI_STARTED: set[str] = set()
_CI_SKIPPED: dict[str, str] = {}


def ci_deadline_skip(module: str, minutes: float, now: float) -> str | None:
    """Why `module` does not start under CI's deadline (None: it starts, or there is none)."""
    deadline = os.environ.get("RAILPLAN_CI_DEADLINE")
    if not deadline or module in _CI_STARTED:
        return None
    if module not in _CI_SKIPPED:
        left = float(deadline) - now
        if left >= minutes * 60:
            _CI_STARTED.add(module)
            return None
        _CI_SKIPPED[module] = (
            f"ci: {max(left, 0) / 60:.0f} min left before CI's deadline and this module needs "
            f"about {minutes:g}: not run"
        )
    return _CI_SKIPPED[module]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    minutes = getattr(getattr(item, "module", None), "CI_MINUTES", None)
    if minutes is not None:
        reason = ci_deadline_skip(item.module.__name__, float(minutes), time.time())  # type: ignore[attr-defined]
        if reason:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


def lint_text(
    text: str, catalog: Catalog | None = None, select: tuple[str, ...] = ()
) -> list[Finding]:
    """Lint spec text with the bundled (or a given) catalog."""
    return lint_loaded(load_spec_text(text, "spec.yaml"), catalog or load_catalog(), select)
