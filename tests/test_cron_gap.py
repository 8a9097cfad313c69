"""How close two cron schedules come (infra.spec.cron), and lint RP019 at its boundary.

RP019 refuses MIG schedule changes of one group that can fire closer than one change Job's
run time (`job_deadline_s`), so that two CronJobs never cordon and relabel the same nodes at
once. The cron expectations are worked out by hand from the calendar.
"""

from __future__ import annotations

import pytest

from infra.catalog import Catalog
from infra.spec.cron import (
    closest_firings,
    cron_fields,
    cron_fields_valid,
    daily_minute,
    dst_shift_minutes,
)

from .conftest import lint_text


@pytest.mark.parametrize(
    ("expressions", "expected"),
    [
        (["0 8 * * *", "1 8 * * *"], (1, 0, 1)),
        # the Monday-only change comes an hour after the daily one, once a week
        (["0 8 * * *", "0 9 * * 1"], (60, 0, 1)),
        # across midnight: 23:00 and 01:00 the next day
        (["0 23 * * *", "0 1 * * *"], (120, 0, 1)),
        # 2024-02-29 is a Thursday: the two meet once in 28 years
        (["0 8 29 2 *", "0 9 * * 4"], (60, 0, 1)),
        # @weekly is Sunday 00:00, 4 h after Saturday's 20:00
        (["0 8 * * 1-5", "0 20 * * *", "@weekly"], (240, 1, 2)),
        # day of month OR day of week when neither is starred: every 1st and every Monday,
        # so a 1st that is a Tuesday puts both on one day (AND would give 26 h)
        (["0 8 1 * 1", "0 10 * * 2"], (120, 0, 1)),
        # February 31 never comes: nothing to overlap with
        (["0 0 31 2 *", "0 1 * * *"], None),
        (["*/5 * * * *", "* * * * *"], (0, 0, 1)),
    ],
)
def test_closest_firings(expressions: list[str], expected: tuple[int, int, int] | None) -> None:
    assert closest_firings(expressions) == expected


def test_dst_shift() -> None:
    assert dst_shift_minutes("Etc/UTC") == 0
    assert dst_shift_minutes("Europe/Berlin") == 60
    assert dst_shift_minutes("Australia/Lord_Howe") == 30


def _spec(second: str, timezone: str = "Etc/UTC") -> str:
    # no compute fabric: one batch, so one change's Job may run 30 + 15 + 10 = 55 min
    return (
        "name: lab\nnode_groups:\n  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n"
        f"    mig: x\n    mig_schedule:\n      timezone: {timezone}\n      changes:\n"
        f'        - {{at: "0 8 * * *", mig: x}}\n        - {{at: "{second}", mig: disabled}}\n'
        "scheduler: {kind: kubernetes, mig_strategy: mixed}\n"
        "mig_layouts:\n  x: {profiles: {1g.10gb: 7}}\n"
    )


def _rp019(text: str, catalog: Catalog) -> list[str]:
    return [f.path for f in lint_text(text, catalog) if f.rule == "RP019"]


def test_boundary(catalog: Catalog) -> None:
    assert _rp019(_spec("55 8 * * *"), catalog) == []
    assert _rp019(_spec("54 8 * * *"), catalog) == ["node_groups[0].mig_schedule.changes[1].at"]
    # in a zone with daylight saving the rule adds its shift (1 h for Berlin) to the gap
    assert _rp019(_spec("55 8 * * *", "Europe/Berlin"), catalog) != []
    assert _rp019(_spec("55 9 * * *", "Europe/Berlin"), catalog) == []
    # the change before midnight and the one after count too
    assert _rp019(_spec("30 7 * * *"), catalog) != []


@pytest.mark.parametrize(("batch", "needed"), [(1, 440), (2, 220), (4, 110), (8, 55)])
def test_rolling_batch_sus_shortens_the_gap_changes_need(
    catalog: Catalog, batch: int, needed: int
) -> None:
    """8 SUs (su_size 1), drain 30m: per batch 30 + 15 + 10 = 55 min, ceil(8 / batch) batches."""
    fabric = "fabrics: {compute: {switch: qm8790, su_size: 1}}\n"

    def spec(minutes: int) -> str:
        at = f"{minutes % 60} {8 + minutes // 60} * * *"
        return (
            _spec(at)
            .replace("count: 2", "count: 8")
            .replace("      changes:", f"      rolling_batch_sus: {batch}\n      changes:")
            + fabric
        )

    assert _rp019(spec(needed), catalog) == []
    found = [f for f in lint_text(spec(needed - 1), catalog) if f.rule == "RP019"]
    assert [f.path for f in found] == ["node_groups[0].mig_schedule.changes[1].at"]
    assert (f" of {batch} SUs x" in found[0].message) == (batch > 1)


