"""`railplan verify` against hostile dumps: each test one cause, not one example.

Special files and huge inputs reach the one bounded reader (`infra.verify.discovered.read_dump`);
names from a dump are escaped and cut in every human output; numbers are ASCII; every seen link
is compared; a dump with nothing to compare is an error. The special-file cases run the real
command in a subprocess with a timeout and an address-space limit, so a regression fails
(exit 3, a timeout) instead of hanging the suite or filling the machine's memory.
"""

from __future__ import annotations

import csv
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.spec import load_spec
from infra.topology import expand
from infra.topology.model import Plan
from infra.verify.compare import LISTED
from infra.verify.formats import JSON_KEEP_CHARS

from .cli_run import run_cli
from .verify_dump import as_built, unknown_cables

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "examples/a100-lab-mig.yaml")  # 4 servers, 32 compute cables on one leaf
MEMORY = 1 << 30  # a verify of the lab fabric needs well under this; reading /dev/zero does not


@pytest.fixture(scope="module")
def plan() -> Plan:
    return expand(load_spec(SPEC).spec, load_catalog())


@pytest.fixture
def dump(plan: Plan, tmp_path: Path) -> Path:
    path = tmp_path / "fabric.txt"
    path.write_text("\n".join(as_built(plan).values()) + "\n")
    return path


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def railplan(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command, bounded in time and memory: a regression fails, never hangs."""
    return subprocess.run(
        [sys.executable, "-m", "infra", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        check=False,
        preexec_fn=_limited,
    )


def _refused(result: subprocess.CompletedProcess[str], file: str, what: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"{file}: error: "), result.stderr
    assert what in result.stderr and "(hint: " in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# --- every dump input goes through one bounded reader --------------------------------


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_device_as_a_dump_is_refused_before_reading(device: str) -> None:
    _refused(railplan("verify", SPEC, device), device, "is a character device")


def test_a_symlink_to_dev_zero_is_refused_as_the_device(tmp_path: Path) -> None:
    link = tmp_path / "dump.txt"
    link.symlink_to("/dev/zero")
    _refused(railplan("verify", SPEC, str(link)), str(link), "is a character device")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, dump: Path) -> None:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    _refused(railplan("verify", SPEC, str(fifo)), str(fifo), "FIFO")
    _refused(railplan("verify", "--structure", str(fifo), str(dump)), str(fifo), "FIFO")
    _refused(railplan("verify", SPEC, str(dump), "--names", str(fifo)), str(fifo), "FIFO")


def test_an_oversize_dump_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.txt"
    with sparse.open("wb") as f:
        f.truncate(10 << 30)  # 10 GiB that take no disk: a read would need 10 GiB of memory
    _refused(railplan("verify", SPEC, str(sparse)), str(sparse), "refuses inputs above 512 MiB")
    _refused(railplan("verify", "--structure", str(sparse)), str(sparse), "512 MiB")


def test_a_dump_in_a_shell_pipe_is_still_read_once(dump: Path) -> None:
    script = f"exec {sys.executable} -m infra verify --structure <(cat {dump}) {dump}"
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no finding: 32 links seen")


def test_a_dump_given_as_the_spec_is_named_as_such(dump: Path) -> None:
    result = run_cli("verify", str(dump), str(dump))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{dump}: error: is a dump, not the spec")


# --- names from the fabric are escaped and cut in every human output -----------------

EVIL = "\x1b]0;owned\x07\x1b[31mgpu\u202eevil mlx5_0"  # OSC title, colour, right-to-left override
HUGE = "A" * 2_000_000  # one word: a NodeDescription nobody checked
SPACED = "B " * 500_000  # many words: no run of it is long, the whole is
RAW = ("\x1b", "\x07", "\u202e")


def _hostile(dump: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The lab's dump with 3 extra HCAs on free leaf ports, and a map renaming a 4th HCA."""
    extra = [
        f"CA    9{i}  1 0x00000000009000a{i} 4x HDR - SW     2 3{i} 0x0000000000100001 "
        f"( '{name}' - 'ib0-leaf-01' )"
        for i, name in enumerate((EVIL, HUGE + " x", SPACED), start=3)
    ]
    hostile = tmp_path / "hostile.txt"
    hostile.write_text(dump.read_text() + "\n".join(extra) + "\n")
    names = tmp_path / "names.txt"
    names.write_text('0x0000000000100002 "\x1b[2J\u202erenamed"\n')
    return hostile, names


@pytest.mark.parametrize("output", ["text", "csv"])
def test_names_reach_text_and_csv_escaped_and_cut(dump: Path, tmp_path: Path, output: str) -> None:
    hostile, names = _hostile(dump, tmp_path)
    result = run_cli("verify", SPEC, str(hostile), "--names", str(names), "--format", output)
    assert result.returncode == 1, result.stderr
    assert not any(ch in result.stdout for ch in RAW), result.stdout[:2000]
    assert "\\x1b]0;owned\\x07" in result.stdout and "\\u202eevil" in result.stdout
    assert "\\x1b[2J\\u202erenamed" in result.stdout  # a --names entry, too
    assert "...(2,000,000 chars)" in result.stdout  # cut, with an ellipsis and its length
    assert len(result.stdout) < 20_000  # not the 4 MB of names, twice each


def test_csv_cells_stay_guarded_against_formulas(dump: Path, tmp_path: Path) -> None:
    extra = (
        "CA    93  1 0x00000000009000a3 4x HDR - SW     2 33 0x0000000000100001 "
        "( '=HYPERLINK(\"http://x\") mlx5_0' - 'ib0-leaf-01' )"
    )
    hostile = tmp_path / "formula.txt"
    hostile.write_text(dump.read_text() + extra + "\n")
    result = run_cli("verify", SPEC, str(hostile), "--format", "csv")
    assert result.returncode == 1
    cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
    assert [cell for cell in cells if cell.startswith("'=HYPERLINK(")]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]


