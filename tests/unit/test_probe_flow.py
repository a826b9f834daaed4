"""The probe flow (densekv/capabilities.py) fed canned server replies, and the kinds' pure
projections of its Capabilities, as tables: Redis 6.2 (only the ziplist config names),
Redis 7.4 (listpackex), Valkey 9.1 (HSETEX, hashtable), a managed service that forbids
CONFIG or MODULE, a server too old, a server that does not answer. The matrix's real
servers are probed in tests/behaviour/test_probe.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from densekv.capabilities import Capabilities, probe_flow
from densekv.errors import ServerTooOld, ServerUnavailable
from densekv.flows import adrive, drive
from densekv.maps.settings import MapFacts
from densekv.maps.settings import facts_of as map_facts
from densekv.sessions.core import ServerFacts
from densekv.sessions.core import facts_of as session_facts
from densekv.sessions.layouts.base import LayoutLimits
from tests.unit.canned import ACanned, Canned

LISTPACK_7 = {"hash-max-listpack-entries": "128", "hash-max-listpack-value": "64",
              "zset-max-listpack-entries": "128", "zset-max-listpack-value": "64",
              "set-max-intset-entries": "512", "maxmemory-policy": "noeviction", "maxmemory": "0",
              "lazyfree-lazy-user-flush": "no"}
# Redis 6.2 answers CONFIG GET of a listpack name with an empty list: only these exist
ZIPLIST_62 = {"hash-max-ziplist-entries": "512", "hash-max-ziplist-value": "80",
              "zset-max-ziplist-entries": "256", "zset-max-ziplist-value": "72",
              "set-max-intset-entries": "512", "maxmemory-policy": "noeviction", "maxmemory": "0",
              "lazyfree-lazy-user-flush": "no"}


@dataclass
class Server:
    """What a canned server answers."""

    info: dict[str, str]
    config: dict[str, str] = field(default_factory=dict)
    commands: frozenset[str] = frozenset()
    encoding: bytes = b"hashtable"
    modules: tuple[str, ...] = ()
    forbidden: frozenset[str] = frozenset()  # commands answered with an error
    down: bool = False

    def answer(self, args: tuple[Any, ...]) -> Any:
        if self.down:
            return redis.ConnectionError("Connection refused")
        if args[0] in self.forbidden:
            return redis.ResponseError(f"ERR unknown command '{args[0]}'")
        if args == ("INFO",):
            return "\r\n".join(["# Server", *(f"{k}:{v}" for k, v in self.info.items()), ""]).encode()
        if args[:2] == ("COMMAND", "INFO"):
            return [[args[2].lower().encode(), -1]] if args[2] in self.commands else [None]
        if args[:2] == ("CONFIG", "GET"):
            name = args[2]
            return [name.encode(), self.config[name].encode()] if name in self.config else []
        if args == ("MODULE", "LIST"):
            return [[b"name", m.encode(), b"ver", 1] for m in self.modules]
        return {"HSET": 2, "HEXPIRE": [1], "OBJECT": self.encoding, "DEL": 1}[args[0]]


def redis_info(version: str, **extra: str) -> dict[str, str]:
    return {"redis_version": version, "mem_allocator": "jemalloc-5.3.0", "cluster_enabled": "0", **extra}


REDIS_62 = Server(redis_info("6.2.14"), ZIPLIST_62)
REDIS_74 = Server(redis_info("7.4.1"), {**LISTPACK_7, "set-max-listpack-entries": "128",
                                        "set-max-listpack-value": "64"},
                  frozenset({"HEXPIRE"}), b"listpackex", ("bf",))
VALKEY_91 = Server({**redis_info("7.2.4", mem_allocator="libc", cluster_enabled="1"), "server_name": "valkey",
                    "valkey_version": "9.1.2"}, LISTPACK_7, frozenset({"HEXPIRE", "HSETEX"}))
NO_CONFIG = Server(redis_info("7.0.15"), LISTPACK_7, modules=("search",), forbidden=frozenset({"CONFIG"}))
NO_MODULE = Server(redis_info("7.0.15"), {**LISTPACK_7, "hash-max-listpack-entries": "64"},
                   forbidden=frozenset({"MODULE"}))

# server -> what the probe reports of it
CASES = [
    (REDIS_62, {"flavor": "redis", "version": "6.2.14", "hash_max_listpack_entries": 512, "hash_max_listpack_value": 80,
                    "zset_max_listpack_entries": 256, "zset_max_listpack_value": 72, "set_max_listpack_entries": None,
                    "field_ttl": "none", "field_ttl_encoding": None, "cluster": False, "config_readable": True, "warnings": ()}),
    (REDIS_74, {"flavor": "redis", "version": "7.4.1", "hash_max_listpack_entries": 128, "set_max_listpack_entries": 128,
                    "field_ttl": "hexpire", "field_ttl_encoding": "listpackex", "modules": ("bf",), "cluster": False}),
    (VALKEY_91, {"flavor": "valkey", "version": "9.1.2", "allocator": "libc", "field_ttl": "hsetex",
                     "field_ttl_encoding": "hashtable", "cluster": True}),
    (NO_CONFIG, {"hash_max_listpack_entries": 128, "hash_max_listpack_value": 64, "maxmemory_policy": "unknown",
                     "config_readable": False, "modules": ("search",),
                     "warnings": ("CONFIG GET is not allowed: listpack limits assumed to be the defaults",)}),
    (NO_MODULE, {"hash_max_listpack_entries": 64, "modules": (), "config_readable": True}),
]


@pytest.mark.parametrize(("server", "want"), CASES, ids=["redis-6.2", "redis-7.4", "valkey-9.1", "no-config",
                                                         "no-module"])
def test_the_probe_flow_reads_what_each_server_says(server: Server, want: dict[str, Any]) -> None:
    ex = Canned(server.answer)
    caps = drive(probe_flow(), ex)
    for name, value in want.items():
        assert getattr(caps, name) == value, name
    # INFO + COMMAND INFO; CONFIG GET of every name + MODULE LIST (refused: then each alone);
    # the scratch key where the server has field TTL
    alone = len(ex.trips[1]) if server.forbidden else 0
    assert len(ex.trips) == 2 + alone + (caps.field_ttl != "none")
    if caps.field_ttl != "none":  # the scratch key is deleted in the round trip that made it
        assert [a[0] for a in ex.trips[-1]] == ["HSET", "HEXPIRE", "OBJECT", "DEL"]
    assert asyncio.run(adrive(probe_flow(), ACanned(server.answer))) == caps


def test_a_lowered_limit_on_62_is_read_from_the_ziplist_name_and_warned_about() -> None:
    low = Server(redis_info("6.2.0"), {**ZIPLIST_62, "hash-max-ziplist-entries": "16"})
    caps = drive(probe_flow(), Canned(low.answer))
    assert caps.hash_max_listpack_entries == 16
    assert any("hash-max-listpack-entries is 16" in w for w in caps.warnings)


def test_a_server_too_old_is_refused_after_the_first_round_trip() -> None:
    ex = Canned(Server(redis_info("6.0.9"), ZIPLIST_62).answer)
    with pytest.raises(ServerTooOld, match="6.2"):
        drive(probe_flow(), ex)
    assert len(ex.trips) == 1


def test_a_server_that_does_not_answer_is_unavailable() -> None:
    with pytest.raises(ServerUnavailable, match="does not answer"):
        drive(probe_flow(), Canned(Server(redis_info("7.0.0"), down=True).answer))


PROJECTIONS = [  # server -> (what a session store keeps, what a map keeps)
    (REDIS_62, ServerFacts(LayoutLimits(512, 80, 256), "none", None, False), MapFacts(512, 80, "none", None, False)),
    (REDIS_74, ServerFacts(LayoutLimits(128, 64, 128), "hexpire", "listpackex", False),
     MapFacts(128, 64, "hexpire", "listpackex", False)),
    (VALKEY_91, ServerFacts(LayoutLimits(128, 64, 128), "hsetex", "hashtable", True),
     MapFacts(128, 64, "hsetex", "hashtable", True)),
]


@pytest.mark.parametrize(("server", "sessions", "maps"), PROJECTIONS, ids=["redis-6.2", "redis-7.4", "valkey-9.1"])
def test_kinds_keep_pure_projections_of_the_capabilities(server: Server, sessions: ServerFacts,
                                                         maps: MapFacts) -> None:
    caps: Capabilities = drive(probe_flow(), Canned(server.answer))
    assert session_facts(caps) == sessions
    assert map_facts(caps) == maps
