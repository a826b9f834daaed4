"""How the harness tells the app which container to use: one frozen value, passed as
environment variables (gunicorn starts the app in a worker process), and the names both
sides derive from it (file root, SQLite path, key prefixes, namespace).

Everything a container writes lives under `dir`, the run's own directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PREFIX = "DENSEKV_CONTAINER"
LIFETIME = 30 * 86400  # seconds a session lives (Flask's PERMANENT_SESSION_LIFETIME default is 31 days)
COOKIE = "session"
FLASK_SESSION_PREFIX = "session:"  # Flask-Session's default key prefix
NAMESPACES = {"densekv": "sess", "densekv-dense": "sessd"}  # one densekv namespace per container
SQLITE_FILE = "sessions.sqlite3"
FILES_DIR = "sessions"


@dataclass(frozen=True)
class AppConfig:
    container: str
    dir: Path  # the run's directory: files and SQLite live here
    url: str = ""  # redis:// URL, memcached host:port, or a PostgreSQL conninfo
    lifetime: int = LIFETIME
    expected: int = 100_000  # densekv's expected_sessions (a new namespace's partition count)
    admin: bool = False  # the /_lab endpoints (fill, sweep, rss of the in-process dict)

    @property
    def files_root(self) -> Path:
        return self.dir / FILES_DIR

    @property
    def namespace(self) -> str:
        return NAMESPACES.get(self.container, "sess")

    @property
    def sqlite_path(self) -> Path:
        return self.dir / SQLITE_FILE

    def to_env(self) -> dict[str, str]:
        return {
            f"{PREFIX}": self.container,
            f"{PREFIX}_DIR": str(self.dir),
            f"{PREFIX}_URL": self.url,
            f"{PREFIX}_LIFETIME": str(self.lifetime),
            f"{PREFIX}_EXPECTED": str(self.expected),
            f"{PREFIX}_ADMIN": "1" if self.admin else "",
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AppConfig:
        env = os.environ if env is None else env
        if not env.get(PREFIX):
            raise RuntimeError(f"set {PREFIX} to the container to use (see densekv.tools.lab.containers.registry)")
        return cls(
            container=env[PREFIX],
            dir=Path(env.get(f"{PREFIX}_DIR") or "."),
            url=env.get(f"{PREFIX}_URL", ""),
            lifetime=int(env.get(f"{PREFIX}_LIFETIME") or LIFETIME),
            expected=int(env.get(f"{PREFIX}_EXPECTED") or 100_000),
            admin=env.get(f"{PREFIX}_ADMIN") == "1",
        )
