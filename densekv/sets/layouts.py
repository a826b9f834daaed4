"""Compact set layouts: builders of plans for add / contains / remove / scan, no I/O.

Every layout gets the item as `item_size` stored bytes (densekv/sets/items.py) and splits
it by radix: partition p = x mod P, quotient q = x div P (x = the bytes as an integer).
p is written only in the key (`{ns}:{code}:{p}`, inside the hash tag, so a partition is
one cluster slot); q is the member. With P a power of two this is the seed's "low n bits
pick the partition". P need not be a power of two: the dense planner picks the P that
packs listpacks best against the allocator's size classes.

  flat   one string key per item, `{ns}:f{P}:{p}:<hex q>` = "1"; CAS = SET NX GET
         (the GET makes a key of another type a WRONGTYPE error instead of "present")
  set    SET per partition, member = hex q (the seed's readable members); CAS = SADD
  hash   HASH per partition, field = hex q, value 1; CAS = HSETNX (the seed's best)
  zset   ZSET per partition, member = hex q, score 1; CAS = ZADD NX
  dense  q as binary (15 bytes for a 16-byte item once P >= 256), in a listpack HASH
         (field q, value 1: q+2 bytes + 2 bytes per item) or a listpack SET (q+2 bytes
         per item), whichever plan_dense() predicts smaller for this server; CAS = HSETNX
         or SADD, one command, so concurrent adders of one item see exactly one True.

Cost model (plan_dense): a listpack is 7 bytes plus, per entry, 1 encoding byte + data
+ 1 back-length byte; the allocation is rounded up to the allocator's size class
(jemalloc: 4 classes per doubling; libc malloc: 16-byte steps + 8); each partition key
costs about KEY_OVERHEAD bytes more. Partition sizes are Poisson around N/P, so the
planner takes the expected cost over that distribution, for P from the smallest count
whose mean + 4 sigma fits the listpack limit and where fewer than 1/20 partitions are
expected past it, up to 4x that, and picks the cheapest.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Plan, command, script_call

#: Bytes a partition key costs beyond its listpack (main-dict entry, object, key name);
#: an estimate used only to rank partition counts (the benchmark measures the truth).
KEY_OVERHEAD = {"jemalloc": 72, "libc": 64}
LISTPACK_HEADER = 7  # 4 total bytes + 2 count + 1 end byte
MAX_PARTITIONS = 1 << 32


@dataclass(frozen=True)
class SetLimits:
    """What the set layouts need to know of the server (from the probe)."""

    hash_max_listpack_entries: int = 128
    hash_max_listpack_value: int = 64
    set_max_listpack_entries: int | None = None  # None: no listpack sets (Redis < 7.2)
    set_max_listpack_value: int | None = None
    zset_max_listpack_entries: int = 128
    zset_max_listpack_value: int = 64
    allocator: str = "jemalloc"
    cluster: bool = False

    @property
    def listpack_sets(self) -> bool:
        return bool(self.set_max_listpack_entries)


# --- radix split ---------------------------------------------------------------------


@dataclass(frozen=True)
class Radix:
    """x <-> (x mod P, x div P) for item_size-byte x; widths of the quotient."""

    partitions: int
    item_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, int) or not 1 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions is a whole number from 1 to {MAX_PARTITIONS}")

    @cached_property
    def qmax(self) -> int:
        return ((1 << (8 * self.item_size)) - 1) // self.partitions

    @cached_property
    def qbytes(self) -> int:
        return max(1, (self.qmax.bit_length() + 7) // 8)

    @cached_property
    def qhex(self) -> int:
        return max(1, (self.qmax.bit_length() + 3) // 4)

    def split(self, stored: bytes) -> tuple[int, int]:
        q, p = divmod(int.from_bytes(stored, "big"), self.partitions)
        return p, q

    def join(self, p: int, q: int) -> bytes:
        return (q * self.partitions + p).to_bytes(self.item_size, "big")


# --- cost model ------------------------------------------------------------------------


def alloc_size(size: int, allocator: str) -> int:
    """What the allocator really hands out (and used_memory counts) for `size` bytes."""
    if allocator.startswith("libc"):
        return max(24, ((size + 8 + 15) & ~15) - 8)
    if size <= 8:
        return 8
    if size <= 128:
        return -(-size // 16) * 16
    spacing = (1 << (size - 1).bit_length() - 1) // 4
    return -(-size // spacing) * spacing


def entry_bytes(data: int) -> int:
    """A listpack string entry of `data` bytes: encoding + data + back-length."""
    enc = 1 if data < 64 else 2 if data < 4096 else 5
    total = enc + data
    return total + (1 if total < 128 else 2 if total < 16384 else 3)


def _poisson(mean: float) -> list[tuple[int, float]]:
    lo = max(0, int(mean - 7 * math.sqrt(mean) - 2))
    hi = int(mean + 7 * math.sqrt(mean) + 3)
    out = []
    for k in range(lo, hi + 1):
        logp = k * math.log(mean) - mean - math.lgamma(k + 1) if mean > 0 else (0.0 if k == 0 else -1e9)
        out.append((k, math.exp(logp)))
    return out


def predicted_bytes(expected: int, partitions: int, per_item: int, allocator: str) -> float:
    """Expected used_memory per item for `expected` random items in `partitions` listpacks."""
    if expected <= 0:
        return float("nan")
    mean = expected / partitions
    key = KEY_OVERHEAD["libc" if allocator.startswith("libc") else "jemalloc"]
    per_partition = sum(
        p * (alloc_size(LISTPACK_HEADER + per_item * k, allocator) + key) for k, p in _poisson(mean) if k
    )
    return per_partition * partitions / expected


def min_partitions(expected: int, max_entries: int) -> int:
    """Smallest P (any whole number) with mean + 4 sigma of a partition <= max_entries."""
    if expected <= 0:
        return 1
    # solve m + 4 sqrt(m) = Z for m: sqrt(m) = -2 + sqrt(4 + Z)
    root = -2 + math.sqrt(4 + max_entries)
    return max(1, math.ceil(expected / (root * root)))


@dataclass(frozen=True)
class DensePlan:
    """plan_dense's decision, kept for explain()."""

    encoding: str  # "hash" | "set"
    partitions: int
    predicted: dict[str, float]
    reason: str


