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
  dense  q as binary, in a listpack SET (member q: 15 bytes for a 16-byte item once
         P >= 256, 17 listpack bytes per item) or a listpack HASH with the quotient split
         in two (DenseSplitHash below: field = the high bytes, value = the low 0..7 bits as
         a small integer; 14 + 2 + 2 = 18 listpack bytes per 16-byte item where a 15-byte
         field with a constant value costs 19), whichever plan_dense() predicts smaller
         for this server (a near tie goes to the set: HASH_MARGIN). CAS = SADD (one
         command) or HSETNX + HGET pipelined (a script only on a low-bit collision), exact
         either way: concurrent adders of one item see exactly one True.

Cost model (plan_dense): a listpack is 7 bytes plus, per entry, 1 encoding byte + data
+ 1 back-length byte; the allocation is rounded up to the allocator's size class
(jemalloc: 4 classes per doubling; libc malloc: 16-byte steps + 8); each partition key
costs about KEY_OVERHEAD bytes more, and 8 bytes per main-dict bucket (a power of two
>= the key count). Partition sizes are Poisson around N/P, so the
planner takes the expected cost over that distribution, for P from the smallest count
whose mean + 4 sigma fits the listpack limit and where fewer than 1/20 partitions are
expected past it, up to 4x that, and picks the cheapest. The dense layouts report the
prediction for their partition count (explain()["predicted_bytes_per_item"]) so the
benchmark can print it beside the measured figure.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any

from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall, command, script_call