@pytest.mark.parametrize(
    "expression",
    [
        "0 7 * * 7",  # robfig/cron v3: day-of-week 0-6, "end of range (7) above maximum (6)"
        "0 12 * * 6-7",
        "0 7 * * 0,7",
        "0 7 * * 5-1",  # "beginning of range (5) beyond end of range (1)"
        "0 7 * * fri-mon",
        "0 12-1 * * *",
        "30 20-6 * * *",  # once an IndexError (exit 3) in the firing calculation
        "59-0 21 * * *",
        "@daily ",  # "unrecognized descriptor"
        " @daily",  # "expected exactly 5 fields"
        # Go's strings.Fields does not split on U+001C..U+001F (Python's str.split() does):
        # "expected exactly 5 fields, found 4"
        "0\x1c21 * * *",
        "0\x1d21 * * *",
        "0 21\x1e* * *",
        "0 21 * *\x1f*",
        "0 21 * * *\x1c1",
    ],
)
def test_schedules_kubernetes_refuses_are_refused(expression: str) -> None:
    """kube-apiserver validates a CronJob's schedule with robfig/cron v3's ParseStandard."""
    assert not cron_fields_valid(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "0 7 * * 0",
        "0 7 * * sun-sat",
        "0 20-23 * * *",
        "@daily",
        " 0 7 * * 1 ",
        # Go's unicode.IsSpace beyond ASCII: U+0085, U+00A0, U+1680, U+2000-U+200A, U+3000
        "0\x857 * * *",
        "0\xa07 * * *",
        "0\u16807\u2000*\u200a*\u3000*",
        "0\t7\v*\f*\r*",
    ],
)
def test_schedules_kubernetes_takes_are_taken(expression: str) -> None:
    assert cron_fields_valid(expression)


def test_a_stepped_star_is_not_starred() -> None:
    """robfig clears the star bit for `*/n` with n > 1: day-of-month and day-of-week then
    combine with OR. `0 7 */2 * 1` fires on odd dates and on Mondays, so 30 minutes before
    `30 7 * * 2` on an odd-dated Tuesday (AND would never bring them onto one day)."""
    assert closest_firings(["0 7 */2 * 1", "30 7 * * 2"]) == (30, 0, 1)
    assert closest_firings(["0 7 */1 * 1", "30 7 * * 2"]) == (1470, 0, 1)  # */1 stays starred


def test_fields_are_split_as_go_strings_fields_splits_them() -> None:
    """Go's unicode.IsSpace: '\\t' '\\n' '\\v' '\\f' '\\r' ' ' U+0085 U+00A0, and the White_Space
    table (U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000); not U+001C-U+001F."""
    go_space = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    go_space += "".join(chr(c) for c in range(0x2000, 0x200B))
    for char in go_space:
        assert cron_fields(f"0{char}7") == ["0", "7"], hex(ord(char))
    for char in "\x1c\x1d\x1e\x1f\u200b\u180e\ufeff":
        assert cron_fields(f"0{char}7") == [f"0{char}7"], hex(ord(char))
    assert cron_fields("  0 \xa0 7\u3000") == ["0", "7"]


def test_the_firing_model_reads_fields_as_the_validator_does() -> None:
    assert daily_minute("30\xa07 * * *") == 7 * 60 + 30
    assert closest_firings(["0\u30008 * * *", "1 8\x85* * *"]) == (1, 0, 1)


def test_a_change_at_a_file_separator_is_refused_by_the_loader(catalog: Catalog) -> None:
    """repro CR00: lint exited 0 and render wrote a CronJob kube-apiserver refuses."""
    from infra.errors import RailplanError

    with pytest.raises(RailplanError, match="is not a cron schedule"):
        lint_text(_spec("0\\x1c21 * * *"), catalog)  # YAML escapes
    assert _rp019(_spec("0\\xa021 * * *"), catalog) == []
