"""Two trees, imports one way (issue 33): the runtime never imports the tools.

The package has four parts, told apart by where a module lives:
* the tools: everything under densekv/tools/ (lab, planner, analyzer, the CLI, the server
  fixtures, the meter, bulk loading);
* the face: densekv/__init__.py, the one public import path; it imports the runtime and
  names the tools' public names, imported on first use (PEP 562);
* the old paths: the small modules left where a module used to be (OLD_PATHS below), whose
  `__getattr__` forwards to the new module with a DeprecationWarning (densekv/oldpaths.py);
* the runtime: every other module (kinds, layouts, cores, codec, wire, plans, executors,
  connect, the capability probe, errors, integrations).

The imports are read from the source with ast (tests/unit/test_import_cycles.py's walk): at
the top of a module, inside a function and under `if TYPE_CHECKING:` alike. A module named
in a string (`importlib.import_module("densekv.tools...")`) counts too. The kinds (sets,
maps, sessions) stand side by side: none imports another; what two of them share lives below
them (densekv/dictionaries.py). `python3 -m tests.unit.test_layers` prints the graph's size.
"""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from functools import cache
from pathlib import Path

import pytest

from tests.unit.test_import_cycles import import_graph, module_files

TOOLS = "densekv.tools"
FACE = "densekv"
KINDS = ("densekv.sets", "densekv.maps", "densekv.sessions")

#: old module -> the module it moved to (CHANGELOG.md lists them). An old path is kept where
#: the docs named it, where densekv 0.1 exported names from it, or where an error's old path
#: (tests/unit/test_errors_moved.py) was promised for one minor release.
OLD_PATHS: dict[str, str] = {
    "densekv.analyze": "densekv.tools.analyze",
    "densekv.analyze.errors": "densekv.errors",
    "densekv.analyze.scan": "densekv.tools.analyze.scan",
    "densekv.bulk": "densekv.tools.bulk",
    "densekv.lab": "densekv.tools.lab",
    "densekv.lab.cli": "densekv.tools.lab.cli",
    "densekv.lab.experiments": "densekv.tools.lab.experiments",
    "densekv.lab.experiments.base": "densekv.tools.lab.experiments.base",
    "densekv.lab.target": "densekv.tools.lab.target",
    "densekv.maps.dictionaries": "densekv.dictionaries",
    "densekv.measure": "densekv.tools.measure",
    "densekv.planner": "densekv.tools.planner",
    "densekv.planner.errors": "densekv.errors",
    "densekv.server": "densekv.tools.server",
    "densekv.server.binaries": "densekv.tools.server.binaries",
    "densekv.server.embedded": "densekv.tools.server.embedded",
    "densekv.server.probe": "densekv.capabilities",
}
#: what an old path may import: the forwarding helper and the errors (for errors.moved)
OLD_PATH_IMPORTS = {"densekv.oldpaths", "densekv.errors"}


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def part_of(module: str) -> str:
    if module in OLD_PATHS:
        return "old path"
    if module == FACE:
        return "face"
    return "tools" if under(module, TOOLS) else "runtime"


@cache
def graph() -> dict[str, frozenset[str]]:
    return {m: frozenset(imports) for m, imports in import_graph().items()}


def named_in_strings(module: str) -> set[str]:
    """The densekv modules a module's string constants name (`import_module("densekv.x")`,
    "densekv.x.y:create_app()"), docstrings included: a runtime module says no tool's name."""
    modules = module_files()
    tree = ast.parse(modules[module].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in node.value.replace(":", " ").replace("(", " ").split():
                dotted = word.strip("`'\",.;)")
                if dotted.startswith("densekv.") and dotted in modules:
                    found.add(dotted)
    return found


def test_the_parts_are_the_folders() -> None:
    parts = {m: part_of(m) for m in graph()}
    assert parts["densekv.tools.cli_main"] == "tools"  # the `densekv` command
    assert parts["densekv.tools.server.embedded"] == "tools"
    assert parts["densekv.capabilities"] == "runtime"
    assert parts["densekv.dictionaries"] == "runtime"
    assert parts["densekv.integrations.flask"] == "runtime"
    assert set(OLD_PATHS) <= set(parts), sorted(set(OLD_PATHS) - set(parts))
    # no tool left outside the tools' tree: a module with a click command or the meter in it
    strays = [m for m, p in parts.items() if p == "runtime"
              and "import click" in module_files()[m].read_text()]
    assert not strays, strays


def test_the_walk_sees_function_level_and_type_checking_imports() -> None:
    assert "densekv.tools.lab.cli" in graph()["densekv.tools.cli"]  # inside a function
    assert "densekv.tools.server.embedded" in graph()[FACE]  # under TYPE_CHECKING


def test_no_runtime_module_imports_a_tool() -> None:
    wrong = {m: sorted(d for d in imports if part_of(d) in ("tools", "face"))
             for m, imports in graph().items() if part_of(m) == "runtime"}
    wrong = {m: found for m, found in wrong.items() if found}
    assert not wrong, f"the runtime imports the tools (or the package's face): {wrong}"


def test_no_runtime_module_names_a_tool_in_a_string() -> None:
    wrong = {m: sorted(d for d in named_in_strings(m) if part_of(d) == "tools")
             for m in graph() if part_of(m) == "runtime"}
    wrong = {m: found for m, found in wrong.items() if found}
    assert not wrong, f"the runtime names a tool's module: {wrong}"


def test_only_the_face_reaches_the_tools_from_outside_them() -> None:
    importers = {m for m, imports in graph().items() if part_of(m) not in ("tools", "old path")
                 and any(part_of(d) == "tools" for d in imports)}
    assert importers == {FACE}
    lazy = {d for d in graph()[FACE] if part_of(d) == "tools"}
    # the face imports tools only under TYPE_CHECKING: its _LAZY table loads them on first use
    assert lazy == {module for module, _ in importlib.import_module(FACE)._LAZY.values()}


def test_nothing_in_the_package_imports_an_old_path() -> None:
    wrong = {m: sorted(d for d in imports if part_of(d) == "old path")
             for m, imports in graph().items()}
    wrong |= {m: sorted(d for d in named_in_strings(m) if part_of(d) == "old path" and d != m)
              for m in graph() if part_of(m) != "old path"}
    wrong = {m: found for m, found in wrong.items() if found}
    assert not wrong, f"the package uses an old path (use the new one): {wrong}"


def test_an_old_path_imports_nothing_but_the_forwarding() -> None:
    for old in OLD_PATHS:
        assert graph()[old] <= OLD_PATH_IMPORTS, (old, sorted(graph()[old]))
        assert "__getattr__" in module_files()[old].read_text(), old


def test_every_forwarding_module_is_in_the_table() -> None:
    forwarding = {m for m, path in module_files().items() if "forward(__name__" in path.read_text()}
    assert forwarding <= set(OLD_PATHS), sorted(forwarding - set(OLD_PATHS))


def _a_name_of(module: str) -> str | None:
    new = importlib.import_module(module)
    names = [n for n in getattr(new, "__all__", ()) if not n.startswith("_")]
    return names[0] if names else None


@pytest.mark.parametrize("old", sorted(o for o, n in OLD_PATHS.items() if n != "densekv.errors"))
def test_an_old_path_gives_the_new_modules_object_and_warns(old: str) -> None:
    new = OLD_PATHS[old]
    name = _a_name_of(new)
    if name is None:  # a package without names of its own (densekv.tools.server)
        importlib.import_module(old)
        return
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old}\.{name} moved to {new}\.{name}:") as caught:
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    assert caught[0].filename == __file__  # the user's line
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(module, "__wrapped__")  # dunder lookups neither warn nor forward


