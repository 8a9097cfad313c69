"""Trial 10 (7 December 2026): each test one cause a hostile trial broke, not one example.

1. A size or count typed with a character other than printable ASCII was read: the size
   pattern's ``\\s`` took U+001F and Unicode spaces (``1<U+2003>GiB``), and a count went
   through ``float()``, which reads fullwidth digits (``"１７５e9"``) and Unicode spaces;
   ``predict --min-bytes`` took the same. A count of a schema integer typed with fullwidth
   digits got the generic "plain decimal digits" hint, not the character nor ``count: 16``.
2. An output named through a directory that does not exist (``--cabling missing/../c.csv``)
   was written beside ``missing`` (the path was normalised before the check); the kernel and
   a shell refuse such a path.
3. A spec, dump, name map or trace saved as UTF-16 or UTF-32 (PowerShell's ``>``, Windows
   editors) was "binary data (a NUL byte)", with no word of the encoding or the fix.
4. ``railplan verify`` passed a fabric where two ports hold one LID (two master subnet
   managers, a LID pinned by hand): routing by LID reaches one of them only.
5. ``railplan report --trace``: a trace's tenant or job id holding ESC, an OSC sequence or
   U+202E reached the HTML raw (markupsafe and Jinja's autoescape escape markup, not control
   characters): an HTML parse error, invalid XML in the inline SVG, and live escapes when the
   page is shown in a terminal. Text, CSV and error lines escape them.
6. A float option (``--inflate``, ``--load``, ``--days``, ``--step-factor``) was read by
   typer: ``--inflate nan`` was told "must be at most 100", and ``--load ０.5`` (fullwidth)
   or ``--days 1<U+2003>`` "not a number", naming neither NaN nor the character.
7. A MIG schedule change on a date no month has (``0 7 30 2 *``, ``0 7 31 4,6 *``) passed
   lint: Kubernetes accepts the CronJob, and the change never happens.
8. A lint finding of a rule whose check gives no hint (overlapping management and BMC
   networks RP054, a MIG GPU index the node lacks RP014, a layout over the GPU's instances
   RP011, two groups of one name RP004, and more) was printed without one, although the
   rule's documentation says how to fix it.
"""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.errors import InputError
from infra.reading import read_bounded, wide_encoding
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.spec.units import parse_bytes, parse_count
from infra.topology import expand

from .cli_run import ROOT, run_cli
from .verify_dump import as_built

LAB = ROOT / "examples" / "a100-lab-mig.yaml"
CLAIMS = (ROOT / "examples" / "claims-h100-8k.yaml").read_text()
K8 = (ROOT / "examples" / "k8s-tenants.yaml").read_text()
DATA = ROOT / "tests" / "data" / "verify"


# --- 1. sizes and counts are ASCII, and the character that is not is named ---------------------


@pytest.mark.parametrize(
    "text",
    ["1\x1fGiB", "1\u2003GiB", "\u30001GiB", "1GiB\u00a0", "\uff11GiB", "1\x1cKB", "8\x85"],
    ids=["unit-sep", "em-space", "ideographic", "nbsp", "fullwidth", "file-sep", "nel"],
)
def test_a_size_with_a_non_ascii_or_control_character_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="U\\+") as caught:
        parse_bytes(text)
    assert getattr(caught.value, "hint", "").startswith("write ")


@pytest.mark.parametrize(
    "text", ["\uff11\uff17\uff15e9", "175e9\u2003", "175e9\x1f", "\u0661\u0667\u0665"]
)
def test_a_count_with_a_non_ascii_or_control_character_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="U\\+"):
        parse_count(text)


def test_ascii_sizes_and_counts_still_read() -> None:
    assert parse_bytes(" 1 GiB\t") == 2**30 and parse_bytes("2.8TB") == 2_800_000_000_000
    assert parse_count("175e9") == 175 * 10**9 and parse_count("1_000") == 1000


