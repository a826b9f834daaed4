"""The lab's result record and the `results.json` it writes.

Everything that affects the file's shape lives here: the record (`RunRecord`), the server
stamp (`ServerStamp`), the document around them, and `FIELDS`/`validate()`, which are
the schema that docs/lab-results.md documents (a unit test checks that the doc names
every field). The report and any later tooling read only this file's shape.

One record = one measured configuration on one server (a layout at a partition count,
a data structure at a config, ...): its bytes per item at the largest N it reached, the
throughput of its main operation, and the curve of readings that led there.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

SCHEMA = "densekv-lab/1"


@dataclass(frozen=True)
class ServerStamp:
    """What a figure was measured on: the server, its allocator and its encoding limits."""

    name: str  # matrix name (valkey-9.1, ...) or "url" for a user's server
    flavor: str
    version: str
    allocator: str
    listpack: dict[str, int | None]
    maxmemory_policy: str = ""
    scratch: bool = True  # started by the lab (may be flushed and reconfigured)
    url: str | None = None  # a user's server, password removed
    #: a cluster the lab started (--cluster): masters, replicas_per_master, master_nodes
    cluster: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunRecord:
    """One measured configuration. See docs/lab-results.md for every field."""

    kind: str
    layout: str
    partitions: int | None
    server: str
    version: str
    allocator: str
    n: int
    bytes_per_item: float | None
    ops_per_s: float | None = None
    server_usec_per_call: float | None = None
    op: str | None = None
    variant: str | None = None
    flavor: str = ""
    config: dict[str, int | None] = field(default_factory=dict)
    used_memory_delta: int | None = None
    memory_usage_bytes_per_item: float | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def stamped(cls, stamp: ServerStamp, **values: Any) -> RunRecord:
        base: dict[str, Any] = {"server": stamp.name, "version": stamp.version, "allocator": stamp.allocator,
                                "flavor": stamp.flavor, "config": dict(stamp.listpack)}
        base.update(values)
        return cls(**base)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("bytes_per_item", "ops_per_s", "server_usec_per_call", "memory_usage_bytes_per_item"):
            if out[key] is not None:
                out[key] = round(float(out[key]), 3)
        return out


def op_stats(count: int, seconds: float, server_usec: float | None,
             commands: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The entry of RunRecord.ops for one operation: rate, and server time per operation."""
    return {
        "count": count,
        "seconds": round(seconds, 4),
        "ops_per_s": round(count / seconds, 1) if seconds > 0 else None,
        "server_usec_per_call": None if server_usec is None or count == 0 else round(server_usec / count, 3),
        "commands": commands or {},
    }


# -- schema ---------------------------------------------------------------------------
# name -> (allowed JSON types, required). Types: "string", "integer", "number", "null",
# "object", "array", "boolean".
Fields = dict[str, tuple[tuple[str, ...], bool]]
#: the JSON type a Python value is written as, in the order a value is tested (a bool is
#: an int too)
_JSON_OF: dict[Any, str] = {type(None): "null", bool: "boolean", int: "integer", float: "number",
                            str: "string", list: "array", dict: "object"}


def _json_types(hint: Any) -> tuple[str, ...]:
    """The JSON types a value of Python type `hint` is written as (int | None: integer, null)."""
    parts = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
    return tuple(_JSON_OF[get_origin(part) or part] for part in parts)


def _fields(optional: tuple[str, ...] = (), **hints: Any) -> Fields:
    """name -> (JSON types, required), from each field's Python type; the fields named in
    `optional` may be left out."""
    return {name: (_json_types(hint), name not in optional) for name, hint in hints.items()}


#: a record's fields: every field of RunRecord, always written (to_dict is asdict)
FIELDS = _fields(**get_type_hints(RunRecord))
POINT_FIELDS = _fields(("used_memory_delta", "memory_usage_bytes_per_item", "encodings"),
                       n=int, bytes_per_item=float | None, used_memory_delta=int | None,
                       memory_usage_bytes_per_item=float | None, encodings=dict)
#: what build_document writes
DOCUMENT_FIELDS = _fields(schema=str, densekv_version=str, created_at=str, command=str, host=dict,
                          n=int, servers=list, experiments=list, runs=list, interrupted=bool)
#: what lab/runner.py's summary writes per experiment (`status`: one of STATUSES)
EXPERIMENT_FIELDS = _fields(kind=str, title=str, seed=str | None, status=str, reason=str,
                            server=str | None, seconds=float | None, notes=list, trimmed=str,
                            pace=float | None)
STATUSES = ("ran", "not available", "failed", "skipped", "interrupted")


def _json_type(value: Any) -> str:
    kind = next((t for t in _JSON_OF if isinstance(value, t)), None)
    return _JSON_OF[kind] if kind else type(value).__name__


def _check(obj: Any, fields: Fields, where: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: not an object"]
    errors = []
    for name, (types, required) in fields.items():
        if name not in obj:
            if required:
                errors.append(f"{where}: missing {name}")
            continue
        got = _json_type(obj[name])
        ok = got in types or (got == "integer" and "number" in types)
        if not ok:
            errors.append(f"{where}.{name}: {got}, expected {'|'.join(types)}")
    return errors


def validate(doc: Any) -> list[str]:
    """Every way `doc` departs from the schema (empty: valid)."""
    errors = _check(doc, DOCUMENT_FIELDS, "document")
    if errors:
        return errors
    if doc["schema"] != SCHEMA:
        errors.append(f"document.schema: {doc['schema']!r}, expected {SCHEMA!r}")
    for i, exp in enumerate(doc["experiments"]):
        errors += _check(exp, EXPERIMENT_FIELDS, f"experiments[{i}]")
        if isinstance(exp, dict) and exp.get("status") not in STATUSES:
            errors.append(f"experiments[{i}].status: {exp.get('status')!r}")
    for i, run in enumerate(doc["runs"]):
        errors += _check(run, FIELDS, f"runs[{i}]")
        if isinstance(run, dict) and isinstance(run.get("points"), list):
            for j, point in enumerate(run["points"]):
                errors += _check(point, POINT_FIELDS, f"runs[{i}].points[{j}]")
    return errors


def host_facts() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def build_document(*, command: str, n: int, servers: list[ServerStamp],
                   experiments: list[dict[str, Any]], runs: list[RunRecord],
                   interrupted: bool = False) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        densekv_version = version("densekv")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        densekv_version = "unknown"
    return {
        "schema": SCHEMA,
        "densekv_version": densekv_version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "host": host_facts(),
        "n": n,
        "servers": [s.to_dict() for s in servers],
        "experiments": experiments,
        "runs": [r.to_dict() for r in runs],
        "interrupted": interrupted,
    }


def write_results(doc: dict[str, Any], out_dir: Path) -> Path:
    """Write DIR/results.json (refusing a document that fails its own schema)."""
    errors = validate(doc)
    if errors:
        raise ValueError("results.json would not match its schema: " + "; ".join(errors[:5]))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return path
