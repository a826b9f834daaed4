"""SetFamily and AsyncSetFamily: many small sets keyed by a parent id (seed 002's case:
completed child jobs per parent job), each kept in its server's compact encoding.

One key per parent, `{name}:fm:{<parent>}`: a HASH (child -> 1) or a SET of children.
Which one is decided per server (choose_encoding): seed 002 found HASH cheaper than SET,
on servers where a small SET of strings was a hashtable. Since Redis 7.2 / Valkey 8 a
small SET of strings is a listpack too, and costs 2 bytes per child less than a hash
(no value entry), but only up to set-max-listpack-entries (128 by default) where a hash
stays compact up to hash-max-listpack-entries (512 when the server runs without a config
file). So: SET when the server has listpack sets and the caller says parents hold at
most that many children (`expected_children`), HASH otherwise. benchmarks/set_memory.py
(--family) measures both on each server.

Every add is one Lua script (densekv/lua/set_family_add.lua): type check (a key of
another type -> WrongType, untouched), HSETNX/SADD, the parent's expiry refreshed
(`ttl`: a parent disappears ttl seconds after its last add; `expire()` sets one parent's
expiry), and the size and encoding after the add. A parent that leaves the compact
encoding (more children than the limit, or a child longer than the value limit) costs
its own memory only - encodings are per key - and is recorded in the family's outlier
set `{name}:fo:{0}` (one SADD, only for adds that find the parent converted), which
stats() reads instead of scanning the keyspace.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis

from densekv.cluster_executor import executor_for
from densekv.errors import BadItem
from densekv.flows import Flow, drive
from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Plan, command, script_call
from densekv.sets.compact import OpenedOnFirstUse, limits_from_probe
from densekv.sets.layouts import SetLimits
from densekv.twins import OpensOnce, share_docstrings

T = TypeVar("T")
C = TypeVar("C")  # the client: redis-py's sync or asyncio one
Parent = str | bytes | int
Child = str | bytes | int

COMPACT = ("listpack", "listpackex", "intset", "ziplist")
OUTLIERS_SHOWN = 100


@dataclass(frozen=True)
class FamilyChoice:
    encoding: str  # "hash" | "set"
    limit: int
    reason: str


def choose_encoding(limits: SetLimits, expected_children: int | None, encoding: str = "auto") -> FamilyChoice:
    hash_limit = limits.hash_max_listpack_entries
    set_limit = limits.set_max_listpack_entries or 0
    if encoding == "hash":
        return FamilyChoice("hash", hash_limit, "asked for")
    if encoding == "set":
        return FamilyChoice("set", set_limit, "asked for" if set_limit else "asked for; this server has no listpack sets")
    if encoding != "auto":
        raise ValueError("encoding is 'auto', 'hash' or 'set'")
    if not limits.listpack_sets:
        return FamilyChoice("hash", hash_limit, "no listpack sets here (Redis < 7.2): a small SET of "
                            "strings is a hashtable, a small HASH a listpack (seed 002)")
    if expected_children is not None and expected_children <= set_limit:
        return FamilyChoice("set", set_limit, f"listpack sets here, and parents hold <= {expected_children} "
                            f"children (set-max-listpack-entries {set_limit}): 2 bytes per child less than a hash")
    return FamilyChoice("hash", hash_limit, f"a hash stays a listpack up to {hash_limit} children, a set only "
                        f"up to {set_limit} (pass expected_children <= {set_limit} to use sets)")


_DECIMAL = re.compile(rb"0|-?[1-9][0-9]*")  # what int(text) gives back as the same text


def _bytes_of(value: object, what: str) -> bytes:
    """The stored bytes of a parent or child: bytes as they are, str as UTF-8, int as
    decimal; BadItem for anything that would not come back the same (nothing sent)."""
    if isinstance(value, bool):
        raise BadItem(f"a bool is not a {what}: pass str, bytes or int")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError:
            raise BadItem(f"a {what} with a lone surrogate is not UTF-8 text: it cannot come back "
                          "as the same str") from None
    if isinstance(value, int):
        try:
            return str(value).encode()
        except ValueError:  # more digits than int<->str conversion allows (4300)
            raise BadItem(f"an int {what} of more than 4300 digits: store its bytes instead") from None
    raise BadItem(f"a {what} is str, bytes or int, not {type(value).__name__}")


class FamilyCore:
    """Flows of one family; no I/O."""

    def __init__(self, name: str, ttl: float | None, choice: FamilyChoice, limits: SetLimits,
                 children: type = bytes) -> None:
        if not isinstance(name, str) or not name or any(c in name for c in "{}"):
            raise ValueError("a family name is a non-empty string without braces")
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl is a positive number of seconds (or None)")
        if children not in (bytes, str, int):
            raise ValueError("children is bytes, str or int (the type members() returns)")
        self.name = name
        self.ttl_ms = int(ttl * 1000) if ttl else 0
        self.choice = choice
        self.limits = limits
        self.children = children
        self.outlier_key = tag(name, "fo", 0)

    def child(self, child: object) -> bytes:
        """A child's stored bytes, refused (BadItem) unless members() can give it back as
        the family's `children` type: UTF-8 for str, canonical decimal for int."""
        raw = _bytes_of(child, "child")
        if self.children is int and not _DECIMAL.fullmatch(raw):
            raise BadItem(f"child {raw[:40]!r} is not a decimal integer, and this family gives its "
                          "children back as int")
        if self.children is str:
            try:
                raw.decode()
            except UnicodeDecodeError:
                raise BadItem(f"child {raw[:40]!r} is not UTF-8, and this family gives its children "
                              "back as str") from None
        return raw

    def key(self, parent: object) -> bytes:
        return tag(self.name, "fm", _bytes_of(parent, "parent"))

    def parent_of(self, key: bytes) -> bytes:
        return key[len(self.name) + 5 : -1]

    def out(self, child: bytes) -> Any:
        if self.children is bytes:
            return child
        text = child.decode()
        return int(text) if self.children is int else text

    @property
    def hash(self) -> bool:
        return self.choice.encoding == "hash"

    def _plan_add(self, parent: object, child: object) -> Plan[tuple[int, int, bytes]]:
        key = self.key(parent)
        c = self.child(child)
        return script_call(script("set_family_add"), (key,), (c, self.choice.encoding, self.ttl_ms),
                           lambda r: (int(r[0]), int(r[1]), r[2]))

    def add_many(self, parent: object, children: Iterable[object]) -> Flow[list[bool]]:
        kids = list(children)
        for c in kids:
            self.child(c)  # all checked before anything is sent
        if not kids:
            return []
        replies = yield [self._plan_add(parent, c) for c in kids]
        if any(enc not in (e.encode() for e in COMPACT) for _, _, enc in replies):
            yield [command("SADD", self.outlier_key, _bytes_of(parent, "parent"), keys=(self.outlier_key,))]
        return [bool(a) for a, _, _ in replies]

    def add(self, parent: object, child: object) -> Flow[bool]:
        return (yield from self.add_many(parent, [child]))[0]

    def contains(self, parent: object, child: object) -> Flow[bool]:
        key = self.key(parent)
        cmd = "HEXISTS" if self.hash else "SISMEMBER"
        return bool((yield [command(cmd, key, self.child(child), keys=(key,))])[0])

    def remove(self, parent: object, child: object) -> Flow[bool]:
        key = self.key(parent)
        cmd = "HDEL" if self.hash else "SREM"
        return bool((yield [command(cmd, key, self.child(child), keys=(key,))])[0])

    def count(self, parent: object) -> Flow[int]:
        key = self.key(parent)
        return int((yield [command("HLEN" if self.hash else "SCARD", key, keys=(key,))])[0])

    def members(self, parent: object) -> Flow[set[Any]]:
        key = self.key(parent)
        found: set[bytes] = set()
        cursor = 0
        while True:
            reply = (yield [command("HSCAN" if self.hash else "SSCAN", key, cursor, "COUNT", 1000, keys=(key,))])[0]
            cursor = int(reply[0])
            found.update(reply[1][::2] if self.hash else reply[1])
            if cursor == 0:
                return {self.out(c) for c in found}

    def discard_parent(self, parent: object) -> Flow[bool]:
        key = self.key(parent)
        gone = (yield [script_call(script("set_family_discard"), (key,), (self.choice.encoding,), int)])[0]
        yield [command("SREM", self.outlier_key, _bytes_of(parent, "parent"), keys=(self.outlier_key,))]
        return bool(gone)

    def expire(self, parent: object, seconds: float) -> Flow[bool]:
        if seconds <= 0:
            raise ValueError("seconds is a positive number")
        key = self.key(parent)
        return bool((yield [command("PEXPIRE", key, int(seconds * 1000), keys=(key,))])[0])

    def ttl(self, parent: object) -> Flow[float | None]:
        """Seconds left before the parent expires; None if it has no expiry or does not exist."""
        key = self.key(parent)
        ms = int((yield [command("PTTL", key, keys=(key,))])[0])
        return ms / 1000 if ms >= 0 else None

    def stats(self) -> Flow[dict[str, Any]]:
        reply = (yield [command("SSCAN", self.outlier_key, 0, "COUNT", OUTLIERS_SHOWN, keys=(self.outlier_key,))])[0]
        listed = list(dict.fromkeys(reply[1]))[:OUTLIERS_SHOWN]
        outliers: list[dict[str, Any]] = []
        gone: list[bytes] = []
        if listed:
            keys = [self.key(p) for p in listed]
            size = "HLEN" if self.hash else "SCARD"
            replies = yield [command(size, k, keys=(k,)) for k in keys] + [
                command("OBJECT", "ENCODING", k, keys=(k,)) for k in keys
            ]
            for p, n, enc in zip(listed, replies[: len(keys)], replies[len(keys) :]):
                if enc is None:
                    gone.append(p)  # expired or removed since: forget it
                else:
                    outliers.append({"parent": p.decode(errors="replace"), "children": int(n),
                                     "encoding": enc.decode()})
        if gone:
            yield [command("SREM", self.outlier_key, *gone, keys=(self.outlier_key,))]
        warnings = []
        if outliers:
            warnings.append(f"{len(outliers)} parent(s) outgrew the {self.choice.encoding} listpack "
                            f"(limit {self.choice.limit} children): each costs several times the "
                            "memory per child; the other parents are unaffected")
        return {
            "name": self.name, "encoding": self.choice.encoding, "reason": self.choice.reason,
            "listpack_limit": self.choice.limit, "ttl": self.ttl_ms / 1000 if self.ttl_ms else None,
            "outliers": outliers, "warnings": warnings,
        }


