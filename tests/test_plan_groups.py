"""`Plan.groups`: one owner for a node group's SUs, rolling batch and MIG, read by every stage.

Properties over random small specs with `mig` and `mig_schedule` (hypothesis): the plan's
`mig_split` is true exactly when some state splits a GPU (an oracle written here from the
spec's own words, not from infra), each state's layout per GPU is what the rendered
mig-parted config of that state's name applies, and the servers, SUs and rolling batch agree
with the rest of the plan. Then the homonym the plan replaced: a group whose GPUs are whole
now but MIG-split by schedule gets no NCCL CollNet. GPUs are not needed: everything here is
the plan and rendered text.
"""

from __future__ import annotations

import itertools
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.catalog import Catalog, load_catalog
from infra.k8s.mig_schedule import mig_schedule
from infra.lint.context import LintContext
from infra.render import nccl_env
from infra.report.mig import mig_groups
from infra.spec import Spec, load_spec_text
from infra.spec.cron import daily_minute
from infra.topology import Plan, expand
from infra.topology.migconfig import mig_parted_configs

from .conftest import ROOT

GPUS = 8  # dgx-a100-640gb
LAYOUTS = ("disabled", "infer-small", "infer-large")
CATALOG = load_catalog()


def _lab() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "a100-lab-mig.yaml").read_text())
    return data


def _plan(data: dict[str, Any], catalog: Catalog = CATALOG) -> tuple[Spec, Plan]:
    spec = load_spec_text(yaml.safe_dump(data)).spec
    return spec, expand(spec, catalog)


@st.composite
def mig_values(draw: st.DrawFn) -> Any:
    """A `mig` value: a layout name, or per-GPU assignments over distinct GPUs of the node."""
    if draw(st.booleans()):
        return draw(st.sampled_from(LAYOUTS))
    order = draw(st.permutations(range(GPUS)))
    used = draw(st.integers(1, GPUS))
    cuts = sorted(draw(st.sets(st.integers(1, used - 1), max_size=2))) if used > 1 else []
    bounds = [0, *cuts, used]
    return [
        {"gpus": sorted(order[a:b]), "layout": draw(st.sampled_from(LAYOUTS))}
        for a, b in itertools.pairwise(bounds)
    ]