def test_a_budget_size_with_a_unit_separator_is_a_located_error() -> None:
    text = CLAIMS.replace("bytes: 1GiB", 'bytes: "1\\x1fGiB"')
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    assert "U+001F" in error.message and error.hint == "write '1GiB'"
    assert error.position is not None and error.position.line == 37


def test_predict_refuses_a_size_option_with_an_em_space() -> None:
    out = run_cli(
        "predict", str(LAB), "--collective", "all_reduce", "--gpus", "8",
        "--max-bytes", "8\u2003GiB",
    )  # fmt: skip
    assert out.returncode == 2 and "U+2003" in out.stderr and "hint: write '8 GiB'" in out.stderr


@pytest.mark.parametrize(
    ("typed", "named", "fix"),
    [
        ("\uff11\uff16", "fullwidth digit U+FF11", "write count: 16"),
        ('"\uff11\uff16"', "fullwidth digit U+FF11", "write count: 16"),
        ("\u0664", "ARABIC-INDIC DIGIT FOUR", "write count: 4"),
        ("\u00b2", "superscript digit U+00B2", "ASCII digits"),
    ],
    ids=["fullwidth", "quoted-fullwidth", "arabic-indic", "superscript"],
)
def test_a_schema_count_typed_in_other_digits_names_them(typed: str, named: str, fix: str) -> None:
    text = LAB.read_text().replace("count: 2", f"count: {typed}", 1)
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    assert error.hint is not None and named in error.hint and fix in error.hint, error.hint


# --- 2. a path through a missing directory is refused, as the kernel refuses it ----------------


@pytest.mark.parametrize(
    ("verb", "option"),
    [("plan", "--cabling"), ("plan", "--bom"), ("plan", "--hosts"), ("report", "-o")],
)
def test_an_output_through_a_missing_directory_is_refused(
    tmp_path: Path, verb: str, option: str
) -> None:
    out = run_cli(verb, str(LAB), option, "missing/../out.csv", cwd=tmp_path)
    assert out.returncode == 2, out
    assert f"directory {tmp_path / 'missing'} does not exist" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_output_through_an_existing_directory_and_dot_dot_is_written(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    out = run_cli("plan", str(LAB), "--cabling", "sub/../out.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.csv").stat().st_size > 0


# --- 3. UTF-16 and UTF-32 inputs are named as such ----------------------------------------------


@pytest.mark.parametrize(
    ("encode", "name"),
    [
        (lambda t: codecs.BOM_UTF16_LE + t.encode("utf-16-le"), "UTF-16"),
        (lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"), "UTF-16"),
        (lambda t: t.encode("utf-16-le"), "UTF-16"),
        (lambda t: t.encode("utf-16-be"), "UTF-16"),
        (lambda t: t.encode("utf-32"), "UTF-32"),
        (lambda t: t.encode("utf-32-be"), "UTF-32"),
    ],
    ids=["16le-bom", "16be-bom", "16le", "16be", "32-bom", "32be"],
)
def test_a_wide_encoding_is_named(encode, name: str) -> None:  # type: ignore[no-untyped-def]
    assert wide_encoding(encode("name: a100-lab\n")) == name


@pytest.mark.parametrize(
    "text", [b"name: lab\n", "na\u00efve: \u00e9\n".encode(), b"", b"ab", b"\xff\xfe"]
)
def test_utf8_text_is_no_wide_encoding(text: bytes) -> None:
    assert wide_encoding(text) in (None, "UTF-16")  # a lone UTF-16 mark is UTF-16's
    if not text.startswith(b"\xff\xfe"):
        assert wide_encoding(text) is None


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("lint", "{f}"), "spec.yaml"),
        (("verify", str(LAB), "{f}"), "fabric.txt"),
        (("verify", str(LAB), str(DATA / "ibnetdiscover.txt"), "--names", "{f}"), "names.map"),
        (("simulate", str(LAB), "--trace", "{f}"), "trace.csv"),
    ],
    ids=["spec", "dump", "name-map", "trace"],
)
def test_every_input_in_utf16_says_so_with_the_fix(
    tmp_path: Path, args: tuple[str, ...], name: str
) -> None:
    sources = {
        "spec.yaml": LAB.read_text(),
        "fabric.txt": (DATA / "ibnetdiscover.txt").read_text(),
        "names.map": (DATA / "node-name-map.txt").read_text(),
        "trace.csv": "id,submit_s,duration_s,gpus\nj1,0,60,8\n",
    }
    path = tmp_path / name
    path.write_bytes(codecs.BOM_UTF16_LE + sources[name].encode("utf-16-le"))
    out = run_cli(*(a.format(f=path) for a in args))
    first = out.stderr.splitlines()[0]
    assert out.returncode == 2, out
    assert first.startswith(f"{path}:1:1: error") and "is UTF-16 text" in first, first
    assert "iconv -f UTF-16 -t UTF-8" in first