def overflow_expected(expected: int, partitions: int, limit: int) -> float:
    """Expected number of partitions holding more than `limit` items (Poisson sizes)."""
    mean = expected / partitions
    return partitions * sum(p for k, p in _poisson(mean) if k > limit)


def _best_partitions(expected: int, limit: int, per_item: int, allocator: str) -> tuple[int, float]:
    low = min_partitions(expected, limit)
    # mean + 4 sigma is not enough over ten thousand partitions: also ask that the expected
    # number of partitions past the limit be under 1/20
    while overflow_expected(expected, low, limit) > 0.05:
        low = int(low * 1.02) + 1
    if expected < 10_000:  # too few items for the size classes to matter
        return low, predicted_bytes(expected, low, per_item, allocator)
    candidates = sorted({int(low * (1 + i / 100)) for i in range(0, 301)})
    scored = [(predicted_bytes(expected, p, per_item, allocator), p) for p in candidates]
    cost, p = min(scored)
    return p, cost


def plan_dense(expected: int, item_size: int, limits: SetLimits) -> DensePlan:
    """Listpack HASH or listpack SET, and the partition count: the cheaper by the model."""
    options: dict[str, tuple[int, float]] = {}
    # member width at the chosen P: 15 bytes for a 16-byte item once P >= 256; take the
    # width at the lowest P tried (a safe upper bound) for the value-length check
    for kind, limit, vlimit, extra in (
        ("hash", limits.hash_max_listpack_entries, limits.hash_max_listpack_value, entry_bytes(0) + 0),
        ("set", limits.set_max_listpack_entries or 0, limits.set_max_listpack_value or 0, 0),
    ):
        if limit < 1:
            continue
        width = Radix(min_partitions(expected, limit), item_size).qbytes
        if width > vlimit:
            continue
        options[kind] = _best_partitions(expected, limit, entry_bytes(width) + extra, limits.allocator)
    if not options:
        raise ValueError(
            f"{item_size}-byte items do not fit this server's listpack value limits "
            f"(hash-max-listpack-value {limits.hash_max_listpack_value}): use layout='hash'"
        )
    kind = min(options, key=lambda k: options[k][1])
    predicted = {k: round(v[1], 2) for k, v in options.items()}
    if not limits.listpack_sets:
        reason = "no listpack sets on this server (Redis < 7.2): binary fields in listpack hashes"
    elif kind == "set":
        reason = (f"listpack sets cost 2 bytes per item less than hash fields with a value; "
                  f"predicted {predicted}")
    else:
        reason = f"listpack hashes hold more per key here (limit {limits.hash_max_listpack_entries}); predicted {predicted}"
    return DensePlan(kind, options[kind][0], predicted, reason)


# --- layouts -----------------------------------------------------------------------------


def _to_int(reply: Any) -> int:
    return int(reply)


