"""The import graph of infra/: no import circle, and imports flow one way between stages.

The house rule: spec -> catalog -> topology -> lint/budget -> render/provision/k8s -> cli; a
stage may import the stages before it (and the shared helpers: errors, files, progress,
signals), never one after it. The graph is built from the source with ast (every import,
including ones inside functions, which are circles all the same), not from sys.modules.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

from .conftest import ROOT

INFRA = ROOT / "infra"

STAGES = {
    "spec": 0,
    "catalog": 1,
    "topology": 2,
    "lint": 3,
    "budget": 3,
    "verify": 3,
    "render": 4,
    "provision": 4,
    "k8s": 4,
    "cli": 5,
    "__main__": 5,
}
"""Stage of each top-level part of infra; the others (errors, files, ...) are shared helpers."""

TYPE_ONLY_CIRCLES = {frozenset({"infra.provision.aws", "infra.provision.aws_network"})}
"""Today's exceptions: circles closed only by an ``if TYPE_CHECKING:`` import (no runtime
import happens). aws_network names aws.AwsClusterArgs in annotations only."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in INFRA.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def _imported(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The infra modules an import statement loads (``from pkg import mod`` is ``pkg.mod``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [
            f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
            for a in node.names
        ]
    else:
        assert not isinstance(node, ast.ImportFrom), "relative imports are not house style"
        return []
    found = []
    for name in names:
        while name.startswith("infra") and name not in modules:
            name = name.rsplit(".", 1)[0]
        if name.startswith("infra"):
            found.append(name)
    return found


@functools.cache
def import_graph(*, with_type_only: bool) -> nx.DiGraph[str]:
    """Module -> the infra modules it imports."""
    modules = _modules()
    graph: nx.DiGraph[str] = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = set() if with_type_only else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) not in type_only:
                graph.add_edges_from((module, t) for t in _imported(node, modules) if t != module)
    return graph


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGES.get(parts[1]) if len(parts) > 1 else None


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph(with_type_only=True)
    assert graph.has_edge("infra.lint.rules.mig", "infra.lint.engine")
    assert graph.has_edge("infra.lint.catalog_of_rules", "infra.lint.rules")
    assert graph.has_edge("infra.provision.aws_network", "infra.provision.aws")  # type-only
    assert not import_graph(with_type_only=False).has_edge(
        "infra.provision.aws_network", "infra.provision.aws"
    )


def test_no_import_circle_at_runtime() -> None:
    graph = import_graph(with_type_only=False)
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))


def test_type_only_circles_are_the_listed_exceptions() -> None:
    graph = import_graph(with_type_only=True)
    assert {frozenset(c) for c in nx.simple_cycles(graph)} == TYPE_ONLY_CIRCLES


def test_the_lint_engine_imports_no_rule_module() -> None:
    graph = import_graph(with_type_only=True)
    reached = nx.descendants(graph, "infra.lint.engine")
    rules = {m for m in graph if m.startswith("infra.lint.rules") or "migparted" in m}
    assert not reached & rules, sorted(reached & rules)


def test_imports_flow_from_spec_to_cli() -> None:
    graph = import_graph(with_type_only=True)
    upstream = [
        f"{a} -> {b}"
        for a, b in graph.edges
        if (sa := _stage(a)) is not None and (sb := _stage(b)) is not None and sb > sa
    ]
    assert upstream == []
