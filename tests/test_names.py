"""One rule for spec names that other tools take (infra.spec.base.name_pattern).

Group and MIG layout names ending in `_`, `-` or `.` used to pass lint and render, then make
Kubernetes label values the API server refuses (and that the tree's own topology_labels role
and mig-change.sh refuse at run time). Every name pattern of the spec is now built by one
rule; these tests check, for names generated from each pattern, that every consumer takes
them: a Kubernetes label value (the API server's regex, which the topology_labels role and
the MIG script use too), a hostname prefix, a Slurm name and a file name.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog import Catalog
from infra.k8s.mig_schedule import SCRIPT_PATH
from infra.render.ansible import ansible_files
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.spec.base import CLUSTER_NAME, DNS_LABEL, GROUP_NAME, LAYOUT_NAME
from infra.topology import expand

# k8s.io/apimachinery validation.IsValidLabelValue (at most 63 characters)
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
HOSTNAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")  # RFC 1123 label
PATTERNS = {"cluster": CLUSTER_NAME, "group": GROUP_NAME, "layout": LAYOUT_NAME, "dns": DNS_LABEL}
ROOT = Path(__file__).resolve().parents[1]
ROLE_TASKS = ROOT / "playbooks/roles/topology_labels/tasks"


def _every_consumer_takes(name: str) -> None:
    assert LABEL_VALUE.fullmatch(name) and len(name) <= 63, name
    assert name not in {".", ".."} and "/" not in name and not name.startswith(("-", "."))
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name)  # a Slurm partition/node name, a shell word


def _every_accepted_name_is_a_label_value(kind: str, data: st.DataObject) -> None:
    name = data.draw(st.from_regex(PATTERNS[kind], fullmatch=True))
    _every_consumer_takes(name)
    if kind == "group":  # its default hostnames: the name with '_' made '-', then digits
        assert HOSTNAME.fullmatch(name.replace("_", "-") + "001")


# About 7 ms of CPU a name: `make test` draws the first 100 fixed names of each kind,
# `make test-slow` (and CI) 300, and `make fuzz` both with fresh random names.
_KINDS = pytest.mark.parametrize("kind", sorted(PATTERNS))
test_every_accepted_name_is_a_label_value = _KINDS(
    settings(max_examples=100, deadline=None)(
        given(data=st.data())(_every_accepted_name_is_a_label_value)
    )
)
test_every_accepted_name_is_a_label_value_300_examples = pytest.mark.slow(
    _KINDS(
        settings(max_examples=300, deadline=None)(
            given(data=st.data())(_every_accepted_name_is_a_label_value)
        )
    )
)


def test_the_role_checks_label_values_with_the_same_regex() -> None:
    # the run-time check these names used to fail: the topology_labels role's assert
    text = (ROLE_TASKS / "kubernetes.yml").read_text()
    assert "is match('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')" in text


SPEC = """name: names
node_groups:
  - name: {group}
    node: dgx-a100-640gb
    count: 2
    mig: {layout}
scheduler: {{kind: kubernetes, mig_strategy: mixed}}
mig_layouts:
  {layout}: {{profiles: {{"1g.10gb": 7}}}}
"""


@pytest.mark.parametrize(
    ("group", "layout", "path", "line"),
    [
        ("infer_", "day", "node_groups[0].name", 3),
        ("infer__", "day", "node_groups[0].name", 3),
        ("infer", "day-", "mig_layouts.day-", 9),
        ("infer", "day.", 'mig_layouts["day."]', 9),
        ("infer", "day_", "mig_layouts.day_", 9),
    ],
)
def test_names_ending_badly_are_refused_located(
    group: str, layout: str, path: str, line: int
) -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(SPEC.format(group=group, layout=layout), file="s.yaml")
    error = next(e for e in caught.value.errors if e.path == path)
    assert error.position is not None and error.position.line == line
    assert "ending with a letter or digit" in str(error) or "starting" in str(error)


@pytest.mark.parametrize(
    ("group", "layout"), [("a", "1x"), ("a_1", "x.y-z_0"), ("a" * 32, "d" * 63)]
)
def test_edge_names_still_load(group: str, layout: str) -> None:
    spec = load_spec_text(SPEC.format(group=group, layout=layout)).spec
    assert spec.node_groups[0].name == group


def test_the_mig_script_takes_every_name_the_spec_takes(tmp_path: Path) -> None:
    # mig-change.sh's own check_label_value, run in sh over edge names the patterns allow
    names = ["a", "1", "a_1", "a__b", "x.y-z_0", "1.-_x", "d" * 63]
    assert all(re.match(GROUP_NAME, n) or re.match(LAYOUT_NAME, n) for n in names)
    text = SCRIPT_PATH.read_text()
    functions = text[text.index("\nlog() {") : text.index("\ncheck_seconds()")]
    script = functions + '\nfor n in "$@"; do check_label_value NAME "$n"; done\necho ok\n'
    done = subprocess.run(
        ["sh", "-c", script, "sh", *names], capture_output=True, text=True, check=False
    )
    assert done.stdout == "ok\n", done.stderr


def _groups_and_hosts(tree: dict[str, Any], groups: set[str], hosts: set[str]) -> None:
    for name, body in tree.items():
        groups.add(name)
        hosts.update((body or {}).get("hosts", {}))
        _groups_and_hosts((body or {}).get("children", {}), groups, hosts)


@pytest.mark.parametrize("example", ["k8s-tenants.yaml", "dgx-a100-superpod.yaml"])
def test_only_node_group_names_can_meet_a_hostname(example: str, catalog: Catalog) -> None:
    # Lint RP005 checks node group names against hostnames; every other inventory group
    # railplan makes holds '_' (which no hostname has) or no digit (which every hostname has).
    spec_file = ROOT / "examples" / example
    spec = load_spec(spec_file).spec
    plan = expand(spec, catalog)
    files = ansible_files(spec, catalog, plan)
    inventory = json.loads(files[f"inventories/{spec.name}/hosts.yml"])
    groups: set[str] = set()
    hosts: set[str] = set()
    _groups_and_hosts(inventory, groups, hosts)
    assert hosts == {s.name for s in plan.servers}
    assert all("_" not in h and re.search(r"[0-9]", h) for h in hosts)
    others = groups - {g.name for g in spec.node_groups}
    assert len(others) > 5
    assert all("_" in g or not re.search(r"[0-9]", g) for g in others), sorted(others)
