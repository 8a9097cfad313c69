"""Property-based fuzzing of the loaders: mutated specs never crash railplan.

Whatever bytes arrive, `load_spec_text` + lint either succeed or raise a `RailplanError` with
a one-line message; through the CLI that is exit code 0, 1 or 2 and never a traceback.
Mutations start from the shipped examples: structural (replace, delete or add a value at a
random path, including wrong types) and byte-level (insert, delete, flip bytes).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra.catalog import load_catalog
from infra.cli import main
from infra.errors import RailplanError
from infra.lint import lint_loaded
from infra.spec import load_spec_text

from .conftest import ROOT

EXAMPLE_TEXTS = [p.read_text() for p in sorted((ROOT / "examples").glob("*.yaml"))]
EXAMPLE_DATA = [yaml.safe_load(t) for t in EXAMPLE_TEXTS]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "1GiB",
            "175e9",
            "dgx-h100",
            "auto",
            "all",
            "disabled",
            "1g.10gb",
            "10.0.0.0/8",
            "{index}",
            "-1",
            "",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _containers(node: Any) -> list[Any]:
    found = [node] if isinstance(node, dict | list) and node else []
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        found += _containers(child)
    return found


@st.composite
def mutated_spec(draw: st.DrawFn) -> str:
    data = copy.deepcopy(draw(st.sampled_from(EXAMPLE_DATA)))
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(_containers(data)))
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target)) | st.text(max_size=12))
            if draw(st.booleans()) and key in target:
                del target[key]
            else:
                target[key] = draw(values)
        else:
            target[draw(st.integers(0, len(target) - 1))] = draw(values)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@st.composite
def mangled_bytes(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(EXAMPLE_TEXTS)).encode())
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["insert", "delete", "flip"]))
        if op == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif at < len(raw):
            if op == "delete":
                del raw[at]
            else:
                raw[at] ^= draw(st.integers(1, 255))
    return bytes(raw)


def _load_and_lint(text: str | bytes) -> None:
    try:
        loaded = load_spec_text(text, "fuzz.yaml")
    except RailplanError as exc:
        assert "\n" not in exc.one_line()
        return
    lint_loaded(loaded, load_catalog())


# Each mutation test, about 20 ms of CPU an example: `make test` lints the first 100 fixed
# examples, `make test-slow` (and CI) 300, and `make fuzz` both with fresh random examples.
_FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _structural_mutations_never_crash(text: str) -> None:
    _load_and_lint(text)


def _byte_mutations_never_crash(raw: bytes) -> None:
    _load_and_lint(raw)


test_structural_mutations_never_crash = _FAST(
    given(mutated_spec())(_structural_mutations_never_crash)
)
test_structural_mutations_never_crash_300_examples = pytest.mark.slow(
    FUZZ(given(mutated_spec())(_structural_mutations_never_crash))
)
test_byte_mutations_never_crash = _FAST(given(mangled_bytes())(_byte_mutations_never_crash))
test_byte_mutations_never_crash_300_examples = pytest.mark.slow(
    FUZZ(given(mangled_bytes())(_byte_mutations_never_crash))
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.one_of(mutated_spec().map(str.encode), mangled_bytes()))
def test_cli_exit_codes_and_no_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: bytes
) -> None:
    spec = tmp_path / "fuzz.yaml"
    spec.write_bytes(raw)
    with pytest.raises(SystemExit) as exited:
        main(["lint", str(spec)])
    out, err = capsys.readouterr()
    assert exited.value.code in (0, 1, 2), err
    assert "Traceback" not in out + err
    if exited.value.code == 2:
        assert err and all(line.startswith(str(spec)) for line in err.splitlines()), err


_BUDGET_FIELDS = {
    "all_reduce": ["bytes", "gpus", "max_ms"],
    "scaling_efficiency": [
        "gpus",
        "min",
        "model_params",
        "precision",
        "tokens_per_gpu",
        "mfu",
        "gradient_bytes",
        "overlap",
        # the training model's keys (railplan train behind the budget)
        "model",
        "layers",
        "hidden",
        "heads",
        "seq",
        "vocab",
        "global_batch",
        "tp",
        "pp",
        "micro_batch",
        "recompute",
        "zero",
    ],
    "checkpoint": ["bytes", "max_s"],
    "rack_power": ["max_kw"],
    "cluster_power": ["max_kw"],
    "model_fits": ["model_params", "precision", "gpus", "zero_stage"],
    "cost_per_pflop_day": [
        "max_usd",
        "price_per_kwh",
        "pue",
        "precision",
        "mfu",
        "price_per_node_usd",
        "amortize_years",
    ],
    "sharp_gain": ["bytes", "gpus", "min"],
}
budget_values = st.one_of(
    st.integers(-5, 10**13),
    st.floats(-1e3, 1e20, allow_nan=False),
    st.sampled_from(["fp8", "bf16", "fp64", "int8", "1GiB", "175e9", "8"]),
    st.sampled_from(["gpt3-175b", "llama2-70b", "gpt-1t", "selective", "full", "none"]),
    st.integers(1, 128),
    values,
)


@st.composite
def spec_with_budgets(draw: st.DrawFn) -> str:
    data = copy.deepcopy(EXAMPLE_DATA[0])
    data["budgets"] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(sorted(_BUDGET_FIELDS)))
        fields = {f: draw(budget_values) for f in _BUDGET_FIELDS[kind] if draw(st.booleans())}
        data["budgets"].append({kind: fields})
    return yaml.safe_dump(data, sort_keys=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_with_budgets())
def test_random_budgets_never_crash(text: str) -> None:
    # Budgets reach every model (collectives, memory, storage, power): any value the schema
    # lets through must give a verdict or a BudgetError, never an exception.
    _load_and_lint(text)


RACK_CLASSES = "name: t\nsite:\n  rack_classes:\n    liquid: {power_kw: 80, cooling: liquid}\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example("liqiud")  # lint, render and report once raised KeyError on it
@given(st.sampled_from(["liquid", "default", "liqiud", "Liquid"]) | st.text(max_size=12))
def test_a_rack_class_reference_resolves_or_is_refused_at_load(name: str) -> None:
    # Every stage looks a group's rack class up; only names the spec defines may reach them.
    group = {"name": "gpu", "node": "dgx-h100", "count": 2, "rack_class": name}
    text = RACK_CLASSES + yaml.safe_dump({"node_groups": [group]})
    try:
        loaded = load_spec_text(text, "fuzz.yaml")
    except RailplanError as exc:
        assert "\n" not in exc.one_line() and exc.path == "node_groups[0].rack_class"
        assert name not in ("liquid", "default")
        return
    assert name in ("liquid", "default")
    lint_loaded(loaded, load_catalog())
