"""The trace readers: each published format read from a small hand-written snippet.

The snippets are written from each format's published schema (the README rows they quote are
the formats' own examples; no third-party trace file is in the repository). Checked: field
mapping by value, detection by columns or shape, skipped rows per reason, located errors,
``gpu_map`` renaming, fuzzing (any text is a trace or a `TraceError`, nothing else), and the
synthetic generator's determinism and its shares against the figures it cites.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.simulate import synthetic
from infra.simulate.traces import FORMATS, TraceError, read_trace, trace_from_text

from .conftest import ROOT

CST = timezone(timedelta(hours=8))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ALIBABA = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0017,88000,327680,8,1000,nan,Burstable,Succeeded,9437497,10769854,9437497
openb-pod-0022,4000,15258,1,220,,BE,Running,9679175,9973826,9679175
openb-pod-0035,16000,32768,1,1000,V100M16|V100M32,LS,Running,9967058,9968575,9967063
openb-pod-0040,8000,16384,0,0,,LS,Succeeded,100,200,100
openb-pod-0041,8000,16384,1,1000,,LS,Pending,100,12000000,
openb-pod-0042,8000,16384,2,1000,,Guaranteed,Running,500,12000000,600
openb-pod-0043,8000,16384,1,1000,,Guaranteed,Failed,700,800,800
openb-pod-0044,0,0,0,0,,LS,Succeeded,100,200,100
"""

HELIOS = """\
job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0
1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0
1425513,uzqls,vcpDC,0,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0
1425514,uzqls,vcpDC,8,8,1,CANCELLED,2020-06-09 18:42:00,,,,
"""

ACME = """\
job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time
5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,2023-03-01 00:20:51+08:00,117,32,936.0
5778469,u5908,1,8,128,Other,COMPLETED,2023-03-01 00:23:58+08:00,2023-03-01 00:24:11+08:00,2023-03-01 01:09:04+08:00,2693,13,21544.0
5778470,u5908,1,16,128,Pretrain,RUNNING,2023-03-01 00:30:00+08:00,2023-03-01 00:31:00+08:00,,,60,
"""