@st.composite
def groups(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for k in range(draw(st.integers(1, 2))):
        group: dict[str, Any] = {
            "name": f"g{k}",
            "node": "dgx-a100-640gb",
            "count": draw(st.integers(1, 6)),
            "mig": draw(mig_values()),
        }
        if draw(st.booleans()):
            hours = draw(st.lists(st.integers(0, 23), min_size=1, max_size=3, unique=True))
            group["mig_schedule"] = {
                "timezone": draw(st.sampled_from(["Etc/UTC", "Europe/Berlin"])),
                "drain_timeout": draw(st.sampled_from(["5m", "30m"])),
                "changes": [{"at": f"0 {h} * * *", "mig": draw(mig_values())} for h in hours],
            }
        out.append(group)
    return out


def _splits(value: Any) -> bool:
    """The oracle: a value splits a GPU when some GPU it names gets a layout other than disabled."""
    if isinstance(value, str):
        return value != "disabled"
    return any(a["layout"] != "disabled" and a["gpus"] for a in value)


def _applied(entries: list[dict[str, Any]]) -> list[dict[str, int] | None]:
    """What a mig-parted config does to each GPU: its MIG devices, or None (MIG disabled)."""
    out: list[dict[str, int] | None] = [None] * GPUS
    for entry in entries:
        devices = range(GPUS) if entry["devices"] == "all" else entry["devices"]
        for i in devices:
            out[i] = entry["mig-devices"] if entry["mig-enabled"] else None
    return out


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(groups())
def test_mig_split_is_any_state_splitting_a_gpu(node_groups: list[dict[str, Any]]) -> None:
    data = {**_lab(), "node_groups": node_groups}
    _, plan = _plan(data)
    assert list(plan.groups) == [g["name"] for g in node_groups]
    for group in node_groups:
        values = [
            group["mig"],
            *(c["mig"] for c in group.get("mig_schedule", {}).get("changes", [])),
        ]
        planned = plan.groups[group["name"]]
        assert planned.mig_split == any(_splits(v) for v in values)
        assert [s.splits for s in planned.mig.states] == [_splits(v) for v in values]


@SETTINGS
@given(groups())
def test_layout_per_gpu_is_what_the_named_mig_parted_config_applies(
    node_groups: list[dict[str, Any]],
) -> None:
    spec, plan = _plan({**_lab(), "node_groups": node_groups})
    configs = mig_parted_configs(spec, schedules=True)["mig-configs"]
    for planned in plan.groups.values():
        for state in planned.mig.states:
            expected = [
                None
                if layout is None
                else {p: n for p, n in sorted(spec.mig_layouts[layout].profiles.items()) if n}
                for layout in state.per_gpu
            ]
            assert _applied(configs[state.config]) == expected, state.path
        # every server runs its group's current state
        assert {s.mig for s in plan.servers_in(planned.name)} == {planned.mig.now.per_gpu}


@SETTINGS
@given(groups(), st.integers(1, 4))
def test_sus_and_rolling_batch_agree_with_the_plan(
    node_groups: list[dict[str, Any]], su_size: int
) -> None:
    data = _lab()
    data["node_groups"] = node_groups
    data["fabrics"]["compute"]["su_size"] = su_size
    _, plan = _plan(data)
    for planned in plan.groups.values():
        assert planned.sus == tuple(su.name for su in plan.sus if su.group == planned.name)
        assert planned.rolling_batch == min(su_size, planned.servers)
        assert planned.servers == len(plan.servers_in(planned.name))


def test_the_cronjobs_are_the_plans_changes() -> None:
    data = _lab()
    data["node_groups"][1]["mig_schedule"] = {
        "drain_timeout": "10m",
        "changes": [
            {"at": "0 20 * * *", "mig": "disabled"},
            {"at": "0 8 * * *", "mig": [{"gpus": "all", "layout": "infer-large"}]},
        ],
    }
    spec, plan = _plan(data)
    planned = plan.groups["infer"]
    jobs = [o for o in mig_schedule(spec, plan) if o["kind"] == "CronJob"]
    assert [j["metadata"]["annotations"]["railplan.dev/mig-config"] for j in jobs] == [
        c.config for c in planned.mig.changes
    ]
    assert [c.config for c in planned.mig.changes] == ["all-disabled", "group-infer-change2"]
    assert [c.daily_minute for c in planned.mig.changes] == [1200, 480]
    deadline = jobs[0]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
    assert deadline == planned.job_deadline_s == len(planned.sus) * (600 + 900 + 600)


def test_a_group_split_only_by_schedule_gets_no_collnet() -> None:
    """CollNet follows `mig_split` (any time), not the servers' layout now (the old homonym)."""
    data = _lab()
    data["fabrics"]["compute"].update(switch="qm8790", sharp=True, subnet_manager="ufm")
    data["node_groups"].append(
        {
            "name": "night",
            "node": "dgx-a100-640gb",
            "count": 2,
            "hostname": "night{index:02d}",
            "mig_schedule": {"changes": [{"at": "0 8 * * *", "mig": "infer-small"}]},
        }
    )
    spec, plan = _plan(data)
    assert not any(s.mig[0] for s in plan.servers_in("night"))  # whole GPUs until 08:00
    assert plan.groups["night"].mig_split
    conf = nccl_env.nccl_conf(plan, spec, CATALOG)
    assert conf["train"]["NCCL_COLLNET_ENABLE"] == "1"
    assert "NCCL_COLLNET_ENABLE" not in conf["infer"]
    assert "NCCL_COLLNET_ENABLE" not in conf["night"]


def test_daily_minute_reads_cron_as_kubernetes_does() -> None:
    """The report's day strip comes from the cron parser lint uses, not a regex of its own."""
    assert daily_minute("0 20 * * *") == 1200
    assert daily_minute("  30  7 * * * ") == 450
    assert daily_minute("@daily") == 0
    assert daily_minute("0 8 */1 * *") == 480
    assert daily_minute("0 8 * * 1-5") is None  # not every day
    assert daily_minute("0 8,20 * * *") is None  # twice a day
    assert daily_minute("0 8 * * sun-sat") == 480


def test_the_report_draws_a_day_strip_from_the_plans_times() -> None:
    data = _lab()
    data["node_groups"][1]["mig_schedule"] = {
        "changes": [{"at": "@daily", "mig": "disabled"}, {"at": "0 8 * * *", "mig": "infer-large"}]
    }
    spec, plan = _plan(data)
    (infer,) = mig_groups(spec, CATALOG, plan)
    assert infer.timeline is not None and "00:00" in infer.timeline
    data["node_groups"][1]["mig_schedule"]["changes"][1]["at"] = "0 8 * * 1-5"
    spec, plan = _plan(data)
    (infer,) = mig_groups(spec, CATALOG, plan)
    assert infer.timeline is None  # weekdays only: no single day to draw


def test_lint_reads_the_same_states_with_or_without_a_plan() -> None:
    data = _lab()
    data["node_groups"][1]["mig_schedule"] = {"changes": [{"at": "0 8 * * *", "mig": "disabled"}]}
    loaded = load_spec_text(yaml.safe_dump(data))
    before = LintContext(loaded, CATALOG).migs  # rules that run before planning
    ctx = LintContext(loaded, CATALOG)
    assert ctx.plan is not None
    assert ctx.migs == before == tuple(g.mig for g in ctx.plan.groups.values())
