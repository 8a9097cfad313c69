"""Job traces against hostile rows and paths: each test one cause.

Times and dates out of range are refused when the trace is read, at their row, by every reader
(one bound, `infra.simulate.traces.common.MAX_TRACE_S`); a budget's trace stays inside the
spec's directory; a trace's text reaches messages and human output short and escaped. The
cases that ran for minutes before the fix run the real command in a subprocess with a
timeout, so a regression fails instead of stalling the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.simulate.traces import TraceError, trace_from_text

from .cli_run import run_cli
from .conftest import ROOT

MAX_TRACE_S = 10 * 365.25 * 86_400  # the documented bound (traces.common.MAX_TRACE_S)
TENANTS = str(ROOT / "examples/k8s-tenants.yaml")  # MIG schedules: the replay walks its days
RAILPLAN = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model,time_limit_s\n"
HELIOS = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
)
ALIBABA = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def railplan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The real command with a timeout: before the fix these ran past 120 s."""
    return subprocess.run(
        [sys.executable, "-m", "infra", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=90,
        check=False,
    )


def _refused(text: str, where: str, what: str) -> None:
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "t.csv")
    line = caught.value.one_line()
    assert line.startswith(f"t.csv:{where}:"), line  # where: "line" or "line:column"
    assert ": error: " in line, line
    assert what in line, line


# --- times and durations out of range are refused at their row -------------------------------


@pytest.mark.parametrize("value", ["1e308", "1e300", "1e12", str(int(MAX_TRACE_S) + 1)])
@pytest.mark.parametrize(("field", "column"), [("submit_s", 3), ("duration_s", 6)])
def test_railplan_csv_times_beyond_ten_years_are_refused(
    value: str, field: str, column: int
) -> None:
    row = {"submit_s": "10", "duration_s": "100"} | {field: value}
    text = (
        RAILPLAN
        + f"a,0,100,1,1000,t,low,,\nb,{row['submit_s']},{row['duration_s']},1,1000,t,low,,\n"
    )
    _refused(text, f"3:{column}", f"{field} '{value}' is more than 10 years")


def test_a_time_limit_beyond_ten_years_is_refused() -> None:
    _refused(RAILPLAN + "a,0,100,1,1000,t,low,,1e12\n", "2:23", "time_limit_s '1e12' is more")


def test_the_bound_itself_is_accepted() -> None:
    from infra.simulate.traces import common

    assert common.MAX_TRACE_S == MAX_TRACE_S
    at = int(MAX_TRACE_S)
    trace = trace_from_text(RAILPLAN + f"a,{at},{at},1,1000,t,low,,{at}\n", "t.csv")
    assert trace.jobs[0].submit_s == trace.jobs[0].duration_s == MAX_TRACE_S


@pytest.mark.parametrize("value", ["1e12", "1e300"])
def test_helios_durations_beyond_ten_years_are_refused(value: str) -> None:
    row = f"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,,{value},0\n"
    _refused(HELIOS + row, "2", f"duration '{value}' is more than 10 years")


@pytest.mark.parametrize(
    "date", ["0001-01-01 00:00:00", "9999-12-31 23:59:59", "1969-12-31 23:00:00"]
)
def test_helios_dates_outside_1970_to_2099_are_refused(date: str) -> None:
    rows = f"1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,,,600,0\n2,u,vc,1,1,1,COMPLETED,{date},,,600,0\n"
    _refused(HELIOS + rows, "3", f"submit_time '{date}' is not between 1970 and 2099")


def test_a_helios_trace_spanning_decades_is_refused_at_its_late_row() -> None:
    """Both dates are valid; their distance is not: the check every reader's jobs pass."""
    rows = "1,u,vc,1,1,1,COMPLETED,1971-01-01 00:00:00,,,600,0\n"
    rows += "2,u,vc,1,1,1,COMPLETED,2090-01-01 00:00:00,,,600,0\n"
    _refused(HELIOS + rows, "3:1", "job '2''s submission")


def test_philly_dates_and_spans_out_of_range_are_refused() -> None:
    entry = {
        "jobid": "j",
        "vc": "v",
        "submitted_time": "0001-01-01 00:00:00",
        "attempts": [
            {"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 02:12:09",
             "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}
        ],
    }  # fmt: skip
    _refused(json.dumps([entry]), "1:1", "submitted_time '0001-01-01 00:00:00' is not between")
    entry["submitted_time"] = "2017-10-07 01:11:39"
    entry["attempts"][0]["end_time"] = "2090-10-07 02:12:09"  # type: ignore[index]
    _refused(json.dumps([entry]), "1:1", "job 'j''s run time")


def test_pai_and_alibaba_v2023_times_beyond_ten_years_are_refused() -> None:
    pai = "job1,worker,1.0,Terminated,100,1e12,600.0,29.3,100.0,V100\n"
    _refused(pai, "1", "end_time '1e12' is more than 10 years")
    pod = "p,8000,16384,1,1000,,LS,Succeeded,100,1000000000000,100\n"
    _refused(ALIBABA + pod, "2", "deletion_time")


@pytest.mark.parametrize("extra", [[], ["--compare-mig"]])
def test_simulate_refuses_a_job_at_1e12_s_at_once(tmp_path: Path, extra: list[str]) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(RAILPLAN + "a,0,100,1,1000,research,low,,\nb,10,1e12,1,1000,research,low,,\n")
    result = railplan("simulate", TENANTS, "--trace", str(trace), *extra)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"{trace}:3:6: error: duration_s '1e12' is more than 10 years, the longest a trace may "
        "span (hint: trace times are seconds: is it in milliseconds or microseconds?)\n"
    )


