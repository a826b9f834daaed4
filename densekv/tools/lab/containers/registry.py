"""The session containers measured, in report order, and what each one needs.

`needs` says what must be on the machine besides the app (Flask, gunicorn):
  pip        nothing else (the app keeps the sessions itself: a dict, files, SQLite)
  redis      the Redis/Valkey server the run measures on (the lab's target)
  memcached  a memcached binary (scripts/get-components) and pymemcache
  postgres   PostgreSQL's initdb and postgres (scripts/get-components, or the system
             install) and psycopg

`seed`/`seed_says`: what seed 003 found for the container of its own that this one
stands for (ab's req/s as sessions grew to 50k+): a file per session in one directory
(PStore) and ActiveRecord without an index on sessid fell off; memory, DRb and indexed
ActiveRecord stayed flat. Containers the seed did not have (memcached, Redis, densekv,
hashed directories) carry the claim the seed makes for in-memory and indexed stores.

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
    #: what seed 003 found for this kind of container as stored sessions grew: "falls" or
    #: "flat" (the seed's claims, typed in; the lab's verdict is computed from its points)
    seed: str = "flat"
    seed_says: str = ""  # the seed's words for it


CONTAINERS: tuple[Container, ...] = (
    Container("none", "pip", "none (ceiling)", "no session at all: the same app and request, nothing stored", False,
              "flat", "no session data kept: a flat line, the ceiling"),
    Container("dict", "pip", "in-process dict",
              "a dict in the (single) gunicorn worker: {sid: (expires, data)}", True,
              "flat", "MemoryStore fast and flat, bar a garbage-collection dip near 30k"),
    Container("memcached", "memcached", "memcached",
              "Flask-Session 0.8 MemcachedSessionInterface (JSON) on a memcached started for the run", False,
              "flat", "DRb, a store in another process: flat"),
    Container("files-flat", "pip", "files, flat dir",
              "one JSON file per session in one directory; expiry = file age", True,
              "falls", "PStore, a file per session in one directory: nearly 10x slower by 126k sessions on FFS"),
    Container("files-hashed", "pip", "files, hashed dirs",
              "one JSON file per session in 64 subdirectories, by the id's first character (PHP's \"1;/path\")", True,
              "flat", "files kept out of one huge directory (the seed's advice: housekeeping) do not fall"),
    Container("sqlite-indexed", "pip", "SQLite, indexed",
              "SQLite (WAL) table sid PRIMARY KEY, data, expires with an index on expires", True,
              "flat", "ActiveRecord with an index on sessid: very flat to 50k"),
    Container("sqlite-unindexed", "pip", "SQLite, no index",
              "the same SQLite table without any index", True,
              "falls", "ActiveRecord without an index on sessid falls off"),
    Container("postgres-indexed", "postgres", "PostgreSQL, indexed",
              "PostgreSQL table sid PRIMARY KEY, data, expires with an index on expires", True,
              "flat", "ActiveRecord with an index on sessid: very flat to 50k"),
    Container("postgres-unindexed", "postgres", "PostgreSQL, no index",
              "the same PostgreSQL table without any index", True,
              "falls", "ActiveRecord without an index on sessid falls off"),
    Container("redis-json", "redis", "Redis JSON+SETEX",
              "Flask-Session 0.8 RedisSessionInterface, JSON format: one key per session, SET EX", False,
              "flat", "a store in another process (DRb): flat"),
    Container("densekv", "redis", "densekv (auto)",
              "densekv's Flask backend, SessionStore with its defaults (layout auto)", True,
              "flat", "a store in another process (DRb): flat"),
    Container("densekv-dense", "redis", "densekv dense+index",
              "densekv's Flask backend, SessionStore(layout=\"dense\", index_identities=True)", True,
              "flat", "a store in another process (DRb): flat"),
)

BY_NAME = {c.name: c for c in CONTAINERS}
DEFAULT_LAB = tuple(c.name for c in CONTAINERS if c.needs in ("pip", "redis"))


def container(name: str) -> Container:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown container {name!r}: choose from {', '.join(BY_NAME)}") from None
