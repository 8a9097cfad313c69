"""Names railplan generates, refused as spec names (trial5, issue 36); YAML 1.1 type hints.

1. A node group named like an inventory group railplan makes (`control_hosts`, an SU group
   `su_train_su01`, a rack group `rack_train_su01_c1`) merged into it in hosts.yml: lint RP005
   (one predicate, `reserved_group`, which the renderer also holds its own groups to).
2. A MIG layout named like a mig-parted config railplan makes (`all-disabled`,
   `group-<group>[-change<N>]`) shared its name with another body: a located spec error
   (one predicate, `reserved_layout`, beside the names `migconfig` uses).
6. `cuda: 12.4`, `name: no`, `hostname: {index:03d}` unquoted: the type error says to quote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.catalog import Catalog
from infra.errors import InputError
from infra.lint.finding import Severity
from infra.render.ansible import _add_group, ansible_files
from infra.render.writer import RenderError
from infra.spec import SpecValidationError, load_spec, load_spec_text
from infra.spec.base import reserved_group
from infra.spec.mig import reserved_layout
from infra.topology import expand
from infra.topology.migconfig import mig_parted_configs

from .conftest import ROOT, lint_text

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
LAB = (
    "name: lab\nfabrics: {compute: {switch: qm8700, su_size: 4}}\nnode_groups:\n"
    "  - {name: train, node: dgx-a100-640gb, count: 2, hostname: 'train{index:02d}'}\n"
)
SLURM = "name: pod\nscheduler: {kind: slurm}\nsoftware: {dcgm: 4.2.3}\n" + LAB.split("\n", 1)[1]


def _other(name: str) -> str:
    return f"  - {{name: {name}, node: dgx-a100-640gb, count: 2, hostname: 'zz{{index:03d}}'}}\n"


# --- 1. node groups named like railplan's inventory groups ---------------------------------------


@pytest.mark.parametrize(
    ("base", "name"),
    [
        (SLURM, "control_hosts"),  # G01: the Slurm control-plane roll group
        (LAB, "su_train_su01"),  # G02b: train's SU group, the RUNBOOK's rolling batch
        (LAB, "rack_train_su01_c1"),  # G03b: train's first rack group
        (LAB, "su_later"),  # no group `later` yet: adding one would make the clash
    ],
)
def test_a_node_group_named_like_a_generated_group_is_refused(base: str, name: str) -> None:
    errors = [f for f in lint_text(base + _other(name)) if f.severity is Severity.ERROR]
    line = base.count("\n") + 1
    assert [(f.rule, f.path, f.line) for f in errors] == [("RP005", "node_groups[1].name", line)]
    assert "su_train_su01" in errors[0].hint and "control_hosts" in errors[0].hint


@pytest.mark.parametrize("name", ["sus", "racks", "train_su01", "super_train", "control"])
def test_names_near_the_generated_groups_stay_allowed(name: str) -> None:
    assert not reserved_group(name)
    assert [f for f in lint_text(LAB + _other(name)) if f.rule == "RP005"] == []


def test_render_refuses_a_generated_group_name_without_lint(catalog: Catalog) -> None:
    spec = load_spec_text(LAB + _other("su_train_su01")).spec
    with pytest.raises(RenderError) as caught:
        ansible_files(spec, catalog, expand(spec, catalog))
    assert caught.value.path == "node_groups[1].name"


def test_the_renderer_never_defines_a_group_twice() -> None:
    groups: dict[str, dict[str, object]] = {}
    _add_group(groups, "train", {}, node_group=True)
    _add_group(groups, "su_train_su01", {})
    for name, node_group in [("su_train_su01", False), ("train", True), ("extra", False)]:
        with pytest.raises(RenderError):
            _add_group(groups, name, {}, node_group=node_group)


def _group_names(tree: dict[str, object], into: set[str]) -> set[str]:
    for name, body in tree.items():
        into.add(name)
        children = body.get("children", {}) if isinstance(body, dict) else {}
        _group_names(children, into)
    return into


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_generated_inventory_group_is_reserved(example: Path, catalog: Catalog) -> None:
    """The predicate lint uses covers every group the renderer makes besides node groups."""
    spec = load_spec(example).spec
    files = ansible_files(spec, catalog, expand(spec, catalog))
    inventory = json.loads(files[f"inventories/{spec.name}/hosts.yml"])
    generated = _group_names(inventory, set()) - {g.name for g in spec.node_groups}
    assert generated and all(reserved_group(name) for name in generated), sorted(generated)
    assert not any(reserved_group(g.name) for g in spec.node_groups)


# --- 2. MIG layouts named like railplan's mig-parted configs --------------------------------------

MIG = (
    "name: lab\nnode_groups:\n"
    "  - {name: train, node: dgx-a100-640gb, count: 2, mig: LAYOUT}\n"
    "  - name: infer\n    node: dgx-a100-640gb\n    count: 2\n"
    "    mig: [{gpus: [0, 1], layout: small}, {gpus: [2, 3, 4, 5, 6, 7], layout: disabled}]\n"
    "mig_layouts:\n  small: {profiles: {1g.10gb: 7}}\n  LAYOUT: {profiles: {1g.10gb: 7}}\n"
)


@pytest.mark.parametrize("name", ["all-disabled", "group-infer", "group-train-change1", "group-x"])
def test_a_layout_named_like_a_generated_config_is_refused(name: str) -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(MIG.replace("LAYOUT", name), "spec.yaml")
    (error,) = caught.value.errors
    line = error.position.line if error.position else None
    assert (error.path, line) == (f"mig_layouts.{name}", 10)
    assert "all-disabled" in (error.hint or "") and "group-<node group>" in (error.hint or "")


@pytest.mark.parametrize("name", ["disabled-all", "all-disabled2", "groups-a", "my-group-infer"])
def test_layout_names_near_the_generated_configs_stay_allowed(name: str) -> None:
    assert not reserved_layout(name)
    assert name in load_spec_text(MIG.replace("LAYOUT", name)).spec.mig_layouts


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_generated_mig_config_is_reserved(example: Path) -> None:
    spec = load_spec(example).spec
    configs = mig_parted_configs(spec, schedules=True)["mig-configs"]
    generated = set(configs) - set(spec.mig_layouts)
    assert all(reserved_layout(name) for name in generated), sorted(generated)


# --- 6. YAML 1.1 types where the spec wants a string ----------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "path", "says"),
    [
        ("hostname: 'train{index:02d}'", "hostname: {index:02d}", "node_groups[0].hostname", "{"),
        ("name: lab", "name: 12.4", "name", 'name: "12.4"'),
    ],
)
def test_an_unquoted_yaml_type_gets_a_hint_to_quote(
    before: str, after: str, path: str, says: str
) -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(LAB.replace(before, after), "spec.yaml")
    (error,) = caught.value.errors
    assert error.path == path and "must be a string" in error.message
    assert "quote the value" in (error.hint or "") and says in (error.hint or "")


def test_an_unquoted_yaml_1_1_boolean_is_refused_with_the_hint_to_quote() -> None:
    # session 50 (trial 7): `no` is refused when it is read, as YAML 1.2 reads it as text
    with pytest.raises(InputError) as caught:
        load_spec_text(LAB.replace("name: train", "name: no"), "spec.yaml")
    assert "a boolean in YAML 1.1" in caught.value.message
    assert "quote the value" in (caught.value.hint or "") and 'name: "no"' in (
        caught.value.hint or ""
    )


def test_the_cuda_version_unquoted_gets_the_hint() -> None:
    text = LAB + "software: {driver: 550.90.07, cuda: 12.4}\n"
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "spec.yaml")
    (error,) = caught.value.errors
    assert error.path == "software.cuda" and 'cuda: "12.4"' in (error.hint or "")
    assert load_spec_text(text.replace("12.4", "'12.4'")).spec.software.cuda == "12.4"


def test_a_wrong_type_that_is_not_a_yaml_surprise_keeps_its_message() -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(LAB.replace("count: 2", "count: two"), "spec.yaml")
    assert "quote" not in (caught.value.errors[0].hint or "")
