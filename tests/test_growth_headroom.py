"""Growth that only adds: node groups keep room (`node_groups[].max_count`) within max_sus.

The issue's scenario: 1,100 training + 150 inference DGX A100 (10,000 GPUs) on QM8790, with
storage, in-band and out-of-band networks. Growing training by one SU with headroom
declared removes no cable, moves no device and changes no address in any fabric; without
headroom the inference group's leaf uplinks move and `diff` drains every one of its SUs.
The property runs small clusters of two or three groups (SUs of 4, so three-tier trees
come quickly) and grows any group within its maximum, or appends one.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.day2.diff import PlanDiff, plan_diff
from infra.day2.recabling import SPINE_STEP
from infra.spec import load_spec_text
from infra.topology import Plan, expand
from infra.topology.addressing import _growth_order
from infra.topology.growth import natural_key

FABRICS = ("compute", "storage", "inband", "oob")


def _doc(groups: list[dict[str, Any]], su_size: int, max_sus: int | None) -> dict[str, Any]:
    compute: dict[str, Any] = {
        "switch": "qm8790",
        "su_size": su_size,
        "rail_optimized": True,
        "oversubscription": 1,
        "subnet_manager": "ufm",
    }
    if max_sus is not None:
        compute["max_sus"] = max_sus
    return {
        "name": "grow",
        "site": {
            "rack": {"power_kw": 28, "units": 42, "cooling": "air"},
            "management_cidr": "10.20.0.0/16",
            "bmc_cidr": "10.21.0.0/16",
        },
        "node_groups": groups,
        "fabrics": {
            "compute": compute,
            "storage": {"switch": "qm8790", "oversubscription": 1.33, "storage_ports": 8},
            "management": {"inband_switch": "sn4600c", "oob_switch": "sn2201"},
        },
    }


def _diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[PlanDiff, Plan, Plan]:
    catalog = load_catalog()
    specs = [load_spec_text(yaml.safe_dump(d, sort_keys=False)).spec for d in (old, new)]
    plans = [expand(s, catalog) for s in specs]
    return plan_diff(specs[0], plans[0], specs[1], plans[1], catalog), plans[0], plans[1]


def _addresses(plan: Plan) -> dict[str, tuple[str | None, ...]]:
    """Every address of every device: servers, switches of every fabric, PDUs, hosts."""
    out: dict[str, tuple[str | None, ...]] = {s.name: (s.mgmt_ip, s.bmc_ip) for s in plan.servers}
    out.update((w.name, (w.bmc_ip,)) for w in plan.switches)
    out.update((p.name, (p.bmc_ip,)) for p in plan.pdus)
    out.update((h.name, (h.bmc_ip,)) for h in plan.hosts)
    return out


def _places(plan: Plan) -> dict[str, tuple[str | None, int | None]]:
    out = {s.name: (s.rack, s.rack_unit) for s in plan.servers}
    out.update((w.name, (w.rack, w.rack_unit)) for w in plan.switches)
    out.update((h.name, (h.rack, h.rack_unit)) for h in plan.hosts)
    return out


def _assert_only_adds(d: PlanDiff, old: Plan, new: Plan) -> None:
    for fabric in FABRICS:
        assert [c.id for c in d.cables_removed if c.fabric == fabric] == [], fabric
    assert d.servers_removed == () and d.switches_removed == ()
    before, after = _addresses(old), _addresses(new)
    assert {n: after.get(n) for n in before} == before
    places = _places(new)
    assert {n: places.get(n) for n in _places(old)} == _places(old)
    assert d.addresses == () and d.moves == () and d.notes == ()


def _issue_groups(training: int, max_count: int | None) -> list[dict[str, Any]]:
    train: dict[str, Any] = {
        "name": "training",
        "node": "dgx-a100-640gb",
        "count": training,
        "hostname": "trn{index:04d}",
    }
    if max_count is not None:
        train["max_count"] = max_count
    infer = {
        "name": "inference",
        "node": "dgx-a100-640gb",
        "count": 150,
        "hostname": "inf{index:04d}",
    }
    return [train, infer]


def test_issue_growth_with_headroom_removes_no_cable_and_changes_no_address() -> None:
    """1,100 + 150 DGX A100, training grown by one SU (20 servers) within max_count 1,240
    (62 SUs) and max_sus 70: 8 leaves and their cables come, nothing else changes
    (about 4 s here)."""
    d, old, new = _diff(
        _doc(_issue_groups(1100, 1240), 20, 70), _doc(_issue_groups(1120, 1240), 20, 70)
    )
    assert old.gpus == 10_000
    _assert_only_adds(d, old, new)
    assert len(d.servers_added) == 20
    assert [s.unit for s in d.rolling_order] == ["training-su56"]
    assert d.affected_groups == ()


def test_issue_growth_without_headroom_drains_every_affected_su_of_both_groups() -> None:
    """The same growth without max_sus or max_count: the inference SUs sit one SU further
    along the tree, so every inference leaf's uplinks move; each of its SUs is drained in
    plan order after the new training SU, every step with its cable counts and time."""
    d, old, new = _diff(
        _doc(_issue_groups(1100, None), 20, None), _doc(_issue_groups(1120, None), 20, None)
    )
    moved_leaves = {c.a for c in d.cables_removed if c.tier == "leaf_spine"}
    on_moved_leaf = {c.a for c in old.cables if c.tier == "node_leaf" and c.b in moved_leaves}
    expected = [su.name for su in new.sus if set(su.servers) & on_moved_leaf]
    assert {su[: su.index("-su")] for su in expected} == {"inference"}
    assert len(expected) == 8  # 150 servers in SUs of 20
    units = [s.unit for s in d.rolling_order if s.kind == "su"]
    assert units == ["training-su56", *expected]
    assert d.affected_groups == ("inference",)
    for step in d.rolling_order:
        if step.unit in expected:
            assert step.actions[0] == f"drain {step.unit}" and step.cables_removed > 0
        assert step.minutes == 5 * (step.cables_added + step.cables_removed)  # site catalog
    assert sum(s.cables_removed for s in d.rolling_order) == len(d.cables_removed)
    assert sum(s.cables_added for s in d.rolling_order) == len(d.cables_added)
    assert "node_groups[].max_count" in d.notes[0]


def _group(name: str, count: int, room: int) -> dict[str, Any]:
    return {
        "name": name,
        "node": "dgx-a100-640gb",
        "count": count,
        "max_count": count + room,
        "hostname": f"{name}{{index:03d}}",
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(1, 40), min_size=2, max_size=3),
    rooms=st.lists(st.integers(0, 24), min_size=3, max_size=3),
    spare=st.integers(0, 6),
    which=st.integers(0, 3),
    grow=st.integers(1, 24),
)
def test_growing_any_group_within_its_maximum_only_adds(
    counts: list[int], rooms: list[int], spare: int, which: int, grow: int
) -> None:
    """Two or three groups, each with room of its own, max_sus with spare SUs: growing any
    group within its max_count, or appending one within max_sus, only adds, in every fabric."""
    su = 4
    names = ["alpha", "beta", "gamma"]
    groups = [_group(names[i], c, rooms[i]) for i, c in enumerate(counts)]
    kept = sum(-(-g["max_count"] // su) for g in groups)
    max_sus = kept + spare + 1
    old = _doc(groups, su, max_sus)
    grown = [dict(g) for g in groups]
    if which < len(groups):
        target = grown[which]
        target["count"] = min(target["count"] + grow, target["max_count"])
        if target["count"] == groups[which]["count"]:  # no room: grow the last into spare SUs
            last = grown[-1]
            others = sum(-(-g["max_count"] // su) for g in grown[:-1])
            last["count"] += min(grow, (max_sus - others) * su - last["count"])
            last["max_count"] = max(last["max_count"], last["count"])
    else:
        grown.append(_group("delta", min(grow, su * (spare + 1)), 0))
    d, before, after = _diff(old, _doc(grown, su, max_sus))
    assert d.servers_added  # something grew
    _assert_only_adds(d, before, after)


@pytest.mark.parametrize("n", [9, 99])
def test_numbered_names_sort_as_numbers(n: int) -> None:
    """Shared addresses are numbered in this order: a spine numbered past 99 comes last."""
    names = [f"st-spine-{k:02d}" for k in range(1, n + 3)]
    shuffled = sorted(names)  # as strings: st-spine-100 between 10 and 11
    assert sorted(shuffled, key=_growth_order([])) == names
    assert sorted(shuffled, key=natural_key) == names


def test_spine_step_name_is_not_an_su() -> None:
    assert "-su" not in SPINE_STEP
