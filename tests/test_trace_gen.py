"""`railplan trace` and the generator behind it (`infra.simulate.synthetic.generate_load`).

The generated trace is read back by simulate's reader and replayed; the offered load the jobs
realise is the one asked for (exactly with --jobs, within the stated tolerance with --days,
over many jobs and seeds); the same seed gives the same bytes; bad arguments are one line and
exit 2; an existing output is replaced only with --force.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from infra.catalog import load_catalog
from infra.simulate import synthetic
from infra.simulate.traces import read_trace
from infra.spec import load_spec
from infra.topology import expand
from tests.cli_run import ROOT, run_cli

SUPERPOD = str(ROOT / "examples" / "dgx-h100-superpod.yaml")
LAB = str(ROOT / "examples" / "a100-lab-mig.yaml")
TENANTS = str(ROOT / "examples" / "k8s-tenants.yaml")


def _cluster(spec: str) -> tuple[int, int]:
    """(GPUs of the cluster, GPUs of its largest node group)."""
    plan = expand(load_spec(spec).spec, load_catalog())
    return plan.gpus, max(g.gpus * g.servers for g in plan.groups.values())


def _offered(path: Path, gpus: int, window_s: float) -> float:
    jobs = read_trace(str(path)).jobs
    return sum(job.gpu_seconds for job in jobs) / (gpus * window_s)


def _window_s(stderr: str) -> float:
    found = re.search(r"\(([\d,]+) s\)", stderr)
    assert found, stderr
    return float(found[1].replace(",", ""))


def test_the_trace_reads_back_as_railplan_csv_and_replays(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    result = run_cli("trace", TENANTS, "--jobs", "400", "--seed", "3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    trace = read_trace(str(out))
    assert trace.format == "railplan-csv"
    assert len(trace.jobs) == trace.rows == 400 and not trace.skipped
    spec = load_spec(TENANTS).spec
    assert {j.tenant for j in trace.jobs} <= {t.name for t in spec.scheduler.tenants}
    _, largest = _cluster(TENANTS)
    assert max(j.gpus for j in trace.jobs) <= largest
    sim = run_cli("simulate", TENANTS, "--trace", str(out), "--format", "json")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["trace"]["used"] == 400


@pytest.mark.parametrize("load", ["0.3", "0.8", "1.5"])
def test_jobs_offer_exactly_the_load_asked_for(tmp_path: Path, load: str) -> None:
    out = tmp_path / "t.csv"
    result = run_cli("trace", SUPERPOD, "--jobs", "5000", "--load", load, "-o", str(out))
    assert result.returncode == 0, result.stderr
    gpus, _ = _cluster(SUPERPOD)
    # the window is printed to the second; the jobs' times are exact to a tenth
    assert math.isclose(_offered(out, gpus, _window_s(result.stderr)), float(load), rel_tol=1e-4)
    # and the submissions fill the window: the last one is within 1 % of its end
    last = max(j.submit_s for j in read_trace(str(out)).jobs)
    assert 0.99 < last / _window_s(result.stderr) <= 1.0


@pytest.mark.parametrize("mix", synthetic.MIXES)
def test_a_window_offers_the_load_within_the_stated_tolerance(mix: str) -> None:
    gpus, largest = _cluster(SUPERPOD)
    for seed in range(5):
        drawn = synthetic.generate_load(
            0.8, gpus=gpus, seed=seed, days=2.0, largest=largest, mix=mix
        )
        assert len(drawn.jobs) > 1000
        assert abs(drawn.offered_load - 0.8) <= 0.8 * synthetic.LOAD_TOLERANCE
        assert max(j.submit_s for j in drawn.jobs) <= 2 * 86400


def test_same_seed_same_bytes_another_seed_another_trace() -> None:
    first = run_cli("trace", LAB, "--jobs", "300", "--seed", "11")
    again = run_cli("trace", LAB, "--jobs", "300", "--seed", "11")
    other = run_cli("trace", LAB, "--jobs", "300", "--seed", "12")
    assert first.returncode == again.returncode == other.returncode == 0
    assert first.stdout == again.stdout != other.stdout
    assert first.stdout.startswith("id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,")


def test_training_sizes_are_powers_of_two_up_to_the_largest_group() -> None:
    gpus, largest = _cluster(SUPERPOD)
    jobs = synthetic.generate_load(1.0, gpus=gpus, seed=1, jobs=20_000, largest=largest).jobs
    sizes = {j.gpus for j in jobs}
    assert sizes <= {1 << k for k in range(largest.bit_length())}
    assert max(sizes) == 1 << (largest.bit_length() - 1)
    ones, twos = sum(j.gpus == 1 for j in jobs), sum(j.gpus == 2 for j in jobs)
    assert 1.8 < ones / twos < 2.2  # each size half as likely as the one below


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--load", "0"], "--load must be above 0"),
        (["--load", "nan"], "'--load': must be a finite number, not nan"),
        (["--load", "inf"], "'--load': must be a finite number, not inf"),
        (["--days", "-1"], "--days must be above 0"),
        (["--days", "1e9"], "--days must be above 0"),
        (["--jobs", "0"], "must be at least 1"),
        (["--jobs", "3", "--days", "1"], "--jobs and --days do not combine"),
        (["--jobs", "1", "--load", "1e-9"], "window"),
        (["--mix", "inference"], "--mix"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(args: list[str], words: str) -> None:
    result = run_cli("trace", LAB, *args)
    assert result.returncode == 2
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_an_existing_output_is_replaced_only_with_force(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    out.write_text("mine\n")
    refused = run_cli("trace", LAB, "--jobs", "10", "-o", str(out))
    assert refused.returncode == 2 and "exists" in refused.stderr and "--force" in refused.stderr
    assert out.read_text() == "mine\n"
    forced = run_cli("trace", LAB, "--jobs", "10", "-o", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert out.read_text().startswith("id,")
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # no temporary file left


def test_the_output_may_not_be_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(Path(LAB).read_text())
    result = run_cli("trace", str(spec), "-o", str(spec), "--force")
    assert result.returncode == 2
    assert spec.read_text() == Path(LAB).read_text()


def test_make_trace_load_uses_the_same_generator(tmp_path: Path) -> None:
    """bench/make_trace.py --load is `generate_load`: one implementation."""
    module_spec = importlib.util.spec_from_file_location(
        "make_trace", ROOT / "bench" / "make_trace.py"
    )
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    out = tmp_path / "b.csv"
    assert module.main([str(out), "--jobs", "2000", "--gpus", "64", "--load", "0.5"]) == 0
    jobs = read_trace(str(out)).jobs
    drawn = synthetic.generate_load(0.5, gpus=64, seed=1, jobs=2000, mix="measured")
    assert [j.gpu_seconds for j in jobs] == pytest.approx([j.gpu_seconds for j in drawn.jobs])
    assert _offered(out, 64, drawn.window_s) == pytest.approx(0.5, rel=1e-6)


def test_a_window_far_past_the_job_cap_is_refused_before_drawing_it() -> None:
    """`--days 3650 --load 100` took a minute of CPU drawing two million jobs only to refuse:
    the refusal comes once the first jobs show the window needs far more than the cap."""
    drawn = 0
    one = synthetic.Job(id="", submit_s=0.0, duration_s=3600.0, gpus=8, milli=1000)

    def draw() -> synthetic.Job:
        nonlocal drawn
        drawn += 1
        return one

    with pytest.raises(ValueError, match="more than 2,000,000 jobs"):
        synthetic._until(draw, one.gpu_seconds * synthetic.MAX_JOBS * 100)
    assert drawn == synthetic._PROBE_JOBS
    # a window past the probe and within the cap is drawn whole (to the load's tolerance)
    drawn = 0
    kept = len(synthetic._until(draw, one.gpu_seconds * 30_000))
    assert kept == drawn and 30_000 * (1 - synthetic.LOAD_TOLERANCE) <= kept <= 30_000


class _Grid:
    """A stand-in for random.Random whose random() walks an even grid of [0, 1)."""

    def __init__(self, points: int) -> None:
        self.points, self.at = points, 0

    def random(self) -> float:
        self.at += 1
        return (self.at - 0.5) / self.points


@pytest.mark.parametrize("cap", [3600.0, 7 * synthetic.DAY_S, 1e9])
def test_the_mean_run_time_is_the_integral_of_the_drawn_ones(cap: float) -> None:
    """`_mean_duration` is what `_duration` gives on average over every quantile."""
    grid = _Grid(200_000)
    drawn = [synthetic._duration(grid, cap) for _ in range(grid.points)]  # type: ignore[arg-type]
    assert synthetic._mean_duration(cap) == pytest.approx(sum(drawn) / len(drawn), rel=2e-3)


@pytest.mark.parametrize("mix", synthetic.MIXES)
def test_the_mean_size_is_what_the_samplers_draw(mix: str) -> None:
    import random

    rng = random.Random(3)
    sizes = synthetic._sizes(mix, rng, 64)
    drawn = [sizes.draw() for _ in range(100_000)]
    mean = sum(g * m / 1000 for g, m in drawn) / len(drawn)
    assert sizes.mean_gpus() == pytest.approx(mean, rel=0.03)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--jobs", "2000000"], "the jobs would need a window of about"),
        (["--days", "3650", "--load", "100"], "more than 2,000,000 jobs"),
    ],
)
def test_a_limit_a_trace_would_pass_is_refused_before_a_job_is_drawn(
    monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    """`--jobs 2000000` on a 32-GPU lab drew two million jobs (61 s) before refusing a window
    of 69 years; the mean work a job does foretells it, so nothing is drawn."""
    drawn = 0
    body = synthetic._body

    def counted(*a: object) -> synthetic.Job:
        nonlocal drawn
        drawn += 1
        return body(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(synthetic, "_body", counted)
    result = run_cli("trace", LAB, *args)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert drawn == 0


def test_a_window_near_the_limit_is_still_drawn_and_checked_exactly() -> None:
    """Below the estimate's margin the jobs are drawn and the window checked as drawn."""
    gpus, jobs = 32, synthetic._ESTIMATED
    mean = synthetic._sizes("training", None, gpus).mean_gpus() * synthetic._mean_duration(
        7 * synthetic.DAY_S
    )
    load = jobs * mean / (gpus * synthetic.MAX_WINDOW_S) * 1.2  # about 0.83 of the limit
    drawn = synthetic.generate_load(load, gpus=gpus, seed=0, jobs=jobs)
    assert len(drawn.jobs) == jobs and drawn.window_s <= synthetic.MAX_WINDOW_S
