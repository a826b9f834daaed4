"""Where the lab measures, and what it may do there.

Two kinds of target, one rule each:
  * scratch: a server the lab started itself (`--server NAME`, or the embedded default),
    or a cluster it started (`--cluster`: densekv/tools/lab/cluster_target.py).
    The lab owns it: it flushes the whole server between measurements and may change its
    config (for the raised-limit curves), and stops it at the end.
  * url: the user's server (`--url`). The lab owns only the database the URL names, and
    only if that database is empty when the lab starts (`LabRefused` otherwise, naming
    an empty database to use instead). It flushes that database alone (FLUSHDB SYNC)
    between measurements and at the end - also when the run is interrupted (Ctrl-C) or
    fails - so the user's other databases are never touched; it never CONFIG SETs the
    server unless `--allow-config` was given (and then restores every value it changed).
    Curves that need another config run on a scratch server the lab starts
    (`with_config`), and their records say which server that was.
    While it owns the database the lab keeps its mark there (MARK_KEY, rewritten after
    every flush, so it is in every baseline and never in a delta): a database that a lab
    killed outright (kill -9, a lost machine) left behind is recognised by that mark as
    the lab's own, cleaned and reused, and the run says so.
used_memory is server-wide: on a busy user server other clients' writes land in the
deltas (the meter waits for quiet, and gives up with a clear error if it never comes).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from densekv.connect import redact as redact  # noqa: PLC0414  # re-exported: lab/cli.py and tests import it here
from densekv.errors import LabError as _LabError
from densekv.errors import LabRefused as _LabRefused
from densekv.tools.lab.results import ServerStamp
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import (
    EMBEDDED,
    MATRIX,
    NEWER,
    ServerBinary,
    find_servers,
    server_binary,
)
from densekv.tools.server.embedded import config_get, read_listpack
from densekv.tools.server.process import ServerProcess


def stamp_of(client: redis.Redis, name: str, *, scratch: bool, url: str | None = None) -> ServerStamp:
    info = client.info("server")
    flavor = "valkey" if "valkey_version" in info else "redis"
    version = str(info.get("valkey_version") or info["redis_version"])
    allocator = str(client.info("memory").get("mem_allocator", "unknown"))
    return ServerStamp(
        name=name, flavor=flavor, version=version, allocator=allocator,
        listpack=read_listpack(client),
        maxmemory_policy=config_get(client, "maxmemory-policy") or "",
        scratch=scratch, url=redact(url) if url else None,
    )


@dataclass
class Target:
    """A server the lab may measure on, with the rights it has there."""

    name: str
    client: redis.Redis | redis.RedisCluster  # a RedisCluster on a --cluster target
    scratch: bool
    stamp: ServerStamp
    meter: Meter
    binary: ServerBinary | None = None
    allow_config: bool = False
    url: str | None = None
    cleaned: str = ""  # what the lab removed of an earlier run's before it started here
    _changed: dict[str, str] = field(default_factory=dict)

    @property
    def may_configure(self) -> bool:
        return self.scratch or self.allow_config

    @property
    def is_cluster(self) -> bool:
        return isinstance(self.client, redis.RedisCluster)

    def masters(self) -> list[redis.Redis]:
        """A plain client of each master: the server itself, or each master of a cluster
        (for what runs on every node: Lua's garbage collection, warm-ups)."""
        if isinstance(self.client, redis.RedisCluster):
            from densekv.tools.measure_cluster import ClusterMeter

            assert isinstance(self.meter, ClusterMeter)
            return list(self.meter.clients)
        return [self.client]

    def disconnect(self) -> None:
        """Close the client's connections (a loader's buffers are not data; the meter nets
        out what is left, Reading.minus). They reopen on the next command."""
        if isinstance(self.client, redis.RedisCluster):
            for node in self.client.get_nodes():  # type: ignore[no-untyped-call]  # redis-py: untyped
                if node.redis_connection is not None:
                    node.redis_connection.connection_pool.disconnect()
        else:
            self.client.connection_pool.disconnect()

    def restamp(self) -> None:
        if isinstance(self.client, redis.RedisCluster):
            raise _LabError("a cluster target is stamped once, when it starts")
        self.stamp = stamp_of(self.client, self.name, scratch=self.scratch, url=self.url)

    def clear(self) -> None:
        """Flush what the lab owns here (the server, or its one database)."""
        self.meter.flush()

    @contextlib.contextmanager
    def with_config(self, settings: Mapping[str, int]) -> Iterator[Target]:
        """A target where `settings` (CONFIG names) are in force, flushed and empty.

        Here, if the lab may configure this server (scratch, or --allow-config): CONFIG
        SET, and every changed value restored on exit. Otherwise on a scratch server of
        the same kind (the same matrix server, or the embedded default for a URL) started
        with those settings and stopped on exit.
        """
        if isinstance(self.client, redis.RedisCluster):
            raise _LabError("the lab does not reconfigure its cluster: curves that need another config "
                           "are measured on one server")
        if self.may_configure:
            before = {k: config_get(self.client, k) for k in settings}
            self.clear()
            try:
                for key, value in settings.items():
                    self.client.config_set(key, value)
                self.restamp()
                yield self
            finally:
                with interrupts_deferred():  # the user's config comes back even on Ctrl-C
                    self.clear()
                    for key, old in before.items():
                        if old is not None:
                            self.client.config_set(key, old)
                    self.restamp()
            return
        binary = self.binary or server_binary(EMBEDDED)
        with scratch_target(binary, options={k: str(v) for k, v in settings.items()}) as other:
            yield other


#: settings of every scratch server the lab starts (see scratch_target)
SCRATCH_OPTIONS = {"slowlog-log-slower-than": "-1"}


@contextlib.contextmanager
def scratch_target(binary: ServerBinary, options: Mapping[str, str] | None = None) -> Iterator[Target]:
    """Start a server of the matrix for the lab; stop it (and remove its files) on exit.
    Its slowlog is off: entries of slow calls (~1 KB each) are server memory that is not
    data, and how many appear depends on how busy the machine is."""
    with ServerProcess(binary, options={**SCRATCH_OPTIONS, **(options or {})}) as proc:
        client = proc.client()
        try:
            meter = Meter(client, clear=True)
            yield Target(binary.name, client, True, stamp_of(client, binary.name, scratch=True),
                         meter, binary=binary)
        finally:
            client.close()


def _empty_db_hint(client: redis.Redis, url: str) -> str:
    keyspace = client.info("keyspace")
    used = {int(k[2:]) for k, v in keyspace.items() if k.startswith("db") and isinstance(v, dict) and v.get("keys")}
    databases = config_get(client, "databases")
    count = int(databases) if databases and databases.isdigit() else 16
    for db in range(count - 1, -1, -1):
        if db not in used:
            return f" (db {db} is empty: end your --url with /{db})"
    return ""


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block to its end even if Ctrl-C comes (cleanup that must not be cut in
    half); a Ctrl-C that came meanwhile is raised after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt


#: the lab's mark in a --url database it owns: a string key, JSON of who wrote it
MARK_KEY = "densekv-lab:owner"


def mark_value() -> str:
    return json.dumps({"by": "densekv lab", "host": socket.gethostname(), "pid": os.getpid(),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def read_mark(client: redis.Redis) -> dict[str, Any] | None:
    """The lab's mark in the client's database, if there is one (None otherwise)."""
    raw = client.get(MARK_KEY)
    if raw is None:
        return None
    try:
        mark = json.loads(raw)
    except ValueError:
        return None
    return mark if isinstance(mark, dict) and mark.get("by") == "densekv lab" else None


class MarkedMeter(Meter):
    """The Meter of a --url database: every flush puts the lab's mark back (before any
    baseline, so the mark's few bytes are never in a delta)."""

    mark = ""

    def flush(self, *, remark: bool = True) -> None:
        super().flush()
        if remark:
            self.client.set(MARK_KEY, self.mark or mark_value())


def _alive_here(mark: Mapping[str, Any]) -> bool:
    """Whether the lab that wrote `mark` runs on this machine now."""
    from densekv.tools.server.process import pid_alive

    pid = mark.get("pid")
    return (mark.get("host") == socket.gethostname() and isinstance(pid, int) and pid != os.getpid()
            and pid_alive(pid))


def _leftovers(client: redis.Redis, db: int, url: str, keys: int) -> str:
    """Clean an earlier lab run's database and say so; LabRefused for anyone else's data."""
    mark = read_mark(client)
    if mark is None:
        raise _LabRefused(
            f"db {db} at {redact(url)} holds {keys} keys: the lab flushes the database it "
            "measures in, so it only uses an empty one; point --url at an empty database"
            + _empty_db_hint(client, url)
        )
    if _alive_here(mark):
        raise _LabRefused(f"db {db} at {redact(url)} is in use by a densekv lab running now (pid {mark['pid']}); "
                         "wait for it, or point --url at another empty database" + _empty_db_hint(client, url))
    client.execute_command("FLUSHDB", "SYNC")  # type: ignore[no-untyped-call]  # redis-py: untyped
    return (f"db {db} held {keys} keys left by an earlier densekv lab run (started {mark.get('started', '?')} "
            f"on {mark.get('host', '?')}, marked {MARK_KEY}): removed before measuring")


@contextlib.contextmanager
def url_target(url: str, *, allow_config: bool) -> Iterator[Target]:
    """The user's server at `url`, if the database it names is empty (or holds only an
    earlier lab run's leftovers, which are removed); LabRefused if not. The database is
    flushed on the way out whatever happened, Ctrl-C included."""
    from densekv.connect import connect

    client = connect(url)
    try:
        if isinstance(client, redis.RedisCluster):
            raise _LabRefused("the lab measures one server: give the redis:// URL of one node, not a cluster")
        db = int(client.connection_pool.connection_kwargs.get("db", 0) or 0)
        keys = int(client.dbsize())
        cleaned = _leftovers(client, db, url, keys) if keys else ""
        stamp = stamp_of(client, "url", scratch=False, url=url)
        meter = MarkedMeter(client, scope="db")  # refuses again if someone wrote in between
        meter.mark = mark_value()
        try:
            client.set(MARK_KEY, meter.mark)
            yield Target("url", client, False, stamp, meter, allow_config=allow_config, url=url, cleaned=cleaned)
        finally:
            with interrupts_deferred(), contextlib.suppress(redis.RedisError):
                meter.flush(remark=False)  # leave the database as the lab found it: empty
    finally:
        client.close()


def resolve_servers(names: tuple[str, ...]) -> list[ServerBinary]:
    """`--server` values: matrix names (repeated or comma-separated) or `all`."""
    wanted: list[str] = []
    for value in names:
        wanted += [v.strip() for v in value.split(",") if v.strip()]
    present = find_servers()
    if "all" in wanted:
        return list(present.values())
    out: list[ServerBinary] = []
    for name in dict.fromkeys(wanted):
        if name not in MATRIX and name not in NEWER:
            raise _LabError(f"unknown server {name!r}: choose one of {', '.join((*MATRIX, *NEWER))} or all")
        out.append(server_binary(name))
    return out