PHILLY = [
    {
        "status": "Pass",
        "vc": "ee9e8c",
        "jobid": "application_1506638472019_14199",
        "attempts": [
            {"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23",
             "detail": [{"ip": "m47", "gpus": [f"gpu{n}" for n in range(8)]}]},
            {"start_time": "2017-10-07 01:13:30", "end_time": "2017-10-09 06:53:12",
             "detail": [{"ip": "m412", "gpus": [f"gpu{n}" for n in range(8)]},
                        {"ip": "m413", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]},
        ],
        "submitted_time": "2017-10-07 01:11:39",
        "user": "ce2f4c",
    },
    {"status": "Killed", "vc": "11cb48", "jobid": "app_2", "attempts": [],
     "submitted_time": "2017-10-07 02:00:00", "user": "u2"},
    {"status": "Pass", "vc": "11cb48", "jobid": "app_3", "user": "u2",
     "submitted_time": "2017-10-07 01:11:49",
     "attempts": [{"start_time": "2017-10-07 01:20:00", "end_time": None,
                   "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]},
    {"status": "Failed", "vc": "11cb48", "jobid": "app_4", "user": "u2",
     "submitted_time": "2017-10-07 03:00:00",
     "attempts": [{"start_time": "2017-10-07 03:00:10", "end_time": "2017-10-07 03:10:10",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]},
]  # fmt: skip

PAI_TASKS = """\
job1,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC
job2,ps,1.0,Terminated,100.0,1100.0,600.0,10,,
job2,worker,2.0,Terminated,120.0,1000.0,400.0,10,100.0,V100
job3,worker,2.0,Terminated,50,60,400,10,50,T4
job4,worker,1.0,Running,70,,400,10,100,P100
job5,evaluator,1.0,Terminated,10,20,100,2,0,
"""

PAI_JOBS = """\
job1,inst1,userA,Terminated,1739100.0,1739300.0
job2,inst2,userB,Terminated,90.0,1100.0
"""


def by_id(text: str, **kwargs: object) -> dict[str, object]:
    trace = trace_from_text(text, "trace.csv", **kwargs)  # type: ignore[arg-type]
    return {job.id: job for job in trace.jobs}


# --- Alibaba v2023 -----------------------------------------------------------------------


def test_alibaba_v2023_fields_map_by_value() -> None:
    trace = trace_from_text(ALIBABA, "openb.csv")
    assert trace.format == "alibaba-v2023"
    assert trace.origin_unix_s is None
    jobs = {job.id: job for job in trace.jobs}
    whole = jobs["openb-pod-0017"]
    assert (whole.submit_s, whole.duration_s, whole.gpus, whole.milli) == (
        9437497.0, 10769854.0 - 9437497.0, 8, 1000,
    )  # fmt: skip
    assert (whole.priority, whole.tenant, whole.gpu_model, whole.line) == (
        "normal", "default", None, 2,
    )  # fmt: skip
    shared = jobs["openb-pod-0022"]
    assert (shared.gpus, shared.milli, shared.priority) == (1, 220, "low")
    assert shared.fractional
    either = jobs["openb-pod-0035"]
    assert either.duration_s == 9968575 - 9967063
    assert (either.gpu_model, either.gpu_models, either.priority) == (
        "V100M16", ("V100M16", "V100M32"), "high",
    )  # fmt: skip


def test_alibaba_v2023_skips_each_reason_once() -> None:
    trace = trace_from_text(ALIBABA, "openb.csv")
    assert trace.rows == 8
    assert trace.used == 6
    assert trace.skipped == {"no GPU": 1, "zero duration": 1}


def test_alibaba_v2023_a_pod_of_no_gpu_that_asks_cpus_is_a_cpu_only_job() -> None:
    # Weng et al.'s simulator places CPU-only pods too: they take CPUs GPU pods then lack
    cpu_only = by_id(ALIBABA)["openb-pod-0040"]
    assert (cpu_only.gpus, cpu_only.cpu_milli, cpu_only.memory_mib) == (0, 8000, 16384)  # type: ignore[attr-defined]
    assert not cpu_only.fractional  # type: ignore[attr-defined]


def test_alibaba_v2023_replays_pods_the_snapshot_cut_and_pending_pods_flagged() -> None:
    # Before, both were skipped: the running pod's 11.4 M GPU-seconds and the pending pod
    # were missing from the replay. Weng et al.'s simulator submits every pod.
    jobs = by_id(ALIBABA)
    running = jobs["openb-pod-0042"]
    assert (running.submit_s, running.duration_s, running.gpus) == (500.0, 12000000 - 600, 2)  # type: ignore[attr-defined]
    assert running.flag == "running at trace end"  # type: ignore[attr-defined]
    pending = jobs["openb-pod-0041"]
    assert (pending.submit_s, pending.duration_s) == (100.0, 12000000 - 100)  # type: ignore[attr-defined]
    assert pending.flag == "never scheduled"  # type: ignore[attr-defined]
    assert trace_from_text(ALIBABA, "openb.csv").flagged() == {
        "never scheduled": 1,
        "running at trace end": 1,
    }
    assert jobs["openb-pod-0022"].flag == ""  # type: ignore[attr-defined]  # Running, not at the end


def test_alibaba_v2023_gpu_map_renames_every_alternative() -> None:
    jobs = by_id(ALIBABA, gpu_map={"V100M16": "v100-16gb", "V100M32": "v100-32gb"})
    job = jobs["openb-pod-0035"]
    assert job.gpu_model == "v100-16gb"  # type: ignore[attr-defined]
    assert job.gpu_models == ("v100-16gb", "v100-32gb")  # type: ignore[attr-defined]


def test_alibaba_v2023_deletion_before_scheduling_is_located() -> None:
    text = ALIBABA.replace("9967058,9968575,9967063", "9967058,9968575,9969000")
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "openb.csv")
    line = text.splitlines()[3]
    column = line.index(",9968575") + 2
    assert caught.value.position is not None
    assert (caught.value.position.line, caught.value.position.column) == (4, column)
    assert "before scheduled_time" in caught.value.message


def test_alibaba_v2023_unknown_qos_is_located() -> None:
    text = ALIBABA.replace(",BE,", ",Gold,")
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "openb.csv")
    assert caught.value.position is not None
    assert caught.value.position.line == 3
    assert caught.value.position.column == text.splitlines()[2].index(",Gold,") + 2
    assert "LS or BE" in caught.value.hint and "docs/simulate.md" in caught.value.hint


def test_alibaba_v2023_mis_cased_qos_hint_names_the_class_meant() -> None:
    with pytest.raises(TraceError) as caught:
        trace_from_text(ALIBABA.replace(",BE,", ", be ,"), "openb.csv")
    assert caught.value.hint == "write BE as the trace spells it"


# --- Helios and Acme -----------------------------------------------------------------------


def test_helios_fields_dates_and_tenant_by_vc() -> None:
    trace = trace_from_text(HELIOS, "cluster_log.csv")
    assert trace.format == "helios"
    origin = datetime(2020, 6, 9, 18, 41, 1, tzinfo=CST).timestamp()
    assert trace.origin_unix_s == origin
    first, second = trace.jobs
    assert (first.id, first.submit_s, first.duration_s, first.gpus, first.tenant) == (
        "1425511", 0.0, 36848.0, 1, "vcJkd",
    )  # fmt: skip
    assert (second.submit_s, second.gpus, second.tenant, second.line) == (26.0, 4, "vchbv", 3)
    assert trace.skipped == {"never started": 1, "no GPU": 1}


def test_acme_reads_offsets_and_tenant_by_user() -> None:
    trace = trace_from_text(ACME, "trace_seren.csv")
    assert trace.format == "acme"
    assert trace.origin_unix_s == datetime(2023, 3, 1, 0, 18, 22, tzinfo=CST).timestamp()
    assert [(j.id, j.submit_s, j.duration_s, j.gpus, j.tenant) for j in trace.jobs] == [
        ("5778432", 0.0, 117.0, 8, "u5907"),
        ("5778469", 336.0, 2693.0, 8, "u5908"),
    ]
    assert trace.skipped == {"running at trace end": 1}


def test_acme_kalos_utc_offset_is_honoured() -> None:
    header = "job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB,shared_mem_per_pod,type,"
    header += "state,submit_time,start_time,end_time,fail_time,stop_time,duration,queue,gpu_time"
    row = "dlctk696s0jbvitv,uf794,8,64,960,1000,100.0,Other,FAILED,2023-05-17 11:00:58+00:00,"
    row += "2023-05-17 11:01:08+00:00,2023-05-17 11:01:16+00:00,2023-05-17 11:01:16+00:00,,18,10.0,1152.0"
    trace = trace_from_text(f"{header}\n{row}\n", "trace_kalos.csv")
    assert trace.format == "acme"
    assert trace.origin_unix_s == datetime(2023, 5, 17, 11, 0, 58, tzinfo=UTC).timestamp()
    assert trace.jobs[0].gpus == 64


def test_helios_bad_date_is_located() -> None:
    text = HELIOS.replace("2020-06-09 18:41:27,2020", "09/06/2020,2020")
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "cluster_log.csv")
    line = text.splitlines()[2]
    assert caught.value.position is not None
    assert (caught.value.position.line, caught.value.position.column) == (
        3, line.index("09/06/2020") + 1,
    )  # fmt: skip


# --- Philly ------------------------------------------------------------------------------


def test_philly_every_attempt_gpus_duration_and_pacific_dates() -> None:
    trace = trace_from_text(json.dumps(PHILLY, indent=2), "cluster_job_log")
    assert trace.format == "philly"
    pacific_pdt = timezone(timedelta(hours=-7))
    assert trace.origin_unix_s == datetime(2017, 10, 7, 1, 11, 39, tzinfo=pacific_pdt).timestamp()
    earlier, first, failed = trace.jobs
    # the first attempt held 8 GPUs for 74 s before the restart: it counts too (before, only
    # the last attempt was replayed)
    assert (earlier.id, earlier.submit_s, earlier.duration_s, earlier.gpus) == (
        "application_1506638472019_14199#1", 0.0, 74.0, 8,
    )  # fmt: skip
    assert earlier.flag == "earlier attempt" and first.flag == ""
    assert (first.id, first.submit_s, first.gpus, first.tenant) == (
        "application_1506638472019_14199", 111.0, 12, "ee9e8c",
    )  # fmt: skip
    last_start = datetime(2017, 10, 7, 1, 13, 30)
    last_end = datetime(2017, 10, 9, 6, 53, 12)
    assert first.duration_s == (last_end - last_start).total_seconds()
    assert (failed.id, failed.submit_s, failed.duration_s, failed.gpus) == (
        "app_4", 6501.0, 600.0, 2,
    )  # fmt: skip
    assert (trace.rows, trace.used) == (4, 2)  # rows are entries: 2 used + 2 skipped
    assert trace.skipped == {"never started": 1, "running at trace end": 1}


def test_philly_entries_carry_their_line() -> None:
    trace = trace_from_text(json.dumps(PHILLY, indent=2), "cluster_job_log")
    text = json.dumps(PHILLY, indent=2).splitlines()
    assert text[trace.jobs[2].line - 1].strip() == "{"
    assert '"app_4"' in "\n".join(text[trace.jobs[2].line - 1 : trace.jobs[2].line + 3])


def test_philly_bad_json_is_located() -> None:
    text = json.dumps(PHILLY[:2], indent=2).replace('"Killed",', '"Killed"', 1)
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "cluster_job_log")
    assert caught.value.position is not None
    killed = next(n for n, ln in enumerate(text.splitlines(), 1) if '"Killed"' in ln)
    assert caught.value.position.line == killed + 1


def test_philly_bad_date_names_the_entry() -> None:
    bad = [dict(PHILLY[0], submitted_time="7 Oct 2017")]
    with pytest.raises(TraceError) as caught:
        trace_from_text(json.dumps(bad), "cluster_job_log")
    assert "submitted_time" in caught.value.message
    assert caught.value.position is not None and caught.value.position.line == 1


# --- PAI v2020 ---------------------------------------------------------------------------


def test_pai_task_table_is_recognised_without_header() -> None:
    trace = trace_from_text(PAI_TASKS, "pai_task_table.csv")
    assert trace.format == "pai-task"
    jobs = {job.id: job for job in trace.jobs}
    assert (jobs["job1"].gpus, jobs["job1"].milli, jobs["job1"].gpu_model) == (1, 500, "MISC")
    assert (jobs["job1"].submit_s, jobs["job1"].duration_s) == (1739162.0, 38.0)
    assert (jobs["job2"].gpus, jobs["job2"].milli, jobs["job2"].gpu_model) == (2, 1000, "V100")
    assert (jobs["job2"].submit_s, jobs["job2"].duration_s) == (120.0, 880.0)
    assert (jobs["job3"].gpus, jobs["job3"].milli) == (2, 1000)
    assert all(job.tenant == "default" for job in trace.jobs)
    # rows are task rows, used and skipped alike (before, used counted 3 jobs and skipped 3
    # rows, so 6 rows read as 3 + 3 by luck: job2's two rows are one used, one skipped)
    assert (trace.rows, trace.used, len(trace.jobs)) == (6, 3, 3)
    assert trace.skipped == {"no GPU": 2, "running at trace end": 1}


def test_pai_used_counts_task_rows_so_rows_add_up() -> None:
    # job9 has two GPU task rows: 3 rows, 1 job, 3 used (before: 1 used, 3 rows)
    text = PAI_TASKS + "job9,worker,2,Terminated,10,70,400,10,100,V100\n"
    text += "job9,chief,1,Terminated,10,80,400,10,100,V100\njob9,ps,1,Terminated,10,80,400,10,0,\n"
    trace = trace_from_text(text, "pai_task_table.csv")
    assert (trace.rows, trace.used, len(trace.jobs)) == (9, 5, 4)
    assert trace.used + sum(trace.skipped.values()) == trace.rows


def test_duplicate_ids_are_an_error_in_railplan_csv_and_renamed_in_published_traces() -> None:
    text = "id,submit_s,duration_s,gpus\nj,0,10,1\nk,0,10,1\nj,5,10,2\n"
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "t.csv")
    assert caught.value.message == "job id 'j' repeats the id of line 2"
    assert caught.value.position is not None and caught.value.position.line == 4
    twice = ALIBABA.replace("openb-pod-0043", "openb-pod-0017")
    ids = sorted(j.id for j in trace_from_text(twice, "openb.csv").jobs)
    assert "openb-pod-0017" in ids and "openb-pod-0017@8" not in ids  # 0043 ran no time
    twice = ALIBABA.replace("openb-pod-0035", "openb-pod-0017")
    assert {j.id for j in trace_from_text(twice, "openb.csv").jobs} >= {
        "openb-pod-0017",
        "openb-pod-0017@4",
    }


