"""Strict validation of Kubernetes manifests, as the tests and `make` use it.

Custom resources are checked against the strict JSON Schemas in ``tests/schemas/`` (vendored);
built-in kinds with ``kubernetes_validate.validate(doc, "1.33", strict=True)``. A kind with no
schema anywhere fails. This is ``tests/schemas/validate_crs.py``'s rule, as a function that
returns the problems (the script prints them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
SCHEMA_DIR = HERE / "schemas"
K8S_VERSION = "1.33"


@cache
def _validator(key: str) -> jsonschema.Draft7Validator | None:
    path = SCHEMA_DIR / key
    if not path.exists():
        return None
    return jsonschema.Draft7Validator(json.loads(path.read_text()))


def _schema_key(doc: dict[str, Any]) -> str:
    group, _, version = doc["apiVersion"].rpartition("/")
    return f"{group}_{doc['kind'].lower()}_{version}.json"


def problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with one object (empty when it validates strictly)."""
    name = f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
    validator = _validator(_schema_key(doc)) if "apiVersion" in doc and "kind" in doc else None
    if validator is not None:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        return [f"{name}: {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{name}: no schema for {doc.get('apiVersion')} {doc.get('kind')}"]
    except kubernetes_validate.ValidationError as e:
        return [f"{name}: {'.'.join(map(str, e.path))}: {e.message}"]
    return []


def manifest_problems(docs: Iterable[dict[str, Any]]) -> list[str]:
    """Problems of every object."""
    return [p for doc in docs for p in problems(doc)]


def file_problems(paths: Iterable[Path]) -> list[str]:
    """Problems of every object in multi-document YAML files."""
    return [
        f"{path.name}: {p}"
        for path in paths
        for doc in yaml.safe_load_all(path.read_text())
        if doc
        for p in problems(doc)
    ]
