"""The hardware catalog: GPU, node and switch facts with sources, loaded once from YAML data.

``load_catalog()`` reads ``data/*.yaml`` shipped with the package, validates it against
``infra.catalog.models`` and checks its cross references (every source names a known reference,
every node names a known GPU). The result is immutable and cached.

>>> cat = load_catalog()
>>> cat.node_gpu("dgx-a100-640gb").name
'NVIDIA A100-SXM4-80GB'
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import ValidationError

from infra.catalog.models import Catalog, Gpu, Host, MigProfile, MigSpec, Node, Precision, Switch
from infra.errors import CatalogError
from infra.spec import Spec

__all__ = [
    "Catalog",
    "Gpu",
    "Host",
    "MigProfile",
    "MigSpec",
    "Node",
    "Precision",
    "Switch",
    "catalog_for",
    "load_catalog",
]

_DATA_FILES = ("gpus.yaml", "nodes.yaml", "switches.yaml", "site.yaml")


def _read_data() -> dict[str, Any]:
    """Merge the data files; each may add its own ``references`` (ids must not collide)."""
    merged: dict[str, Any] = {"references": {}}
    data_dir = resources.files("infra.catalog") / "data"
    for name in _DATA_FILES:
        doc = yaml.safe_load((data_dir / name).read_text(encoding="utf-8"))
        for ref_id, ref in doc.pop("references", {}).items():
            if ref_id in merged["references"]:
                raise CatalogError(f"{name}: reference {ref_id!r} is defined twice")
            merged["references"][ref_id] = ref
        merged.update(doc)
    return merged


def _check_references(cat: Catalog) -> None:
    records: dict[str, dict[str, str]] = {"site": cat.site_sources}
    for kind, table in (("gpus", cat.gpus), ("nodes", cat.nodes), ("switches", cat.switches)):
        for key, record in table.items():
            records[f"{kind}.{key}"] = record.sources
    for where, sources in records.items():
        for field, ref in sources.items():
            if ref not in cat.references:
                raise CatalogError(f"{where}.sources.{field} names unknown reference {ref!r}")
    for key, node in cat.nodes.items():
        if node.gpu not in cat.gpus:
            raise CatalogError(f"nodes.{key}.gpu names unknown GPU {node.gpu!r}")


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """Load, validate and cache the bundled catalog.

    Raises:
        CatalogError: the bundled data is inconsistent (a railplan bug).
    """
    try:
        cat = Catalog.model_validate(_read_data())
    except ValidationError as exc:  # pragma: no cover - guarded by tests on the shipped data
        raise CatalogError(f"bundled catalog is invalid: {exc}") from exc
    _check_references(cat)
    return cat


def catalog_for(*specs: Spec) -> Catalog:
    """The bundled catalog as ``specs`` see it: with a `generic` node per spec `shape`."""
    cat = load_catalog()
    for spec in specs:
        cat = cat.with_shapes(spec)
    return cat
