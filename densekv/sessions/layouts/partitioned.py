"""Partitioned session layouts: many sessions per HASH, kept in the listpack encoding.

  dense     HASH per partition; field = digest less the partition bits (15 bytes at 4096
            partitions), value = the compact record (densekv/sessions/record.py) with the
            expiry inside; no ZSET. Expired records are invisible at once (the store
            checks the expiry on read) and removed by sweep, a Lua script per partition.
  zset      the seed's best layout: the same HASH plus a per-partition ZSET of
            field -> expires_at, so sweep finds the due sessions with ZRANGEBYSCORE.
  fieldttl  the HASH with the server's own field TTL (HEXPIREAT) on each field: the
            server removes expired sessions. Compact only where the probe finds a hash
            with expiring fields still in a listpack (listpackex: Redis 7.4+).

Keys: `{ns}:sd:{P}`, `{ns}:sz:{P}` (zset) where P is the partition number, so a
partition's hash and zset share a slot. After an online repartition (P -> P * 2^s, see
`plan_split` and densekv/lua/hrec_split.lua) a partition p of the new count is named
`{ns}:sd:{R}:<bits>.<p>`, R being its ancestor among the store's first ("base") partitions:
a partition and all its descendants share one hash tag, so the split of one partition is
one atomic script even on a cluster. Cost per session (dense, 4-byte identity, no
payload): 17 bytes of field entry + 11 of value entry in the listpack, plus the
partition's key overhead shared by a few hundred sessions.

A record whose framed payload would take it past hash-max-listpack-value is
  split      when the payload fits the record plus one more listpack value: the record
             ends with the marker 0x0C and the payload's first part, and the rest is the
             value of the session's continuation field in the same partition hash
             (`cont_field`: its field with the top bit of the first byte set, a bit that
             the partition number leaves 0 in every session's field; where the partition
             bits fill whole bytes (256, 65536 partitions) no bit is free, and the
             continuation field is the field and one 0x00 byte). One HMGET reads both parts, from one
             version; a split session takes two of the partition's listpack entries, so
             partitions are sized for two entries a session (meta.py, make_layout). The
             entries cost about 20 bytes more than inline (a field as long as the
             session's, a value header and the first part's marker);
  out of line otherwise (and always in the fieldttl layout): the record ends with the
             marker 0x0F and the payload is the session's own string key
             `{ns}:so:{R}:<16-byte digest>` (R: the digest's base partition, so the key
             keeps its name through repartitions), with the session's absolute expiry
             (EXAT) as a backstop: a key's overhead, 50-70 bytes, on top of the payload.
densekv 0.1.0 kept a split payload's rest in a separate continuation hash
`{ns}:sc:{P}` (marker 0x0D; a MULTI of two HGETs to read): such records are still read
and are rewritten with the rest in the partition on their next write, or by a repartition
(lua/hrec_split.lua). A layout whose partitions were sized for one entry a session (a
store made by those releases, until it is repartitioned) keeps writing that way (`here`
False), so that its partitions stay listpacks.
`placement` is that rule, in one place for Python (the planner's notes ask it too);
lua/hrec_update.lua applies the same rule to an update. All of them share the partition's
slot; destroy, sweep, rename and repartition move or delete the parts with the record. A
get sends one HGET, or, while recent reads found split payloads (core.py), one HMGET of
the field and its continuation field; out-of-line payloads take a GET beside it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from redis.crc import key_slot

from densekv.errors import SessionDataTooLarge
from densekv.keys import glob_escape, join_digest, partition_bits, split_digest, tag
from densekv.lua import script
from densekv.plan import Command, Plan, ScriptCall, command, script_call
from densekv.sessions.layouts.base import Layout, LayoutLimits
from densekv.sessions.model import Record
from densekv.sessions.payload import CONTINUED, CONTINUED_HERE, MARKER
from densekv.sessions.record import identity_section, pack_record, unpack_record, with_rest

INLINE, SPLIT, OUT_OF_LINE = "inline", "split", "out of line"
CONT_SUFFIX = b"\x00"  # cont_field where the partition bits fill whole bytes (the Lua scripts say '\0')


def cont_field(field: bytes, bits: int) -> bytes:
    """The continuation field of a session's `field` in a partition of `bits` partition
    bits: the top bit of its first byte set (split_digest leaves bits % 8 top bits of it 0),
    or, where bits % 8 == 0, the field and CONT_SUFFIX."""
    if bits % 8:
        return bytes((field[0] | 0x80,)) + field[1:]
    return field + CONT_SUFFIX


def is_cont_field(field: bytes, bits: int) -> bool:
    """Whether a field of a partition hash of `bits` partition bits is a continuation field."""
    if bits % 8:
        return field[0] >= 0x80
    return len(field) == 17 - bits // 8


def placement(record: int, bare: int, limit: int, splits: bool = True) -> str:
    """Where a payload goes: INLINE when the whole `record` (bytes, payload included) fits
    `limit` (hash-max-listpack-value); SPLIT when the layout `splits` and the payload fits
    the record without it (`bare` bytes) plus one marker byte and one more value of
    `limit`; else OUT_OF_LINE. (A record over the limit without its payload is refused.)"""
    if record <= limit:
        return INLINE
    first = limit - bare - 1
    if splits and first > 0 and record - bare - first <= limit:
        return SPLIT
    return OUT_OF_LINE


class PartitionedLayout(Layout):
    mode = "plain"  # the Lua scripts' mode argument (lua/hrec_*.lua)
    framed = True
    outside = True
    splits = True

    def __init__(self, namespace: str, partitions: int, limits: LayoutLimits, *,
                 base_partitions: int | None = None, from_partitions: int | None = None,
                 here: bool = True) -> None:
        super().__init__(namespace)
        #: split payloads keep their rest in the partition hash (False: in the separate
        #: continuation hash, for partitions sized for one entry a session)
        self.here = here
        self.partitions = partitions
        self.bits = partition_bits(partitions)
        self.base_bits = partition_bits(base_partitions or partitions)
        #: while a repartition runs: the old partition count, whose partitions are split
        #: (hrec_split) before any operation touches their children
        self.from_partitions = from_partitions
        self.from_bits = partition_bits(from_partitions) if from_partitions else None
        if self.base_bits > self.bits or (self.from_bits is not None and not self.base_bits <= self.from_bits < self.bits):
            raise ValueError("partition counts only grow: base <= from < partitions")
        self.limits = limits
        #: plan_get's and plan_replace's key names by partition (_named)
        self._names: dict[int, tuple[bytes, bytes, bytes, tuple[bytes, ...]]] = {}

    def payload_room(self, bare: int) -> int | None:
        return self.limits.hash_max_listpack_value - bare  # placement()'s INLINE

    # -- naming -----------------------------------------------------------------------
    def key_at(self, code: str, partition: int, bits: int) -> bytes:
        if bits == self.base_bits:
            return tag(self.namespace, code, partition)
        root = partition >> (bits - self.base_bits)
        return tag(self.namespace, code, root) + b":%d.%d" % (bits, partition)

    def hash_key(self, partition: int) -> bytes:
        return self.key_at("sd", partition, self.bits)

    def zset_key(self, partition: int) -> bytes:
        return self.key_at("sz", partition, self.bits)

    def locate(self, digest: bytes) -> tuple[int, bytes]:
        return split_digest(digest, self.bits)

    def cont_key(self, partition: int) -> bytes:
        return self.key_at("sc", partition, self.bits)

    def is_cont(self, field: bytes) -> bool:
        """Whether a field of one of this layout's partition hashes is a split session's
        continuation (not a record): what a scan of a partition must skip."""
        return is_cont_field(field, self.bits)

    def ool_key(self, digest: bytes) -> bytes:
        """The session's out-of-line payload key: same hash tag as its partitions."""
        root = split_digest(digest, self.base_bits)[0]
        return tag(self.namespace, "so", root) + b":" + digest

    # -- repartition --------------------------------------------------------------------
    TOMBSTONE = b"densekv: partition moved (repartition); re-read the store metadata"

    def old_partition(self, digest: bytes) -> int | None:
        """The partition of the old count that must be split before touching `digest`."""
        if self.from_bits is None:
            return None
        return split_digest(digest, self.from_bits)[0]

    def plan_split(self, old: int) -> Plan[int]:
        """Move old partition `old` (of from_partitions) into its children, atomically."""
        assert self.from_bits is not None
        s = self.bits - self.from_bits
        if not 1 <= s <= 8:
            raise ValueError("one repartition step multiplies the partition count by 2..256")
        children = [(old << s) + j for j in range(1 << s)]
        keys = [self.key_at("sd", old, self.from_bits), self.key_at("sz", old, self.from_bits)]
        keys += [self.hash_key(c) for c in children]
        keys += [k for c in children for k in self._keys(c)[1:]]  # the zsets, in the zset layout
        keys += [self.key_at("sc", old, self.from_bits), *(self.cont_key(c) for c in children)]
        args = (s, self.from_bits % 8, self.bits // 8 - self.from_bits // 8, self.bits % 8, self.mode,
                self.TOMBSTONE, 16 - self.from_bits // 8, int(self.here))
        return script_call(script("hrec_split"), tuple(keys), args, int)

    def partitioning(self) -> PartitionedLayout:
        return self

    def structures(self, partition: int) -> dict[str, bytes]:
        """The keys of one partition by the kind of structure they are (hash, zset)."""
        return dict(zip(("hash", "zset"), self._keys(partition)))

    def plan_splits(self, digests: Iterable[bytes]) -> list[Plan[int]]:
        if self.from_partitions is None:
            return []
        olds = dict.fromkeys(self.old_partition(d) for d in digests)
        return [self.plan_split(p) for p in olds if p is not None]

    def plan_unit_splits(self, units: Iterable[int]) -> list[Plan[int]]:
        if self.from_bits is None:
            return []
        shift = self.bits - self.from_bits
        return [self.plan_split(p) for p in dict.fromkeys(u >> shift for u in units)]

    def plan_drop_outside(self, gone: list[Record]) -> list[Plan[Any]]:
        """DEL of the out-of-line keys of swept records (a continuation entry goes with
        its record, in the sweep script)."""
        keys = [self.ool_key(r.digest) for r in gone if r.outside and r.part is None]
        return [command("DEL", k, keys=(k,)) for k in keys]

    def group_of(self, digest: bytes) -> Hashable:
        return key_slot(self.hash_key(self.locate(digest)[0]))

    def describe(self) -> dict[str, Any]:
        return {"layout": self.name, "partitions": self.partitions,
                "repartition_from": self.from_partitions,
                "hash_max_listpack_entries": self.limits.hash_max_listpack_entries,
                "hash_max_listpack_value": self.limits.hash_max_listpack_value}

    def _decode(self, digest: bytes, where: bytes) -> Any:
        def decode(reply: Any) -> Record | None:
            if reply is None:
                return None
            return unpack_record(digest, reply, key=where)

        return decode

    def _named(self, p: int, digest: bytes) -> tuple[bytes, bytes, bytes, tuple[bytes, ...]]:
        """Partition p's key names: (hash, the out-of-line key less its digest,
        continuation, the zset or nothing), made once per partition (a name costs ~0.3-0.8
        us to format) and kept for the first _REPLACE_KEYS_MAX partitions used. Past that
        they are made per call and not kept: emptying a full cache made a store of many
        more partitions miss on most calls, each miss dearer than the names it needs."""
        named = self._names.get(p)
        if named is None:
            ool = self.ool_key(digest)
            named = (self.hash_key(p), ool[: len(ool) - len(digest)], self.cont_key(p), self._keys(p)[1:])
            if len(self._names) < _REPLACE_KEYS_MAX:
                self._names[p] = named
        return named

    def _cached(self, p: int, digest: bytes) -> tuple[bytes, bytes, bytes, tuple[bytes, ...]] | None:
        """_named while the cache has room for p, else None: the caller formats only the
        names it needs (plan_get, plan_put)."""
        named = self._names.get(p)
        if named is None and len(self._names) < _REPLACE_KEYS_MAX:
            named = self._named(p, digest)
        return named

    # -- operations ---------------------------------------------------------------------
    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        p, field = self.locate(rec.digest)
        named = self._cached(p, rec.digest)
        key = self.hash_key(p) if named is None else named[0]
        value = pack_record(rec, rec.payload)
        limit = self.limits.hash_max_listpack_value
        steps: list[Command] = []
        if len(value) > limit and rec.payload is not None:  # the partition must stay a listpack
            bare = len(pack_record(rec, b""))
            if placement(len(value), bare, limit, self.splits) == SPLIT:
                first = limit - bare - 1
                if self.here:  # the rest beside the record: one HSET of both fields
                    value = pack_record(rec, CONTINUED_HERE + rec.payload[:first])
                    if len(value) <= limit:
                        more = (cont_field(field, self.bits), rec.payload[first:])
                        return Plan(tuple(self._put_steps(key, p, field, value, rec, more)), _none,
                                    atomic=self.mode == "zset")
                value = pack_record(rec, CONTINUED + rec.payload[:first])
                cont = self.cont_key(p) if named is None else named[2]
                steps.append(Command(("HSET", cont, field, rec.payload[first:]), (cont,)))
            else:
                value = pack_record(rec, MARKER)
                ool = self.ool_key(rec.digest)
                steps.append(Command(("SET", ool, rec.payload, "EXAT", rec.absolute_at), (ool,)))
        if len(value) > limit:  # a longer value would turn the whole partition into a hashtable
            raise SessionDataTooLarge(
                f"this session's record would be {len(value)} bytes without its data, over the "
                f"server's hash-max-listpack-value {limit}: use a shorter identity"
            )
        steps += self._put_steps(key, p, field, value, rec)
        return Plan(tuple(steps), lambda r: None, atomic=len(steps) > 1)

    def _put_steps(self, key: bytes, p: int, field: bytes, value: bytes, rec: Record,
                   more: tuple[bytes, ...] = ()) -> list[Command]:
        """The commands that store a record (`more`: the continuation field and its value,
        set in the same HSET)."""
        return [Command(("HSET", key, field, value, *more), (key,)), *self._put_extra(p, field, rec)]

    def _put_extra(self, p: int, field: bytes, rec: Record) -> list[Command]:
        return []

    def put_guard(self, digest: bytes) -> tuple[tuple[bytes, ...], tuple[Any, ...]]:
        p, field = self.locate(digest)
        return (self.hash_key(p), self.cont_key(p), self.ool_key(digest)), ("field", field, cont_field(field, self.bits))

    def plan_get(self, digest: bytes, outside: bool | str = True) -> Plan[Record | None]:
        """HGET of the record, and with `outside` the rest of a payload that is not all
        inline: "split" the continuation this layout writes (`here`: the continuation
        field, read with the record in one HMGET; else the separate continuation hash),
        "here" / "cont" that one, "ool" the out-of-line key, True all of them. Parts from
        more than one key are read in one MULTI (a split payload's two parts must come
        from one version of the session). A record whose rest was not asked for comes
        back without it, and the store reads the rest next (plan_fetch_outside)."""
        p, field = self.locate(digest)
        named = self._cached(p, digest)
        key = self.hash_key(p) if named is None else named[0]
        if not outside:
            return command("HGET", key, field, keys=(key,), decode=self._decode(digest, key))
        if outside == "split":
            outside = "here" if self.here else "cont"
        here = outside is True or outside == "here"
        if here and outside == "here":  # the one-command read of a split session
            return command("HMGET", key, field, cont_field(field, self.bits), keys=(key,),
                           decode=self._decode_here(digest, key))
        steps: tuple[Command, ...] = (Command(("HMGET", key, field, cont_field(field, self.bits)) if here else
                                               ("HGET", key, field),
                                              (key,)),)
        at_cont = at_ool = 0
        if outside is True or outside == "cont":
            cont = self.cont_key(p) if named is None else named[2]
            at_cont = len(steps)
            steps += (Command(("HGET", cont, field), (cont,)),)
        if outside is True or outside == "ool":
            ool = self.ool_key(digest) if named is None else named[1] + digest
            at_ool = len(steps)
            steps += (Command(("GET", ool), (ool,)),)

        def all_parts(replies: list[Any]) -> Record | None:
            first = replies[0]
            raw = first[0] if here else first
            if raw is None:
                return None
            rec = unpack_record(digest, raw, key=key)
            if rec.outside:
                if rec.here:
                    return with_rest(rec, first[1]) if here else rec
                at = at_cont if rec.part is not None else at_ool
                if at:
                    return with_rest(rec, replies[at])
            return rec

        return Plan(steps, all_parts, atomic=True)

    def _decode_here(self, digest: bytes, where: bytes) -> Any:
        def decode(reply: Any) -> Record | None:
            raw, rest = reply
            if raw is None:
                return None
            rec = unpack_record(digest, raw, key=where)
            return with_rest(rec, rest) if rec.here else rec

        return decode

    def plan_fetch_outside(self, rec: Record) -> Plan[Record | None]:
        """The rest of a record read without it (HSCAN, a get without `outside`). A split
        payload is read again whole, record and continuation in one step (one HMGET, or
        one MULTI for the separate continuation hash): the record may have changed since
        it was read, and parts of two versions must never be joined. An out-of-line value
        read alone is a whole payload (of this version or a later one)."""
        if rec.part is not None:
            return self.plan_get(rec.digest, outside="here" if rec.here else "cont")
        ool = self.ool_key(rec.digest)
        return command("GET", ool, keys=(ool,), decode=lambda r: with_rest(rec, r))

    def _keys(self, p: int) -> tuple[bytes, ...]:
        return (self.hash_key(p),)

    # The index keeps 8 digest bytes: they name the partition (bits <= 24) and start the
    # field, so one HSCAN MATCH of that partition finds the session (64 bits: a stray match
    # is rare, and the store checks the identity of whatever it finds).
    index_ref_len = 8

    def plan_find(self, ref: bytes, cursor: int) -> Plan[tuple[int, list[Record]]]:
        p, field = self.locate(ref + bytes(16 - len(ref)))
        head = field[: len(field) - (16 - len(ref))]
        key = self.hash_key(p)

        def decode(reply: Any) -> tuple[int, list[Record]]:
            nxt, flat = reply
            return int(nxt), [
                unpack_record(join_digest(p, flat[i], self.bits), flat[i + 1], key=key)
                for i in range(0, len(flat), 2)
                if flat[i].startswith(head) and len(flat[i]) == len(field)
            ]

        return command("HSCAN", key, cursor, "MATCH", glob_escape(head) + b"*", "COUNT", 1000,
                       keys=(key,), decode=decode)

    def plan_touch(self, digest: bytes, now: int, idle_ttl: int) -> Plan[int]:
        p, field = self.locate(digest)
        return script_call(script("hrec_touch"), self._keys(p), (field, now, idle_ttl, self.mode), int)

    def plan_replace(self, digest: bytes, current: Record | None, data: dict[str, Any] | None,
                     framed: bytes | None, now: int, times: tuple[int, int] | None = None) -> Plan[int]:
        p, field = self.locate(digest)
        expected = (b"", b"") if current is None else (current.raw, current.ool or b"")
        named = self._names.get(p) or self._named(p, digest)
        keys: tuple[bytes, ...] = (named[0], named[1] + digest, named[2])
        if times is not None:
            keys += named[3]  # the zset, in the zset layout
        args = (field, now, framed or b"", self.limits.hash_max_listpack_value, self.mode, *expected,
                *(times or _NO_TIMES), cont_field(field, self.bits), _HERE[self.here])
        return Plan((ScriptCall(script("hrec_update"), keys, args),), _first_int)

    def plan_delete(self, digest: bytes) -> Plan[Record | None]:
        p, field = self.locate(digest)
        key = self.hash_key(p)
        ool, cont = self.ool_key(digest), self.cont_key(p)
        steps = [Command(("HGET", key, field), (key,)), Command(("HDEL", key, field, cont_field(field, self.bits)), (key,)),
                 Command(("HDEL", cont, field), (cont,)), Command(("DEL", ool), (ool,))]
        steps += self._delete_extra(p, field)
        decode = self._decode(digest, key)
        return Plan(tuple(steps), lambda r: decode(r[0]), atomic=True, revokes=True)

    def _delete_extra(self, p: int, field: bytes) -> list[Command]:
        return []

    def plan_rename(self, old: bytes, new: bytes, now: int, identity: Any = ...,
                    current: Record | None = None) -> Plan[Any]:
        p_old, f_old = self.locate(old)
        p_new, f_new = self.locate(new)
        keys: tuple[bytes, ...] = (self.hash_key(p_old), self.hash_key(p_new), self.ool_key(old), self.ool_key(new),
                                   self.cont_key(p_old), self.cont_key(p_new))
        keys += self._keys(p_old)[1:] + self._keys(p_new)[1:]  # the zsets, in the zset layout
        section = b""
        if identity is not ...:
            flags, ident = identity_section(identity)
            section = bytes([flags]) + ident
        return Plan(
            (ScriptCall(script("hrec_rename"), keys, (f_old, f_new, now, self.mode, section,
                                                      cont_field(f_old, self.bits), cont_field(f_new, self.bits))),),
            lambda r: None if r[0] is None else unpack_record(new, r[0]), revokes=True,
        )

    def sweep_units(self) -> Iterator[int]:
        return iter(range(self.partitions))

    def plan_sweep(self, unit: int, now: int, limit: int, dry: bool = False) -> Plan[list[Record]]:
        """Remove what expired by `now` in one partition (at most `limit`); `dry`: remove
        nothing, reply what would go (a store announcing expiries first)."""

        def decode(reply: Any) -> list[Record]:
            return [
                unpack_record(join_digest(unit, reply[i], self.bits), reply[i + 1])
                for i in range(0, len(reply), 2)
            ]

        keys = (self.hash_key(unit), self.cont_key(unit), *self._keys(unit)[1:])
        args = (now, limit, self.mode, self.bits % 8, 16 - self.bits // 8, b"1" if dry else b"0")
        return script_call(script("hrec_sweep"), keys, args, decode)


class DenseLayout(PartitionedLayout):
    name = "dense"


class ZsetLayout(PartitionedLayout):
    name = "zset"
    mode = "zset"

    def _keys(self, p: int) -> tuple[bytes, ...]:
        return (self.hash_key(p), self.zset_key(p))

    def _put_extra(self, p: int, field: bytes, rec: Record) -> list[Command]:
        key = self.zset_key(p)
        return [Command(("ZADD", key, rec.expires_at, field), (key,))]

    def _delete_extra(self, p: int, field: bytes) -> list[Command]:
        key = self.zset_key(p)
        return [Command(("ZREM", key, field), (key,))]


class FieldTtlLayout(PartitionedLayout):
    name = "fieldttl"
    mode = "fieldttl"
    server_expires = True
    splits = False  # a payload over the limit goes out of line (lua/hrec_update.lua: mode)

    #: the server has HSETEX (Redis 8+, Valkey 9+): value and field TTL in one command;
    #: otherwise HSET + HEXPIREAT in one MULTI (Redis 7.4)
    hsetex = False

    def __init__(self, namespace: str, partitions: int, limits: LayoutLimits, *, hsetex: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(namespace, partitions, limits, **kwargs)
        self.hsetex = hsetex

    def _put_steps(self, key: bytes, p: int, field: bytes, value: bytes, rec: Record,
                   more: tuple[bytes, ...] = ()) -> list[Command]:
        assert not more, "the fieldttl layout never splits"
        if self.hsetex:
            return [Command(("HSETEX", key, "EXAT", rec.expires_at, "FIELDS", 1, field, value), (key,))]
        return super()._put_steps(key, p, field, value, rec)

    def _put_extra(self, p: int, field: bytes, rec: Record) -> list[Command]:
        key = self.hash_key(p)
        return [Command(("HEXPIREAT", key, rec.expires_at, "FIELDS", 1, field), (key,))]

    def sweep_units(self) -> Iterator[int]:
        return iter(())  # the server expires fields itself


_REPLACE_KEYS_MAX = 4096
_NO_TIMES = (b"", b"")  # lua/hrec_update.lua's ARGV[8..9] when the expiries stay
_HERE = {True: b"1", False: b"0"}  # its ARGV[11]


def _none(replies: list[Any]) -> None:
    return None


def _first_int(replies: list[Any]) -> int:
    """plan_replace's reply: script_call(..., int) without a closure per plan."""
    return int(replies[0])
