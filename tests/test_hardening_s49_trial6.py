"""Breaks the sixth hostile trial found (session 49, issue 36), one test per cause.

1. Cron and time-zone load errors carried no hint: a validator's ValueError could not give
   one (`HintedValueError`); a cron schedule now says which field robfig/cron refuses and a
   zone what it probably means.
"""

from __future__ import annotations

import pytest

from infra.spec import SpecValidationError, load_spec_text

SCHEDULED = (
    "name: lab\nfabrics: {compute: {switch: qm8700, su_size: 4}}\nscheduler: {kind: kubernetes}\n"
    "mig_layouts: {small: {profiles: {'1g.10gb': 7}}}\nnode_groups:\n"
    "  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n    hostname: 'infer{index:02d}'\n"
    "    mig_schedule:\n      timezone: Europe/Berlin\n      changes:\n"
    "        - {at: '0 7 * * 1-5', mig: small}\n        - {at: '0 21 * * *', mig: disabled}\n"
)


def _only_error(text: str) -> tuple[str, str, str]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    return error.path, error.message, error.hint or ""


# --- 1. cron and time-zone errors with a hint ---------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("0 7 * * 1-8", "day-of-week '1-8'"),
        ("0 24 * * *", "hour '24'"),
        ("0 7 ? * *", "day-of-month '?'"),
        ("0 7 * *", "4 fields"),
        ("@daily ", "a macro stands alone"),
        ("@Daily", "a macro stands alone"),
        ("CRON_TZ=UTC 0 7 * * *", "set mig_schedule.timezone"),
    ],
)
def test_a_bad_cron_schedule_gets_a_hint_naming_what_to_fix(schedule: str, says: str) -> None:
    path, message, hint = _only_error(SCHEDULED.replace("0 7 * * 1-5", schedule))
    assert path.endswith("changes[0].at") and "is not a cron schedule" in message
    assert says in hint, hint


@pytest.mark.parametrize(
    ("zone", "says"),
    [
        ("Europe/Berln", "did you mean 'Europe/Berlin'?"),
        ("europe/berlin", "did you mean 'Europe/Berlin'?"),
        ("UTC+2", "Etc/GMT-2"),
        ("GMT-05:00", "Etc/GMT+5"),
        ("localtime", "timedatectl list-timezones"),
    ],
)
def test_an_unknown_time_zone_gets_a_hint(zone: str, says: str) -> None:
    path, message, hint = _only_error(SCHEDULED.replace("Europe/Berlin", f"'{zone}'"))
    assert path.endswith("mig_schedule.timezone") and "IANA time zone" in message
    assert says in hint, hint
