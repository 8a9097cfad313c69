"""`railplan diff OLD NEW`: properties of the change plan between two specs.

The base spec is a 40-node DGX A100 cluster (QM8790, SUs of 20, rail-optimized, 1:1): two
SUs of eight rail leaves each, ten spines. Growing it by one SU adds 20 servers, eight
leaves, ten spines and their cables, and by default re-sizes the spines (pinned in
`test_growing_without_max_sus_rewires_the_spines_and_says_how_to_avoid_it`); with
`fabrics.compute.max_sus` the upper tiers are built for the target and nothing moves.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.day2.diff import PlanDiff, plan_diff
from infra.day2.diff_format import diff_json, diff_text
from infra.render.tree import render_tree
from infra.spec import Spec, load_spec_text
from infra.topology import Plan, expand

from .test_cli import railplan

RAILS = 8  # DGX A100: eight compute NICs


def _spec(count: int = 40, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "grow",
        "site": {"rack": {"power_kw": 28, "units": 42, "cooling": "air"}},
        "node_groups": [{"name": "dgx", "node": "dgx-a100-640gb", "count": count}],
        "fabrics": {
            "compute": {
                "switch": "qm8790",
                "su_size": 20,
                "rail_optimized": True,
                "oversubscription": 1,
            }
        },
        "mig_layouts": {
            "halves": {"profiles": {"3g.40gb": 2}},
            "sevenths": {"profiles": {"1g.10gb": 7}},
        },
    }
    doc.update(top)
    return doc


def _planned(doc: dict[str, Any]) -> tuple[Spec, Plan]:
    spec = load_spec_text(yaml.safe_dump(doc, sort_keys=False)).spec
    return spec, expand(spec, load_catalog())


def _diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[PlanDiff, Plan, Plan]:
    (old_spec, old_plan), (new_spec, new_plan) = _planned(old), _planned(new)
    return plan_diff(old_spec, old_plan, new_spec, new_plan, load_catalog()), old_plan, new_plan


def _two_groups(mig: str = "halves", driver: str = "550.90.07") -> dict[str, Any]:
    groups = [
        {"name": "dgx", "node": "dgx-a100-640gb", "count": 40},
        {
            "name": "infer",
            "node": "dgx-a100-640gb",
            "count": 20,
            "hostname": "inf{index:03d}",
            "mig": mig,
        },
    ]
    return _spec(node_groups=groups, software={"driver": driver})


def _write(tmp_path: Path, name: str, doc: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_identical_specs_change_nothing() -> None:
    d, _, _ = _diff(_spec(), _spec())
    assert not d.changed
    doc = json.loads(diff_json(d))
    assert doc["changed"] is False
    assert doc["servers"] == doc["switches"] == doc["cables"] == {"added": [], "removed": []}
    assert doc["rolling_order"] == [] and doc["addresses"] == doc["moves"] == []
    assert diff_text(d).startswith("servers: 0 added, 0 removed\n")


def test_growing_by_one_su_adds_its_servers_leaves_and_cables() -> None:
    d, old, new = _diff(_spec(40), _spec(60))
    assert [s.name for s in old.sus] == ["dgx-su01", "dgx-su02"]
    assert d.servers_added == tuple(f"dgx{n:03d}" for n in range(41, 61))
    assert d.servers_removed == () and d.switches_removed == ()
    new_leaves = {s.name for s in new.switches_in("compute", "leaf") if s.su == "dgx-su03"}
    assert len(new_leaves) == RAILS and new_leaves <= set(d.switches_added)
    added = set(d.servers_added)
    node_leaf = [c for c in d.cables_added if c.tier == "node_leaf" and c.a in added]
    assert len(node_leaf) == 20 * RAILS == 160
    assert Counter(c.a for c in node_leaf) == dict.fromkeys(added, RAILS)
    uplinks = [c for c in new.cables_in("compute", "leaf_spine") if c.a in new_leaves]
    assert len(uplinks) == RAILS * 20  # 1:1 leaves: as many uplinks as servers per SU
    assert set(uplinks) <= set(d.cables_added)
    servers = {s.name for s in old.servers}
    assert not [c for c in d.cables_removed if {c.a, c.b} & servers]
    assert d.addresses == () and d.moves == ()
    # Without max_sus the spines are resized (next test): the SUs whose leaf uplinks move
    # are drained while they are recabled, the new SU only adds.
    assert [s.unit for s in d.rolling_order] == ["dgx-su01", "dgx-su02", "dgx-su03"]
    assert d.rolling_order[1].actions == (
        "drain dgx-su02",
        "take out 160 and put in 160 cables (about 1600 min)",
        "apply",
        "undrain dgx-su02",
    )
    assert d.rolling_order[2].actions == (
        "put in 320 cables (about 1600 min)",
        "cable 20 added servers",
        "apply",
        "join 20 added servers",
    )
    assert sum(s.cables_removed for s in d.rolling_order) == len(d.cables_removed)
    assert sum(s.cables_added for s in d.rolling_order) == len(d.cables_added)


def test_growing_without_max_sus_rewires_the_spines_and_says_how_to_avoid_it() -> None:
    """What growing 40 -> 60 removes by default, pinned: spines are sized to the leaves planned.

    Two-tier spines are the fewest that divide a leaf's 20 uplinks and take all leaves'
    uplinks (`infra.topology.fat_tree`; NVIDIA's published two-tier sizes do the same):
    16 leaves need 8 -> 10 spines (2 links per leaf and spine), 24 leaves need 12 -> 20
    (1 link each). So every leaf's uplinks fan out anew. No server's cable is touched, and
    the UFM appliance, on the highest free spine ports, stays where it is.
    """
    d, old, new = _diff(_spec(40), _spec(60))
    assert (old.fabrics["compute"].spine, new.fabrics["compute"].spine) == (10, 20)
    removed = Counter((c.fabric, c.tier) for c in d.cables_removed)
    assert removed == {("compute", "leaf_spine"): 310}
    (note,) = d.notes
    assert "310 compute uplink cables" in note and "fabrics.compute.max_sus" in note
    assert f"note: {note}" in diff_text(d)
    assert json.loads(diff_json(d))["notes"] == [note]


def test_growing_within_the_spines_removes_nothing() -> None:
    d, _, _ = _diff(_spec(60), _spec(80))  # 24 and 32 leaves: 20 spines either way
    assert d.cables_removed == () and d.moves == () and d.notes == ()
    assert len(d.cables_added) == 2 * 20 * RAILS


def _grown(count: int, max_sus: int, **fabrics: Any) -> dict[str, Any]:
    doc = _spec(count)
    doc["fabrics"]["compute"]["max_sus"] = max_sus
    doc["fabrics"].update(fabrics)
    return doc


ALL_NETWORKS = {"storage": {"switch": "qm8790", "storage_ports": 8}, "management": {}}


def test_growing_by_one_su_within_max_sus_adds_exactly_its_cables_and_removes_nothing() -> None:
    """The issue's done-when: 40 -> 60 DGX A100 lists the 160 node-leaf cables of the new SU
    and its leaves' 160 uplinks, and removes nothing (spines built for max_sus 3 SUs)."""
    d, old, new = _diff(_grown(40, 3), _grown(60, 3))
    assert old.fabrics["compute"].spine == new.fabrics["compute"].spine == 20
    assert d.cables_removed == () and d.switches_removed == () and d.moves == ()
    assert Counter(c.tier for c in d.cables_added) == {"node_leaf": 160, "leaf_spine": 160}
    new_leaves = {s.name for s in new.switches_in("compute", "leaf") if s.su == "dgx-su03"}
    assert set(d.switches_added) == new_leaves
    assert {c.a for c in d.cables_added if c.tier == "node_leaf"} == set(d.servers_added)
    assert {c.a for c in d.cables_added if c.tier == "leaf_spine"} == new_leaves
    assert d.addresses == () and d.notes == ()


@pytest.mark.parametrize(
    ("old", "new", "max_sus"),
    [(40, 60, 3), (140, 300, 16), (20, 140, 7), (100, 160, 12)],
    ids=["two-tier", "three-tier-new-pods", "two-to-three-tier", "three-tier-partial-pod"],
)
def test_growing_within_max_sus_with_every_network_removes_and_moves_nothing(
    old: int, new: int, max_sus: int
) -> None:
    """Storage and in-band trees are sized in proportion; cores, spines and storage-system
    leaves are placed before what growth adds, and the core row's OOB ports keep order."""
    d, _, _ = _diff(_grown(old, max_sus, **ALL_NETWORKS), _grown(new, max_sus, **ALL_NETWORKS))
    assert d.cables_removed == () and d.switches_removed == ()
    assert d.moves == () and d.addresses == () and d.notes == ()
    assert len(d.servers_added) == new - old


def test_multi_plane_h100_growth_within_max_sus_moves_no_cable_or_address() -> None:
    """Two planes of DGX H100 on QM9700, 397 -> 835 servers of max_sus 31: new pods in both
    planes; the cores, every plane's spines and all addresses stay."""

    def h100(count: int) -> dict[str, Any]:
        doc = _grown(count, 31, **ALL_NETWORKS)
        doc["node_groups"][0]["node"] = "dgx-h100"
        doc["fabrics"]["compute"].update(switch="qm9700", su_size=32, planes=2)
        doc["fabrics"]["storage"]["switch"] = "qm9700"
        return doc

    d, old, new = _diff(h100(397), h100(835))
    assert (old.fabrics["compute"].tiers, new.fabrics["compute"].spine) == (3, 216)
    assert d.addresses == () and d.switches_removed == ()
    assert {c.a for c in d.cables_removed} <= {"ufm-1"}
    old_racks = {r.name for r in old.racks}
    assert not [m for m in d.moves if m.new_rack in old_racks]


def test_appending_a_node_group_within_max_sus_removes_nothing() -> None:
    extra = {"name": "extra", "node": "dgx-a100-640gb", "count": 20, "hostname": "x{index:03d}"}
    base = _grown(40, 3, **ALL_NETWORKS)
    grown = _grown(40, 3, **ALL_NETWORKS)
    grown["node_groups"].append(extra)
    d, _, _ = _diff(base, grown)
    assert d.cables_removed == () and d.switches_removed == () and d.moves == ()
    assert d.addresses == () and d.servers_added == tuple(f"x{n:03d}" for n in range(1, 21))


def test_filling_the_fabric_to_max_sus_leaves_no_port_for_the_ufm() -> None:
    """Grown to max_sus the tree is full, so the UFM can only borrow ports growth takes:
    the smaller plan warns (RP058) and the full one has no UFM port (RP057)."""
    d, old, new = _diff(_grown(140, 8), _grown(160, 8))
    assert {c.a for c in d.cables_removed} == {"ufm-1"}
    assert [w.code for w in old.warnings] == ["ufm-moves-with-growth"]
    assert [w.code for w in new.warnings] == ["ufm-no-port"]


def test_more_sus_than_max_sus_is_a_plan_error() -> None:
    from infra.topology import PlanError

    with pytest.raises(PlanError) as caught:
        _planned(_grown(60, 2))
    assert caught.value.path == "fabrics.compute.max_sus"
    assert "3 scalable units" in caught.value.message


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.integers(min_value=1, max_value=100),
    grow=st.integers(min_value=1, max_value=100),
    spare=st.integers(min_value=0, max_value=3),
)
def test_growth_within_max_sus_never_removes_renames_or_moves(
    start: int, grow: int, spare: int
) -> None:
    max_sus = -(-(start + grow) // 20) + spare
    d, old, new = _diff(
        _grown(start, max_sus, **ALL_NETWORKS), _grown(start + grow, max_sus, **ALL_NETWORKS)
    )
    # Only a UFM that its plan said would move (RP058) may move.
    ufm = {"ufm-1"} if [w for w in old.warnings if w.code == "ufm-moves-with-growth"] else set()
    assert {c.a for c in d.cables_removed} <= ufm and d.switches_removed == ()
    assert d.addresses == ()
    # An SU's OOB switch stands in for the rack it serves until that rack exists, then moves
    # into it (a move into a new rack); nothing moves into a rack that was already there.
    old_racks = {r.name for r in old.racks}
    assert not [m for m in d.moves if m.new_rack in old_racks and not ufm]
    spines = {s.name for s in old.switches if s.tier != "leaf"}
    assert spines <= {s.name for s in new.switches}


def test_shrinking_removes_the_last_su_and_drains_it() -> None:
    d, _, _ = _diff(_spec(60), _spec(40))
    assert d.servers_removed == tuple(f"dgx{n:03d}" for n in range(41, 61))
    assert d.servers_added == ()
    # The spines shrink too (20 -> 10): the SUs that stay are drained while recabled.
    *kept, step = d.rolling_order
    assert [s.unit for s in kept] == ["dgx-su01", "dgx-su02"]
    assert (step.unit, len(step.removed), step.added) == ("dgx-su03", 20, ())
    assert step.actions[0] == "drain dgx-su03" and step.actions[-1] == "undrain dgx-su03"
    assert step.actions[1:3] == (
        "remove 20 servers, then uncable them",
        "take out 320 cables (about 1600 min)",
    )


def test_appending_a_node_group_removes_no_device() -> None:
    extra = {"name": "extra", "node": "dgx-a100-640gb", "count": 20, "hostname": "x{index:03d}"}
    base = _spec()
    d, old, _ = _diff(base, _spec(node_groups=[*base["node_groups"], extra]))
    assert d.servers_removed == () and d.switches_removed == ()
    assert d.servers_added == tuple(f"x{n:03d}" for n in range(1, 21))
    servers = {s.name for s in old.servers}
    assert not [c for c in d.cables_removed if {c.a, c.b} & servers]
    assert d.addresses == ()
    # No max_sus: the spines grow with the third SU and the first group's leaf uplinks move,
    # so its SUs are drained too (the jobs of group dgx are affected).
    assert [s.unit for s in d.rolling_order] == ["dgx-su01", "dgx-su02", "extra-su01"]
    assert d.affected_groups == ("dgx",)


def test_a_mig_layout_change_is_reported_and_rolls_only_its_sus() -> None:
    d, _, _ = _diff(_two_groups("halves"), _two_groups("sevenths"))
    assert d.changed
    ((change),) = d.mig
    assert (change.group, change.old, change.new) == ("infer", "halves", "sevenths")
    assert [s.unit for s in d.rolling_order] == ["infer-su01"]
    assert d.rolling_order[0].actions == ("drain infer-su01", "apply", "undrain infer-su01")
    assert not (d.servers_added or d.cables_added or d.cables_removed)
    doc = json.loads(diff_json(d))
    assert doc["mig"][0]["new"] == "sevenths"


def test_a_driver_change_is_reported_and_rolls_every_su() -> None:
    d, _, _ = _diff(_two_groups(driver="550.90.07"), _two_groups(driver="550.127.05"))
    assert [(s.field, s.old, s.new) for s in d.software] == [("driver", "550.90.07", "550.127.05")]
    assert [s.unit for s in d.rolling_order] == ["dgx-su01", "dgx-su02", "infer-su01"]
    assert "~ software driver 550.90.07 -> 550.127.05" in diff_text(d)


def test_budget_predictions_are_compared() -> None:
    budgets = [{"cluster_power": {"max_kw": 2000}}]
    d, _, _ = _diff(_spec(40, budgets=budgets), _spec(60, budgets=budgets))
    ((b),) = d.budgets
    assert b.kind == "cluster_power" and b.new > b.old > 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grow=st.integers(min_value=1, max_value=60))
