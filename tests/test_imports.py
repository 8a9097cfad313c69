"""The import graph of infra/: no import circle, and imports flow one way between stages.

The house rule is `STAGE_ORDER` below, written once: a stage may import the stages on the
floors before it (and the shared helpers: errors, files, progress, signals, ...), never one on
its own floor or after it. README.md and docs/design.md print the line `stage_order_line()`
makes of it (a test checks they do). The graph is built from the source with ast (every import,
including ones inside functions, which are circles all the same), not from sys.modules.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import networkx as nx
import pytest

from .conftest import ROOT

INFRA = ROOT / "infra"

STAGE_ORDER: tuple[tuple[str, ...], ...] = (
    ("spec",),
    ("catalog",),
    ("topology",),
    ("simulate", "verify", "k8s"),
    ("budget",),
    ("lint",),
    ("render", "provision", "day2"),
    ("report",),
    ("cli",),
)
"""The stages of infra, floor by floor. simulate, verify and k8s read the plan and nothing
after it; budget checks a replay's figures (`infra.budget.simulation`); lint reads budgets
(RP060); render writes k8s objects, lint's findings and budgets, provision declares the k8s
objects, day2 compares two plans and their budgets (none of them reads another); the report
shows the tree's bill of materials with its templates; only the CLI prints. The other top-level modules are shared helpers."""

STAGES = {stage: floor for floor, names in enumerate(STAGE_ORDER) for stage in names}
"""Floor of each stage."""


def stage_order_line() -> str:
    """The one-line stage order README.md and docs/design.md print."""
    return "Data flows one way: " + " → ".join("/".join(f) for f in STAGE_ORDER) + "."


TYPE_ONLY_CIRCLES: set[frozenset[str]] = set()
"""Circles closed only by an ``if TYPE_CHECKING:`` import (no runtime import happens): none
since `infra.provision.aws_network` takes a `BastionImage`, not `aws.AwsClusterArgs`."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in INFRA.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


@functools.cache
def _trees() -> dict[str, ast.Module]:
    """Each infra module's syntax tree, parsed once for every test here."""
    return {m: ast.parse(path.read_text(encoding="utf-8")) for m, path in _modules().items()}


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
    for module, tree in _trees().items():
        graph.add_node(module)
        type_only = set() if with_type_only else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) not in type_only:
                graph.add_edges_from((module, t) for t in _imported(node, modules) if t != module)
    return graph


def _stage(module: str) -> str | None:
    """The stage a module belongs to (None for a shared helper); ``python -m infra`` is the CLI."""
    parts = module.split(".")
    name = "cli" if parts[1:2] == ["__main__"] else parts[1] if len(parts) > 1 else ""
    return name if name in STAGES else None


def test_every_package_under_infra_is_a_stage() -> None:
    """A new package gets a floor here; a stage whose package went away leaves the order."""
    packages = {path.parent.name for path in INFRA.glob("*/__init__.py")}
    assert packages == set(STAGES)


def _top_level_names(node: ast.AST) -> list[str]:
    """The top-level packages an import statement names (``from tools.x import y``: tools)."""
    if isinstance(node, ast.Import):
        return [a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module.split(".")[0]]
    return []


CHECKOUT_ONLY = {"tools", "tests", "bench"}
"""Top-level directories of the checkout that no install carries (the wheel is `infra` only)."""


def checkout_imports(trees: dict[str, ast.Module]) -> list[str]:
    """``module: package`` for each import of a checkout-only package."""
    return sorted(
        f"{module}: {name}"
        for module, tree in trees.items()
        for node in ast.walk(tree)
        for name in _top_level_names(node)
        if name in CHECKOUT_ONLY
    )


def test_the_package_imports_nothing_the_wheel_leaves_out() -> None:
    """`tools.accuracy` writes docs/accuracy.md; an installed railplan has no `tools`."""
    assert checkout_imports(_trees()) == []
    planted = {"infra.budget.bands": ast.parse("from tools.accuracy.band_table import x\n")}
    assert checkout_imports(planted) == ["infra.budget.bands: tools"]


def private_imports(trees: dict[str, ast.Module]) -> list[str]:
    """``module: name`` for each private name (``_x``) imported from another infra module."""
    return sorted(
        f"{module}: {node.module}.{alias.name}"
        for module, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("infra")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    )