def test_a_helios_year_1_is_exit_2_not_3(tmp_path: Path) -> None:
    trace = tmp_path / "cluster_log.csv"
    trace.write_text(HELIOS + "1,u,vc,1,1,1,COMPLETED,0001-01-01 00:00:00,,,600,0\n")
    result = railplan("simulate", TENANTS, "--trace", str(trace))
    assert result.returncode == 2 and "is not between 1970 and 2099" in result.stderr


def _spec_with_budget(tmp_path: Path, trace: str) -> Path:
    spec = tmp_path / "spec.yaml"
    text = Path(TENANTS).read_text()
    assert text.count("\nbudgets:\n") == 1
    spec.write_text(
        text.replace("\nbudgets:\n", f"\nbudgets:\n  - utilization: {{trace: {trace}, min: 0.5}}\n")
    )
    return spec


def test_a_utilization_budget_over_a_job_at_1e12_s_is_rp061_at_once(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(RAILPLAN + "a,0,1e12,1,1000,research,low,,\n")
    result = railplan("lint", str(_spec_with_budget(tmp_path, "jobs.csv")), "--format", "json")
    findings = json.loads(result.stdout)["findings"]
    (rp061,) = [f for f in findings if f["rule"] == "RP061"]
    assert "duration_s '1e12' is more than 10 years" in rp061["message"]


# --- a budget's trace stays in the spec's directory; its text reaches output escaped ----------

SECRET = "s3cr3t-field-of-a-file-outside-the-spec-directory"


@pytest.mark.parametrize("trace", ["/etc/shadow", "../jobs.csv", "traces/../../jobs.csv"])
def test_a_trace_path_leaving_the_spec_directory_is_a_spec_error(
    tmp_path: Path, trace: str
) -> None:
    (tmp_path / "jobs.csv").write_text(RAILPLAN + "a,0,100,1,1000,research,low,,\n")
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = _spec_with_budget(specs, trace)
    result = run_cli("lint", str(spec))
    assert result.returncode == 2, result.stdout
    line = next(ln for ln in result.stderr.splitlines() if "error[RP000]" in ln)
    assert f"trace {trace!r} must be a path inside the spec's directory" in line
    assert "[budgets[0].utilization.trace]" in line


def test_a_symlink_out_of_the_spec_directory_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text(HELIOS + f"1,u,vc,1,1,1,COMPLETED,{SECRET},,,600,0\n")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "jobs.csv").symlink_to(outside)
    result = run_cli("lint", str(_spec_with_budget(specs, "jobs.csv")), "--format", "json")
    (rp061,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "RP061"]
    assert "trace 'jobs.csv' leads out of the spec's directory" in rp061["message"]
    assert SECRET not in result.stdout + result.stderr