def test_growing_never_removes_a_server_or_its_cables(grow: int) -> None:
    d, old, _ = _diff(_spec(40), _spec(40 + grow))
    assert d.servers_removed == () and d.switches_removed == ()
    assert len(d.servers_added) == grow
    servers = {s.name for s in old.servers}
    assert not [c for c in d.cables_removed if {c.a, c.b} & servers]
    assert d.addresses == () and not [m for m in d.moves if m.kind == "server"]


def test_cli_exit_codes_and_json_contract(tmp_path: Path) -> None:
    old, new = _write(tmp_path, "old.yaml", _spec(40)), _write(tmp_path, "new.yaml", _spec(60))
    same = railplan("diff", old, old)
    assert same.returncode == 0, same.stderr
    assert json.loads(railplan("diff", "--format", "json", old, old).stdout)["changed"] is False
    grown = railplan("diff", "--format", "json", old, new)
    assert grown.returncode == 1, grown.stderr
    doc = json.loads(grown.stdout)
    assert doc["changed"] is True and len(doc["servers"]["added"]) == 20
    cable = doc["cables"]["added"][0]
    assert set(cable) == {"id", "fabric", "tier", "a", "a_port", "b", "b_port"}
    assert cable["tier"] in {"node_leaf", "leaf_spine", "spine_core"}
    keys = {"addresses", "moves", "mig", "software", "budgets", "rolling_order"}
    assert keys <= set(doc)
    text = railplan("diff", old, new)
    assert text.returncode == 1 and "servers: 20 added, 0 removed" in text.stdout
    assert "1. su dgx-su01: drain dgx-su01, take out 150 and put in 150 cables" in text.stdout
    assert "3. su dgx-su03: put in 320 cables (about 1600 min), cable 20 added" in text.stdout


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    old = _write(tmp_path, "old.yaml", _spec(40))
    missing = str(tmp_path / "missing.yaml")
    result = railplan("diff", old, missing)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"{missing}: error:")
    as_json = railplan("diff", "--format", "json", old, missing)
    assert as_json.returncode == 2 and as_json.stderr == ""  # said once, in the document
    assert json.loads(as_json.stdout)["errors"][0]["file"] == missing
    bad = _write(tmp_path, "bad.yaml", {**_spec(40), "node_groups": [{"name": "dgx"}]})
    invalid = railplan("diff", old, bad)
    assert invalid.returncode == 2 and f"{bad}:" in invalid.stderr
    assert all(line.split(":")[1].isdigit() for line in invalid.stderr.splitlines())


