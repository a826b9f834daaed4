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

The server's limits, the radix split and the dense layouts' cost model (plan_dense: which
encoding and how many partitions) are densekv/sets/sizing.py's; this module builds the
plans of each layout and `make_layout` puts the two together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NamedTuple

from densekv.keys import glob_escape, tag
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall, command, script_call
from densekv.sets.sizing import (
    HASH_MARGIN,
    KEY_OVERHEAD,
    MAX_PARTITIONS,
    DensePlan,
    Radix,
    SetLimits,
    best_dense_partitions,
    default_partitions,
    dense_item_bytes,
    min_partitions,
    overflow_expected,
    plan_dense,
    predicted_bytes,
)

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


class _Op(NamedTuple):
    """One command on a partition's key and one member: name, key, *before, member, *after."""

    name: str
    before: tuple[Any, ...] = ()
    after: tuple[Any, ...] = ()
    decode: Callable[[Any], bool] = bool


def _not_none(reply: Any) -> bool:
    return reply is not None


class _MemberLayout(SetLayout):
    """A layout whose add (CAS), contains and remove are one command each on the item's
    partition key and member: `ops` names them, in that order."""

    ops: tuple[_Op, _Op, _Op]

    def _plan_op(self, stored: bytes, op: _Op) -> Plan[bool]:
        key, m = self.locate(stored)
        return command(op.name, key, *op.before, m, *op.after, keys=(key,), decode=op.decode)

    def plan_add(self, stored: bytes) -> Plan[Any]:
        return self._plan_op(stored, self.ops[0])

    def plan_contains(self, stored: bytes) -> Plan[bool]:
        return self._plan_op(stored, self.ops[1])

    def plan_remove(self, stored: bytes) -> Plan[bool]:
        return self._plan_op(stored, self.ops[2])


class SetOfMembers(_MemberLayout):
    name = "set"
    code = "s"
    redis_type = "set"
    ops = (_Op("SADD"), _Op("SISMEMBER"), _Op("SREM"))


class HashOfFields(_MemberLayout):
    name = "hash"
    code = "h"
    redis_type = "hash"
    scan_command = "HSCAN"
    size_command = "HLEN"
    many_contains = "HMGET"
    scan_pairs = True
    ops = (_Op("HSETNX", after=(1,)), _Op("HEXISTS"), _Op("HDEL"))


class SortedSet(_MemberLayout):
    name = "zset"
    code = "z"
    redis_type = "zset"
    scan_command = "ZSCAN"
    size_command = "ZCARD"
    many_contains = "ZMSCORE"
    scan_pairs = True
    ops = (_Op("ZADD", before=("NX", 1)), _Op("ZSCORE", decode=_not_none), _Op("ZREM"))


class _BinaryMembers(SetLayout):
    """Members are the quotient's own bytes (qbytes, big-endian), not its hex."""

    def member(self, q: int) -> bytes:
        return q.to_bytes(self.radix.qbytes, "big")

    def members_of(self, qs: list[int]) -> list[bytes]:
        width = self.radix.qbytes
        return [q.to_bytes(width, "big") for q in qs]

    def quotient(self, member: bytes) -> int:
        return int.from_bytes(member, "big")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "encoding": self.redis_type}


class DenseSet(_BinaryMembers, SetOfMembers):
    name = "dense"
    code = "ds"


class DenseHash(_BinaryMembers, HashOfFields):
    """The first dense hash (field = all of q, value 1): kept to reopen sets recorded with
    code "dh"; new dense hash sets are DenseSplitHash."""

    name = "dense"
    code = "dh"


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
        return glob_escape(self.namespace.encode()) + f":{self.code}{self.partitions}:{{*}}:*".encode()

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


__all__ = ["HASH_MARGIN", "KEY_OVERHEAD", "LAYOUTS", "MAX_PARTITIONS", "DenseHash", "DensePlan", "DenseSet",
           "DenseSplitHash", "FlatKeys", "HashOfFields", "Radix", "SetLayout", "SetLimits", "SetOfMembers",
           "SortedSet", "best_dense_partitions", "default_partitions", "dense_item_bytes", "make_layout",
           "min_partitions", "overflow_expected", "plan_dense", "predicted_bytes"]
