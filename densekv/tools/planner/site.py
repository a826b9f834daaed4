"""Where the planner reads limits and where it measures, with what it may do there.

The planned-for server (`Target`) is the server a user names: `--server NAME` (a scratch
server of the matrix the planner starts), the embedded default, `--url URL` or a client
given to `plan()`. Its probe gives the limits the plan must respect.

Measuring (`site()`) follows the lab's rule (densekv/tools/lab/target.py): the planner flushes
what it measures on, so
  * on a scratch server it started, it measures there (a config the plan needs that is
    not in force: another scratch server of the same binary, started with it);
  * on a user's server (URL or client) it measures only in the database the URL names,
    and only if that database is empty (FLUSHDB SYNC between loads and at the end; never
    CONFIG SET); otherwise - the database holds keys, the server is a cluster, or the
    plan needs a config the server does not have - on an embedded Valkey started with
    that server's listpack settings, and `measured_on` says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from densekv.connect import redact
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import EMBEDDED, ServerBinary, server_binary
from densekv.tools.server.embedded import read_listpack
from densekv.tools.server.process import ServerProcess


@dataclass
class Target:
    """The server a plan is for: a client to probe, and how to measure like it."""

    client: Any
    label: str  # "valkey-9.1 (scratch)", "redis://host:6379/0", "the given client"
    binary: ServerBinary | None = None  # set for scratch servers of the matrix
    url: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def scratch(self) -> bool:
        return self.binary is not None


@dataclass
class Site:
    """A place to measure: a client, its meter and what it is."""

    client: redis.Redis
    meter: Meter
    server: dict[str, Any]
    measured_on: str


def server_info(client: redis.Redis) -> dict[str, Any]:
    info = client.info("server")
    flavor = "valkey" if "valkey_version" in info else "redis"
    return {"flavor": flavor, "version": str(info.get("valkey_version") or info["redis_version"]),
            "allocator": str(client.info("memory").get("mem_allocator", "unknown")),
            "listpack": read_listpack(client)}


def listpack_options(client: Any) -> dict[str, str]:
    """The server's listpack settings as server options ('-' names), for a look-alike."""
    node = client
    if isinstance(client, redis.RedisCluster):
        node = client.get_default_node().redis_connection or client  # type: ignore[no-untyped-call]
    return {k.replace("_", "-"): str(v) for k, v in read_listpack(node).items() if v is not None}


@contextlib.contextmanager
def open_target(*, server: str | None = None, url: str | None = None, client: Any = None) -> Iterator[Target]:
    """The planned-for server (exactly one of server / url / client; none: the embedded default)."""
    if sum(x is not None for x in (server, url, client)) > 1:
        raise ValueError("give one of server=, url= or client=")
    if client is not None:
        yield Target(client, "the given client")
        return
    if url is not None:
        from densekv.connect import connect

        c = connect(url)
        try:
            yield Target(c, redact(url), url=url)
        finally:
            c.close()
        return
    binary = server_binary(server or EMBEDDED)
    with ServerProcess(binary) as proc:
        c = proc.client()
        try:
            yield Target(c, f"{binary.name} (scratch server started by the planner)", binary=binary)
        finally:
            c.close()


def _needs(client: Any, options: Mapping[str, str]) -> bool:
    """True if some of `options` is not what the server has now."""
    have = listpack_options(client)
    return any(have.get(k) != str(v) for k, v in options.items())


@contextlib.contextmanager
def _scratch(binary: ServerBinary, options: Mapping[str, str], measured_on: str) -> Iterator[Site]:
    with ServerProcess(binary, options=dict(options)) as proc:
        c = proc.client()
        try:
            yield Site(c, Meter(c, clear=True), server_info(c), measured_on)
        finally:
            c.close()


@contextlib.contextmanager
def site(target: Target, options: Mapping[str, str] | None = None) -> Iterator[Site]:
    """Somewhere to measure that behaves like `target` (with `options` in force)."""
    options = dict(options or {})
    wanted = ", ".join(f"{k} {v}" for k, v in options.items())
    if target.binary is not None:
        if not options or not _needs(target.client, options):
            c = target.client
            yield Site(c, Meter(c, clear=True), server_info(c), f"{target.binary.name}, a scratch server "
                       "the planner started")
            return
        with _scratch(target.binary, options, f"{target.binary.name}, a scratch server started with {wanted}") as s:
            yield s
        return
    c = target.client
    why = None
    if isinstance(c, redis.RedisCluster):
        why = "it is a cluster (the meter measures one server)"
    elif options and _needs(c, options):
        why = f"the plan needs {wanted}, which the planner never sets on a user's server"
    else:
        db = int(c.connection_pool.connection_kwargs.get("db", 0) or 0)
        keys = int(c.dbsize())
        if keys:
            why = f"its database {db} holds {keys} keys (the planner measures only in an empty database)"
        else:
            meter = Meter(c, scope="db")
            try:
                yield Site(c, meter, server_info(c), f"the empty database {db} of {target.label}")
            finally:
                with contextlib.suppress(redis.RedisError):
                    meter.flush()
            return
    like = {**listpack_options(c), **options}
    note = (f"measured on an embedded {EMBEDDED} started with the listpack settings of {target.label}, "
            f"because {why}; its allocator and per-key costs may differ from that server's")
    with _scratch(server_binary(EMBEDDED), like, note) as s:
        yield s
