"""The capability probe: what this server really does, asked of the server itself.

Limits come from CONFIG GET, field-TTL support from COMMAND INFO, and the encoding that a
small hash with one expiring field really gets from trying it on a scratch key (then
deleting it) - never from a version number, because Redis 7.4 keeps such a hash in a
listpack (listpackex) while Valkey 9 converts it to a hashtable, and that decides whether
the `fieldttl` layouts are dense. Layouts never read the probe themselves: the planner
and `layout="auto"` pass the numbers in.

This is the one place server facts are read: `probe_flow()` is a flow, so the sync
`probe()`, the asyncio `aprobe()` and every kind's async shell run the same reads, and
each kind keeps only a pure projection of `Capabilities` (sessions.core.facts_of,
maps.facts.facts_of, ...). `capabilities()` is the pure part (tested with tables,
including Redis 6.2's ziplist config names).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from densekv.cluster_executor import executor_for
from densekv.errors import ServerTooOld, ServerUnavailable
from densekv.flows import Flow, adrive, drive
from densekv.plan import Command, Plan, command

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


def parse_info(raw: Any) -> dict[str, str]:
    """INFO's text (`key:value` lines under `# Section` headers) as a flat dict."""
    out: dict[str, str] = {}
    for line in _text(raw).splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, value = line.split(":", 1)
            out[key] = value.strip()
    return out


def _pairs(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = [_text(x) for x in reply]
    return dict(zip(items[::2], items[1::2]))


def _known(reply: Any) -> bool:
    # the raw reply: redis-py's COMMAND INFO callback fails on a nil entry
    return bool(reply) and reply[0] is not None


def _module_names(reply: Any) -> tuple[str, ...]:
    names = []
    for entry in reply or []:
        if isinstance(entry, dict):
            info = {_text(k): v for k, v in entry.items()}
        else:
            info = {_text(k): v for k, v in zip(entry[::2], entry[1::2])}
        names.append(_text(info.get("name", "?")))
    return tuple(sorted(names))


def _each_or_none(plans: list[Plan[Any]]) -> Flow[list[Any]]:
    """The plans' results in one round trip; if one is refused (CONFIG or MODULE renamed
    or forbidden on a managed service), each plan alone, None for those refused."""
    try:
        return (yield plans)
    except redis.ResponseError:
        out: list[Any] = []
        for plan in plans:
            try:
                out.append((yield [plan])[0])
            except redis.ResponseError:
                out.append(None)
        return out


def probe_flow() -> Flow[Capabilities]:
    """The probe as a flow (densekv/flows.py): sync, asyncio and cluster executors run the
    same one. Two round trips (three on a server with field TTL): INFO and COMMAND INFO;
    every CONFIG name (listpack names and their pre-7.0 ziplist aliases) and MODULE LIST;
    then one expiring field on a scratch key, deleted in the same round trip."""
    try:
        info, hsetex, hexpire = yield [command("INFO", decode=parse_info),
                                       command("COMMAND", "INFO", "HSETEX", decode=_known),
                                       command("COMMAND", "INFO", "HEXPIRE", decode=_known)]
    except (redis.ConnectionError, redis.TimeoutError, ServerUnavailable) as exc:
        raise ServerUnavailable(f"server does not answer: {exc}") from exc
    flavor = "valkey" if "valkey_version" in info or info.get("server_name") == "valkey" else "redis"
    version = info.get("valkey_version") or info["redis_version"]
    if version_tuple(version)[:2] < MIN_VERSION:
        raise ServerTooOld(
            f"{flavor} {version} is too old: densekv needs Redis or Valkey 6.2 or newer"
        )
    names = [name for names in _CONFIG_NAMES.values() for name in names]
    *replies, modules = yield from _each_or_none(
        [command("CONFIG", "GET", name, decode=_pairs) for name in names]
        + [command("MODULE", "LIST", decode=_module_names)])
    field_ttl = "hsetex" if hsetex else "hexpire" if hexpire else "none"
    encoding = None
    if field_ttl != "none":
        key = f"densekv:probe:{{{secrets.token_hex(8)}}}".encode()
        got = yield [Plan((Command(("HSET", key, "f", "v", "g", "w"), (key,)),
                           Command(("HEXPIRE", key, 3600, "FIELDS", 1, "f"), (key,)),
                           Command(("OBJECT", "ENCODING", key), (key,)),
                           Command(("DEL", key), (key,))))]
        encoding = _text(got[0][2])
    return capabilities(info, dict(zip(names, replies)), field_ttl, encoding, modules or ())


def capabilities(info: dict[str, str], config: dict[str, dict[str, str] | None], field_ttl: str,
                 field_ttl_encoding: str | None, modules: tuple[str, ...] = ()) -> Capabilities:
    """Capabilities from what the server said: INFO, the CONFIG GET reply per name (None
    where refused: then every limit is assumed to be its default), COMMAND INFO, the
    scratch key's encoding and MODULE LIST. The first name of _CONFIG_NAMES that the
    server knows wins (Redis 6.2 knows only the ziplist names)."""
    readable = all(reply is not None for reply in config.values())
    values: dict[str, str] = {}
    for key, candidates in _CONFIG_NAMES.items():
        for name in candidates:
            found = config.get(name) or {}
            if readable and name in found:
                values[key] = found[name]
                break

    def num(key: str) -> int | None:
        return int(values[key]) if key in values else None

    def limit(key: str) -> int:
        value = num(key)
        return DEFAULT_LIMITS[key] if value is None else value

    flavor = "valkey" if "valkey_version" in info or info.get("server_name") == "valkey" else "redis"
    caps = Capabilities(
        flavor=flavor,
        version=info.get("valkey_version") or info["redis_version"],
        allocator=info.get("mem_allocator", "unknown"),
        hash_max_listpack_entries=limit("hash_max_listpack_entries"),
        hash_max_listpack_value=limit("hash_max_listpack_value"),
        zset_max_listpack_entries=limit("zset_max_listpack_entries"),
        zset_max_listpack_value=limit("zset_max_listpack_value"),
        set_max_listpack_entries=num("set_max_listpack_entries"),
        set_max_listpack_value=num("set_max_listpack_value"),
        set_max_intset_entries=limit("set_max_intset_entries"),
        field_ttl=field_ttl,
        field_ttl_encoding=field_ttl_encoding,
        modules=modules,
        cluster=bool(int(info.get("cluster_enabled", "0") or 0)),
        maxmemory=num("maxmemory") or 0,
        maxmemory_policy=values.get("maxmemory_policy", "unknown"),
        lazyfree_user_flush=values.get("lazyfree_user_flush", "no") == "yes",
        config_readable=readable,
    )
    return _with_warnings(caps)


def probe(client: Any) -> Capabilities:
    """Ask the server (one primary of a cluster) what it is and what it can do."""
    return drive(probe_flow(), executor_for(client))


async def aprobe(client: Any) -> Capabilities:
    """The same with a redis-py asyncio client."""
    return await adrive(probe_flow(), executor_for(client))


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


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["MIN_VERSION", "Capabilities", "aprobe", "capabilities", "parse_info", "probe", "probe_flow",
           "version_tuple"]
