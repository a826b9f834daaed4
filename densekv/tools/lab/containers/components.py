"""Where the programs a container run needs besides Python are: memcached, wrk and
PostgreSQL (initdb, postgres).

Looked up in this order: what scripts/get-components fetched (`.servers/components/NAME/`
with its info.json), then the system install (memcached and wrk on PATH, the newest
/usr/lib/postgresql/N/bin). Nothing is fetched here: a missing component is None, and
the caller says which container it could not measure and how to get it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from densekv.tools.server.binaries import servers_dir

FETCH_HINT = "scripts/get-components fetches it"


@dataclass(frozen=True)
class Component:
    name: str
    bins: dict[str, Path] = field(default_factory=dict)
    source: str = ""
    version: str = ""


def _fetched(name: str) -> Component | None:
    home = servers_dir() / "components" / name
    try:
        info = json.loads((home / "info.json").read_text())
    except (OSError, ValueError):
        return None
    bins = {b: Path(p) if os.path.isabs(p) else home / p for b, p in dict(info.get("bins", {})).items()}
    if not bins or not all(os.access(p, os.X_OK) for p in bins.values()):
        return None
    return Component(name, bins, str(info.get("source", "")), str(info.get("version", "")))


def _system_postgres() -> Component | None:
    found = []
    for postgres in glob.glob("/usr/lib/postgresql/*/bin/postgres"):
        bindir = Path(postgres).parent
        if os.access(bindir / "initdb", os.X_OK):
            major = int(bindir.parent.name) if bindir.parent.name.isdigit() else 0
            found.append((major, bindir))
    if not found:
        return None
    major, bindir = max(found)
    return Component("postgresql", {"postgres": bindir / "postgres", "initdb": bindir / "initdb"},
                     f"system install ({bindir})", str(major))


def find_component(name: str) -> Component | None:
    """memcached, wrk or postgresql, if this machine has it."""
    got = _fetched(name)
    if got is not None:
        return got
    if name == "postgresql":
        return _system_postgres()
    exe = shutil.which(name)
    return Component(name, {name: Path(exe)}, f"system install ({exe})") if exe else None
