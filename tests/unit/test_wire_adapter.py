"""densekv/wire.py is the one module that knows redis-py's internals (issue 24): no other densekv
module imports redis-py's private modules or reads a private attribute of a redis-py object,
and the redis-py range wire.py declares is pyproject's and the one CI tests at its low end.

Read from the source with ast (nothing is imported for the walk). Which attribute belongs to a
redis-py object is not known statically, so the check goes by name: redis-py's private
connection and pool attributes (PRIVATE_REDIS_ATTRS), read on anything but `self` / `cls`
(densekv's own classes may well have a `_lock`), or through getattr / hasattr / setattr with
the name as a string.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import redis
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from densekv import resp, wire
from densekv.tools.analyze.wire import READ_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "densekv"
ADAPTER = PACKAGE / "wire.py"

#: private attributes of redis-py's connections, pools, parsers and clients
PRIVATE_REDIS_ATTRS = frozenset({
    "_sock", "_parser", "_buffer", "_reader", "_writer", "_stream", "_available_connections",
    "_in_use_connections", "_created_connections", "_lock", "_checkpid", "_connect",
    "_send_packed_command", "_read_response", "_socket_timeout", "_command_packer",
    "_connect_callbacks", "_event_dispatcher", "_fork_lock", "_fail_count",
})
_ACCESSORS = frozenset({"getattr", "hasattr", "setattr", "delattr"})


def violations(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` imports a private redis-py module or reads a private redis-py attribute."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if _private_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if _private_module(node.module):
                found.append(f"{where} imports from {node.module}")
            elif node.module.split(".")[0] == "redis":
                found += [f"{where} imports {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_REDIS_ATTRS:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{where} reads .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ACCESSORS and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in PRIVATE_REDIS_ATTRS):
            found.append(f"{where} {node.func.id}(..., {node.args[1].value!r})")
    return found


def _private_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "redis" and any(p.startswith("_") for p in parts[1:])


def test_no_module_but_the_adapter_touches_redis_py_internals() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != ADAPTER:
            found += violations(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "only densekv/wire.py may use redis-py's internals:\n" + "\n".join(found)


def test_the_adapter_is_where_the_internals_are() -> None:
    """The walk above would see them: it finds what wire.py uses (else it checks nothing)."""
    found = "\n".join(violations(ADAPTER.read_text()))
    for what in ("redis._parsers.base", "._sock", "._available_connections", "._lock"):
        assert what in found


@pytest.mark.parametrize("source", [
    "import redis._parsers.base",
    "from redis._parsers import BaseParser",
    "from redis.connection import _HiredisParser",
    "conn._sock.recv_into(buf)",
    "pool._in_use_connections.add(c)",
    "getattr(conn, '_sock', None)",
    "hasattr(pool, '_created_connections')",
])
def test_each_kind_of_reach_is_caught(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize("source", [
    "import redis.asyncio", "from redis.exceptions import ResponseError", "self._lock.acquire()",
    "conn.send_packed_command(x)", "getattr(obj, 'name', None)",
])
def test_public_use_and_own_attributes_pass(source: str) -> None:
    assert violations(source) == []


# --- the supported redis-py range, declared once and tested at both ends -----------------------


def _pyproject_redis() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    (redis_req,) = [r for r in reqs if r.name == "redis"]
    return redis_req


def _lower_bound(spec: SpecifierSet) -> Version:
    (low,) = [Version(s.version) for s in spec if s.operator == ">="]
    return low


def test_the_adapter_declares_pyprojects_redis_range() -> None:
    req = _pyproject_redis()
    assert "hiredis" in req.extras
    assert SpecifierSet(wire.REDIS_PY_RANGE) == req.specifier
    assert wire.REDIS_PY_RANGE in (wire.__doc__ or "")


def test_ci_tests_the_low_end_and_the_installed_redis_py_is_in_range() -> None:
    """scripts/ci-lowest-redis pins the range's lower bound; this run is the other end."""
    spec = SpecifierSet(wire.REDIS_PY_RANGE)
    script = (ROOT / "scripts" / "ci-lowest-redis").read_text()
    pinned = re.search(r'^LOWEST_REDIS="\$\{DENSEKV_LOWEST_REDIS:-([0-9.]+)\}"', script, re.MULTILINE)
    assert pinned is not None, "scripts/ci-lowest-redis no longer states LOWEST_REDIS"
    assert Version(pinned.group(1)) == _lower_bound(spec)
    assert Version(redis.__version__) in spec, f"redis-py {redis.__version__} is outside {spec}"


# --- one RESP encoder, one list of reads ---------------------------------------------------------


@pytest.mark.parametrize("commands", [
    [("SET", "k", "v")],
    [("SET", b"\x00\r\n", 12), ("GET", "k"), ["HSET", "h", "f", "é"]],
    [("INCRBYFLOAT", "x", 1.5), ("INCRBYFLOAT", "x", 0.1), ("ZADD", "z", 1e20, b"m", -3)],
])
def test_the_fallback_encoder_makes_hiredis_bytes(commands: list[tuple[object, ...]]) -> None:
    hiredis = pytest.importorskip("hiredis")
    assert resp._resp(commands) == b"".join(hiredis.pack_command(tuple(c)) for c in commands)
    assert resp.pack(commands) == resp._resp(commands)


@pytest.mark.parametrize("bad", [None, True, object(), [1]])
def test_both_encoders_refuse_other_argument_types(bad: object) -> None:
    with pytest.raises(TypeError):
        resp.pack([("SET", "k", bad)])
    with pytest.raises(TypeError):
        resp._resp([("SET", "k", bad)])


def test_the_analyzers_allow_list_only_reads() -> None:
    assert {name.split()[0] for name in READ_COMMANDS} <= wire.READS
