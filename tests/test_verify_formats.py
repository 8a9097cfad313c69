"""`railplan verify`'s outputs: the JSON keys DESIGN.md names, text by rack, a safe CSV sheet."""

from __future__ import annotations

import csv
import io
import json

from infra.verify.findings import Finding, Place
from infra.verify.formats import (
    WORK_ORDER_COLUMNS,
    Ignored,
    Summary,
    verify_csv,
    verify_json,
    verify_text,
)

SUMMARY = Summary(cables_planned=3364, links_seen=3363, files=("fabric.txt",))
MISSING = Finding(
    "missing",
    Place("dgx005", "mlx5_3", "dgx-su01-c2", 7),
    Place("ib0-leaf-su01-r3", "5", "net-su01", 20),
    "200 Gb/s optical cable",
    "no link",
    "install a 200 Gb/s optical cable from dgx005 port mlx5_3 (dgx-su01-c2 U7) to ...",
)
HOSTILE = Finding(
    "unexpected",
    Place('=HYPERLINK("http://x")', "1", None, None),
    Place("@SUM(1)", "2", None, None),
    "no cable",
    "a link",
    "remove it",
)


def test_json_has_the_contracts_keys() -> None:
    ignored = [Ignored("fabric.txt", 12, "SHARP aggregation node")]
    document = json.loads(verify_json([MISSING], SUMMARY, ignored))
    (finding,) = document["findings"]
    assert set(finding) == {"kind", "a", "z", "expected", "found", "fix"}
    assert finding["a"] == {
        "device": "dgx005",
        "port": "mlx5_3",
        "rack": "dgx-su01-c2",
        "rack_unit": 7,
    }
    assert document["summary"]["as_planned"] is False
    assert document["summary"]["by_kind"] == {"missing": 1}
    assert document["ignored"] == [
        {"file": "fabric.txt", "line": 12, "reason": "SHARP aggregation node"}
    ]


def test_text_groups_by_rack_and_says_what_to_do() -> None:
    text = verify_text([MISSING], SUMMARY, [])
    lines = text.splitlines()
    assert lines[0] == "rack dgx-su01-c2"
    assert lines[1].strip().startswith("U7  missing: dgx005 mlx5_3: expected 200 Gb/s")
    assert lines[2].strip().startswith("fix: install a 200 Gb/s optical cable")
    assert lines[-1] == "1 finding (1 missing); 3,363 links seen, 3,364 planned cables"


def test_as_planned_text() -> None:
    clean = Summary(cables_planned=2, links_seen=2, files=("f",))
    assert verify_text([], clean, []) == "as planned: 2 links seen, 2 planned cables\n"


def test_the_work_order_sheet_never_holds_a_formula() -> None:
    rows = list(csv.reader(io.StringIO(verify_csv([MISSING, HOSTILE]))))
    assert tuple(rows[0]) == WORK_ORDER_COLUMNS
    assert rows[1][:6] == ["1", "missing", "dgx-su01-c2", "7", "dgx005", "mlx5_3"]
    assert rows[2][4] == '\'=HYPERLINK("http://x")' and rows[2][8] == "'@SUM(1)"
    assert all(row[-1] == "" for row in rows[1:])  # the technician's "done" column