def test_pai_reads_the_job_table_beside_the_task_table(tmp_path: Path) -> None:
    (tmp_path / "pai_task_table.csv").write_text(PAI_TASKS)
    (tmp_path / "pai_job_table.csv").write_text(PAI_JOBS)
    trace = read_trace(str(tmp_path / "pai_task_table.csv"), gpu_map={"MISC": "k80"})
    jobs = {job.id: job for job in trace.jobs}
    assert (jobs["job1"].tenant, jobs["job1"].submit_s, jobs["job1"].gpu_model) == (
        "userA", 1739100.0, "k80",
    )  # fmt: skip
    assert (jobs["job2"].tenant, jobs["job2"].submit_s) == ("userB", 90.0)
    assert jobs["job3"].tenant == "default"


def test_pai_task_table_with_header_and_located_error() -> None:
    header = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
    text = header + PAI_TASKS.replace(
        "job3,worker,2.0,Terminated,50,60", "job3,worker,2.0,Terminated,50,4x"
    )
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "tasks.csv")
    assert caught.value.position is not None
    assert caught.value.position.line == 5
    assert caught.value.position.column == text.splitlines()[4].index("4x") + 1


def test_pai_job_table_alone_is_refused_with_a_hint() -> None:
    with pytest.raises(TraceError) as caught:
        trace_from_text(PAI_JOBS, "pai_job_table.csv")
    assert caught.value.hint is not None and "pai_task_table" in caught.value.hint


