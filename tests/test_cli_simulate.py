"""`railplan simulate` end to end: JSON keys per DESIGN.md, same bytes twice, located errors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_run import ROOT, run_cli

SPEC = ROOT / "examples" / "k8s-tenants.yaml"
HEADER = "id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model\n"
ROWS = [
    "a,0,3600,8,1000,research,normal,",
    "b,60,1800,64,1000,research,high,",
    "c,120,600,1,250,serving,normal,",
    "d,180,600,1,1000,serving,normal,A100-SXM4-80GB",
    "e,200,900,4096,1000,research,normal,",
    "f,240,7200,16,1000,guests,low,",
]


def _trace(tmp_path: Path, rows: list[str] = ROWS) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_json_has_the_design_keys(tmp_path: Path) -> None:
    result = run_cli("simulate", str(SPEC), "--trace", str(_trace(tmp_path)), "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    for key in (
        "trace",
        "allocation",
        "queueing_s",
        "fragmentation",
        "preemptions",
        "lost_gpu_hours",
        "repartitions",
        "never_ran",
    ):
        assert key in doc
    assert {"rows", "used", "skipped"} <= set(doc["trace"])
    assert {"mean", "p50", "p95"} <= set(doc["allocation"])
    assert {"p50", "p95", "p99"} <= set(doc["queueing_s"]["research"])
    never = {n["job"]: n["reason"] for n in doc["never_ran"]}
    assert set(never) == {"d", "e"}  # an A100 on an H100 cluster; more GPUs than it has
    assert "guests" in doc["notes"][0]


def test_same_trace_and_spec_give_the_same_bytes(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    first = run_cli("simulate", str(SPEC), "--trace", trace, "--format", "json")
    second = run_cli("simulate", str(SPEC), "--trace", trace, "--format", "json")
    assert first.returncode == 0 and first.stdout == second.stdout


def test_map_gpu_renames_a_trace_model_to_the_catalog(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    result = run_cli(
        "simulate",
        str(SPEC),
        "--trace",
        trace,
        "-f",
        "json",
        "--map-gpu",
        "A100-SXM4-80GB=h100-sxm5-80gb",
    )
    assert [n["job"] for n in json.loads(result.stdout)["never_ran"]] == ["e"]


def test_text_summarises_the_replay(tmp_path: Path) -> None:
    result = run_cli("simulate", str(SPEC), "--trace", str(_trace(tmp_path)))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "6 rows, 6 used" in out
    assert "allocation mean" in out and "queueing/tenant" in out
    assert "never ran: 2 jobs" in out


def test_a_bad_row_is_one_located_line_and_exit_2(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [*ROWS[:2], "x,ten,60,1,1000,research,normal,"])
    result = run_cli("simulate", str(SPEC), "--trace", str(trace))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{trace}:4:" in lines[0], result.stderr


def test_a_bad_map_gpu_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("simulate", str(SPEC), "--trace", str(_trace(tmp_path)), "--map-gpu", "x")
    assert result.returncode == 2
    assert "--map-gpu expects SRC=ID" in result.stderr


def test_the_checkpoint_budget_sets_the_replays_checkpoint_time() -> None:
    from infra.budget.sim_policy import sim_policy
    from infra.budget.storage import checkpoint_estimate
    from infra.catalog import load_catalog
    from infra.simulate.policy import DEFAULT_CHECKPOINT_WRITE_S
    from infra.spec import load_spec
    from infra.topology import expand

    catalog = load_catalog()
    spec = load_spec(str(SPEC)).spec  # declares checkpoint: {bytes: 1.4TB, max_s: 90}
    plan = expand(spec, catalog)
    expected = checkpoint_estimate(1_400_000_000_000, spec, catalog, plan).seconds
    policy = sim_policy(spec, catalog, plan, seed=3)
    assert policy.checkpoint_write_s == round(expected, 3) != DEFAULT_CHECKPOINT_WRITE_S
    assert policy.seed == 3
    bare = spec.model_copy(update={"budgets": []})
    assert sim_policy(bare, catalog, plan).checkpoint_write_s == DEFAULT_CHECKPOINT_WRITE_S


def test_with_json_a_bad_row_is_the_errors_document(tmp_path: Path) -> None:
    trace = _trace(tmp_path, ["x,ten,60,1,1000,research,normal,"])
    result = run_cli("simulate", str(SPEC), "--trace", str(trace), "-f", "json")
    assert result.returncode == 2
    (error,) = json.loads(result.stdout)["errors"]
    assert (error["file"], error["line"]) == (str(trace), 2)


def test_jobs_csv_writes_every_jobs_outcome_and_placement_is_an_option(tmp_path: Path) -> None:
    out = tmp_path / "jobs.csv"
    result = run_cli(
        "simulate",
        str(SPEC),
        "--trace",
        str(_trace(tmp_path)),
        "--jobs-csv",
        str(out),
        "--placement",
        "random",
        "--seed",
        "5",
        "-f",
        "json",
    )
    assert result.returncode == 0, result.stderr
    rows = out.read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("id,line,tenant,priority,gpus,gpu_milli,flag,outcome,")
    outcomes = {line.split(",")[0]: line.split(",")[7] for line in rows[1:]}
    assert outcomes == {
        "a": "finished",
        "b": "finished",
        "c": "finished",
        "f": "finished",
        "d": "never_ran",
        "e": "never_ran",
    }
    doc = json.loads(result.stdout)
    assert doc["outcomes"] == {"finished": 4, "never_ran": 2, "not_started": 0, "unfinished": 0}
    bad = run_cli("simulate", str(SPEC), "--trace", str(out), "--placement", "worst-fit")
    assert bad.returncode == 2


SHAPED = """\
name: shaped
site: {management_cidr: 10.0.0.0/24, bmc_cidr: 10.1.0.0/24}
node_groups:
  - {name: t4, count: 2, shape: {gpus: 2, gpu: t4, cpus: 16, memory_gib: 64},
     sharing: {strategy: time-slicing, replicas: 100}}