class SetLayout(ABC):
    """Plans for one set kept as `partitions` keys (or one key per item: flat)."""

    name: str
    code: str
    #: the Redis type of a partition key (for the WRONGTYPE message and stats)
    redis_type: str
    partitioned: bool = True

    def __init__(self, namespace: str, partitions: int, item_size: int) -> None:
        self.namespace = namespace
        self.partitions = partitions
        self.item_size = item_size
        self.radix = Radix(partitions, item_size)
        self._keys: list[bytes | None] = [None] * min(partitions, 1 << 20)

    def key(self, p: int) -> bytes:
        cache = self._keys
        if p < len(cache):
            key = cache[p]
            if key is None:
                key = cache[p] = tag(self.namespace, f"{self.code}{self.partitions}", p)
            return key
        return tag(self.namespace, f"{self.code}{self.partitions}", p)

    # member <-> quotient
    def member(self, q: int) -> bytes:
        return format(q, f"0{self.radix.qhex}x").encode()

    def quotient(self, member: bytes) -> int:
        return int(member, 16)

    def locate(self, stored: bytes) -> tuple[bytes, bytes]:
        p, q = self.radix.split(stored)
        return self.key(p), self.member(q)

    def stored_of(self, p: int, member: bytes) -> bytes:
        return self.radix.join(p, self.quotient(member))

    @abstractmethod
    def plan_add(self, stored: bytes) -> Plan[bool]: ...

    @abstractmethod
    def plan_contains(self, stored: bytes) -> Plan[bool]: ...

    @abstractmethod
    def plan_remove(self, stored: bytes) -> Plan[bool]: ...

    # several items of one partition in one command (add_many / contains_many)
    many_contains = "SMISMEMBER"

    def plan_add_group(self, p: int, members: list[bytes]) -> Plan[list[bool]]:
        key = self.key(p)
        return script_call(script("set_add_many"), (key,), (self.redis_type, *members),
                           lambda r: [bool(x) for x in r])

    def plan_contains_group(self, p: int, members: list[bytes]) -> Plan[list[bool]]:
        key = self.key(p)
        if self.many_contains == "SMISMEMBER":
            return command("SMISMEMBER", key, *members, keys=(key,), decode=lambda r: [bool(x) for x in r])
        return command(self.many_contains, key, *members, keys=(key,), decode=lambda r: [x is not None for x in r])

    # partitions
    scan_command = "SSCAN"
    size_command = "SCARD"
    scan_pairs = False  # HSCAN / ZSCAN reply field, value pairs

    def plan_scan(self, p: int, cursor: int, count: int = 1000) -> Plan[tuple[int, list[bytes]]]:
        key = self.key(p)
        pairs = self.scan_pairs

        def decode(reply: Any) -> tuple[int, list[bytes]]:
            members = list(reply[1])
            return int(reply[0]), members[::2] if pairs else members

        return command(self.scan_command, key, cursor, "COUNT", count, keys=(key,), decode=decode)

    def plan_size(self, p: int) -> Plan[int]:
        key = self.key(p)
        return command(self.size_command, key, keys=(key,), decode=_to_int)

    def plan_encoding(self, p: int) -> Plan[str | None]:
        key = self.key(p)
        return command("OBJECT", "ENCODING", key, keys=(key,),
                       decode=lambda r: None if r is None else (r.decode() if isinstance(r, bytes) else str(r)))

    def plan_unlink(self, p: int) -> Plan[int]:
        key = self.key(p)
        return command("UNLINK", key, keys=(key,), decode=_to_int)

    def describe(self) -> dict[str, Any]:
        return {"layout": self.name, "partitions": self.partitions, "member_bytes": len(self.member(0)),
                "key_example": self.key(0).decode()}