# --- detection, override, railplan CSV -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ALIBABA, "alibaba-v2023"),
        (HELIOS, "helios"),
        (ACME, "acme"),
        (json.dumps(PHILLY), "philly"),
        (PAI_TASKS, "pai-task"),
        ("id,submit_s,duration_s,gpus\nj,0,10,1\n", "railplan-csv"),
    ],
)
def test_detection_by_columns_or_shape(text: str, expected: str) -> None:
    assert trace_from_text(text, "t").format == expected


def test_format_override_and_unknown_format() -> None:
    assert trace_from_text(PAI_TASKS, "t", trace_format="pai-task").used == 3
    with pytest.raises(TraceError, match="not one of"):
        trace_from_text(PAI_TASKS, "t", trace_format="slurm")
    with pytest.raises(TraceError, match="not recognised") as caught:
        trace_from_text("a,b,c\n1,2,3\n", "t")
    assert caught.value.position is not None and caught.value.position.line == 1


def test_row_with_too_many_fields_is_located() -> None:
    text = HELIOS + "9,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,a,b,10,0,extra\n"
    with pytest.raises(TraceError) as caught:
        trace_from_text(text, "cluster_log.csv")
    assert caught.value.position is not None and caught.value.position.line == 6


# --- fuzz: anything is a trace or a TraceError -------------------------------------------

field = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**7).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", "nan", "LS", "BE", "Running", "Pending", "2020-06-09 18:41:01"]),
)


def rows_of(header: str, width: int) -> st.SearchStrategy[str]:
    row = st.lists(field, min_size=width - 1, max_size=width + 1).map(
        lambda fs: ",".join(f.replace("\n", " ") for f in fs)
    )
    return st.lists(row, max_size=6).map(lambda rows: "\n".join([header, *rows]) + "\n")


HEADERS = [
    ALIBABA,
    HELIOS,
    ACME,
    "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n",
]


@FUZZ
@given(
    st.sampled_from(HEADERS).flatmap(
        lambda t: rows_of(t.splitlines()[0], t.splitlines()[0].count(",") + 1)
    )
)
def test_fuzz_csv_readers_raise_only_trace_errors(text: str) -> None:
    try:
        trace = trace_from_text(text, "fuzz.csv")
    except TraceError:
        return
    assert trace.used + sum(trace.skipped.values()) == trace.rows  # one unit: rows
    for job in trace.jobs:
        assert job.gpus >= 1 and job.duration_s > 0 and 1 <= job.milli <= 1000


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.sampled_from(["2017-10-07 01:11:39", "None", "gpu0"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["jobid", "vc", "submitted_time", "attempts", "start_time", "end_time", "detail", "gpus", "ip"]),
        inner, max_size=6,
    ),
    max_leaves=25,
)  # fmt: skip