#: Bytes a partition key costs beyond its listpack (main-dict entry, object, key name);
#: an estimate used only to rank partition counts (the benchmark measures the truth).
KEY_OVERHEAD = {"jemalloc": 72, "libc": 64}
LISTPACK_HEADER = 7  # 4 total bytes + 2 count + 1 end byte
MAX_PARTITIONS = 1 << 32
#: bytes per item the split hash must save over a listpack set to be chosen: its add is
#: HSETNX + HGET over a ~4x longer listpack (measured on redis-7.4, 1M IDs, commit 38c6b13
#: + this change: 19.68 against 19.76 B/ID, but 6.5 against 1.9 server usec per add),
#: so a near tie goes to the set
HASH_MARGIN = 0.5


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

    @cached_property
    def field_split(self) -> tuple[int, int]:
        """(field bytes, low bits) for the split hash: q = field << low | low bits, with
        0 <= low bits <= 7 so the low part is a listpack 7-bit integer (one byte)."""
        bits = max(8, self.qmax.bit_length())
        fbytes = -(-(bits - 7) // 8)
        return fbytes, bits - 8 * fbytes

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
    buckets = 8 * (1 << (partitions - 1).bit_length())  # the main dict's table: a power of two
    return (per_partition * partitions + buckets) / expected


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


def dense_item_bytes(kind: str, partitions: int, item_size: int) -> int:
    """Listpack bytes per item of the dense layouts at this partition count."""
    radix = Radix(partitions, item_size)
    if kind == "set":
        return entry_bytes(radix.qbytes)
    fbytes, _ = radix.field_split
    return entry_bytes(fbytes) + entry_bytes(0)  # + the low bits: a 7-bit integer entry


def _best_partitions(
    expected: int, limit: int, per_item: Callable[[int], int], allocator: str
) -> tuple[int, float]:
    low = min_partitions(expected, limit)
    # mean + 4 sigma is not enough over ten thousand partitions: also ask that the expected
    # number of partitions past the limit be under 1/20
    while overflow_expected(expected, low, limit) > 0.05:
        low = int(low * 1.02) + 1
    low = min(low, MAX_PARTITIONS)
    if expected < 10_000:  # too few items for the size classes to matter
        return low, predicted_bytes(expected, low, per_item(low), allocator)
    candidates = sorted({min(MAX_PARTITIONS, int(low * (1 + i / 100))) for i in range(301)})
    scored = [(predicted_bytes(expected, p, per_item(p), allocator), p) for p in candidates]
    cost, p = min(scored)
    return p, cost


def best_dense_partitions(
    expected: int, item_size: int, kind: str, limits: SetLimits
) -> tuple[int, float]:
    """The cheapest partition count for dense `kind` ("hash" | "set") and its predicted
    bytes per item."""
    if kind == "set":
        limit = limits.set_max_listpack_entries or 128
    else:
        limit = limits.hash_max_listpack_entries
    return _best_partitions(expected, limit, lambda p: dense_item_bytes(kind, p, item_size),
                            limits.allocator)


def plan_dense(expected: int, item_size: int, limits: SetLimits) -> DensePlan:
    """Listpack HASH or listpack SET, and the partition count: the cheaper by the model."""
    options: dict[str, tuple[int, float]] = {}
    # field / member width at the lowest P tried (the widest) for the value-length check
    for kind, limit, vlimit in (
        ("hash", limits.hash_max_listpack_entries, limits.hash_max_listpack_value),
        ("set", limits.set_max_listpack_entries or 0, limits.set_max_listpack_value or 0),
    ):
        if limit < 1:
            continue
        radix = Radix(min_partitions(expected, limit), item_size)
        width = radix.field_split[0] + 1 if kind == "hash" else radix.qbytes  # hash: the long form
        if width > vlimit:
            continue
        options[kind] = best_dense_partitions(expected, item_size, kind, limits)
    if not options:
        raise ValueError(
            f"{item_size}-byte items do not fit this server's listpack value limits "
            f"(hash-max-listpack-value {limits.hash_max_listpack_value}): use layout='hash'"
        )
    kind = min(options, key=lambda k: options[k][1])
    if kind == "hash" and "set" in options and options["set"][1] - options["hash"][1] < HASH_MARGIN:
        kind = "set"  # about as small, and its add is one SADD instead of a script
    predicted = {k: round(v[1], 2) for k, v in options.items()}
    if not limits.listpack_sets:
        reason = ("no listpack sets on this server (Redis < 7.2): split binary fields in "
                  "listpack hashes")
    elif kind == "set" and predicted["hash"] < predicted["set"]:
        reason = (f"listpack sets: within {HASH_MARGIN} B/item of the split hash, and one "
                  f"SADD per add instead of a script; predicted {predicted}")
    elif kind == "set":
        reason = (f"listpack sets predicted cheaper here (set-max-listpack-entries "
                  f"{limits.set_max_listpack_entries}); predicted {predicted}")
    else:
        reason = (f"listpack hashes hold more per key here (hash-max-listpack-entries "
                  f"{limits.hash_max_listpack_entries}, set {limits.set_max_listpack_entries}); "
                  f"predicted {predicted}")
    return DensePlan(kind, options[kind][0], predicted, reason)


# --- layouts -----------------------------------------------------------------------------


def _to_int(reply: Any) -> int:
    return int(reply)


#: the decode of a one-step group plan whose reply is already one 1/0 per item
_first = itemgetter(0)


def _present(reply: list[Any]) -> list[bool]:
    """HMGET / ZMSCORE: a value (whatever it is) or None per member."""
    return [x is not None for x in reply]


class SetLayout(ABC):
    """Plans for one set kept as `partitions` keys (or one key per item: flat)."""

    name: str
    code: str
    #: the Redis type of a partition key (for the WRONGTYPE message and stats)
    redis_type: str
    partitioned: bool = True
    #: the cost model's bytes per item at `expected` (dense layouts; None: not modelled)
    predicted: float | None = None

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

    def members_of(self, qs: list[int]) -> list[bytes]:
        """member(q) of many quotients (the batch path; binary layouts override it)."""
        fmt = f"%0{self.radix.qhex}x"
        return [(fmt % q).encode() for q in qs]

    def quotient(self, member: bytes) -> int:
        return int(member, 16)

    def locate(self, stored: bytes) -> tuple[bytes, bytes]:
        p, q = self.radix.split(stored)
        return self.key(p), self.member(q)

    def stored_of(self, p: int, member: bytes) -> bytes:
        return self.radix.join(p, self.quotient(member))

    @abstractmethod
    def plan_add(self, stored: bytes) -> Plan[Any]:  # Plan[bool], or Plan[bool | None]
        """The CAS add: True if new, False if there; None only when the layout could not
        tell in this round trip (DenseSplitHash, a low-bit collision): then the caller
        sends plan_add_fallback, which always tells."""

    def plan_add_fallback(self, stored: bytes) -> Plan[bool]:
        plan: Plan[bool] = self.plan_add(stored)
        return plan

    @abstractmethod
    def plan_contains(self, stored: bytes) -> Plan[bool]: ...

    @abstractmethod
    def plan_remove(self, stored: bytes) -> Plan[bool]: ...

    # several items of one partition in one command (add_many / contains_many)
    many_contains = "SMISMEMBER"

    # Group plans decode to one 1/0 (or True/False) per member, in order: the scripts' and
    # SMISMEMBER's replies as they are; SetCore.many makes them bools once per batch.
    def plan_add_group(self, p: int, members: list[bytes]) -> Plan[list[Any]]:
        key = self.key(p)
        return Plan((ScriptCall(script("set_add_many"), (key,), (self.redis_type, *members)),), _first)

    def plan_contains_group(self, p: int, members: list[bytes]) -> Plan[list[Any]]:
        key = self.key(p)
        if self.many_contains == "SMISMEMBER":
            return Plan((Command(("SMISMEMBER", key, *members), (key,)),), _first)
        return command(self.many_contains, key, *members, keys=(key,), decode=_present)

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
        out = {"layout": self.name, "partitions": self.partitions,
               "member_bytes": len(self.member(0)), "key_example": self.key(0).decode()}
        if self.predicted is not None:
            out["predicted_bytes_per_item"] = self.predicted
        return out


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

    def members_of(self, qs: list[int]) -> list[bytes]:
        width = self.radix.qbytes
        return [q.to_bytes(width, "big") for q in qs]

    def quotient(self, member: bytes) -> int:
        return int.from_bytes(member, "big")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": "set"}


class DenseHash(HashOfFields):
    """The first dense hash (field = all of q, value 1): kept to reopen sets recorded with
    code "dh"; new dense hash sets are DenseSplitHash."""

    name = "dense"
    code = "dh"

    def member(self, q: int) -> bytes:
        return q.to_bytes(self.radix.qbytes, "big")

    def members_of(self, qs: list[int]) -> list[bytes]:
        width = self.radix.qbytes
        return [q.to_bytes(width, "big") for q in qs]

    def quotient(self, member: bytes) -> int:
        return int.from_bytes(member, "big")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": "hash"}


class DenseSplitHash(HashOfFields):
    """Dense hash with the quotient split across field and value (code "dq").

    q = high << L | low with L = 0..7 low bits (Radix.field_split): an item is the field
    `high` (F bytes; 14 for a 16-byte item and 512..2**16 partitions) with the value `low`,
    which a listpack keeps as a 7-bit integer entry (2 bytes): F + 4 listpack bytes per
    item, one less than a whole-q field with a constant value. Two items share a field
    only if they differ in the low bits alone (odds about n**2 / 2**(8F) for random items,
    but easy with spread=False and structured IDs): the later one is then stored in the
    long form, field `high + byte(low)` (F + 1 bytes, never mistaken for a short field)
    with value 1, and the short field's value gets a mark (+128). Invariant: a prefix has
    long forms only while its short field exists, marked. So every item is exactly one
    field, and:
      add       HSETNX high low + HGET high, one round trip, no script: 1 -> new; else the
                value mod 128 == low -> present; else (a low-bit collision, or the field
                removed between the two) a second round trip with set_dense_add.lua
                (HSETNX high low; only if the field is taken, HGET it: same low -> present,
                else HSETNX the long form + mark), which always tells. Exact under
                concurrency: True only ever comes from an HSETNX that created the item's
                one field, and False only from a reply that showed the item stored (the
                HGET), so concurrent adders of one item see exactly one True. Plain
                pipelining, not MULTI: the HGET needs no isolation from the HSETNX (if
                anything ran between, the reply is read at the HGET's moment, or the
                script decides), and EXEC would add its own cost on the server
                Server cost at 1M random IDs on redis-7.0 (2592 partitions of ~390):
                6.7 usec per add (HSETNX 4.9 + HGET 1.8; the script was 10-13), nearly all
                listpack search, so only shorter partitions cut it, and they cost bytes:
                5000 partitions 20.04 B/ID and 5.0 usec, 12000: 20.98 B and 2.9 usec
                (benchmarks/set_memory.py --server redis-7.0 --layout dense:P)
      add_many  set_dense_add.lua, one EVALSHA per partition of the batch: one HMGET of the
                short fields and one HSET of the free ones for the whole partition, the
                item-by-item path above only for fields taken by another item
      contains  HMGET high long (one command): value of high mod 128 == low, or long there
      remove    set_dense_remove.lua: HDEL the item's form; a removed marked short item
                is replaced by one of its prefix's long forms, the last long form unmarks
      len       HLEN per partition: exact, nothing extra kept
      iterate   HSCAN pairs: a short field with its value mod 128, or a long field
    Members handed around in Python are the long form (high + byte(low)) for both.
    """

    name = "dense"
    code = "dq"
    many_contains = "HMGET"

    def __init__(self, namespace: str, partitions: int, item_size: int) -> None:
        super().__init__(namespace, partitions, item_size)
        self.field_bytes, self.low_bits = self.radix.field_split
        self._mask = (1 << self.low_bits) - 1
        self._lows = [str(i).encode() for i in range(128)]
        self._lowbytes = [bytes((i,)) for i in range(128)]
        self._maxlow = str(self._mask).encode()

    def member(self, q: int) -> bytes:
        return (q >> self.low_bits).to_bytes(self.field_bytes, "big") + bytes((q & self._mask,))

    def members_of(self, qs: list[int]) -> list[bytes]:
        width, bits, mask, lows = self.field_bytes, self.low_bits, self._mask, self._lowbytes
        return [(q >> bits).to_bytes(width, "big") + lows[q & mask] for q in qs]

    def quotient(self, member: bytes) -> int:
        return (int.from_bytes(member[:-1], "big") << self.low_bits) | member[-1]

    def _args(self, members: list[bytes]) -> list[bytes]:
        lows = self._lows
        out: list[bytes] = []
        for m in members:
            out += (m[:-1], lows[m[-1]])
        return out

    def plan_add(self, stored: bytes) -> Plan[Any]:  # Plan[bool | None]
        key, m = self.locate(stored)
        field, low = m[:-1], m[-1]

        def decode(replies: list[Any]) -> bool | None:
            if replies[0]:
                return True  # this HSETNX made the item's short field
            value = replies[1]
            if value is not None and int(value) % 128 == low:
                return False  # the short field holds this very item
            return None  # another item's field (or gone since): ask the script

        return Plan((Command(("HSETNX", key, field, self._lows[low]), (key,)),
                     Command(("HGET", key, field), (key,))), decode)

    def plan_add_fallback(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return script_call(script("set_dense_add"), (key,), self._args([m]), lambda r: bool(r[0]))

    def plan_add_group(self, p: int, members: list[bytes]) -> Plan[list[Any]]:
        key = self.key(p)
        return Plan((ScriptCall(script("set_dense_add"), (key,), tuple(self._args(members))),), _first)

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        return script_call(script("set_dense_remove"), (key,), [self._maxlow, *self._args([m])],
                           lambda r: bool(r[0]))

    @staticmethod
    def _lookup(members: list[bytes]) -> tuple[list[bytes], Callable[[Any], list[bool]]]:
        """HMGET fields (short and long form of each member) and the reply's reading."""
        fields: list[bytes] = []
        for m in members:
            fields += (m[:-1], m)
        lows = [m[-1] for m in members]

        def decode(reply: Any) -> list[bool]:
            return [(v is not None and int(v) % 128 == low) or lv is not None
                    for low, v, lv in zip(lows, reply[::2], reply[1::2])]

        return fields, decode

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        key, m = self.locate(stored)
        fields, decode = self._lookup([m])
        return command("HMGET", key, *fields, keys=(key,), decode=lambda r: decode(r)[0])

    def plan_contains_group(self, p: int, members: list[bytes]) -> Plan[list[Any]]:
        key = self.key(p)
        fields, decode = self._lookup(members)
        return command("HMGET", key, *fields, keys=(key,), decode=decode)

    def plan_scan(self, p: int, cursor: int, count: int = 1000) -> Plan[tuple[int, list[bytes]]]:
        key = self.key(p)
        width = self.field_bytes

        def decode(reply: Any) -> tuple[int, list[bytes]]:
            flat = list(reply[1])
            members = [f + bytes((int(v) % 128,)) if len(f) == width else f
                       for f, v in zip(flat[::2], flat[1::2])]
            return int(reply[0]), members

        return command("HSCAN", key, cursor, "COUNT", count, keys=(key,), decode=decode)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": "hash", "member_bytes": self.field_bytes,
                "field_bytes": self.field_bytes, "low_bits": self.low_bits}


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
    if name == "dense-hash-v1":  # only to reopen sets recorded before DenseSplitHash
        return DenseHash(namespace, partitions or 1, item_size), "reopened: first dense hash"
    if name in ("dense", "dense-hash", "dense-set", "auto"):
        decision = plan_dense(expected, item_size, limits)
        encoding = name.removeprefix("dense-") if name.startswith("dense-") else decision.encoding
        if encoding == "set" and not limits.listpack_sets:
            raise ValueError("layout dense-set needs listpack sets (Redis 7.2+, Valkey 8+)")
        if encoding == decision.encoding:
            p, reason = decision.partitions, decision.reason
        else:
            p, _ = best_dense_partitions(expected, item_size, encoding, limits)
            reason = f"dense-{encoding} asked for; the model predicts {decision.predicted}"
        cls: type[SetLayout] = DenseSet if encoding == "set" else DenseSplitHash
        lay = cls(namespace, partitions or p, item_size)
        per_item = dense_item_bytes(encoding, lay.partitions, item_size)
        lay.predicted = round(predicted_bytes(expected, lay.partitions, per_item, limits.allocator), 2)
        return lay, reason
    raise ValueError(f"unknown layout {name!r}: choose one of auto, {', '.join(LAYOUTS)}, dense-hash, dense-set")