def test_rp061_echoes_a_trace_field_short(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(HELIOS + f"1,u,vc,1,1,1,COMPLETED,{SECRET * 200},,,600,0\n")
    result = run_cli("lint", str(_spec_with_budget(tmp_path, "jobs.csv")), "--format", "json")
    (rp061,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "RP061"]
    assert (
        f"submit_time 's3cr3t-field-of-a-file-o...({len(SECRET) * 200:,} chars)' is not a date"
        in rp061["message"]
    )
    assert len(rp061["message"]) < 500


ESC = "\x1b]0;owned\x07ten\u202eant"  # an OSC title sequence and a right-to-left override


def _evil_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "evil.csv"
    rows = [f'"job\x1b[2J{i}",0,100,256,1000,"{ESC}",low,,' for i in range(3)]
    trace.write_text(RAILPLAN + "\n".join(rows) + "\njob9,10,100,1,1000,research,low,,\n")
    return trace


@pytest.mark.parametrize("extra", [[], ["--compare-mig"]])
def test_simulate_text_shows_trace_tenants_escaped(tmp_path: Path, extra: list[str]) -> None:
    result = run_cli("simulate", TENANTS, "--trace", str(_evil_trace(tmp_path)), *extra)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    if not extra:
        assert "\\x1b]0;owned\\x07ten\\u202eant" in result.stdout


def test_budget_text_shows_the_worst_tenant_escaped(tmp_path: Path) -> None:
    _evil_trace(tmp_path)
    spec = _spec_with_budget(tmp_path, "evil.csv")
    spec.write_text(
        spec.read_text().replace(
            "  - utilization:", "  - queueing_delay: {trace: evil.csv, max_s: 10}\n  - utilization:"
        )
    )
    result = run_cli("budget", str(spec))
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "tenant \\x1b]0;owned\\x07ten\\u202eant, p95 of 3 jobs 200 s" in result.stdout


def test_a_pai_job_table_beside_a_budget_trace_that_links_out_is_not_read(tmp_path: Path) -> None:
    """The trace itself is inside the spec's directory; the job table its reader adds is not."""
    outside = tmp_path / "outside.csv"
    outside.write_text(
        f"job_name,inst_id,user,status,start_time,end_time\njob1,i,u,Terminated,{SECRET},700\n"
    )
    specs = tmp_path / "specs"
    (specs / "pai").mkdir(parents=True)
    (specs / "pai/pai_task_table.csv").write_text(
        "job1,worker,1.0,Terminated,100,700,600.0,29.3,100.0,V100\n"
    )
    (specs / "pai/pai_job_table.csv").symlink_to(outside)
    spec = _spec_with_budget(specs, "pai/pai_task_table.csv")
    result = run_cli("lint", str(spec), "--format", "json")
    (rp061,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "RP061"]
    assert "pai_job_table.csv beside the trace leads out of" in rp061["message"]
    assert SECRET not in result.stdout + result.stderr


# --- --inflate draws a bounded number of jobs ----------------------------------------------


def test_an_inflation_of_tiny_fractions_is_refused_before_it_draws_without_end() -> None:
    """Before: --inflate 100 of 1/1000-GPU jobs on 32 GPUs drew 3.2 million jobs (past 120 s)."""
    from infra.errors import InputError
    from infra.simulate.inflate import MAX_INFLATED_JOBS, inflate

    trace = trace_from_text(RAILPLAN + "a,0,10,1,1,t,low,,\n", "t.csv")
    assert MAX_INFLATED_JOBS < 16 * 32 * 1000  # 512,000 draws without the bound
    with pytest.raises(InputError) as caught:
        inflate(trace, 32, 16.0, seed=0)
    assert f"would draw more than {MAX_INFLATED_JOBS:,} jobs" in caught.value.one_line()
    assert len(inflate(trace, 32, 1.0, seed=0).jobs) == 32_000  # within the bound: as before


def test_an_inflation_past_the_bound_is_foretold_before_a_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--inflate 100 of the 3k example on 8,000 GPUs drew 500,000 jobs (6 s of CPU) before
    refusing; the trace's mean ask says it needs about 933,000, so nothing is drawn."""
    import random

    from infra.errors import InputError
    from infra.simulate import inflate as module

    draws = 0

    class Counted(random.Random):
        def randrange(self, *args: int) -> int:  # type: ignore[override]
            nonlocal draws
            draws += 1
            return super().randrange(*args)

    monkeypatch.setattr(module.random, "Random", Counted)
    trace = trace_from_text(RAILPLAN + "a,0,10,1,500,t,low,,\nb,0,10,1,1000,t,low,,\n", "t.csv")
    with pytest.raises(InputError) as caught:
        module.inflate(trace, 8000, 100.0, seed=0)  # 800,000 GPUs at 0.75 a job
    assert "would draw more than 500,000 jobs (about 1,066,667)" in caught.value.one_line()
    assert draws == 0


def test_simulate_inflate_100_of_tiny_jobs_is_exit_2_at_once(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(RAILPLAN + "a,0,10,1,1,research,low,,\n")
    result = railplan("simulate", TENANTS, "--trace", str(trace), "--inflate", "100")
    assert result.returncode == 2, result.stderr
    assert "[--inflate]" in result.stderr and "Traceback" not in result.stderr


def test_a_header_alone_and_a_column_given_twice_are_errors(tmp_path: Path) -> None:
    """Before: a header-only trace replayed as "0 jobs", exit 0; a header naming
    `duration_s` twice used the last column silently."""
    header = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"
    alone = tmp_path / "alone.csv"
    alone.write_text(header, encoding="utf-8")
    result = railplan("simulate", TENANTS, "--trace", str(alone))
    assert result.returncode == 2, result.stdout
    assert "the trace has no rows, only its header" in result.stderr
    twice = tmp_path / "twice.csv"
    twice.write_text(
        header.replace("gpu_model", "duration_s") + "a,0,60,8,1000,t,normal,7200\n",
        encoding="utf-8",
    )
    result = railplan("simulate", TENANTS, "--trace", str(twice))
    assert result.returncode == 2, result.stdout
    assert f"{twice}:1:1: " in result.stderr
    assert "column 'duration_s' appears twice in the header" in result.stderr