def test_a_nul_in_utf8_text_is_still_binary(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(LAB.read_bytes().replace(b"Seven", b"Sev\x00en"))
    with pytest.raises(InputError) as caught:
        load_spec(str(path))
    assert "NUL" in caught.value.message
    assert read_bounded(str(LAB), 1 << 20) == LAB.read_bytes()


# --- 4. a LID two ports hold is a finding ----------------------------------------------------


@pytest.fixture(scope="module")
def lab_dump() -> list[str]:
    plan = expand(load_spec(str(LAB)).spec, load_catalog())
    return list(as_built(plan).values())


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _verify(tmp_path: Path, lines: list[str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    dump = tmp_path / "fabric.txt"
    dump.write_text("\n".join(lines) + "\n")
    out = run_cli("verify", *extra, str(dump), "--format", "json")
    return out.returncode, json.loads(out.stdout)


def test_two_hcas_with_one_lid_are_a_finding(tmp_path: Path, lab_dump: list[str]) -> None:
    lines = [lab_dump[0], lab_dump[1].replace("CA     3  1", "CA     1  1"), *lab_dump[2:]]
    code, doc = _verify(tmp_path, lines, str(LAB))
    (finding,) = doc["findings"]
    assert code == 1 and finding["kind"] == "duplicate_lid"
    assert {finding["a"]["port"], finding["z"]["port"]} == {"mlx5_0", "mlx5_1"}
    assert "LID 1" in finding["found"] and finding["a"]["rack"] == "train-su01-c1"


def test_an_hca_with_its_switchs_lid_is_a_finding_without_a_spec(
    tmp_path: Path, lab_dump: list[str]
) -> None:
    lines = [line.replace(" SW     2 ", " SW     1 ") for line in lab_dump]
    code, doc = _verify(tmp_path, lines, "--structure")
    kinds = [f["kind"] for f in doc["findings"]]
    assert code == 1 and kinds.count("duplicate_lid") == 1, kinds


@pytest.mark.parametrize(
    "files",
    [
        ("ibnetdiscover.txt", "ibnetdiscover-p.txt", "iblinkinfo.txt", "iblinkinfo-l.txt"),
        ("messy-ibnetdiscover.txt", "node-name-map.txt"),
        ("topograph-ndr.out",),
    ],
    ids=["one-port-four-ways", "messy", "topograph"],
)
def test_one_port_named_by_node_and_port_guid_is_one_lid_holder(files: tuple[str, ...]) -> None:
    out = run_cli("verify", "--structure", *(str(DATA / f) for f in files), "--format", "json")
    kinds = [f["kind"] for f in json.loads(out.stdout)["findings"]]
    assert "duplicate_lid" not in kinds


def test_a_switch_lid_on_another_switch_in_a_topology_file_is_a_finding(tmp_path: Path) -> None:
    text = (DATA / "ibnetdiscover.txt").read_text()
    dump = tmp_path / "fabric.txt"
    dump.write_text(text.replace("base port 0 lid 6 lmc", "base port 0 lid 3 lmc", 1))
    out = run_cli("verify", "--structure", str(dump))
    assert out.returncode == 1 and "duplicate_lid" in out.stdout and "LID 3" in out.stdout


# --- 5. the report shows names from a trace with their control characters escaped -------------

_RAW = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    ("job", "tenant", "shown"),
    [
        ("j1", "re\x1b[2Jsearch", "re\\x1b[2Jsearch"),
        ("j1", "re\u202esearch", "re\\u202esearch"),
    ],
    ids=["csi-tenant", "rlo-tenant"],
)
def test_the_report_escapes_control_characters_from_a_trace(
    tmp_path: Path, job: str, tenant: str, shown: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"
        f"{job},0,60,8,1000,{tenant},low,\nj2,5,60,8,1000,{tenant},low,\n"
    )
    page = tmp_path / "r.html"
    out = run_cli("report", str(LAB), "-o", str(page), "--trace", str(trace))
    html = page.read_text()
    assert out.returncode == 0, out.stderr
    assert _RAW.search(html) is None
    assert shown in html  # the tenant is in the queueing chart, shown as error lines show it


# --- 6. a float option names NaN and a non-ASCII character ------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("simulate", "--trace", "{trace}", "--inflate", "nan"),
            "must be a finite number, not nan",
        ),
        (("simulate", "--trace", "{trace}", "--inflate", "-inf"), "must be a finite number"),
        (
            ("trace", "--load", "\uff10.5"),
            "fullwidth digit U+FF10 (FULLWIDTH DIGIT ZERO): write 0.5",
        ),
        (("trace", "--days", "1\u2003", "--load", "0.5"), "non-ASCII space U+2003"),
        (
            ("predict", "--collective", "all_reduce", "--gpus", "8", "--step-factor", "\u0662"),
            "digit of another script U+0662",
        ),
    ],
    ids=["inflate-nan", "inflate-inf", "load-fullwidth", "days-em-space", "step-arabic"],
)
def test_a_float_option_says_what_is_wrong(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("id,submit_s,duration_s,gpus\nj1,0,60,8\n")
    verb, *rest = (a.format(trace=trace) for a in args)
    out = run_cli(verb, str(LAB), *rest, cwd=tmp_path)
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert not (tmp_path / "out.csv").exists()


def test_float_options_still_read_ascii_numbers(tmp_path: Path) -> None:
    out = run_cli("trace", str(LAB), "--load", "5e-1", "--jobs", "3", "-o", "t.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 4


# --- 7. a schedule that never fires is refused where it stands ----------------------------------


@pytest.mark.parametrize("at", ["0 7 30 2 *", "0 7 31 4,6,9,11 *", "15 3 30-31 2 *"])
def test_a_mig_change_on_a_date_no_month_has_is_refused(at: str) -> None:
    text = K8.replace("0 7 * * 1-5", at)
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    assert "never fires" in error.message and error.hint and "February" in error.hint
    assert error.position is not None and error.position.line == _line(text, at)


@pytest.mark.parametrize("at", ["0 7 29 2 *", "0 7 30 2 1", "0 7 31 * *", "@monthly"])
def test_a_schedule_that_fires_some_day_still_passes(at: str) -> None:
    load_spec_text(K8.replace("0 7 * * 1-5", at), "spec.yaml")


# --- 8. every lint finding has a hint --------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("192.168.11.0/24", "192.168.10.0/25", "RP054"),
        ("gpus: [6, 7]", "gpus: [6, 9]", "RP014"),
        ("gpus: [6, 7]", "gpus: [5, 7]", "RP014"),
        ('"1g.10gb": 7', '"1g.10gb": 8', "RP011"),
        ("  - name: infer\n", "  - name: train\n", "RP004"),
    ],
    ids=["cidr-overlap", "gpu-index", "gpu-twice", "too-many-instances", "duplicate-name"],
)
def test_every_lint_finding_says_how_to_fix_it(
    tmp_path: Path, old: str, new: str, rule: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(LAB.read_text().replace(old, new, 1))
    out = run_cli("lint", str(spec), "--format", "json")
    findings = json.loads(out.stdout)["findings"]
    assert rule in {f["rule"] for f in findings}, findings
    assert [f for f in findings if not f["hint"]] == []