def test_the_cli_shares_public_names_only() -> None:
    """What CLI modules share is public in `infra.cli.common`; none takes another's `_name`."""
    cli = {m: tree for m, tree in _trees().items() if m.startswith("infra.cli")}
    assert private_imports(cli) == []
    planted = {"infra.cli.changes": ast.parse("from infra.cli.planning import _plan_or_fail\n")}
    assert private_imports(planted) == ["infra.cli.changes: infra.cli.planning._plan_or_fail"]


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph(with_type_only=True)
    assert graph.has_edge("infra.lint.rules.mig", "infra.lint.engine")
    assert graph.has_edge("infra.lint.catalog_of_rules", "infra.lint.rules")
    assert graph.has_edge("infra.topology.groups", "infra.topology.servers")  # type-only
    assert not import_graph(with_type_only=False).has_edge(
        "infra.topology.groups", "infra.topology.servers"
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


def _against_the_order(edges: Iterable[tuple[str, str]]) -> list[str]:
    """The imports of a later stage, or of another stage on the same floor."""
    wrong = []
    for a, b in edges:
        sa, sb = _stage(a), _stage(b)
        if sa is None or sb is None or sa == sb:
            continue
        if STAGES[sb] >= STAGES[sa]:
            wrong.append(f"{a} -> {b}")
    return wrong


def test_imports_flow_from_spec_to_cli() -> None:
    assert _against_the_order(import_graph(with_type_only=True).edges) == []


def test_the_order_check_sees_imports_against_it() -> None:
    planted = [
        ("infra.simulate.engine", "infra.budget.cluster"),  # a later floor
        ("infra.verify.compare", "infra.simulate.engine"),  # the same floor
        ("infra.k8s.gpu", "infra.render.k8s_manifests"),
        ("infra.lint.engine", "infra.budget.cluster"),  # allowed: an earlier floor
        ("infra.render.tree", "infra.render.writer"),  # allowed: within a stage
        ("infra.cli.app", "infra.errors"),  # allowed: a shared helper
    ]
    assert _against_the_order(planted) == [f"{a} -> {b}" for a, b in planted[:3]]


@pytest.mark.parametrize("doc", ["README.md", "docs/design.md"])
def test_the_docs_print_the_stage_order(doc: str) -> None:
    lines = [ln for ln in (ROOT / doc).read_text(encoding="utf-8").splitlines() if "→" in ln]
    assert stage_order_line() in lines, f"{doc} should have the line: {stage_order_line()}"


def test_the_design_stage_table_follows_the_order() -> None:
    """docs/design.md's block of stages names every stage once, floor by floor."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text.split("## Stages", 1)[1].split("```")[1]
    named = [m for line in block.splitlines() for m in re.findall(r"infra\.(\w+)", line[:29])]
    assert sorted(named) == sorted(STAGES)
    assert [STAGES[m] for m in named] == sorted(STAGES[m] for m in named), named


# --- one owner per MIG fact ---------------------------------------------------------------------

MIG_OWNERS = {"infra.spec.models", "infra.topology.groups", "infra.topology.migconfig"}
"""Modules that may turn a `mig` value into assignments (`assignments_of`, `mig_values()`):
the spec defines them, `infra.topology.groups` expands them per GPU, `migconfig` writes each
assignment as a mig-parted entry. Everything else reads `Plan.groups` (or `group_migs`)."""
SPLIT_OWNER = ("infra.topology.facts_model", "splits")
"""The one function that answers "does this MIG state split a GPU" (`MigState.splits`)."""


def _mig_copies(module: str, tree: ast.Module) -> list[str]:
    """Where ``tree`` expands a `mig` value or answers "is it split" on its own."""
    found: list[str] = []
    for func in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        name = getattr(func, "name", "")
        for node in ast.walk(func) if isinstance(func, ast.FunctionDef) else ():
            where = f"{module}.{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and module not in MIG_OWNERS:
                called = node.func
                called_name = getattr(called, "id", getattr(called, "attr", ""))
                if called_name in ("assignments_of", "mig_values"):
                    found.append(f"{where} calls {called_name}")
            if _expands_all(node) and module != "infra.topology.groups":
                found.append(f"{where} expands gpus: all")
            if _split_answer(node) and (module, name) != SPLIT_OWNER:
                found.append(f"{where} answers whether MIG splits a GPU")
    return sorted(set(found))


def _expands_all(node: ast.AST) -> bool:
    """``range(n) if x.gpus == "all" else ...``: the per-GPU expansion of an assignment."""
    return (
        isinstance(node, ast.IfExp)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Attribute)
        and node.test.left.attr == "gpus"
        and any(isinstance(c, ast.Constant) and c.value == "all" for c in node.test.comparators)
        and isinstance(node.body, ast.Call)
        and getattr(node.body.func, "id", "") == "range"
    )


def _split_answer(node: ast.AST) -> bool:
    """``any``/``all`` over layouts compared with ``"disabled"`` or None: "is it split"."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("any", "all")):
        return False
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Compare):
            continue
        sides = [sub.left, *sub.comparators]
        if any(isinstance(s, ast.Constant) and s.value == "disabled" for s in sides):
            return True
        named_layout = any(getattr(s, "id", getattr(s, "attr", "")) == "layout" for s in sides)
        if named_layout and any(isinstance(s, ast.Constant) and s.value is None for s in sides):
            return True
    return False


def test_one_mig_expansion_and_one_split_answer() -> None:
    copies = [copy for module, tree in _trees().items() for copy in _mig_copies(module, tree)]
    assert copies == []


def test_the_mig_detector_sees_the_copies_it_replaced() -> None:
    """The shapes the copies had before `Plan.groups` (k8s, report, Server), each flagged."""
    old = """
def uses_mig(spec):
    return any(a.layout != "disabled" for g in spec.node_groups for _, v in g.mig_values()
               for a in assignments_of(v))
def skip(first):
    return all(x == "disabled" for x in first)
def mig_partitioned(self):
    return any(layout is not None for layout in self.mig)
def per_gpu(value, gpus):
    return [range(gpus) if a.gpus == "all" else a.gpus for a in assignments_of(value)]
"""
    found = _mig_copies("infra.k8s.gpu", ast.parse(old))
    assert [f.split(":")[0] for f in found] == [
        "infra.k8s.gpu.mig_partitioned",
        "infra.k8s.gpu.per_gpu",
        "infra.k8s.gpu.per_gpu",
        "infra.k8s.gpu.skip",
        "infra.k8s.gpu.uses_mig",
        "infra.k8s.gpu.uses_mig",
        "infra.k8s.gpu.uses_mig",
    ]
