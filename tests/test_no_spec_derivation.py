"""No stage after topology works out again a fact the plan carries (``plan.facts``).

`infra.topology.facts.cluster_facts` owns what the spec means; render, day2, report, k8s,
simulate, verify, lint and budget read ``plan.facts``. This scan walks those packages' source for the
patterns that re-derive a planned fact: calling a topology owner of one (MIG states, control
hosts, power-off, fabric geometry, the SHARP and NIC rules, group records), reading the
spec's SHARP flag (``fabrics.compute.sharp``), NIC fields (``compute_nics``,
``compute_nic_gbps``) or ``exclude_groups``, taking ``plan.servers[0]`` as the controller,
or parsing an SU number back out of a name. `ALLOWED` lists what still reads the spec
legitimately, each with why; a planted copy of each pattern must be caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_imports import STAGES as FLOORS

STAGES = ("render", "day2", "report", "k8s", "simulate", "verify", "lint", "budget")
NOT_SCANNED = {"provision": "declares infra.k8s objects", "cli": "reads options, not facts"}

# Calls of a topology owner: the plan already holds their answer.
OWNER_CALLS = {
    "group_migs": "mig",
    "group_mig": "mig",
    "mig_per_gpu": "mig",
    "plan_groups": "groups",
    "list_servers": "groups",
    "controller_host": "control",
    "control_hosts": "control",
    "subnet_manager_hosts": "control",
    "kept_powered": "power-off",
    "kept_reasons": "power-off",
    "suspendable": "power-off",
    "spec_geometry": "geometry",
    "fabric_shape": "geometry",
    "compute_geometry": "geometry",
    "sharp_state": "sharp",
    "sharp_usable": "sharp",
    "group_nic_gbps": "nic",
    "group_nics": "nic",
    "cluster_facts": "facts",
}
FIELDS = {"compute_nics": "nic", "compute_nic_gbps": "nic", "exclude_groups": "power-off"}

# (module, fact, count): what still reads the spec, and why. Keep it honest: a new entry
# needs a reason a reviewer accepts, and a moved reader must leave the list.
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    # budget/cluster.py is the performance models' view of a spec for callers that do not
    # plan (`railplan predict`, `train`, budgets): it calls the topology owners directly.
    ("budget/cluster.py", "sharp"): (2, "no plan: sharp_state, and sharp_usable's own use"),
    ("budget/cluster.py", "geometry"): (2, "no plan: the fabric's shape for the job's tiers"),
    ("budget/cluster.py", "nic"): (2, "no plan: group_nics and group_nic_gbps"),
    ("budget/cluster.py", "mig"): (1, "no plan: which groups are MIG-split"),
    ("budget/evaluate.py", "sharp"): (1, "budgets are evaluated without a plan"),
    # lint judges the spec as written and must work when it cannot be planned
    ("lint/context.py", "mig"): (1, "MIG states of a spec that cannot be planned"),
    ("lint/rules/fabric.py", "sharp"): (3, "says why SHARP is not usable, at the spec key"),
    ("lint/rules/fabric.py", "nic"): (3, "NIC faster than the switch port: the catalog's rate"),
    ("lint/rules/subnet.py", "sharp"): (2, "SHARP with a subnet manager that cannot run it"),
    ("lint/rules/nccl.py", "sharp"): (1, "NCCL settings check, also without a plan"),
    ("lint/rules/power_saving.py", "power-off"): (1, "RP090: exclude_groups names a group"),
    # `railplan simulate --compare-mig` plans MIG variants the spec does not declare
    ("simulate/variants.py", "mig"): (2, "MIG states of each variant"),
    # subnet_manager_hosts places OpenSM for the rehearsal and twin too (the plan's facts
    # list subnet managers only for an OpenSM fabric)
    ("render/opensm.py", "control"): (1, "sm_hosts: OpenSM hosts, rehearsal included"),
    # the canary when every first-group server is a control host: any server will do
    ("render/runbook.py", "control"): (1, "a host to name in the runbook, not the controller"),
    # edited elsewhere at the time of writing (render hot spots); to read plan.facts.sharp()
    ("render/fabric_validators.py", "sharp"): (1, "ibdiagnet --sharp: to move to plan.facts"),
}


def _chain(node: ast.AST) -> list[str]:
    """Names along an attribute/subscript/call chain, outermost last (``plan.servers``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        else:
            node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _fabric_aliases(tree: ast.AST) -> set[str]:
    """Names bound to ``<spec>.fabrics.compute`` (``fabric = spec.fabrics.compute``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _chain(node.value)[-2:] == ["fabrics", "compute"]:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _call_fact(node: ast.Call) -> str | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name in OWNER_CALLS:
        return OWNER_CALLS[name]
    parses_su = any(
        isinstance(a, ast.Constant) and isinstance(a.value, str) and "-su" in a.value
        for a in node.args
    )
    return "su-number" if name in ("split", "rsplit") and parses_su else None


def _first_server(node: ast.Subscript) -> bool:
    """``plan.servers[0]``: the controller rule written out again."""
    first = isinstance(node.slice, ast.Constant) and node.slice.value == 0
    return first and _chain(node.value)[-2:] == ["plan", "servers"]


def derivations(source: str) -> list[tuple[int, str]]:
    """(line, fact) of every spec derivation in ``source``."""
    tree = ast.parse(source)
    aliases = _fabric_aliases(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        fact = None
        if isinstance(node, ast.Call):
            fact = _call_fact(node)
        elif isinstance(node, ast.Attribute) and node.attr in FIELDS:
            fact = FIELDS[node.attr]
        elif isinstance(node, ast.Attribute) and node.attr == "sharp":
            base = _chain(node.value)
            alias = len(base) == 1 and base[0] in aliases
            fact = "sharp" if "fabrics" in base or alias else None
        elif isinstance(node, ast.Subscript) and _first_server(node):
            fact = "control"
        if fact is not None:
            found.append((node.lineno, fact))
    return sorted(found)


def _scan() -> dict[tuple[str, str], list[int]]:
    counts: dict[tuple[str, str], list[int]] = {}
    for stage in STAGES:
        for path in sorted((ROOT / "infra" / stage).rglob("*.py")):
            module = path.relative_to(ROOT / "infra").as_posix()
            for line, fact in derivations(path.read_text(encoding="utf-8")):
                counts.setdefault((module, fact), []).append(line)
    return counts


def test_no_stage_after_topology_derives_a_planned_fact_from_the_spec() -> None:
    found = _scan()
    unexpected = {
        key: lines for key, lines in found.items() if len(lines) > ALLOWED.get(key, (0, ""))[0]
    }
    assert not unexpected, (
        "read plan.facts (infra.topology.facts) instead of deriving from the spec: "
        + "; ".join(f"{m}:{lines} ({fact})" for (m, fact), lines in sorted(unexpected.items()))
    )
    stale = {key for key, (n, _) in ALLOWED.items() if len(found.get(key, [])) < n}
    assert not stale, f"allow-list entries no longer needed (shrink them): {sorted(stale)}"


PLANTED = [
    ("sharp = spec.fabrics.compute is not None and spec.fabrics.compute.sharp\n", "sharp"),
    ("fabric = spec.fabrics.compute\nif fabric.sharp:\n    pass\n", "sharp"),
    ("x = sharp_usable(spec, catalog)\n", "sharp"),
    ("rate = group.compute_nics.gbps if group.compute_nics else node.compute_nic_gbps\n", "nic"),
    ("migs = group_migs(spec, catalog)\n", "mig"),
    ("host = plan.servers[0].name\n", "control"),
    ("host = tree.plan.servers[0].name\n", "control"),
    ("kept = kept_powered(plan, spec)\n", "power-off"),
    ("groups = set(spec.scheduler.power_saving.exclude_groups)\n", "power-off"),
    ("n = int(su.rsplit('-su', 1)[1])\n", "su-number"),
    ("shape = spec_geometry(spec, catalog)\n", "geometry"),
]


@pytest.mark.parametrize(("source", "fact"), PLANTED)
def test_the_scan_catches_a_planted_copy(source: str, fact: str) -> None:
    assert {f for _, f in derivations(source)} == {fact}


def test_reading_the_plans_facts_is_not_a_derivation() -> None:
    source = (
        "sharp = plan.facts.sharp() == 'usable'\n"
        "rate = plan.facts.groups[group.name].nic_gbps\n"
        "host = plan.facts.control.controller\n"
        "capable = catalog.switches[s.model].sharp\n"
    )
    assert derivations(source) == []


def test_the_allow_list_is_small() -> None:
    # what still reads the spec after topology, in allowed derivations
    assert sum(n for n, _ in ALLOWED.values()) <= 25
    assert all(reason for _, reason in ALLOWED.values())


def _module_path(module: str) -> Path:
    return ROOT / "infra" / module


def test_every_stage_after_topology_is_scanned() -> None:
    after = {stage for stage, floor in FLOORS.items() if floor > FLOORS["topology"]}
    assert set(STAGES) == after - set(NOT_SCANNED)


def test_every_allowed_module_exists() -> None:
    assert all(_module_path(m).is_file() for m, _ in ALLOWED)
