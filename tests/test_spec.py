"""Spec loading: positions, error messages, units, defaults and limits of the YAML reader."""

from __future__ import annotations

import pytest

from infra.errors import InputError
from infra.spec import SpecValidationError, load_spec_text, load_yaml_text
from infra.spec.units import parse_bytes, parse_count
from infra.spec.yamlpos import MAX_BYTES, MAX_NODES, join_path, parent_path

MINIMAL = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"


def errors_of(text: str) -> list[str]:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(text, "s.yaml")
    return [e.one_line() for e in caught.value.errors]


def test_minimal_spec_gets_documented_defaults() -> None:
    spec = load_spec_text(MINIMAL).spec
    assert spec.site.rack.cooling == "air"
    assert spec.software.fabric_manager == "auto"
    assert spec.scheduler.kind == "kubernetes"
    assert spec.node_groups[0].hostname_pattern == "gpu{index:03d}"
    assert spec.fabrics.compute is None and spec.budgets == []


def test_every_schema_error_is_reported_not_just_the_first() -> None:
    text = "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 0, colour: red}\n"
    lines = errors_of(text)
    assert len(lines) == 2
    assert any("count" in line and "must be at least 1" in line for line in lines)
    assert any("unknown key 'colour'" in line for line in lines)


def test_positions_point_at_the_key() -> None:
    text = MINIMAL + "fabrics:\n  compute:\n    switch: qm9700\n    su_size: big\n"
    (line,) = errors_of(text)
    assert line.startswith("s.yaml:7:5: error[RP000]:")
    assert "[fabrics.compute.su_size]" in line


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1GiB", 2**30),
        ("2.8TB", 2_800_000_000_000),
        (4096, 4096),
        ("1.5 MiB", 1_572_864),
        ("1e9", 10**9),
        ("512kb", 512_000),
    ],
)
def test_parse_bytes(value: object, expected: int) -> None:
    assert parse_bytes(value) == expected


@pytest.mark.parametrize("value", ["1 GB/s", "lots", -1, 0, True, "1.5B", float("nan"), [1]])
def test_parse_bytes_rejects(value: object) -> None:
    with pytest.raises(ValueError, match=r"size|whole|positive|boolean"):
        parse_bytes(value)


def test_parse_count_reads_yaml11_exponent_strings() -> None:
    assert parse_count("175e9") == 175 * 10**9
    assert parse_count(70_000_000_000) == 70 * 10**9
    with pytest.raises(ValueError):
        parse_count("1.5")


@pytest.mark.parametrize(
    ("pattern", "ok"),
    [
        ("gpu{index:03d}", True),
        ("dgx-h100-{index}", True),
        ("{index:04d}gpu", True),
        ("GPU{index}", False),
        ("gpu_{index}", False),
        ("gpu", False),
        ("{index}{index}", False),
        ("gpu{name}", False),
        ("-gpu{index}", False),
        ("gpu{index}$(reboot)", False),
    ],
)
def test_hostname_patterns(pattern: str, ok: bool) -> None:
    text = f"name: lab\nnode_groups:\n  - {{name: gpu, node: dgx-h100, count: 4, hostname: '{pattern}'}}\n"
    if ok:
        assert load_spec_text(text).spec.node_groups[0].hostname == pattern
    else:
        assert any("hostname" in line for line in errors_of(text))


def test_yaml_merge_keys_and_anchors_work() -> None:
    text = (
        "name: lab\nnode_groups:\n  - &g {name: a, node: dgx-h100, count: 4}\n"
        "  - <<: *g\n    name: b\n"
    )
    groups = load_spec_text(text).spec.node_groups
    assert [(g.name, g.count) for g in groups] == [("a", 4), ("b", 4)]


def test_norway_keys_stay_strings() -> None:
    data, _ = load_yaml_text("on: 1\nno: 2\n", "x.yaml")
    assert data == {"on": 1, "no": 2}


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
        f"*a{i - 1}, *a{i - 1}, *a{i - 1}]"
        for i in range(1, 9)
    ]
    with pytest.raises(InputError, match=f"more than {MAX_NODES:,} nodes"):
        load_yaml_text("\n".join(lines), "bomb.yaml")


