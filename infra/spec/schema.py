"""JSON Schema of the spec, for editors (yaml-language-server) and CI validation.

Generated from the Pydantic models, so it can never drift from what `load_spec` accepts for
structure; value rules that need the catalog are lint rules and not in the schema. Put
``# yaml-language-server: $schema=<path to railplan-spec.schema.json>`` at the top of a spec
to get completion and inline errors in VS Code and other LSP editors.
"""

from __future__ import annotations

import json
from typing import Any

from infra.spec.models import Spec

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def spec_json_schema() -> dict[str, Any]:
    """The spec's JSON Schema (draft 2020-12) as a dict."""
    schema = Spec.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema}


def spec_json_schema_text() -> str:
    """The schema as deterministic, indented JSON text with a trailing newline."""
    return json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