class SetOfMembers(SetLayout):
    name = "set"
    code = "s"
    redis_type = "set"

    def plan_add(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("SADD", key, m, keys=(key,), decode=bool)

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("SISMEMBER", key, m, keys=(key,), decode=bool)

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("SREM", key, m, keys=(key,), decode=bool)


class HashOfFields(SetLayout):
    name = "hash"
    code = "h"
    redis_type = "hash"
    scan_command = "HSCAN"
    size_command = "HLEN"
    many_contains = "HMGET"
    scan_pairs = True

    def plan_add(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("HSETNX", key, m, 1, keys=(key,), decode=bool)

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("HEXISTS", key, m, keys=(key,), decode=bool)

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("HDEL", key, m, keys=(key,), decode=bool)


class SortedSet(SetLayout):
    name = "zset"
    code = "z"
    redis_type = "zset"
    scan_command = "ZSCAN"
    size_command = "ZCARD"
    many_contains = "ZMSCORE"
    scan_pairs = True

    def plan_add(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("ZADD", key, "NX", 1, m, keys=(key,), decode=bool)

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("ZSCORE", key, m, keys=(key,), decode=lambda r: r is not None)

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return command("ZREM", key, m, keys=(key,), decode=bool)


class DenseSet(SetOfMembers):
    name = "dense"
    code = "ds"

    def member(self, q: int) -> bytes:
        return q.to_bytes(self.radix.qbytes, "big")

    def quotient(self, member: bytes) -> int:
        return int.from_bytes(member, "big")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": "set"}


class DenseHash(HashOfFields):
    name = "dense"
    code = "dh"

    def member(self, q: int) -> bytes:
        return q.to_bytes(self.radix.qbytes, "big")

    def quotient(self, member: bytes) -> int:
        return int.from_bytes(member, "big")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": "hash"}


class FlatKeys(SetLayout):
    """One string key per item; `partitions` only rearranges key names (the seed's xx)."""

    name = "flat"
    code = "f"
    redis_type = "string"
    partitioned = False

    def locate(self, stored: bytes) -> tuple[bytes, bytes]:
        p, q = self.radix.split(stored)
        return self.key(p) + b":" + self.member(q), b""

    def item_of_key(self, key: bytes) -> bytes:
        head, _, hexq = key.rpartition(b":")
        p = int(head[head.rindex(b"{") + 1 : -1])
        return self.radix.join(p, int(hexq, 16))

    def scan_pattern(self) -> bytes:
        ns = "".join("\\" + c if c in "*?[]\\" else c for c in self.namespace)
        return f"{ns}:{self.code}{self.partitions}:{{*}}:*".encode()

    def plan_add(self, stored: bytes) -> Plan[bool]:
        key, _ = self.locate(stored)

        def decode(reply: Any) -> bool:
            if reply is None:
                return True
            if reply != b"1":
                from densekv.errors import WrongType

                raise WrongType(f"key {key.decode()} holds a value densekv did not write; left untouched")
            return False

        return command("SET", key, 1, "NX", "GET", keys=(key,), decode=decode)

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        key, _ = self.locate(stored)
        return command("GET", key, keys=(key,), decode=lambda r: r is not None)

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        key, _ = self.locate(stored)
        return command("GETDEL", key, keys=(key,), decode=lambda r: r is not None)

    def plan_unlink_key(self, key: bytes) -> Plan[int]:
        return command("UNLINK", key, keys=(key,), decode=_to_int)


LAYOUTS = ("flat", "set", "hash", "zset", "dense")
_BY_NAME: dict[str, type[SetLayout]] = {"flat": FlatKeys, "set": SetOfMembers, "hash": HashOfFields, "zset": SortedSet}


def default_partitions(name: str, expected: int, limits: SetLimits) -> int:
    """The seed layouts' partition count when none is given: a power of two sized so the
    fullest partition stays in its listpack (flat: 4096, only key names change)."""
    from densekv.keys import partition_count

    if name == "flat":
        return 4096
    if name == "hash":
        return partition_count(expected, limits.hash_max_listpack_entries)
    if name == "zset":
        return partition_count(expected, limits.zset_max_listpack_entries)
    if limits.listpack_sets:
        return partition_count(expected, limits.set_max_listpack_entries or 128)
    return 256  # no listpack sets of strings on this server: the seed's advice


def make_layout(
    name: str, namespace: str, expected: int, item_size: int, limits: SetLimits, partitions: int | None
) -> tuple[SetLayout, str]:
    """The layout object and why it was chosen (for explain())."""
    if name in _BY_NAME:
        p = partitions or default_partitions(name, expected, limits)
        return _BY_NAME[name](namespace, p, item_size), "asked for"
    if name in ("dense", "dense-hash", "dense-set", "auto"):
        decision = plan_dense(expected, item_size, limits)
        encoding = name.removeprefix("dense-") if name.startswith("dense-") else decision.encoding
        if encoding == "set" and not limits.listpack_sets:
            raise ValueError("layout dense-set needs listpack sets (Redis 7.2+, Valkey 8+)")
        if encoding == decision.encoding:
            p, reason = decision.partitions, decision.reason
        else:
            limit = limits.set_max_listpack_entries if encoding == "set" else limits.hash_max_listpack_entries
            width = Radix(min_partitions(expected, limit or 128), item_size).qbytes
            extra = entry_bytes(0) if encoding == "hash" else 0
            p, _ = _best_partitions(expected, limit or 128, entry_bytes(width) + extra, limits.allocator)
            reason = f"dense-{encoding} asked for; the model predicts {decision.predicted}"
        cls = DenseSet if encoding == "set" else DenseHash
        return cls(namespace, partitions or p, item_size), reason
    raise ValueError(f"unknown layout {name!r}: choose one of auto, {', '.join(LAYOUTS)}, dense-hash, dense-set")
