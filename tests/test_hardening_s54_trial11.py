"""Trial 11 (7 December 2026): each test one cause a hostile trial broke, not one example.

1. ``railplan simulate --jobs-csv``: a never-ran job's ``reason`` names the GPU model the
   trace asked for, and that cell was written as it came: a model ``A<ESC>[31m100`` reached
   the CSV raw (a terminal that ``cat``s the file runs it), unlike the id and tenant cells.
2. ``railplan verify``: an ``ibnetdiscover -p`` dump cut inside a port line, after its GUID
   or its rate and before the description every port line ends with, was read: the line cut
   at ``CA 7 1 0x00000000001`` became an unconnected HCA with GUID 0x1, reported as an
   unnamed node, while a line cut inside a cable's description was refused as cut short.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from infra.errors import DiscoveredError
from infra.simulate.jobs import Job
from infra.simulate.outcomes import JobTable
from infra.verify.discovered import parse_text

from .cli_run import ROOT, run_cli

LAB = ROOT / "examples" / "a100-lab-mig.yaml"
_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
TRACE_HEAD = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


# --- 1. every text cell of the jobs CSV is escaped and spreadsheet-safe --------------------------


@pytest.mark.parametrize("model", ["A\x1b[31m100", "A\x9b100", "tpu\u202ev5", "=1+1"])
def test_a_never_ran_reason_naming_the_traces_gpu_model_is_escaped(
    tmp_path: Path, model: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE_HEAD + f"j1,0,60,8,1000,research,low,{model}\n")
    jobs = tmp_path / "jobs.csv"
    out = run_cli("simulate", str(LAB), "--trace", str(trace), "--jobs-csv", str(jobs))
    assert out.returncode == 0, out.stderr
    text = jobs.read_text()
    assert "never_ran" in text and _RAW.search(text) is None, text


def test_every_text_cell_of_the_jobs_csv_is_escaped_and_never_a_formula() -> None:
    job = Job("=j", 0.0, 60.0, 8, tenant="@t", priority="\x1bp", flag="+f")
    table = JobTable([], [], [], [], [(job, "-reason \x1b[2J")])
    cells = _cells(table.csv())
    assert all(_RAW.search(c) is None and not c.startswith(_FORMULA) for c in cells), cells


# --- 2. a port line cut before its description is refused where it stands -----------------------

PORTS = (ROOT / "tests" / "data" / "verify" / "ibnetdiscover-p.txt").read_text()
_CABLE = next(line for line in PORTS.splitlines() if " - " in line and line.startswith("CA"))
_FREE = next(line for line in PORTS.splitlines() if " - " not in line and line[:2] in ("CA", "SW"))


@pytest.mark.parametrize("keep", [20, 30, 40])
def test_a_port_line_cut_before_its_description_is_refused(keep: int) -> None:
    text = PORTS.replace(_CABLE, _CABLE[:keep], 1)
    line = PORTS.splitlines().index(_CABLE) + 1
    with pytest.raises(DiscoveredError) as caught:
        parse_text(text, "d.txt")
    assert caught.value.position is not None and caught.value.position.line == line
    assert "cut short" in str(caught.value) or "cannot read" in str(caught.value)


def test_an_unconnected_port_with_its_description_still_reads() -> None:
    fabric = parse_text(PORTS, "d.txt")
    assert fabric is not None and "'" in _FREE and _FREE.rstrip().endswith("'")