@FUZZ
@given(st.lists(json_values, max_size=4))
def test_fuzz_philly_raises_only_trace_errors(entries: list[object]) -> None:
    with contextlib.suppress(TraceError):
        trace_from_text(json.dumps(entries), "cluster_job_log")


@FUZZ
@given(st.sampled_from(FORMATS), st.text(max_size=300))
def test_fuzz_any_text_any_format(fmt: str, text: str) -> None:
    with contextlib.suppress(TraceError):
        trace_from_text(text, "fuzz", trace_format=fmt)


# --- the synthetic generator ---------------------------------------------------------------


def test_generator_is_deterministic_and_seeded() -> None:
    kwargs = {"gpus": 512, "tenants": ("a", "b"), "days": 2.0}
    first = synthetic.generate(500, seed=7, **kwargs)  # type: ignore[arg-type]
    assert first == synthetic.generate(500, seed=7, **kwargs)  # type: ignore[arg-type]
    assert first != synthetic.generate(500, seed=8, **kwargs)  # type: ignore[arg-type]
    assert [j.submit_s for j in first] == sorted(j.submit_s for j in first)


def test_generator_shares_match_the_cited_trace() -> None:
    jobs = synthetic.generate(50_000, gpus=10_000, seed=1, tenants=("a", "b", "c"), days=14.0)
    n = len(jobs)
    fractional = sum(j.fractional for j in jobs) / n
    multi = sum(j.gpus > 1 for j in jobs) / n
    assert abs(fractional - 3078 / 7064) < 0.01
    assert abs(multi - 75 / 7064) < 0.003
    durations = sorted(j.duration_s for j in jobs)
    assert abs(durations[n // 2] - 655) / 655 < 0.1
    assert abs(durations[int(n * 0.9)] - 7389) / 7389 < 0.1
    eights = sum(j.gpus == 8 for j in jobs) / max(1, sum(j.gpus > 1 for j in jobs))
    assert abs(eights - 44 / 75) < 0.08
    low = sum(j.priority == "low" for j in jobs) / n
    assert abs(low - 2948 / 7064) < 0.01
    assert {j.tenant for j in jobs} == {"a", "b", "c"}


def test_generator_day_night_ratio() -> None:
    jobs = synthetic.generate(50_000, gpus=64, seed=2, days=10.0, day_night_ratio=3.0)
    hours = [0] * 24
    for job in jobs:
        hours[int(job.submit_s // 3600) % 24] += 1
    assert 2.5 < hours[14] / hours[2] < 3.5
    assert max(range(24), key=hours.__getitem__) in (13, 14, 15)


def test_generator_never_exceeds_the_cluster() -> None:
    jobs = synthetic.generate(5000, gpus=4, seed=3, multi_gpu_share=0.5)
    assert max(j.gpus for j in jobs) == 4
    assert all(j.duration_s <= 7 * 86400 for j in jobs)


def test_generator_round_trips_through_the_railplan_csv() -> None:
    jobs = synthetic.generate(300, gpus=64, seed=4, tenants=("x", "y"), days=1.0)
    out = io.StringIO()
    synthetic.write_csv(jobs, out)
    trace = trace_from_text(out.getvalue(), "synthetic.csv")
    assert trace.format == "railplan-csv"
    assert [(j.id, j.gpus, j.milli, j.tenant, j.priority) for j in trace.jobs] == [
        (j.id, j.gpus, j.milli, j.tenant, j.priority) for j in jobs
    ]
    assert all(
        math.isclose(a.duration_s, b.duration_s, abs_tol=0.05)
        for a, b in zip(trace.jobs, jobs, strict=True)
    )


def make_trace(args: list[str]) -> int:
    """bench/make_trace.py's main (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("make_trace", ROOT / "bench" / "make_trace.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(args))


def test_shipped_example_trace_is_what_its_command_writes(tmp_path: Path) -> None:
    shipped = ROOT / "examples" / "traces" / "synthetic-alibaba-3k.csv"
    readme = (ROOT / "examples" / "traces" / "README.md").read_text()
    command = next(
        ln.split("make_trace.py", 1)[1] for ln in readme.splitlines() if "make_trace.py" in ln
    )
    args = command.split()
    args[0] = str(tmp_path / "out.csv")
    assert make_trace(args) == 0
    assert (tmp_path / "out.csv").read_bytes() == shipped.read_bytes()