"""


def test_inflate_and_fgd_on_a_generic_shape(tmp_path: Path) -> None:
    spec = tmp_path / "shaped.yaml"
    spec.write_text(SHAPED, encoding="utf-8")
    trace = tmp_path / "t.csv"
    trace.write_text(
        "submit_s,duration_s,gpus,gpu_milli,cpu_milli,memory_mib\n"
        "0,100,1,500,2000,4096\n1,100,1,1000,4000,8192\n2,100,0,0,8000,1024\n",
        encoding="utf-8",
    )
    args = ("simulate", str(spec), "--trace", str(trace), "--format", "json", "--seed", "7")
    result = run_cli(*args, "--placement", "fgd", "--inflate", "1.3")
    assert result.returncode == 0, result.stderr
    inflation = json.loads(result.stdout)["inflation"]
    assert inflation["factor"] == 1.3 and inflation["requested_gpus"] <= 1.3 * 4
    assert 0 < inflation["allocation"] <= 1.0
    lint = run_cli("lint", str(spec))
    assert lint.returncode == 1 and "generic server `shape`" in lint.stdout + lint.stderr


def test_inflate_with_compare_mig_is_one_clear_error(tmp_path: Path) -> None:
    trace = str(_trace(tmp_path))
    result = run_cli("simulate", str(SPEC), "--trace", trace, "--inflate", "1.2", "--compare-mig")
    assert result.returncode == 2
    assert "--inflate and --compare-mig do not combine" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_map_gpu_target_that_is_no_catalog_id_is_a_usage_error(tmp_path: Path) -> None:
    """Before: accepted, and every mapped job 'never ran' (model a100-sxm4-40g not in the
    cluster) with exit 0."""
    result = run_cli(
        "simulate", str(SPEC), "--trace", str(_trace(tmp_path)),
        "--map-gpu", "V100=a100-sxm4-40g",
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert "'a100-sxm4-40g' is not a catalog GPU id [--map-gpu]" in result.stderr
    assert "did you mean 'a100-sxm4-40gb'?" in result.stderr


def test_jobs_csv_never_replaces_the_trace_or_the_spec(tmp_path: Path) -> None:
    """Before: `--jobs-csv` naming the trace (or the spec) overwrote it, exit 0."""
    trace = _trace(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SPEC.read_bytes())
    before = {p: p.read_bytes() for p in (trace, spec)}
    for target, what in ((trace, "trace.csv"), (spec, "spec.yaml")):
        result = run_cli("simulate", str(spec), "--trace", str(trace), "--jobs-csv", str(target))
        assert result.returncode == 2, result.stdout
        assert f"--jobs-csv is the same file as input {tmp_path / what}" in result.stderr
    assert {p: p.read_bytes() for p in (trace, spec)} == before
