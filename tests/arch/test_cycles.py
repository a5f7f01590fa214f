"""No import cycles between product modules (issue 23), computed from the source.

The graph is grimp's (the library import-linter runs on) over backend/, c3/ and widgets/, with every
import: those inside functions (lazy imports) and those under `if TYPE_CHECKING:` too, because a cycle
that only the type checker sees still ties the modules together. A cycle is a strongly connected
component of more than one module. import-linter's `acyclic_siblings` contract (pyproject.toml) looks
at packages; this looks at modules, inside a package too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp
import pytest

PRODUCT = ("backend", "c3", "widgets")

ALLOWED = [
    # The cycles that remain, each in another engineer's area this round (issue 23 defers them). A new cycle,
    # or a module joining one of these, fails; once one is broken, delete its line (the test says so).
]

pytestmark = pytest.mark.static


def product_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PRODUCT, exclude_type_checking_imports=False)


def import_cycles(edges: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def graph_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def describe(cycle: frozenset[str]) -> str:
    return " <-> ".join(sorted(cycle))


def test_no_new_import_cycles():
    cycles = import_cycles(graph_edges(product_graph()))
    new = [describe(c) for c in cycles if not any(c <= allowed for allowed in ALLOWED)]
    assert new == [], "import cycles between product modules:\n" + "\n".join(new)


def test_every_allowed_cycle_still_exists():
    cycles = import_cycles(graph_edges(product_graph()))
    gone = [describe(a) for a in ALLOWED if not any(c <= a for c in cycles)]
    assert gone == [], "these cycles are broken; delete them from ALLOWED in tests/arch/test_cycles.py:\n" + "\n".join(gone)


def test_a_planted_cycle_is_found():
    """The check must be able to fail: a lazy import back from the models into the CLI is a cycle."""
    graph = product_graph()
    graph.add_import(importer="backend.models", imported="c3.cli", line_number=1, line_contents="import c3.cli")
    cycles = import_cycles(graph_edges(graph))
    assert any({"backend.models", "c3.cli"} <= c for c in cycles)
    assert not any(c <= allowed for c in cycles if "c3.cli" in c for allowed in ALLOWED)
