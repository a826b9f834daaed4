"""The tools (densekv/tools/: lab, planner, analyzer, the CLI, the server fixtures, the meter,
bulk loading) use the runtime only through its public names (issue 24): every name a tool
module imports from a runtime module - `from densekv.x import name`, or `alias.name` after
`from densekv import x as alias` - is in that module's `__all__`, and a class or function among them has
a docstring of its own. The list of such names is what the runtime's public API must keep.

Read from the source with ast (the tools are not imported); the runtime modules are
imported to read their `__all__` and docstrings.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path

from tests.unit.test_import_cycles import module_files

ROOT = Path(__file__).resolve().parents[2]

#: The tools' tree (issue 33): every module under it is a tool, every other densekv module is
#: the runtime (tests/unit/test_layers.py keeps the imports one way between the two).
TOOLS = "densekv.tools"

# Names the tools import that their runtime module does not export (runtime module, name):
# empty - every one is exported now. An entry needs a reason beside it, and goes once the
# module exports the name or the tools stop needing it.
NOT_EXPORTED_YET: set[tuple[str, str]] = set()

# Exported names the tools use that have no docstring of their own (none today).
UNDOCUMENTED_YET: set[tuple[str, str]] = set()


def is_tool(module: str) -> bool:
    return module == TOOLS or module.startswith(TOOLS + ".")


def runtime_names_used_by_tools() -> dict[tuple[str, str], set[str]]:
    """(runtime module, name) -> the tool modules that import it."""
    modules = module_files()
    used: dict[tuple[str, str], set[str]] = {}
    for tool, path in sorted(modules.items()):
        if not is_tool(tool):
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}  # local name -> runtime module bound to it
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                    node.module.split(".")[0] == "densekv"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:  # a module: what the tool reads from it is checked below
                        if not is_tool(sub):
                            aliases[alias.asname or alias.name] = sub
                    elif not is_tool(node.module):
                        used.setdefault((node.module, alias.name), set()).add(tool)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and not is_tool(alias.name) and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                used.setdefault((aliases[node.value.id], node.attr), set()).add(tool)
    return used


def exports(module: str) -> set[str]:
    return set(getattr(importlib.import_module(module), "__all__", ()))


def has_own_docstring(obj: object) -> bool:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and doc and doc.startswith(
            obj.__name__ + "("):
        return False  # the signature dataclasses write when the class has no docstring
    return bool(doc and doc.strip())


def test_the_walk_finds_the_tools_imports() -> None:
    used = runtime_names_used_by_tools()
    assert "densekv.tools.cli_run" in used[("densekv.errors", "DensekvError")]  # a top-level import
    assert any(tool.startswith("densekv.tools.planner") for tool in used[("densekv.keys", "partition_count")])
    assert not [m for m, _ in used if is_tool(m)]  # tool-to-tool imports are not checked


def test_every_runtime_name_a_tool_imports_is_exported() -> None:
    missing = sorted(
        f"{module}.{name} (imported by {', '.join(sorted(tools))})"
        for (module, name), tools in runtime_names_used_by_tools().items()
        if name not in exports(module) and (module, name) not in NOT_EXPORTED_YET
    )
    assert not missing, "not in the module's __all__:\n" + "\n".join(missing)


def test_the_exported_classes_and_functions_the_tools_use_are_documented() -> None:
    undocumented = []
    for module, name in sorted(runtime_names_used_by_tools()):
        if (module, name) in NOT_EXPORTED_YET | UNDOCUMENTED_YET:
            continue
        obj = getattr(importlib.import_module(module), name)
        if (inspect.isclass(obj) or inspect.isroutine(obj)) and not has_own_docstring(obj):
            undocumented.append(f"{module}.{name}")
    assert not undocumented, f"no docstring: {undocumented}"

