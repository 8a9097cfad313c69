"""One owner for the compute fabric's shape: the budget's geometry is the plan's, on any spec.

`infra.topology.fabric_geometry.compute_geometry` sets tiers, pods, uplinks per leaf and the
oversubscription as built; the planner builds from it and carries it on
``plan.fabrics["compute"].geometry``, and the performance models read it off the spec
(`spec_geometry`) without planning. The property test plans random specs (several groups,
partial SUs, planes, ``max_sus``, UFM) and holds the two equal; a source scan fails when
another module works out a leaf's uplinks (the fat-tree formula) again.
"""

from __future__ import annotations

import ast
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra.budget.cluster import comm_topology, job_tiers
from infra.catalog import Catalog, load_catalog
from infra.spec import Spec, load_spec_text
from infra.topology import PlanError, expand
from infra.topology.fabric_geometry import spec_geometry

from .conftest import ROOT

CATALOG = load_catalog()

# A 81-server group fills 5 SUs of 20 (4 full and one with a server), a 1-server group a 6th:
# 48 leaves of 40-port HDR switches need three tiers. Counting servers instead of each
# group's SUs gives ceil(82 / 20) = 5 SUs, 40 leaves: two tiers (the budget's old answer).
SPANS_PODS = """name: spans-pods
site: {management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}
node_groups:
  - {name: train, node: dgx-a100-640gb, count: 81, hostname: "t{index:03d}"}
  - {name: infer, node: dgx-a100-640gb, count: 1, hostname: "i{index:03d}"}
fabrics:
  compute: {switch: qm8790, su_size: 20}
"""


def _spec(text: str) -> Spec:
    return load_spec_text(text).spec


def _random_spec(
    counts: list[int],
    su_size: int,
    switch: str,
    planes: int,
    oversubscription: float,
    max_sus: int | None,
    ufm: bool,
    headroom: tuple[int, ...] = (),
) -> str:
    """A spec of groups of ``counts`` servers; ``headroom[i]`` > 0 declares group i's
    ``max_count`` that many servers above its count (node_groups[].max_count)."""
    extra_of = dict(enumerate(headroom))
    groups = "".join(
        f'  - {{name: g{i}, node: dgx-a100-640gb, count: {n}, hostname: "g{i}-{{index:04d}}"'
        + (f", max_count: {n + extra_of[i]}" if extra_of.get(i) else "")
        + "}\n"
        for i, n in enumerate(counts)
    )
    extra = f", max_sus: {max_sus}" if max_sus is not None else ""
    return (
        "name: random\nsite: {management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}\n"
        f"node_groups:\n{groups}fabrics:\n  compute: {{switch: {switch}, su_size: {su_size}, "
        f"planes: {planes}, oversubscription: {oversubscription}, "
        f"subnet_manager: {'ufm' if ufm else 'opensm'}{extra}}}\n"
    )


def _planned_tiers(spec: Spec, catalog: Catalog, group: str, nodes: int) -> int | None:
    """Tiers a job on ``nodes`` of ``group`` climbs, read off the plan (None: unplannable)."""
    try:
        plan = expand(spec, catalog)
    except PlanError:
        return None
    fabric = plan.fabrics["compute"]
    assert spec.fabrics.compute is not None
    if nodes <= spec.fabrics.compute.su_size:
        return 1
    if fabric.tiers < 3:
        return fabric.tiers
    pods = {su.pod for su in plan.sus if su.group == group}
    return 3 if len(pods) > 1 else 2


