"""The capability probe: what this server really does, asked of the server itself.

Limits come from CONFIG GET, field-TTL support from COMMAND INFO, and the encoding that a
small hash with one expiring field really gets from trying it on a scratch key (then
deleting it) - never from a version number, because Redis 7.4 keeps such a hash in a
listpack (listpackex) while Valkey 9 converts it to a hashtable, and that decides whether
the `fieldttl` layouts are dense. Layouts never read the probe themselves: the planner
and `layout="auto"` pass the numbers in.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from densekv.errors import ServerTooOld, ServerUnavailable
from densekv.plan import SyncExecutor, command

MIN_VERSION = (6, 2)

#: The servers' own defaults; a limit set lower than these is worth a warning.
DEFAULT_LIMITS = {
    "hash_max_listpack_entries": 128,
    "hash_max_listpack_value": 64,
    "zset_max_listpack_entries": 128,
    "zset_max_listpack_value": 64,
    "set_max_listpack_entries": 128,
    "set_max_intset_entries": 512,
}

# CONFIG names, with the pre-7.0 ziplist aliases as fallback.
_CONFIG_NAMES = {
    "hash_max_listpack_entries": ("hash-max-listpack-entries", "hash-max-ziplist-entries"),
    "hash_max_listpack_value": ("hash-max-listpack-value", "hash-max-ziplist-value"),
    "zset_max_listpack_entries": ("zset-max-listpack-entries", "zset-max-ziplist-entries"),
    "zset_max_listpack_value": ("zset-max-listpack-value", "zset-max-ziplist-value"),
    "set_max_listpack_entries": ("set-max-listpack-entries",),
    "set_max_listpack_value": ("set-max-listpack-value",),
    "set_max_intset_entries": ("set-max-intset-entries",),
    "maxmemory_policy": ("maxmemory-policy",),
    "maxmemory": ("maxmemory",),
    "lazyfree_user_flush": ("lazyfree-lazy-user-flush",),
}


@dataclass(frozen=True)
class Capabilities:
    """One server's capabilities. `to_json()` is what `densekv probe --json` prints."""

    flavor: str
    version: str
    allocator: str
    hash_max_listpack_entries: int
    hash_max_listpack_value: int
    zset_max_listpack_entries: int
    zset_max_listpack_value: int
    set_max_listpack_entries: int | None
    set_max_listpack_value: int | None
    set_max_intset_entries: int
    field_ttl: str  # "none" | "hexpire" | "hsetex"
    field_ttl_encoding: str | None
    modules: tuple[str, ...]
    cluster: bool
    maxmemory: int
    maxmemory_policy: str
    lazyfree_user_flush: bool
    config_readable: bool = True
    warnings: tuple[str, ...] = field(default=())

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return version_tuple(self.version)

    @property
    def jemalloc(self) -> bool:
        return self.allocator.startswith("jemalloc")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["modules"] = list(self.modules)
        data["warnings"] = list(self.warnings)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        match = re.match(r"\d+", piece)
        parts.append(int(match.group()) if match else 0)
    return tuple(parts)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _node_client(client: Any) -> redis.Redis:
    """A plain client of one node: the client itself, or a cluster's first primary."""
    if isinstance(client, redis.RedisCluster):
        node = client.get_primaries()[0]  # type: ignore[no-untyped-call]  # redis-py: untyped
        return node.redis_connection  # type: ignore[no-any-return]
    return client  # type: ignore[no-any-return]


def _config(node: redis.Redis) -> tuple[dict[str, str], bool]:
    values: dict[str, str] = {}
    try:
        for key, names in _CONFIG_NAMES.items():
            for name in names:
                reply = node.execute_command("CONFIG", "GET", name)  # type: ignore[no-untyped-call]  # redis-py: untyped
                pairs = _pairs(reply)
                if name in pairs:
                    values[key] = pairs[name]
                    break
    except redis.ResponseError:  # CONFIG renamed or forbidden (managed services)
        return {}, False
    return values, True


