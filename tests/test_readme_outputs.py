"""What the README, docs/verify.md and examples/traces/README.md show a command printing is
what it prints today.

The third hostile trial found four drifted figures: the plan's first line (1,411.9 kW, the
CLI now says 1,412.0 kW and which part is a typical draw), the render's file count (350,
now 361), the claims example's scaling paragraph (0.687 from 250 pipelines of 7
micro-batches; the budget prints 0.725 from 125 pipelines of 13) and docs/verify.md's
render (236 files, now 244). Each command is run here and compared with the text.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import yaml

from .cli_run import run_cli
from .conftest import ROOT

README = (ROOT / "README.md").read_text()
PROSE = " ".join(README.split())  # prose wraps anywhere


def test_the_plan_example_prints_the_readme_lines(tmp_path: Path) -> None:
    spec = str(ROOT / "examples/dgx-h100-superpod.yaml")
    result = run_cli("plan", spec, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines()[:3]:
        assert line in README, line


def test_the_render_example_prints_the_readme_count(tmp_path: Path) -> None:
    spec = str(ROOT / "examples/dgx-a100-superpod.yaml")
    result = run_cli("render", spec, "--root", "deploy", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in README, result.stdout


def test_the_claims_paragraph_quotes_the_budget() -> None:
    result = run_cli("budget", str(ROOT / "examples/claims-h100-8k.yaml"))
    scaling = result.stdout.split("budgets[0].scaling_efficiency: ", 1)[1]
    bound = scaling.split(" ", 1)[0]
    layout = re.search(
        r"x DP (\d+), (\d+) micro-batches .*bubble (\d+)%, exposed DP (\d+)%", scaling
    )
    assert layout is not None, scaling
    pipelines, micro, bubble, exposed = layout.groups()
    assert f"{bound} (the conservative bound) against the claimed 0.89" in PROSE
    assert f"each of the {pipelines} pipelines {micro} micro-batches" in PROSE
    assert f"exposed gradient traffic ({exposed} % of the step)" in PROSE
    assert f"pipeline bubble ({bubble} %)" in PROSE


def test_the_verify_walkthrough_render_prints_its_count(tmp_path: Path) -> None:
    """docs/verify.md's bring-up session starts with this render (it said 236 files)."""
    docs = (ROOT / "docs/verify.md").read_text()
    spec = str(ROOT / "tests/data/twin/dgx-a100-su.yaml")
    result = run_cli("render", spec, "--root", "tree", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in docs, result.stdout


def test_the_training_accuracy_line_quotes_docs_accuracy() -> None:
    """README's training figures once said 33 rows and 2.6 % while docs/accuracy.md (generated
    from the data) said 61 held-out figures at 4.0 %."""
    doc = (ROOT / "docs/accuracy.md").read_text(encoding="utf-8")
    held = re.search(r"held out, all metrics\*\*: median \|error\| ([\d.]+)% over (\d+) rows", doc)
    worst = re.search(r"held out, all metrics\*\*: .*worst ([\d.]+)%", doc)
    assert held and worst
    data = yaml.safe_load((ROOT / "tests/data/training-measurements.yaml").read_text())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"compares it with {len(data['measurements'])} published rows" in readme
    assert f"median error {held[1]} % over {held[2]} figures, worst {worst[1]} %" in readme


def test_the_8k_trace_readme_quotes_the_simulation_and_the_offered_load() -> None:
    """examples/traces/README.md said the 8k trace "offers 89 %": the data offer 101.3 % (docs/
    simulate.md's offered load) and the command it shows prints "allocation mean 38.5 %"."""
    readme = (ROOT / "examples/traces/README.md").read_text(encoding="utf-8")
    trace = ROOT / "examples/traces/synthetic-training-8k.csv"
    command = readme.split("$ railplan simulate ", 1)[1].split("\n", 1)[0].split()
    assert command == ["examples/claims-h100-8k.yaml", "--trace", str(trace.relative_to(ROOT))]
    result = run_cli("simulate", *command, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines()[:3]:
        assert line in readme, line
    allocated = re.search(r"allocation mean ([\d.]+) %", result.stdout)
    assert allocated is not None
    prose = " ".join(readme.split())
    assert f"only {allocated[1]} % of the day's GPU-time" in prose
    assert f"tests that {allocated[1]} %" in prose
    rows = list(csv.DictReader(trace.open(encoding="utf-8")))
    window_s = max(float(r["submit_s"]) for r in rows) - min(float(r["submit_s"]) for r in rows)
    gpu_s = sum(float(r["gpus"]) * float(r["duration_s"]) for r in rows)
    cluster = re.search(r"cluster (\d+) GPUs", result.stdout)
    assert cluster is not None
    gpus = int(cluster[1])
    assert abs(window_s - 86_400) < 60  # the day: the window the offered load is over
    offered = f"{gpu_s / (gpus * 86_400):.1%}".replace("%", " %")
    assert f"{gpu_s / 3600:,.0f} GPU-hours, {offered} of the cluster's" in prose
