"""No import cycles inside densekv: the modules form one direction (issue 24).

The graph is read from the source with ast, without importing anything: every `import` and
`from ... import` of a densekv module, at the top of a module, inside a function or under
`if TYPE_CHECKING:` (a type-only import still says which layer knows which). `from pkg import
name` counts as an import of the submodule `pkg.name` when there is one, else of `pkg`. The
implicit import of a module's parent packages is left out: every module would import
densekv/__init__.py, which imports the kinds.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "densekv"

# No cycle is allowed; an entry here would be one strongly connected component, exactly as
# found, with the reason it is tolerated (none is today).
KNOWN_CYCLES: list[frozenset[str]] = []


def module_files() -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The densekv modules `name` imports anywhere in its source."""

    def known(dotted: str) -> str | None:  # the module itself, or its nearest package
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(known(a.name) for a in node.names if a.name.split(".")[0] == "densekv")
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, `level - 1` packages up
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "densekv":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in modules else known(source))
    return {m for m in found if m is not None and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def path_through(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """One cycle inside a component, as a readable path a -> b -> ... -> a."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if nxt not in previous:
                previous[nxt] = node
                frontier.append(nxt)
    return sorted(component)


def test_the_walk_sees_densekvs_imports() -> None:
    graph = import_graph()
    assert "densekv.maps.core" in graph["densekv.maps.compact"]  # a top-level import
    assert "densekv.tools.lab.cli" in graph["densekv.tools.cli"]  # a function-level one (_register_lab)
    assert "densekv.errors" in graph["densekv"]


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert path_through(graph, frozenset({"a", "b", "c"})) == ["a", "b", "c", "a"]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_but_the_known_ones() -> None:
    graph = import_graph()
    new = [c for c in cycles(graph) if c not in KNOWN_CYCLES]
    assert not new, "import cycles: " + "; ".join(
        f"{sorted(c)} (one of them: {' -> '.join(path_through(graph, c))})" for c in new)