def test_the_changelog_lists_every_old_path() -> None:
    """CHANGELOG.md's table of moved modules: `| old | new (the old path warns) |`."""
    text = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `densekv") and len(cells) == 2:
            rows[cells[0].strip("`")] = (cells[1].split("`")[1], cells[1].endswith("(the old path warns)"))
    kept = {old: new for old, new in OLD_PATHS.items() if new != "densekv.errors"}
    assert {old: new for old, (new, warns) in rows.items() if warns} == kept
    for old, (new, _) in rows.items():
        assert new in module_files(), new
        assert old not in module_files() or old in OLD_PATHS, old


def test_the_kinds_stand_side_by_side() -> None:
    crossing = {m: sorted(d for d in imports if any(under(d, k) for k in KINDS if not under(m, k)))
                for m, imports in graph().items()
                if part_of(m) == "runtime" and any(under(m, k) for k in KINDS)}
    crossing = {m: found for m, found in crossing.items() if found}
    assert not crossing, f"a kind imports another kind: {crossing}"


def levels(part: dict[str, frozenset[str]]) -> dict[str, int]:
    """Each module's level: 1 for a module that imports none of `part`, else one more than
    the highest module it imports (the graph has no cycle: test_import_cycles)."""
    out: dict[str, int] = {}

    def level(m: str) -> int:
        if m not in out:
            out[m] = 1 + max((level(d) for d in part[m] if d in part), default=0)
        return out[m]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in part:
        level(m)
    return out


def folder_of(module: str) -> str:
    """A module's room in the folder view: its folder (or file) right below densekv/, or
    right below densekv/tools/ for a tool."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) >= 3 and parts[1] == "tools" else parts[:2])


def figures() -> dict[str, object]:
    """The import graph's size, old paths left out: modules, edges and levels of the whole
    package, of the runtime alone and of the folder view (a folder below densekv/ or
    densekv/tools/ as one node), and the level of each kind's folder there."""
    whole = {m: frozenset(d for d in imports if part_of(d) != "old path")
             for m, imports in graph().items() if part_of(m) != "old path"}
    runtime = {m: frozenset(d for d in imports if part_of(d) == "runtime")
               for m, imports in whole.items() if part_of(m) == "runtime"}
    folders: dict[str, set[str]] = {}
    for m, imports in whole.items():
        folders.setdefault(folder_of(m), set()).update(
            folder_of(d) for d in imports if folder_of(d) != folder_of(m))
    out: dict[str, object] = {}
    for name, part in (("package", whole), ("runtime", runtime),
                       ("folders", {f: frozenset(i) for f, i in folders.items()})):
        lv = levels(part)
        out[name] = {"nodes": len(part), "edges": sum(len(v) for v in part.values()),
                     "levels": max(lv.values())}
    lv = levels({f: frozenset(i) for f, i in folders.items()})
    out["kinds' folder levels"] = {k.rpartition(".")[2]: lv[k] for k in KINDS}
    return out


def test_the_figures_add_up() -> None:
    shown = figures()
    assert shown["package"]["nodes"] > shown["runtime"]["nodes"]  # type: ignore[index]
    assert shown["package"]["levels"] >= shown["runtime"]["levels"]  # type: ignore[index]
    # side by side: the three kinds' folders stand on one level of the folder view
    assert len(set(shown["kinds' folder levels"].values())) == 1  # type: ignore[attr-defined]


if __name__ == "__main__":
    import json

    print(json.dumps(figures(), indent=1))