def test_json_keeps_short_names_exact_cuts_long_ones_and_escapes(
    dump: Path, tmp_path: Path
) -> None:
    hostile, names = _hostile(dump, tmp_path)
    result = run_cli("verify", SPEC, str(hostile), "--names", str(names), "--format", "json")
    assert result.returncode == 1 and len(result.stdout) < 20_000  # not 2 MB a name
    assert not any(ch in result.stdout for ch in RAW)  # json.dumps writes \u001b, \u202e
    devices = {f["a"]["device"] for f in json.loads(result.stdout)["findings"]}
    assert "\x1b]0;owned\x07\x1b[31mgpu\u202eevil" in devices
    assert "A" * JSON_KEEP_CHARS + "...(2,000,002 chars)" in devices


# --- numbers are ASCII digits in InfiniBand's ranges --------------------------------


@pytest.mark.parametrize(("old", "new"), [(" 1  1 0x", " 1  ² 0x"), (" 1  1 0x", " ³  1 0x")])
def test_a_superscript_port_or_lid_is_exit_2_at_its_line(dump: Path, old: str, new: str) -> None:
    lines = dump.read_text().split("\n")
    lines[4] = (
        "CA     1  1 0x00000000009000a0 4x HDR - SW     2 40 0x0000000000100001 ( 'x' - 'y' )"
    )
    lines[4] = lines[4].replace(old, new)
    dump.write_text("\n".join(lines))
    result = run_cli("verify", SPEC, str(dump))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{dump}:5:1: error: "), result.stderr
    assert "is not a number from 0 to" in result.stderr and result.stderr.count("\n") == 1


# --- every seen link is compared, a second one between the same ends too -------------

SECOND = "CA     1  {port} 0x0000000000100000 4x HDR - SW     2  1 0x0000000000100001 ( '{name}' - 'ib0-leaf-01' )"


def test_a_second_link_between_planned_ends_is_reported(dump: Path) -> None:
    """The HCA of a planned cable reports another port on the same leaf port: a finding.

    The leaf port holds one cable: the second peer is a finding, not a 33rd link
    (tests/test_verify_two_peers.py has the cause).
    """
    planned = dump.read_text()
    assert "( 'train01 mlx5_0' - 'ib0-leaf-01' )" in planned.split("\n")[0]
    dump.write_text(planned + SECOND.format(port=2, name="train01 mlx5_0") + "\n")
    result = run_cli("verify", SPEC, str(dump), "--format", "json")
    assert result.returncode == 1, result.stdout
    document = json.loads(result.stdout)
    assert document["summary"]["as_planned"] is False
    assert document["summary"]["links_seen"] == 32 and document["summary"]["cables_planned"] == 32
    (finding,) = document["findings"]
    assert finding["kind"] == "unexpected" and finding["expected"] == "one cable"
    assert finding["found"] == f"a second link (4xHDR) at {dump}:33"
    assert {finding["a"]["device"], finding["z"]["device"]} == {"ib0-leaf-01", "train01"}


def test_port_999999_is_refused_as_no_port_number(dump: Path) -> None:
    dump.write_text(dump.read_text() + SECOND.format(port=999999, name="train01 mlx5_0") + "\n")
    result = run_cli("verify", SPEC, str(dump))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{dump}:33:1: error: port '999999' is not a number from 0")