class _FamilyShell(Generic[C]):
    """What SetFamily and its asyncio twin share: the one signature (neither does I/O in
    it: both read the server's limits on first use or open()) and what needs no server."""

    def __init__(
        self,
        client: C,
        name: str,
        ttl: float | None = None,
        *,
        expected_children: int | None = None,
        encoding: str = "auto",
        children: type = bytes,
        limits: SetLimits | None = None,
        durable: bool = False,
    ) -> None:
        """`client`: a redis-py client (redis.Redis or redis.RedisCluster) for the sync
        class, an asyncio one (redis.asyncio) for the twin."""
        self._names = FamilyCore(name, ttl, FamilyChoice("hash", 1, ""), SetLimits(), children)  # args checked
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._limits = limits
        self._args = (name, ttl, expected_children, encoding, children)
        self._start()

    def _start(self) -> None:
        """Note that the family is not open yet (the first operation, or open(), opens it)."""
        raise NotImplementedError

    def _make(self, limits: SetLimits) -> FamilyCore:
        name, ttl, expected, encoding, children = self._args
        return FamilyCore(name, ttl, choose_encoding(limits, expected, encoding), limits, children)

    def _opened(self) -> FamilyCore:
        raise NotImplementedError

    @property
    def encoding(self) -> str:
        """The chosen encoding (opens the family; on the asyncio twin: after `await f.open()`)."""
        return self._opened().choice.encoding

    def key_of(self, parent: Parent) -> bytes:
        """The server key that holds `parent`'s children (for MEMORY USAGE, OBJECT ENCODING;
        the name needs no server)."""
        return self._names.key(parent)


