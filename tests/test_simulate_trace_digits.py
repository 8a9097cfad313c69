"""Numbers in job traces and in `mig check --driver` are ASCII digits, as verify's dumps are.

``int()`` and ``float()`` read Arabic-Indic (``٣٠``) and fullwidth (``１２``) digits and
``1_000``, so every trace reader took them as numbers while verify refused ``١`` as a port
with a located error; a field's Unicode spaces (``3<U+00A0>``) were stripped before the check. Now each reader refuses them at the field's line and column with a hint
(one helper, `infra.digits`), and ``mig check --driver ٥٥٠.1`` is a usage error (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.traces import TraceError, trace_from_text

from .cli_run import run_cli
from .conftest import ROOT

RAILPLAN = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model,time_limit_s\n"
HELIOS = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
)
ALIBABA = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
# Unicode spaces around a number: str.strip() took them away and the digits were read
NOT_ASCII = ["٣٠", "１２", "1_000", "³", "1٠", "3\u00a0", "\u00a03", "3\u2003", "3\u3000"]
HINT = "write numbers with the ASCII digits 0-9"
MIG = str(ROOT / "examples/mig-parted/config-default.yaml")


def _refused(text: str, where: str, field: str, value: str) -> None:
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "t.csv")
    line = caught.value.one_line()
    assert line.startswith(f"t.csv:{where}: error: {field} {value!r} is not"), line
    assert HINT in line, line


def _railplan_row(**fields: str) -> str:
    row = {"id": "b", "submit_s": "10", "duration_s": "100", "gpus": "1", "gpu_milli": "1000"}
    row |= fields
    values = [row["id"], row["submit_s"], row["duration_s"], row["gpus"], row["gpu_milli"]]
    return RAILPLAN + "a,0,100,1,1000,t,low,,\n" + ",".join(values) + ",t,low,,\n"


@pytest.mark.parametrize("value", NOT_ASCII)
@pytest.mark.parametrize(
    ("field", "column"), [("submit_s", 3), ("duration_s", 6), ("gpus", 10), ("gpu_milli", 12)]
)
def test_railplan_csv_refuses_numbers_not_in_ascii_digits(
    value: str, field: str, column: int
) -> None:
    _refused(_railplan_row(**{field: value}), f"3:{column}", field, value)


@pytest.mark.parametrize("value", NOT_ASCII)
def test_helios_refuses_gpus_and_durations_not_in_ascii_digits(value: str) -> None:
    row = f"1,u,vc,{value},1,1,COMPLETED,2020-06-09 18:41:01,,,600,0\n"
    _refused(HELIOS + row, "2:8", "gpu_num", value)
    row = f"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,,,{value},0\n"
    _refused(HELIOS + row, "2:46", "duration", value)


@pytest.mark.parametrize("value", NOT_ASCII)
def test_alibaba_v2023_refuses_them_on_its_fast_path_too(value: str) -> None:
    """The fast path reads plain integers with int(); it must hand these to the checked path."""
    pod = f"p,8000,16384,{value},1000,,LS,Succeeded,100,1000,100\n"
    _refused(ALIBABA + pod, "2:14", "num_gpu", value)
    pod = f"p,8000,16384,1,1000,,LS,Succeeded,{value},1000,100\n"
    _refused(ALIBABA + pod, "2:35", "creation_time", value)


@pytest.mark.parametrize("value", [v for v in NOT_ASCII if v != "³"])
def test_pai_refuses_them(value: str) -> None:
    """(``³`` is no number even to float(): a header-less file with it is no PAI task table.)"""
    pai = f"job1,worker,1.0,Terminated,{value},1000,600.0,29.3,100.0,V100\n"
    _refused(pai, "1:28", "start_time", value)


@pytest.mark.parametrize(
    ("text", "expected"), [("12", 12.0), ("12.5", 12.5), ("1e3", 1000.0), (" 12\t", 12.0)]
)
def test_ascii_numbers_are_still_read(text: str, expected: float) -> None:
    trace = trace_from_text(_railplan_row(duration_s=text), "t.csv")
    assert trace.jobs[1].duration_s == expected


@settings(max_examples=60, deadline=None)
@given(st.characters(categories=["Nd"]).filter(lambda c: not c.isascii()))
def test_every_non_ascii_decimal_digit_is_refused(digit: str) -> None:
    """Any Unicode decimal digit int() would read, in every count and time of the row."""
    for field in ("submit_s", "duration_s", "gpus"):
        with pytest.raises(TraceError):
            trace_from_text(_railplan_row(**{field: f"1{digit}"}), "t.csv")


def test_simulate_refuses_such_a_trace_with_one_located_line(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(_railplan_row(gpus="٣"))
    result = run_cli("simulate", str(ROOT / "examples/k8s-tenants.yaml"), "--trace", str(trace))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{trace}:3:10: error: gpus '٣' is not a number"), result
    assert HINT in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("driver", ["٥٥٠.1", "５５０.90.07", "550.٩٠.07", "5_50.90", "²"])
def test_mig_check_driver_takes_only_ascii_digits(driver: str) -> None:
    result = run_cli("mig", "check", MIG, "--driver", driver)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not a driver version" in result.stderr and result.stderr.count("\n") == 1
    assert "550.90.07" in result.stderr  # the hint


def test_mig_check_driver_in_ascii_is_still_read() -> None:
    assert run_cli("mig", "check", MIG, "--driver", "550.90.07").returncode == 0