# --- settings the plan does not show ------------------------------------------------------------

TENANTS_EXAMPLE = Path(__file__).parents[1] / "examples" / "k8s-tenants.yaml"


def _tenants_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(TENANTS_EXAMPLE.read_text())
    return doc


def _edit_name(doc: dict[str, Any]) -> str:
    doc["name"] = "h100-shared-b"
    return "name"


def _edit_tenant_name(doc: dict[str, Any]) -> str:
    doc["scheduler"]["tenants"][0]["name"] = "science"
    return "scheduler.tenants[science]"


def _edit_priority(doc: dict[str, Any]) -> str:
    doc["scheduler"]["tenants"][0]["priority"] = "low"
    return "scheduler.tenants[research].priority"


def _edit_batch(doc: dict[str, Any]) -> str:
    doc["scheduler"]["batch"] = "kueue"
    return "scheduler.batch"


def _edit_provisioner(doc: dict[str, Any]) -> str:
    doc["scheduler"]["checkpoint_storage"]["provisioner"] = "csi.weka.io"
    return "scheduler.checkpoint_storage.provisioner"


def _edit_alert(doc: dict[str, Any]) -> str:
    doc["scheduler"]["monitoring"]["idle_for"] = "3h"
    return "scheduler.monitoring.idle_for"