class SetFamily(OpensOnce[FamilyCore], _FamilyShell[redis.Redis | redis.RedisCluster]):
    """Many small sets keyed by a parent id; see the module docstring. The first operation
    (or `open()`) reads the server's limits, unless given, and chooses the encoding."""

    def _start(self) -> None:
        self._core = None
        self._opening = threading.Lock()

    def _open_core(self) -> FamilyCore:
        return self._make(self._limits or limits_from_probe(self.client))

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._ex)

    def add(self, parent: Parent, child: Child) -> bool:
        """True if the child was new to this parent (one script call; atomic)."""
        return self._run(self._opened().add(parent, child))

    def add_many(self, parent: Parent, children: Iterable[Child]) -> list[bool]:
        return self._run(self._opened().add_many(parent, children))

    def contains(self, parent: Parent, child: Child) -> bool:
        return self._run(self._opened().contains(parent, child))

    def remove(self, parent: Parent, child: Child) -> bool:
        return self._run(self._opened().remove(parent, child))

    def members(self, parent: Parent) -> set[Any]:
        return self._run(self._opened().members(parent))

    def count(self, parent: Parent) -> int:
        return self._run(self._opened().count(parent))

    def discard_parent(self, parent: Parent) -> bool:
        return self._run(self._opened().discard_parent(parent))

    def expire(self, parent: Parent, seconds: float) -> bool:
        return self._run(self._opened().expire(parent, seconds))

    def ttl(self, parent: Parent) -> float | None:
        return self._run(self._opened().ttl(parent))

    def stats(self) -> dict[str, Any]:
        return self._run(self._opened().stats())


