"""The session containers measured, in report order, and what each one needs.

`needs` says what must be on the machine besides the app (Flask, gunicorn):
  pip        nothing else (the app keeps the sessions itself: a dict, files, SQLite)
  redis      the Redis/Valkey server the run measures on (the lab's target)
  memcached  a memcached binary (scripts/get-components) and pymemcache
  postgres   PostgreSQL's initdb and postgres (scripts/get-components, or the system
             install) and psycopg

The lab's default run measures the `pip` and `redis` containers only (they need nothing
beyond pip and the embedded server); benchmarks/session_containers.py measures all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Container:
    name: str
    needs: str  # pip | redis | memcached | postgres
    label: str  # for plots and tables
    what: str  # one line: how it keeps sessions
    sweeps: bool  # has an application-side housekeeping (expired sessions stay until swept)


CONTAINERS: tuple[Container, ...] = (
    Container("none", "pip", "none (ceiling)", "no session at all: the same app and request, nothing stored", False),
    Container("dict", "pip", "in-process dict",
              "a dict in the (single) gunicorn worker: {sid: (expires, data)}", True),
    Container("memcached", "memcached", "memcached",
              "Flask-Session 0.8 MemcachedSessionInterface (JSON) on a memcached started for the run", False),
    Container("files-flat", "pip", "files, flat dir",
              "one JSON file per session in one directory; expiry = file age", True),
    Container("files-hashed", "pip", "files, hashed dirs",
              "one JSON file per session under two levels of subdirectories (PHP's \"2;/path\")", True),
    Container("sqlite-indexed", "pip", "SQLite, indexed",
              "SQLite (WAL) table sid PRIMARY KEY, data, expires with an index on expires", True),
    Container("sqlite-unindexed", "pip", "SQLite, no index",
              "the same SQLite table without any index", True),
    Container("postgres-indexed", "postgres", "PostgreSQL, indexed",
              "PostgreSQL table sid PRIMARY KEY, data, expires with an index on expires", True),
    Container("postgres-unindexed", "postgres", "PostgreSQL, no index",
              "the same PostgreSQL table without any index", True),
    Container("redis-json", "redis", "Redis JSON+SETEX",
              "Flask-Session 0.8 RedisSessionInterface, JSON format: one key per session, SET EX", False),
    Container("densekv", "redis", "densekv (auto)",
              "densekv's Flask backend, SessionStore with its defaults (layout auto)", True),
    Container("densekv-dense", "redis", "densekv dense+index",
              "densekv's Flask backend, SessionStore(layout=\"dense\", index_identities=True)", True),
)

BY_NAME = {c.name: c for c in CONTAINERS}
DEFAULT_LAB = tuple(c.name for c in CONTAINERS if c.needs in ("pip", "redis"))


def container(name: str) -> Container:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown container {name!r}: choose from {', '.join(BY_NAME)}") from None
