"""Mutation fuzz of `railplan verify`'s dump parsers, in process: numbers must be ASCII digits in
InfiniBand's ranges.

Valid dumps of every format (the recorded ones and the lab plan's cabling as ``ibnetdiscover
-p`` prints it) are mutated where parsers are weakest: digits replaced by non-ASCII digits
(``²``, ``٣``, ``１``), signs, underscores or hundreds of digits; control, bidirectional and
line-separator characters inserted; lines cut, dropped or repeated; the text truncated. Each
mutant goes the whole way `railplan verify` takes it (parse, resolve, compare with the plan,
the structure checks, every output format). The outcome must be a result or a clean input
error (`InputError` with the file and line): never another exception, which the CLI would
report as exit 3. ``VERIFY_FUZZ_EXAMPLES`` sets the number of examples (default 150).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.errors import InputError
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Plan
from infra.verify import parse_text
from infra.verify.compare import compare, placer
from infra.verify.formats import Summary, verify_csv, verify_json, verify_text
from infra.verify.resolve import resolve
from infra.verify.structure import check_structure, combine

from .verify_dump import as_built

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/verify"
SPEC = ROOT / "examples/a100-lab-mig.yaml"
EXAMPLES = int(os.environ.get("VERIFY_FUZZ_EXAMPLES", "150"))

DIGITS = [
    "²", "³", "¹", "٣", "１", "𝟙", "Ⅻ", "½", "߃",  # not ASCII: superscripts, Arabic, fullwidth
    "1_0", "+1", "-1", " 1", "0x1", "1e3", "1.5", "",  # what int() or float() would take
    "9" * 7, "9" * 30, "9" * 400, "0" * 40, "65536", "256", "4294967296",  # huge, out of range
]  # fmt: skip
CHARS = ["\x1b[31m", "\x07", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u202e", "\t", '"']
CHARS += ["'", "(", ")", "[", "]", "#", "-", "=", ":", " ", "\ufeff", "\udcff"]
_NUMBER = re.compile(r"\d+")


PLAN = expand(load_spec(str(SPEC)).spec, load_catalog())  # not a fixture: no repr in reports
SEEDS = {p.name: p.read_text() for p in sorted(DATA.glob("*.txt"))}
SEEDS["lab-p.txt"] = "\n".join(as_built(PLAN).values()) + "\n"


@st.composite
def mutants(draw: st.DrawFn) -> str:
    """A seed dump with 1-4 mutations."""
    text = SEEDS[draw(st.sampled_from(sorted(SEEDS)))]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["digits", "digits", "char", "cut", "line", "truncate"]))
        if kind == "digits":
            spans = [m.span() for m in _NUMBER.finditer(text)]
            if spans:
                start, end = draw(st.sampled_from(spans))
                text = text[:start] + draw(st.sampled_from(DIGITS)) + text[end:]
        elif kind == "char":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(CHARS)) + text[at:]
        elif kind == "cut":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif kind == "line":
            lines = text.split("\n")
            at = draw(st.integers(0, len(lines) - 1))
            if draw(st.booleans()):
                lines.insert(at, lines[at])  # repeated
            else:
                del lines[at]
            text = "\n".join(lines)
        else:
            text = text[: draw(st.integers(0, len(text)))]
    return text


def _verify(text: str, plan: Plan) -> None:
    """What `railplan verify --structure SPEC dump` does with the text, in every format."""
    fabric = parse_text(text, "dump.txt")
    findings = compare(plan, resolve(fabric))
    found = check_structure(fabric, sharp=True, place=placer(plan))
    findings = combine(findings, found.findings)
    summary = Summary(
        len(plan.cables_in("compute")), len(fabric.links), fabric.sources, found.shape
    )
    verify_text(findings, summary, fabric.ignored)
    verify_csv(findings)
    verify_json(findings, summary, fabric.ignored)
    check_structure(fabric, sharp=None, place=None)  # and without a spec


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=mutants())
def test_a_mutated_dump_is_a_result_or_a_located_input_error(text: str) -> None:
    try:
        _verify(text, PLAN)
    except InputError as error:
        assert error.file == "dump.txt", error.one_line()
        line = error.one_line()
        assert "\n" not in line and "\x1b" not in line and "\u202e" not in line


@pytest.mark.parametrize("digit", ["²", "³", "٣", "１"])
@pytest.mark.parametrize("field", ["port", "lid", "remote port", "width"])
def test_a_non_ascii_digit_is_a_located_error(digit: str, field: str) -> None:
    line = "CA     1  1 0x0000000000100000 4x HDR - SW     2  1 0x0000000000100001 ( 'a mlx5_0' - 'b' )"
    at = {"port": 10, "lid": 7, "remote port": 50, "width": 31}[field]
    assert line[at] in "124", field
    text = "# a comment\n" + line[:at] + digit + line[at + 1 :] + "\n"
    if field == "width":  # an unknown width is an unknown rate, as an unknown speed is
        assert parse_text(text, "dump.txt").links[0].width is None
        return
    with pytest.raises(InputError) as caught:
        parse_text(text, "dump.txt")
    assert caught.value.one_line().startswith("dump.txt:2:1: error: ")


@pytest.mark.parametrize("separator", ["\x1c", "\x0b", "\x85", "\u2028"])
def test_a_line_separator_in_a_description_keeps_line_numbers(separator: str) -> None:
    good = SEEDS["lab-p.txt"].split("\n")
    good[0] = good[0].replace("train01 mlx5_0", f"train01{separator}mlx5_0")
    good[2] = good[2].replace(" 1 0x", " ³ 0x", 1)
    with pytest.raises(InputError) as caught:
        parse_text("\n".join(good), "dump.txt")
    assert caught.value.one_line().startswith("dump.txt:3:1: error: port '³' is not a number")