SETTING_EDITS = [
    _edit_name, _edit_tenant_name, _edit_priority, _edit_batch, _edit_provisioner, _edit_alert,
]  # fmt: skip


@pytest.mark.parametrize("edit", SETTING_EDITS, ids=lambda f: f.__name__[len("_edit_") :])
def test_a_setting_that_changes_the_rendered_tree_is_reported(edit: Any) -> None:
    """The edits `railplan diff` once reported as "nothing changed" (exit 0) although the
    rendered tree differed: the diff now names each by its spec path."""
    old, new = _tenants_doc(), _tenants_doc()
    path = edit(new)
    (old_spec, old_plan), (new_spec, new_plan) = _planned(old), _planned(new)
    catalog = load_catalog()
    assert render_tree(old_spec, catalog, old_plan) != render_tree(new_spec, catalog, new_plan)
    d = plan_diff(old_spec, old_plan, new_spec, new_plan, catalog)
    assert d.changed and d.servers_added == d.servers_removed == ()
    assert path in [s.path for s in d.settings], d.settings
    assert f"~ setting {path} " in diff_text(d)
    assert path in [s["path"] for s in json.loads(diff_json(d))["settings"]]


def test_a_renamed_tenant_reads_as_one_removed_and_one_added() -> None:
    old, new = _tenants_doc(), _tenants_doc()
    _edit_tenant_name(new)
    d, _, _ = _diff(old, new)
    by_path = {s.path: s for s in d.settings}
    assert by_path["scheduler.tenants[research]"].new is None
    assert by_path["scheduler.tenants[science]"].old is None
    assert by_path["scheduler.tenants[science]"].new["gpus"] == 448


def test_software_and_mig_edits_are_not_repeated_as_settings() -> None:
    d, _, _ = _diff(_two_groups(), _two_groups(mig="sevenths", driver="560.35.03"))
    assert d.software and d.mig and d.settings == ()


def test_a_diff_of_settings_only_exits_1_from_the_cli(tmp_path: Path) -> None:
    old, new = _tenants_doc(), _tenants_doc()
    _edit_priority(new)
    result = railplan("diff", _write(tmp_path, "a.yaml", old), _write(tmp_path, "b.yaml", new))
    assert result.returncode == 1, result.stderr
    assert "settings: 1 changed" in result.stdout
    assert '~ setting scheduler.tenants[research].priority "high" -> "low"' in result.stdout
