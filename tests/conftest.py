"""Shared fixtures: the catalog, paths, and a helper that lints spec text."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


def lint_text(
    text: str, catalog: Catalog | None = None, select: tuple[str, ...] = ()
) -> list[Finding]:
    """Lint spec text with the bundled (or a given) catalog."""
    return lint_loaded(load_spec_text(text, "spec.yaml"), catalog or load_catalog(), select)
