"""CI's deadline for the long twin modules (tests/conftest.py `ci_deadline_skip`).

.ci/run sets RAILPLAN_CI_DEADLINE; a module declaring `CI_MINUTES` starts only if that many
minutes are left, and once skipped or started it stays so for its every test.
"""

from __future__ import annotations

import pytest

from tests.conftest import ci_deadline_skip

DEADLINE = 10_000.0


def test_without_a_deadline_nothing_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAILPLAN_CI_DEADLINE", raising=False)
    assert ci_deadline_skip("m-none", 60, now=DEADLINE + 1) is None


def test_a_module_that_fits_starts_and_stays_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILPLAN_CI_DEADLINE", str(DEADLINE))
    assert ci_deadline_skip("m-fits", 10, now=DEADLINE - 600) is None
    # its later tests run even past the deadline: a module is never cut in half
    assert ci_deadline_skip("m-fits", 10, now=DEADLINE + 60) is None


def test_a_module_that_does_not_fit_is_skipped_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILPLAN_CI_DEADLINE", str(DEADLINE))
    reason = ci_deadline_skip("m-late", 10, now=DEADLINE - 599)
    assert reason == "ci: 10 min left before CI's deadline and this module needs about 10: not run"
    # and stays skipped, even if a test of it were reached with more time
    assert ci_deadline_skip("m-late", 10, now=0) == reason
