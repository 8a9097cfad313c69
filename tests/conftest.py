"""Shared fixtures: the catalog, paths, and a helper that lints spec text."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.catalog import Catalog, load_catalog
from infra.lint import lint_loaded
from infra.lint.finding import Finding
from infra.spec import load_spec_text

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