class AsyncSetFamily(OpenedOnFirstUse[FamilyCore], _FamilyShell[Any]):
    """The asyncio twin of SetFamily: same names, awaited."""

    _not_open = "the family is not open yet: await f.open() (or any operation) first"

    def _start(self) -> None:
        self._core = None

    async def _open_with(self, limits: SetLimits) -> FamilyCore:
        return self._make(limits)

    async def ready(self) -> FamilyCore:
        """`await f.open()` under its older name, returning the family's core."""
        return await self._ready()

    async def add(self, parent: Parent, child: Child) -> bool:
        return await self._run(lambda c: c.add(parent, child))

    async def add_many(self, parent: Parent, children: Iterable[Child]) -> list[bool]:
        kids = list(children)
        return await self._run(lambda c: c.add_many(parent, kids))

    async def contains(self, parent: Parent, child: Child) -> bool:
        return await self._run(lambda c: c.contains(parent, child))

    async def remove(self, parent: Parent, child: Child) -> bool:
        return await self._run(lambda c: c.remove(parent, child))

    async def members(self, parent: Parent) -> set[Any]:
        return await self._run(lambda c: c.members(parent))

    async def count(self, parent: Parent) -> int:
        return await self._run(lambda c: c.count(parent))

    async def discard_parent(self, parent: Parent) -> bool:
        return await self._run(lambda c: c.discard_parent(parent))

    async def expire(self, parent: Parent, seconds: float) -> bool:
        return await self._run(lambda c: c.expire(parent, seconds))

    async def ttl(self, parent: Parent) -> float | None:
        return await self._run(lambda c: c.ttl(parent))

    async def stats(self) -> dict[str, Any]:
        return await self._run(lambda c: c.stats())


share_docstrings(SetFamily, AsyncSetFamily)


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["AsyncSetFamily", "FamilyChoice", "FamilyCore", "SetFamily", "choose_encoding"]
