"""The base of every spec model (strict, frozen, unknown keys refused) and shared name patterns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["DNS_LABEL", "StrictModel"]

# A Kubernetes namespace or object name that is also a safe path and shell word.
DNS_LABEL = r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$"


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors and values are not coerced.

    Strict mode keeps YAML's loose typing from slipping through: ``count: true`` or
    ``count: "4"`` are errors, not 1 and 4. Fields that parse text (sizes, CIDRs, enums)
    convert it themselves before validation.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