def test_a_large_group_that_spans_pods_climbs_three_tiers_in_plan_and_budget() -> None:
    spec = _spec(SPANS_PODS)
    plan = expand(spec, CATALOG)
    assert plan.fabrics["compute"].tiers == 3
    assert len({su.pod for su in plan.sus if su.group == "train"}) > 1
    node = CATALOG.nodes["dgx-a100-640gb"]
    assert job_tiers(spec, CATALOG, node, 81) == 3
    assert comm_topology(spec, CATALOG, 81 * 8, group="train").tiers == 3
    shape = spec_geometry(spec, CATALOG)
    assert shape is not None and shape.geometry == plan.fabrics["compute"].geometry


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(1, 90), min_size=1, max_size=3),
    su_size=st.sampled_from([4, 10, 16, 20]),
    switch=st.sampled_from(["qm8790", "qm9700"]),
    planes=st.sampled_from([1, 2, 4]),
    oversubscription=st.sampled_from([1, 1.5, 2]),
    max_sus=st.one_of(st.none(), st.integers(1, 24)),
    ufm=st.booleans(),
    headroom=st.lists(st.sampled_from([0, 0, 5, 40]), max_size=3).map(tuple),
)
@example([81, 1], 20, "qm8790", 1, 1, None, False, ())  # SPANS_PODS
@example([100], 20, "qm8790", 1, 1, 30, False, ())  # max_sus alone makes three tiers
@example([30, 10], 10, "qm8790", 1, 1, None, False, (40,))  # a group keeps positions
def test_the_budgets_geometry_is_the_plans(
    counts: list[int],
    su_size: int,
    switch: str,
    planes: int,
    oversubscription: float,
    max_sus: int | None,
    ufm: bool,
    headroom: tuple[int, ...],
) -> None:
    spec = _spec(
        _random_spec(counts, su_size, switch, planes, oversubscription, max_sus, ufm, headroom)
    )
    try:
        plan = expand(spec, CATALOG)
    except PlanError as exc:
        with pytest.raises(PlanError) as raised:
            spec_geometry(spec, CATALOG)
        assert raised.value.path == exc.path
        return
    shape = spec_geometry(spec, CATALOG)
    assert shape is not None
    built = plan.fabrics["compute"]
    assert shape.geometry == built.geometry
    assert (built.tiers, built.pods, built.oversubscription) == (
        shape.geometry.tiers,
        shape.geometry.pods,
        shape.geometry.oversubscription,
    )
    biggest = max(range(len(counts)), key=lambda i: counts[i])
    nodes = counts[biggest]
    if nodes >= 2:
        topo = comm_topology(spec, CATALOG, nodes * 8, group=f"g{biggest}")
        assert topo.oversubscription == max(1.0, built.oversubscription)
        planned = _planned_tiers(spec, CATALOG, f"g{biggest}", nodes)
        if topo.tiers == 3 or planned == 1 or built.tiers < 3:
            assert topo.tiers == planned  # the job needs more than a pod: it crosses pods
        if planned == 3 and math.ceil(nodes / su_size) > built.geometry.sus_per_pod:
            assert topo.tiers == 3


# The leaf-port rule: a leaf's uplinks are ``su_size / oversubscription`` (rounded up) and at
# most what the radix leaves. Only the owner may work it out.
OWNER = ROOT / "infra" / "topology" / "fabric_geometry.py"


def _works_out_uplinks(tree: ast.AST) -> list[int]:
    """Lines dividing something by an ``oversubscription`` or calling `fat_tree_shape`.

    The uplink rule divides the SU's ports by the ratio itself (``su / oversubscription``);
    a bandwidth model that scales a rate by it (``full / max(1, flows * ratio / nodes)``) is
    not a second tree formula, so only a divisor that is the ratio counts.
    """
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.FloorDiv):
            divisor = ast.unparse(node.right).split(".")[-1]
            lines += [node.lineno] if divisor == "oversubscription" else []
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("fat_tree_shape"):
            lines.append(node.lineno)
    return lines


def test_only_the_owner_works_out_the_compute_fabrics_shape() -> None:
    """The budget once sized the tree itself and disagreed with the plan; never again.

    The storage fabric's leaves (`infra.topology.networks`) split their ports by their own
    rule and call the tree builder for their own tree: they are listed, not the compute
    fabric's shape.
    """
    allowed = {OWNER, ROOT / "infra" / "topology" / "networks.py"}
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "infra").rglob("*.py"))
        if path not in allowed
        and (lines := _works_out_uplinks(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_the_scan_sees_the_old_budget_formula() -> None:
    """The scan must catch the copy that was deleted from `infra.budget.cluster`."""
    old = (
        "up = min(math.ceil(fabric.su_size / fabric.oversubscription), ports - su_size)\n"
        "shape = fat_tree_shape(sus * rails, max(1, up), switch.ports, rails)\n"
    )
    assert sorted(_works_out_uplinks(ast.parse(old))) == [1, 2]


def test_the_owner_holds_the_rule() -> None:
    assert _works_out_uplinks(ast.parse(OWNER.read_text(encoding="utf-8")))