def test_oversized_input_is_refused_before_parsing() -> None:
    with pytest.raises(InputError, match="refuses inputs above"):
        load_yaml_text(b"#" * (MAX_BYTES + 1), "big.yaml")


def test_paths_round_trip() -> None:
    path = join_path(join_path(join_path("mig-configs", "all-1g.5gb"), 0), "mig-devices")
    assert path == 'mig-configs["all-1g.5gb"][0].mig-devices'
    assert parent_path(path) == 'mig-configs["all-1g.5gb"][0]'
    assert parent_path('mig-configs["all-1g.5gb"]') == "mig-configs"
    assert parent_path("name") == ""
    assert parent_path("") is None


@pytest.mark.parametrize("value", ["true", "5", "10.0.0.0", "'10.0.0.0/33'"])
def test_cidrs_must_be_written_as_cidrs(value: str) -> None:
    (line,) = errors_of(MINIMAL + f"site: {{management_cidr: {value}}}\n")
    assert "site.management_cidr" in line


def test_design_md_sketch_is_a_valid_spec_and_lints_without_errors() -> None:
    from pathlib import Path

    from infra.catalog import load_catalog
    from infra.lint import lint_loaded
    from infra.spec import load_spec

    loaded = load_spec(Path(__file__).parent / "data" / "design-sketch.yaml")
    spec = loaded.spec
    assert [g.name for g in spec.node_groups] == ["train", "infer"]
    assert [b.kind for b in spec.budgets] == ["all_reduce", "scaling_efficiency", "checkpoint"]
    assert spec.budgets[2].checkpoint is not None
    assert spec.budgets[2].checkpoint.bytes == 2_800_000_000_000
    schedule = spec.node_groups[1].mig_schedule
    assert schedule is not None and [c.mig for c in schedule.changes] == ["infer-day", "disabled"]
    assert [t.name for t in spec.scheduler.tenants] == ["research", "serving"]
    severities = {(f.rule, f.severity.value) for f in lint_loaded(loaded, load_catalog())}
    # Known: its 7 full SUs of 20 leave no leaf port for the UFM appliance (a real finding).
    assert {r for r, sev in severities if sev != "info"} == {"RP057"}
    assert ("RP057", "warning") in severities
    # Its GPT-3 budget states no batch: the preset's 1,536, which no layout of 1,120 GPUs
    # divides, becomes the nearest one that does, and the budget says so
    from infra.budget.evaluate import evaluate_budgets
    from infra.topology import expand

    catalog = load_catalog()
    scaling = evaluate_budgets(spec, catalog, expand(spec, catalog))[1]
    assert scaling.error == "", scaling.error
    assert "global batch 1,540: the nearest to 1,536 that 1,120 GPUs divide" in scaling.detail


def test_cluster_size_is_capped_per_spec() -> None:
    groups = "".join(
        f"  - {{name: g{i}, node: dgx-h100, count: 16384, hostname: 'g{i}-{{index:05d}}'}}\n"
        for i in range(3)
    )
    (line,) = errors_of("name: huge\nnode_groups:\n" + groups)
    assert "49,152 servers exceed" in line and line.startswith("s.yaml:2:1:")


@pytest.mark.parametrize(
    ("name", "ok"), [("lab", True), ("a-1", True), ("lab-", False), ("1lab", False)]
)
def test_cluster_names_are_dns_labels(name: str, ok: bool) -> None:
    # The name is a Kubernetes label value (railplan.dev/cluster) and an inventory path.
    text = f"name: {name}\nnode_groups: [{{name: gpu, node: dgx-h100, count: 1}}]\n"
    if ok:
        assert load_spec_text(text).spec.name == name
    else:
        (line,) = errors_of(text)
        assert "must be a lowercase DNS label" in line and "[name]" in line
