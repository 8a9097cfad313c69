"""The exported JSON Schema: valid, documented, and in agreement with the Pydantic loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from infra.spec.schema import spec_json_schema, spec_json_schema_text

from .conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate_against_the_schema(validator: Any, path: Path) -> None:
    validator.validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x", "node_groups": [{"name": "g", "node": "dgx-h100", "cout": 4}]},
        {"name": "X!", "node_groups": [{"name": "g", "node": "dgx-h100", "count": 4}]},
        {"name": "x", "node_groups": []},
        {
            "name": "x",
            "node_groups": [{"name": "g", "node": "dgx-h100", "count": 4}],
            "budgets": [{}],
        },
    ],
)
def test_schema_rejects_what_the_loader_rejects(validator: Any, bad: dict[str, Any]) -> None:
    assert list(validator.iter_errors(bad))


def _properties(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        for key, prop in node.get("properties", {}).items():
            found.append((f"{where}.{key}", prop))
        for key, value in node.items():
            found += _properties(value, f"{where}.{key}" if key != "properties" else where)
    return found


def test_every_property_has_a_description() -> None:
    undocumented = [w for w, prop in _properties(spec_json_schema()) if "description" not in prop]
    assert not undocumented, undocumented


def test_schema_text_is_deterministic() -> None:
    assert spec_json_schema_text() == spec_json_schema_text()
    assert (ROOT / "docs" / "railplan-spec.schema.json").read_text() == spec_json_schema_text(), (
        "docs/railplan-spec.schema.json is stale: run `railplan schema > docs/railplan-spec.schema.json`"
    )
