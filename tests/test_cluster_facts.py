"""The plan's facts are the builder's: `cluster_facts` without planning equals ``plan.facts``.

`infra.topology.facts.cluster_facts` works out once what a spec means (per group NICs, SUs,
rolling batch, MIG, power-off; per fabric geometry and SHARP; the control hosts); `expand`
stores it on the plan and `railplan predict`/`train` call it without planning. These tests
hold the two equal on every example and on random specs, and pin the facts a reader checks
by hand (the H100 SuperPOD's controller, SHARP, NIC rate).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.spec import Spec, load_spec, load_spec_text
from infra.topology import PlanError, expand
from infra.topology.facts import ClusterFacts, cluster_facts, sharp_state

from .conftest import ROOT
from .test_fabric_geometry import _random_spec

CATALOG = load_catalog()
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def _spec_level(facts: ClusterFacts) -> tuple[object, object]:
    return dict(facts.groups), dict(facts.fabrics)


def _same_as_plan(spec: Spec) -> None:
    plan = expand(spec, CATALOG)
    alone = cluster_facts(spec, CATALOG)
    assert not alone.planned and plan.facts.planned
    assert _spec_level(alone) == _spec_level(plan.facts)
    placed = cluster_facts(spec, CATALOG, servers=plan.servers, sus=plan.sus)
    assert placed == plan.facts
    for su in plan.sus:  # numbers are data, carried from the planner, never parsed back
        assert (su.name, su.number) in {(s.name, s.number) for s in plan.facts.groups[su.group].sus}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).stem)
def test_every_examples_facts_without_planning_are_the_plans(path: Path) -> None:
    _same_as_plan(load_spec(str(path)).spec)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(1, 60), min_size=1, max_size=3),
    su_size=st.sampled_from([4, 10, 20]),
    switch=st.sampled_from(["qm8790", "qm9700"]),
    planes=st.sampled_from([1, 2]),
    max_sus=st.one_of(st.none(), st.integers(1, 12)),
    ufm=st.booleans(),
)
def test_random_specs_facts_without_planning_are_the_plans(
    counts: list[int], su_size: int, switch: str, planes: int, max_sus: int | None, ufm: bool
) -> None:
    spec = load_spec_text(_random_spec(counts, su_size, switch, planes, 1, max_sus, ufm)).spec
    try:
        expand(spec, CATALOG)
    except PlanError:
        with pytest.raises(PlanError):
            cluster_facts(spec, CATALOG)
        return
    _same_as_plan(spec)


def test_the_h100_superpods_facts() -> None:
    spec = load_spec(str(ROOT / "examples" / "dgx-h100-superpod.yaml")).spec
    facts = expand(spec, CATALOG).facts
    assert facts.control.controller == "dgx-h100-001"
    assert ("dgx-h100-001", "slurm controller") in facts.control.kept_on
    assert "dgx-h100-001" not in facts.control.may_power_off
    assert facts.sharp() == "usable"
    gpu = facts.groups["gpu"]
    assert (gpu.nics, gpu.nic_gbps, gpu.power_off) == (8, 400.0, True)
    assert [(s.name, s.number) for s in gpu.sus][:2] == [("gpu-su01", 1), ("gpu-su02", 2)]


@pytest.mark.parametrize(
    ("fabric", "state"),
    [
        ("{switch: qm9700}", "off"),
        ("{switch: qm9700, sharp: true}", "usable"),
        ("{switch: qm9700, sharp: true, rail_optimized: false}", "asked"),
        ("{switch: qm9700, sharp: true, subnet_manager: switch}", "asked"),
    ],
)
def test_sharp_is_one_value(fabric: str, state: str) -> None:
    spec = load_spec_text(
        "name: s\nnode_groups: [{name: g, node: dgx-h100, count: 4}]\n"
        f"fabrics: {{compute: {fabric}}}\n"
    ).spec
    assert sharp_state(spec, CATALOG) == state
    assert expand(spec, CATALOG).facts.sharp() == state


def test_unknown_node_is_a_located_plan_error() -> None:
    spec = load_spec_text("name: s\nnode_groups: [{name: g, node: dgx-h100, count: 4}]\n").spec
    bad = spec.model_copy(
        update={"node_groups": [spec.node_groups[0].model_copy(update={"node": "dgx-h1000"})]}
    )
    with pytest.raises(PlanError) as raised:
        cluster_facts(bad, CATALOG)
    assert raised.value.path == "node_groups[0].node"