def _pairs(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = [_text(x) for x in reply]
    return dict(zip(items[::2], items[1::2]))


def _has_command(node: redis.Redis, name: str) -> bool:
    # Raw reply through a plan: redis-py's COMMAND INFO callback fails on a nil entry.
    reply: list[Any] = SyncExecutor(node).run(command("COMMAND", "INFO", name))
    return bool(reply) and reply[0] is not None


def _field_ttl_encoding(client: Any, field_ttl: str) -> str | None:
    """Try one expiring field on a scratch key and read the encoding it really got."""
    if field_ttl == "none":
        return None
    key = f"densekv:probe:{{{secrets.token_hex(8)}}}"
    try:
        client.execute_command("HSET", key, "f", "v", "g", "w")
        client.execute_command("HEXPIRE", key, 3600, "FIELDS", 1, "f")
        return _text(client.execute_command("OBJECT", "ENCODING", key))
    finally:
        client.execute_command("DEL", key)


def _modules(node: redis.Redis) -> tuple[str, ...]:
    try:
        reply = node.execute_command("MODULE", "LIST")  # type: ignore[no-untyped-call]  # redis-py: untyped
    except redis.ResponseError:
        return ()
    names = []
    for entry in reply or []:
        if isinstance(entry, dict):
            info = {_text(k): v for k, v in entry.items()}
        else:
            info = {_text(k): v for k, v in zip(entry[::2], entry[1::2])}
        names.append(_text(info.get("name", "?")))
    return tuple(sorted(names))


def probe(client: Any) -> Capabilities:
    """Ask the server (one node of a cluster) what it is and what it can do."""
    node = _node_client(client)
    try:
        info = node.info()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ServerUnavailable(f"server does not answer: {exc}") from exc
    flavor = "valkey" if "valkey_version" in info or info.get("server_name") == "valkey" else "redis"
    version = _text(info.get("valkey_version") or info["redis_version"])
    if version_tuple(version)[:2] < MIN_VERSION:
        raise ServerTooOld(
            f"{flavor} {version} is too old: densekv needs Redis or Valkey 6.2 or newer"
        )
    config, readable = _config(node)

    def num(key: str) -> int | None:
        return int(config[key]) if key in config else None

    def limit(key: str) -> int:
        value = num(key)
        return DEFAULT_LIMITS[key] if value is None else value

    if _has_command(node, "HSETEX"):
        field_ttl = "hsetex"
    elif _has_command(node, "HEXPIRE"):
        field_ttl = "hexpire"
    else:
        field_ttl = "none"
    caps = Capabilities(
        flavor=flavor,
        version=version,
        allocator=_text(info.get("mem_allocator", "unknown")),
        hash_max_listpack_entries=limit("hash_max_listpack_entries"),
        hash_max_listpack_value=limit("hash_max_listpack_value"),
        zset_max_listpack_entries=limit("zset_max_listpack_entries"),
        zset_max_listpack_value=limit("zset_max_listpack_value"),
        set_max_listpack_entries=num("set_max_listpack_entries"),
        set_max_listpack_value=num("set_max_listpack_value"),
        set_max_intset_entries=limit("set_max_intset_entries"),
        field_ttl=field_ttl,
        field_ttl_encoding=_field_ttl_encoding(client, field_ttl),
        modules=_modules(node),
        cluster=bool(int(info.get("cluster_enabled", 0))),
        maxmemory=num("maxmemory") or 0,
        maxmemory_policy=config.get("maxmemory_policy", "unknown"),
        lazyfree_user_flush=config.get("lazyfree_user_flush", "no") == "yes",
        config_readable=readable,
    )
    return _with_warnings(caps)


def _with_warnings(caps: Capabilities) -> Capabilities:
    warnings: list[str] = []
    if not caps.config_readable:
        warnings.append(
            "CONFIG GET is not allowed: listpack limits assumed to be the defaults"
        )
    policy = caps.maxmemory_policy
    if policy.startswith("allkeys-") or (policy.startswith("volatile-") and caps.maxmemory):
        warnings.append(
            f"maxmemory-policy {policy} can evict a whole partition key, i.e. thousands of "
            "sessions or set members at once; use noeviction for densekv data"
        )
    for key, default in DEFAULT_LIMITS.items():
        value = getattr(caps, key)
        if value is not None and value < default:
            warnings.append(
                f"{key.replace('_', '-')} is {value}, below the default {default}: "
                "partitions convert to hashtables early and cost several times more"
            )
    return Capabilities(**{**caps.__dict__, "warnings": tuple(warnings)})