def test_one_cable_in_two_formats_with_two_guids_is_one_link(dump: Path, tmp_path: Path) -> None:
    """A topology file without port GUIDs names an HCA by its node GUID, -p by its port GUID."""
    topology = tmp_path / "topology.txt"
    topology.write_text(
        'Ca\t1 "H-00000000009000ff"\t\t# "train01 mlx5_0"\n'
        '[1] \t"S-0000000000100001"[1]\t\t# lid 1 lmc 0 "ib0-leaf-01" lid 2 4xHDR\n'
    )
    result = run_cli("verify", SPEC, str(dump), str(topology))
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("as planned: 32 links seen, 32 planned cables")
    for extra in ([str(topology)], [str(dump)], [str(topology), str(dump), str(topology)]):
        again = run_cli("verify", SPEC, str(dump), *extra, "--format", "json")
        summary = json.loads(again.stdout)["summary"]
        assert again.returncode == 0 and summary["links_seen"] == 32, summary  # distinct cables


# --- a dump with nothing to compare is an error, not "as planned" or "0 servers" -----

ONE_HCA = (
    "CA     1  1 0x0000000000100000 4x HDR                                    'train01 mlx5_0'\n"
)


@pytest.mark.parametrize("with_spec", [True, False])
def test_a_dump_without_a_cable_is_exit_2_naming_what_is_missing(
    tmp_path: Path, with_spec: bool
) -> None:
    cut = tmp_path / "cut.txt"
    cut.write_text("ibwarn: [7] mad_rpc_open_port: noise\n" + ONE_HCA)
    result = run_cli("verify", *([SPEC] if with_spec else ["--structure"]), str(cut))
    assert result.returncode == 2, result.stdout
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"{cut}: error: holds no cable between two nodes: nothing to compare"
    ), result.stderr


def test_a_cableless_dump_beside_a_good_one_is_still_named(dump: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.txt"
    cut.write_text(ONE_HCA)
    result = run_cli("verify", SPEC, str(dump), str(cut))
    assert result.returncode == 2 and result.stderr.startswith(f"{cut}: error: holds no cable")


def test_a_node_name_map_alone_is_no_dump(tmp_path: Path) -> None:
    names = tmp_path / "names.txt"
    names.write_text('0x0000000000100000 "train01 mlx5_0"\n')
    result = run_cli("verify", "--structure", str(names))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{names}: error: is a node-name map, and no dump is given")


def test_a_dump_cut_inside_a_cable_line_is_located(dump: Path) -> None:
    text = dump.read_text()
    dump.write_text(text[: text.index("mlx5_2") + 2])  # the third cable's line, cut short
    result = run_cli("verify", SPEC, str(dump))
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(f"{dump}:3:1: error: the cable's line is cut short")


# --- a dump of many stray cables: its findings listed up to LISTED a kind, the rest counted --


def test_stray_cables_past_the_listed_are_counted_not_listed(dump: Path) -> None:
    """1,500 cables to switches the plan lacks: 1,000 listed in walking order, 500 counted."""
    dump.write_text(dump.read_text() + "\n".join(unknown_cables(LISTED + 500)) + "\n")
    result = run_cli("verify", SPEC, str(dump), "--format", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    kinds = {f["kind"] for f in document["findings"]}
    assert len(document["findings"]) == LISTED and kinds == {"unexpected"}
    summary = document["summary"]
    assert summary["by_kind"] == {"unexpected": LISTED + 500}
    assert summary["not_listed"] == {"unexpected": 500} and summary["links_seen"] == 32 + 1500
    assert document["findings"][0]["a"]["device"] == "stray-sw-00000"  # walking order: first
    text = run_cli("verify", SPEC, str(dump)).stdout.splitlines()
    assert text[-2:] == [
        "and 500 more unexpected, not listed (the first 1,000 are)",
        "1,500 findings (1,500 unexpected); 1,532 links seen, 32 planned cables",
    ]
    rows = list(csv.reader(io.StringIO(run_cli("verify", SPEC, str(dump), "-f", "csv").stdout)))
    assert len(rows) == 1 + LISTED + 1 and rows[-1][:2] == ["", "unexpected"]
    assert rows[-1][11] == "500 more unexpected findings, not listed here (the first 1,000 are)"


def test_a_huge_name_is_cut_in_the_json_too_saying_its_length(dump: Path) -> None:
    name = "n" * 100_000
    line = unknown_cables(1)[0].replace("'stray-sw-00000'", f"'{name}'")
    dump.write_text(dump.read_text() + line + "\n")
    result = run_cli("verify", SPEC, str(dump), "--format", "json")
    assert result.returncode == 1 and len(result.stdout) < 5_000
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["a"]["device"] == "n" * JSON_KEEP_CHARS + "...(100,000 chars)"
    assert f"{'n' * JSON_KEEP_CHARS}...(100,000 chars) port 1" in finding["fix"]
