"""The rendered alert rules and shell scripts, checked by the real promtool and shellcheck.

promtool (Debian package prometheus) checks the rendered rule file and runs the unit tests
of tests/data/promtool/ against it: a repeated XID, MIG and whole-GPU idleness, NVLink,
ECC and throttling. shellcheck reads every shell script the rendered trees hold (files,
role templates, ConfigMap data). Each test skips without its tool, and fails under CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from infra.catalog import load_catalog
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "tests" / "golden" / "inputs").glob("*.yaml"))
UNIT_TESTS = ROOT / "tests" / "data" / "promtool" / "railplan-gpu.test.yml"
K8S_UNIT_TESTS = ROOT / "tests" / "data" / "promtool" / "railplan-gpu-k8s.test.yml"
RULES = "files/monitoring/railplan-gpu.rules.yml"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian: `make tools` as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _tree(spec_file: Path) -> dict[str, str]:
    loaded = load_spec(spec_file)
    catalog = load_catalog()
    tree = render_tree(loaded.spec, catalog, expand(loaded.spec, catalog))
    return {path: data.decode() for path, data in tree.items()}


def _rules(spec_file: Path) -> str:
    (text,) = [t for p, t in _tree(spec_file).items() if p.endswith(RULES)]
    return text


@pytest.mark.parametrize("spec_file", GOLDEN, ids=lambda p: p.stem)
def test_promtool_accepts_the_rendered_rules(spec_file: Path, tmp_path: Path) -> None:
    promtool = _tool("promtool")
    (tmp_path / "r.yml").write_text(_rules(spec_file))
    done = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "r.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_every_alert_fires_as_the_unit_tests_say(tmp_path: Path) -> None:
    """The unit tests assume the spec defaults, which the Slurm golden input keeps."""
    promtool = _tool("promtool")
    spec_file = next(p for p in GOLDEN if p.stem == "h100-slurm-opensm")
    assert load_spec(spec_file).spec.scheduler.monitoring.model_fields_set == set()
    (tmp_path / "railplan-gpu.rules.yml").write_text(_rules(spec_file))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    done = subprocess.run(
        [promtool, "test", "rules", UNIT_TESTS.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = {r["alert"] for r in yaml.safe_load(_rules(spec_file))["groups"][0]["rules"]}
    cases = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    tested = {a["alertname"] for case in cases for a in case["alert_rule_test"] if a["exp_alerts"]}
    assert tested == alerts  # every alert has a unit test in which it fires


def _promtool_test(promtool: str, rules: str, unit_tests: Path, where: Path) -> str:
    (where / "railplan-gpu.rules.yml").write_text(rules)
    shutil.copy(unit_tests, where / unit_tests.name)
    done = subprocess.run(
        [promtool, "test", "rules", unit_tests.name],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_gpu_idle_fires_only_on_gpus_a_pod_holds(tmp_path: Path) -> None:
    """Kubernetes rules: a free idle GPU (no pod label) is quiet, a held idle one alerts."""
    promtool = _tool("promtool")
    spec_file = next(p for p in GOLDEN if p.stem == "a100-lab-mig")
    spec = load_spec(spec_file).spec
    assert spec.scheduler.kind == "kubernetes"
    assert spec.scheduler.monitoring.model_fields_set == set()
    out = _promtool_test(promtool, _rules(spec_file), K8S_UNIT_TESTS, tmp_path)
    assert "SUCCESS" in out


def _scripts(tree: dict[str, str]) -> dict[str, str]:
    """Shell scripts by where they are: *.sh files, *.sh.j2 templates, systemd units'
    `sh -c` commands, ConfigMap data."""
    found = {}
    for path, text in tree.items():
        if path.endswith(".sh"):
            found[path] = text
        elif path.endswith(".sh.j2"):
            # role templates: rendered with Jinja (unset variables empty) before checking
            found[path] = jinja2.Environment().from_string(text).render(ansible_managed="managed")
        elif ".service" in path:
            # systemd units running `sh -c '...'`: the quoted argument is a script
            unit = jinja2.Environment().from_string(text).render(ansible_managed="managed")
            for n, match in enumerate(
                re.findall(r"^Exec\w+=/bin/sh -c '(.*)'$", unit, re.MULTILINE)
            ):
                found[f"{path}:{n}"] = "#!/bin/sh\n" + match + "\n"
        elif path.endswith(".yaml") and "/k8s/" in path:
            for doc in yaml.safe_load_all(text):
                for key, value in ((doc or {}).get("data") or {}).items():
                    if isinstance(value, str) and (key.endswith(".sh") or value.startswith("#!")):
                        found[f"{path}:{key}"] = value
    return found


def test_shellcheck_passes_every_rendered_script(tmp_path: Path) -> None:
    shellcheck = _tool("shellcheck")
    scripts: dict[str, str] = {}
    for spec_file in [*GOLDEN, *sorted((ROOT / "examples").glob("*.yaml"))]:
        scripts |= _scripts(_tree(spec_file))
    # the MIG change script (a ConfigMap) and the ACS script (a role template) at least
    assert any("mig-change.sh" in p for p in scripts) and any("disable-acs" in p for p in scripts)
    assert any("cpu-governor.service" in p for p in scripts)
    failures = []
    for index, (where, text) in enumerate(sorted(scripts.items())):
        path = tmp_path / f"{index}.sh"
        path.write_text(text)
        done = subprocess.run([shellcheck, str(path)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            failures.append(f"{where}:\n{done.stdout}")
    assert not failures, "\n".join(failures)
