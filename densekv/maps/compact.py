"""CompactMap and AsyncCompactMap: key -> small value at a few bytes per item.

Items live as fields of listpack hash buckets (maps/buckets.py), keys zipped
(maps/zipkeys.py), values framed with a one-byte codec header (densekv/codec.py). Every
operation is written once, as a *flow*: a generator that yields lists of plans and
receives their results (one list = one round trip). The sync map, the asyncio map and a
batch (many flows driven together, their plans sharing round trips) all run the same
flows, so they cannot drift. Invariants:
  * a bucket never leaves the listpack encoding because of a value: a framed value longer
    than hash-max-listpack-value goes to its own key (marker 0x0F in the bucket); a key
    whose zipped form is too long for a field is refused (KeyTooLong) before any write;
  * per-item expiry (ttl_mode "packed", see "Per-item TTL" below) is packed before the
    value (codec.EXPIRES) and checked on every read, so an expired item is never returned,
    swept or not; read-then-write operations on it (setnx, incr, expire, sweep) are one Lua
    script;
  * the map's geometry (bucket count), alias table and TTL mode are fixed in the server
    when the map is created: any process, with any `expected`, finds every item;
  * a value that does not decode raises DecodeError naming the key; nothing is returned
    raw and nothing else is touched;
  * while a migration runs (`fallback`), a missing item is read from the plain key of the
    same name, and a write first moves that key in (maps/migrate.py).
get is one HGET, set one HSET (two commands only for out-of-line values).

Per-item TTL (`ttl_mode`, stored in the map's meta at creation; a map made before the
option existed has none and is "packed"; an explicit mode other than the stored one
raises MapConfigError):
  * "packed": the expiry, 4-byte unix seconds behind the 0x0E header, before the framed
    value; read checks it, sweep() removes expired items (map_sweep.lua).
  * "field": the server's hash field TTL (HEXPIREAT on the item's field), no expiry in the
    value. A write with a TTL sets value and TTL together: HSETEX where the server has it
    (Valkey 9.1), else HSET + HEXPIREAT in one MULTI (Redis 7.4), also in batches
    (run_fast groups them per bucket and expiry). A write without one is a plain HSET,
    which drops the field's TTL (as SET does); HINCRBY keeps it (both checked by
    tests/behaviour/test_map_fieldttl.py on Redis 7.4 and Valkey 9.1). ttl() reads
    HPEXPIRETIME, expire()/persist() are HEXPIREAT/HPERSIST (and EXPIREAT/PERSIST of an
    out-of-line key, which keeps its own EXAT one second past its field's). The server
    expires items itself and hides expired fields from HGET, HMGET, HGETALL and HSCAN,
    so sweep() only reclaims out-of-line keys. Refused with FieldTtlUnavailable, before
    anything is written, on a server without field TTL (Redis 7.0, Valkey 8.0).
  * "auto" (default): packed on every server, from these measurements (used_memory delta
    per item at 200k items, every item with a one-day TTL; `python benchmarks/map_memory.py
    --server S --case C --ttl-mode packed|field`; load does not move bytes):
        server       case         packed   field                    plain SET EX
        redis-7.4    int_seq      21.19    21.46 (listpackex)       101.22
        redis-7.4    int_holey    23.48    22.77 (listpackex)       100.97
        redis-7.4    str8_holey   22.50    27.77 (listpackex)       116.90
        valkey-9.1   int_seq      19.53    77.88 (hashtable)         68.47
        valkey-9.1   int_holey    21.41    73.05 (hashtable)         67.95
    On Redis 7.4 (listpackex) a field TTL is a listpack integer entry of ~10 bytes per
    item against 5 packed bytes, which also turn an integer value into a string: about
    even for integers (0.7 B/item smaller under holey ids, 0.3 larger under sequential
    ids), 5.3 B/item larger for 8-byte strings, and writes cost more server time (int
    cases, batched sets: HSET 2.0-2.8 us + HEXPIREAT 4.3-6.4 us per grouped call against
    HSET 1.1-1.4 us packed; commandstats of the same runs, load average 1.8-3.3).
    On Valkey 9.1 one expiring field turns the bucket into a hashtable: 3.4-4x packed and
    more than plain SET EX. So auto never finds field TTL "compact and not larger";
    "field" remains for those who want the server to expire items (no sweep).

Batches and transactions (`m.batch(transaction=False|True)`, results like a redis-py
pipeline's, in order, each also in the Pending the op returned):
  * a batch (transaction=False) runs its gets and sets through MapCore.run_fast: one
    HMGET per bucket for consecutive gets, one HSET per bucket for consecutive sets (an op
    only moves earlier past ops on other buckets), one round trip, per-prefix locate work
    cached (buckets.Locator). Other ops run as their flows, in the same round trips, in order.
    An out-of-line value is read in a second round trip, only when its marker is seen;
    that read returns a value the item held between the two round trips (its key is
    written with its marker in one MULTI and rewritten only by a newer write of the same
    item), and a key gone by then (item replaced inline and the key reclaimed) makes the
    item be read again, never reported missing. When a later op of the same batch writes
    that item, the value is prefetched right after the bucket read instead, so the batch's
    own writes never show through an earlier get. Like a redis-py pipeline, a batch is not
    isolated from other clients. During a migration every op runs as its flow (fallback
    reads prefetched in the first round trip, as before);
  * a transaction (transaction=True) sends the first (and, for every op, only) round
    trip of all its ops inside one MULTI/EXEC: scripts as EVALSHA, loaded by SCRIPT LOAD
    ahead in the same round trip, and every get also reads the item's out-of-line key
    inside the MULTI, so nothing of the transaction needs a second round trip except
    loading a zstd dictionary not seen yet; that happens after EXEC and is still
    consistent: a stored dictionary never changes and its id is never reused. Refused with
    TransactionError before anything is sent: a map with a migration in progress (moving
    plain keys in takes reads then scripts, and fallback reads would be a second round
    trip) and, on a cluster, keys in more than one slot (the keys of one bucket share a
    hash tag; other buckets usually do not). Bad input (ValueTooLarge, KeyTooLong,
    TypeError) raises before anything is sent. As in Redis, an op that fails inside EXEC
    (NotAnInteger, WrongType) does not undo the others; the first such error raises after
    the transaction ran, as redis-py's transaction pipeline does.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from redis.crc import key_slot

from densekv import codec as cd
from densekv.codec import Codec, ZstdDictionary
from densekv.errors import DecodeError, DensekvError
from densekv.lua import script
from densekv.maps.buckets import (
    FORMAT,
    Geometry,
    Location,
    Locator,
    bucket_count,
    bucket_patterns,
    key_of,
)
from densekv.maps.dictionaries import DictionaryCache, plan_load, plan_store, train_dictionary
from densekv.maps.zipkeys import Aliases
from densekv.plan import (
    ClusterExecutor,
    Command,
    Plan,
    ScriptCall,
    command,
    executor_for,
    script_call,
)

T = TypeVar("T")
Flow = Generator[list[Plan[Any]], list[Any], T]
MISSING: Any = object()
OOL = bytes([cd.OUT_OF_LINE])
OOL_SLACK = 1  # an out-of-line key outlives its marker by a second (clock rounding)
EXPIRES_HEAD = bytes([cd.EXPIRES])
INT64_MIN, INT64_MAX = cd.INT64_MIN, cd.INT64_MAX
_INT_HEADS = frozenset(cd.INTEGER_FIRST)
_NONE: Mapping[int, Any] = {}
_ZSTD_HEADS = frozenset(bytes([h]) for h in (cd.ZSTD_BYTES, cd.ZSTD_STR, cd.ZSTD_MSGPACK))


class ValueTooLarge(DensekvError):
    """A value that cannot be stored compactly (a map with out_of_line=False)."""


class NotAnInteger(DensekvError):
    """incr/incrby on an item that does not hold an integer (or would overflow int64)."""


class MapConfigError(DensekvError):
    """The map stored in the server was made with another alias table or format."""


class FieldTtlUnavailable(MapConfigError):
    """ttl_mode="field" (or a map stored in that mode) on a server without hash field TTL
    (HEXPIRE: Redis 7.4+, Valkey 9+); raised before anything is written."""


class TransactionError(DensekvError):
    """A transaction that cannot run atomically (keys in several cluster slots, a
    migration in progress); raised before anything is sent."""


@dataclass(frozen=True)
class MapFacts:
    """What a map needs of the server (from the probe)."""

    entries_limit: int
    value_limit: int
    field_ttl: str = "none"
    field_ttl_encoding: str | None = None
    cluster: bool = False


def facts_from_probe(client: Any) -> MapFacts:
    from densekv.server.probe import probe

    caps = probe(client)
    return MapFacts(caps.hash_max_listpack_entries, caps.hash_max_listpack_value,
                    caps.field_ttl, caps.field_ttl_encoding, caps.cluster)


def read_facts() -> Flow[MapFacts]:
    """The same facts by CONFIG GET (for asyncio clients, where the probe is not async)."""

    def pair(reply: Any) -> int:
        items = list(reply.items()) if isinstance(reply, dict) else list(zip(reply[::2], reply[1::2]))
        return int(items[0][1])

    def known(r: Any) -> bool:
        return bool(r) and r[0] is not None

    entries, value, hexpire, hsetex = yield [
        command("CONFIG", "GET", "hash-max-listpack-entries", decode=pair),
        command("CONFIG", "GET", "hash-max-listpack-value", decode=pair),
        command("COMMAND", "INFO", "HEXPIRE", decode=known),
        command("COMMAND", "INFO", "HSETEX", decode=known),
    ]
    field_ttl = "hsetex" if hsetex else "hexpire" if hexpire else "none"
    encoding = None
    if field_ttl != "none":  # what the probe does: one expiring field on a scratch key
        key = f"densekv:probe:{{{secrets.token_hex(8)}}}".encode()
        got = yield [Plan((Command(("HSET", key, "f", "v", "g", "w"), (key,)),
                           Command(("HEXPIRE", key, 3600, "FIELDS", 1, "f"), (key,)),
                           Command(("OBJECT", "ENCODING", key), (key,)),
                           Command(("DEL", key), (key,))))]
        encoding = _text(got[0][2])
    return MapFacts(entries, value, field_ttl, encoding)


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _flat(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    return {_text(k): _text(v) for k, v in zip(reply[::2], reply[1::2])}


def _key(key: Any) -> str:
    if isinstance(key, bytes):
        return key.decode("utf-8", "surrogateescape")
    if not isinstance(key, str):
        raise TypeError(f"map keys are str (or bytes), not {type(key).__name__}")
    return key


def step(plan: Plan[T]) -> Flow[T]:
    return (yield [plan])[0]  # type: ignore[no-any-return]


def plain_value(raw: bytes) -> Any:
    """How a plain string value reads through a map (migration fallback): canonical integer
    text is an int (it is stored as one), anything else bytes."""
    return int(raw) if cd.is_canonical_int(raw) else bytes(raw)


def plain_bytes(value: Any) -> bytes:
    """The inverse of plain_value, for the reverse migration (JSON for other values)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    import json

    return json.dumps(value, separators=(",", ":")).encode()


class MapCore:
    """The flows of one map; no I/O. Built from the server facts and the stored meta."""

    def __init__(self, namespace: str, facts: MapFacts, meta: Mapping[str, str], aliases: Aliases,
                 codec: Codec, ttl: float | None, clock: Callable[[], float], out_of_line: bool) -> None:
        self.namespace = namespace
        self.facts = facts
        self.geo = Geometry(int(meta["buckets"]), int(meta["entries"]),
                            min(int(meta["value"]), facts.value_limit))
        self.aliases = aliases
        self.codec = codec
        self.ttl = ttl
        self.clock = clock
        self.out_of_line = out_of_line
        self.fallback = meta.get("fallback") or None
        self.dicts = DictionaryCache()
        self.write_dictionary = int(meta.get("zdict", "0") or 0)
        self.place = Locator(namespace, self.geo, aliases)
        self.ttl_mode = meta.get("ttl_mode", "packed")
        self.field_ttl = self.ttl_mode == "field"  # per-item expiry as the server's field TTL
        self.hsetex = facts.field_ttl == "hsetex"

    # -- pure helpers -------------------------------------------------------------------
    def now(self) -> int:
        return int(self.clock())

    def locate(self, key: str) -> Location:
        return Location(*self.place(key))

    def expiry_of(self, ttl: float | None) -> int | None:
        ttl = self.ttl if ttl is None else ttl
        if ttl is None:
            return None
        if ttl <= 0:
            raise ValueError("ttl is a positive number of seconds")
        return self.now() + max(1, int(round(ttl)))

    def frame(self, key: str, value: Any, expires: int | None) -> tuple[bytes, bytes | None]:
        """(what the bucket stores, the out-of-line value or None). Raises before writing.
        The expiry is packed before the value in ttl_mode "packed" only."""
        framed = self.codec.encode(value)
        if self.field_ttl:
            expires = None
        stored = cd.with_expiry(framed, expires)
        if len(stored) <= self.geo.value_limit:
            return stored, None
        if not self.out_of_line:
            raise ValueTooLarge(
                f"the value of {key!r} is {len(stored)} bytes framed, over the server's "
                f"hash-max-listpack-value {self.geo.value_limit}: a larger value would turn its "
                "bucket into a hashtable (make the map with out_of_line=True, compress, or raise the limit)"
            )
        return cd.with_expiry(OOL, expires), framed

    def write_plan(self, loc: Location, stored: bytes, ool: bytes | None, expires: int | None) -> Plan[Any]:
        """The write of one item. In ttl_mode "field" the value and its field TTL are set
        together (HSETEX where the server has it, else HSET + HEXPIREAT in one MULTI); a
        plain HSET over a field drops its TTL (Redis 7.4, Valkey 9.1), as SET does."""
        hset = Command(("HSET", loc.bucket, loc.field, stored), (loc.bucket,))
        fttl = (Command(("HEXPIREAT", loc.bucket, expires, "FIELDS", 1, loc.field), (loc.bucket,)),) \
            if expires and self.field_ttl else ()
        if ool is None:
            if not fttl:
                return command("HSET", loc.bucket, loc.field, stored, keys=(loc.bucket,))
            if self.hsetex:
                return Plan((Command(("HSETEX", loc.bucket, "EXAT", expires, "FIELDS", 1, loc.field, stored),
                                     (loc.bucket,)),))
            return Plan((hset, *fttl), atomic=True)
        args: tuple[Any, ...] = ("SET", loc.ool, ool) + (("EXAT", expires + OOL_SLACK) if expires else ())
        return Plan((Command(args, (loc.ool,)), hset, *fttl), atomic=True)

    def live(self, raw: Any) -> bytes | None:
        """The bucket value without its expiry wrapper, or None if missing or expired."""
        if raw is None:
            return None
        exp, inner = cd.split_expiry(bytes(raw))
        if exp is not None and exp <= self.now():
            return None
        return inner

    # -- reading ------------------------------------------------------------------------
    def resolve(self, keys: Sequence[str], locs: Sequence[Location], raws: Sequence[Any],
                oolvals: Sequence[Any] | None = None, plains: Sequence[Any] | None = None) -> Flow[list[Any]]:
        """Bucket replies -> values (MISSING where absent): out-of-line values and the
        migration fallback fetched in one more round trip each unless prefetched (batches
        prefetch them, so that later operations of the batch cannot slip in between), and
        dictionaries (immutable) loaded once."""
        inner: list[bytes | None] = []
        for key, raw in zip(keys, raws):
            try:
                inner.append(self.live(raw))
            except ValueError as exc:
                raise DecodeError(f"the value of key {key!r} does not decode: {exc}", key=key) from exc
        ool_at = [i for i, v in enumerate(inner) if v == OOL]
        if ool_at:
            if oolvals is None:
                got = yield [command("GET", locs[i].ool, keys=(locs[i].ool,)) for i in ool_at]
            else:
                got = [oolvals[i] for i in ool_at]
            for i, v in zip(ool_at, got):
                inner[i] = None if v is None else bytes(v)
        values: list[Any] = [MISSING] * len(keys)
        plain_at = [i for i, v in enumerate(inner) if v is None] if self.fallback else []
        if plain_at:
            if plains is None:
                got = yield [self.plain_get(keys[i]) for i in plain_at]
            else:
                got = [plains[i] for i in plain_at]
            for i, v in zip(plain_at, got):
                if v is not None:
                    values[i] = plain_value(v)
        yield from self.need_dictionaries(inner)
        for i, (key, v) in enumerate(zip(keys, inner)):
            if v is not None:
                values[i] = cd.decode(v, key=key, dictionaries=self.dicts.known)
        return values

    def need_dictionaries(self, framed: Iterable[bytes | None]) -> Flow[None]:
        ids = self.dicts.missing(cd.needed_dictionary(v) for v in framed if v)
        if ids:
            self.dicts.add((yield [plan_load(self.namespace, ids)])[0])

    def plain_get(self, key: str) -> Plan[Any]:
        k = key.encode("utf-8", "surrogateescape")
        return command("GET", k, keys=(k,))

    def get_many(self, keys: Sequence[str], prefetch: bool = False) -> Flow[list[Any]]:
        """prefetch: read out-of-line (and fallback) values in the same round trip."""
        locs = [self.locate(k) for k in keys]
        by_bucket: dict[bytes, list[int]] = {}
        for i, loc in enumerate(locs):
            by_bucket.setdefault(loc.bucket, []).append(i)
        plans: list[Plan[Any]] = [
            command("HMGET", b, *[locs[i].field for i in idx], keys=(b,)) if len(idx) > 1
            else command("HGET", b, locs[idx[0]].field, keys=(b,), decode=lambda r: [r])
            for b, idx in by_bucket.items()]
        if prefetch:
            plans += [command("GET", loc.ool, keys=(loc.ool,)) for loc in locs]
            if self.fallback:
                plans += [self.plain_get(k) for k in keys]
        replies = yield plans
        raws: list[Any] = [None] * len(keys)
        for idx, reply in zip(by_bucket.values(), replies):
            for i, r in zip(idx, reply):
                raws[i] = r
        n = len(by_bucket)
        oolvals = replies[n : n + len(keys)] if prefetch else None
        plains = replies[n + len(keys) :] if prefetch and self.fallback else None
        return (yield from self.resolve(keys, locs, raws, oolvals, plains))

    # -- batches: gets and sets grouped into few commands ---------------------------------
    def run_fast(self, ops: Sequence[Queued], prefetch: Mapping[int, Any] = _NONE, base: int = 0,
                 split: bool = False) -> Flow[list[Any]]:
        """Queued gets, mgets, sets and msets of a batch (no migration in progress) in one
        round trip. The result has one entry per key, in order: the value (MISSING when
        absent) for a get, True for a set.

        Commands go out in op order, except that consecutive gets of one bucket share an
        HMGET and consecutive sets one HSET as long as no op of the other kind on that
        bucket came in between: an op moves earlier past ops on other buckets only, so
        every key sees its ops in order. Every value is framed (and refused) before
        anything is sent. An out-of-line value (marker in the bucket) is read in a second
        round trip when its marker is seen, unless `prefetch` says a later op of the batch
        writes that key (base + op index -> True, or a flag per key of an mget): its GET goes
        right after the bucket read, before that write. A deferred read whose key is gone
        (another client overwrote the item and the key was reclaimed in between) reads the
        item again from the start, so a get never calls an item missing that never was.
        `split`: one plan per bucket (a cluster routes them by slot), else one plan."""
        place = self.place
        frame = self.frame
        int_ok = self.codec.serializer != "raw"  # every other serializer writes an int64 as INTEGER
        limit = self.geo.value_limit
        field_ttl, hsetex = self.field_ttl, self.hsetex
        cmds: list[tuple[bytes, list[Any]]] = []
        reads: dict[bytes, tuple[int, list[Any]]] = {}
        writes: dict[bytes, list[Any]] = {}
        # ttl_mode "field": bucket -> (expiry, the HSET or HSETEX, the HEXPIREAT or None) of
        # the last run of sets with that expiry; value and field TTL go in one command
        # (HSETEX) or one MULTI, so no reader ever sees the value without its TTL
        twrites: dict[bytes, tuple[int, list[Any], list[Any] | None]] = {}
        where: list[tuple[int, int, int] | None] = []  # per get: command, position, prefetch command
        keys: list[str] = []
        for n, (kind, data, _, _, _) in enumerate(ops):
            if kind == SET or kind == MSET:
                if kind == SET:
                    pairs: Any = (data[:2],)
                    ttl = data[2]
                else:
                    pairs, ttl = data
                expires = self.expiry_of(ttl) if ttl is not None or self.ttl is not None else None
                packed = expires if not field_ttl else None
                for key, value in pairs:
                    bucket, fld = place(key)
                    if type(value) is int and int_ok and INT64_MIN <= value <= INT64_MAX:
                        stored, ool = str(value).encode(), None  # what codec.encode_int writes
                        if packed or len(stored) > limit:
                            stored, ool = frame(key, value, expires)
                    else:
                        stored, ool = frame(key, value, expires)
                    if reads:
                        reads.pop(bucket, None)
                    if field_ttl:
                        if expires and ool is None:
                            writes.pop(bucket, None)
                            run = twrites.get(bucket)
                            if run is not None and run[0] == expires:
                                if run[2] is None:  # HSETEX key EXAT t FIELDS n f v ...
                                    run[1][5] += 1
                                    run[1].extend((fld, stored))
                                else:  # MULTI, HSET key f v ..., HEXPIREAT key t FIELDS n f ..., EXEC
                                    run[1].extend((fld, stored))
                                    run[2][4] += 1
                                    run[2].append(fld)
                            elif hsetex:
                                hsx: list[Any] = [b"HSETEX", bucket, b"EXAT", expires, b"FIELDS", 1, fld, stored]
                                twrites[bucket] = (expires, hsx, None)
                                cmds.append((bucket, hsx))
                            else:
                                hs: list[Any] = [b"HSET", bucket, fld, stored]
                                hx: list[Any] = [b"HEXPIREAT", bucket, expires, b"FIELDS", 1, fld]
                                twrites[bucket] = (expires, hs, hx)
                                cmds += [(bucket, [b"MULTI"]), (bucket, hs), (bucket, hx), (bucket, [b"EXEC"])]
                            where.append(None)
                            keys.append(key)
                            continue
                        if twrites:
                            twrites.pop(bucket, None)
                    if ool is None:
                        hset = writes.get(bucket)
                        if hset is None:
                            writes[bucket] = hset = [b"HSET", bucket, fld, stored]
                            cmds.append((bucket, hset))
                        else:
                            hset += (fld, stored)
                    else:
                        writes.pop(bucket, None)
                        ex: list[Any] = [b"EXAT", expires + OOL_SLACK] if expires else []
                        cmds += [(bucket, [b"MULTI"]), (bucket, [b"SET", Location(bucket, fld).ool, ool, *ex]),
                                 (bucket, [b"HSET", bucket, fld, stored])]
                        if field_ttl and expires:
                            cmds.append((bucket, [b"HEXPIREAT", bucket, expires, b"FIELDS", 1, fld]))
                        cmds.append((bucket, [b"EXEC"]))
                    where.append(None)
                    keys.append(key)
                continue
            # GET (one key) or MGET (a list): each key joins its bucket's HMGET
            if kind == GET:
                names: Sequence[str] = (data,)
                flags = (prefetch.get(base + n),) if prefetch else None
            else:
                names = data
                flags = prefetch.get(base + n) if prefetch else None
            for j, key in enumerate(names):
                bucket, fld = place(key)
                if writes:
                    writes.pop(bucket, None)
                if twrites:
                    twrites.pop(bucket, None)
                got = reads.get(bucket)
                if got is None:
                    got = reads[bucket] = (len(cmds), [b"HMGET", bucket, fld])
                    cmds.append((bucket, got[1]))
                else:
                    got[1].append(fld)
                pre = -1
                if flags and flags[j]:
                    pre = len(cmds)
                    cmds.append((bucket, [b"GET", Location(bucket, fld).ool]))
                where.append((got[0], len(got[1]) - 3, pre))
                keys.append(key)
        if not cmds:
            return []
        if split:
            groups: dict[bytes, list[int]] = {}
            for i, (bucket, _) in enumerate(cmds):
                groups.setdefault(bucket, []).append(i)
            plans: list[Plan[Any]] = [Plan(tuple(Command(tuple(cmds[i][1]), (b,)) for i in idx))
                                      for b, idx in groups.items()]
            replies: list[Any] = [None] * len(cmds)
            for idx, got_replies in zip(groups.values(), (yield plans)):
                for i, r in zip(idx, got_replies):
                    replies[i] = r
        else:
            replies = (yield [Plan(tuple([Command(tuple(a), (b,)) for b, a in cmds]))])[0]
        return (yield from self._settle_gets(keys, where, replies, split))

    def _settle_gets(self, keys: list[str], where: list[tuple[int, int, int] | None],
                     replies: list[Any], split: bool) -> Flow[list[Any]]:
        out: list[Any] = [True] * len(keys)
        inner: list[tuple[int, bytes]] = []
        deferred: list[tuple[int, bytes]] = []
        now = self.now()
        for i, w in enumerate(where):
            if w is None:
                continue
            raw = replies[w[0]][w[1]]
            if raw is None:
                out[i] = MISSING
                continue
            head = raw[0] if raw else 0
            if head in _INT_HEADS:  # the common case, decoded here: canonical int64 text
                if len(raw) <= 20 and (raw.isdigit() or raw[1:].isdigit()):
                    v = int(raw)
                    if INT64_MIN <= v <= INT64_MAX and str(v).encode() == raw:
                        out[i] = v
                        continue
                inner.append((i, raw))  # not canonical: cd.decode raises DecodeError
                continue
            if head == cd.EXPIRES:
                try:
                    exp, raw = cd.split_expiry(raw)
                except ValueError as exc:
                    raise DecodeError(f"the value of key {keys[i]!r} does not decode: {exc}", key=keys[i]) from exc
                if exp is not None and exp <= now:
                    out[i] = MISSING
                    continue
            if raw == OOL:
                if w[2] < 0:
                    deferred.append((i, Location(*self.place(keys[i])).ool))
                    continue
                raw = replies[w[2]]
                if raw is None:
                    out[i] = MISSING
                    continue
            inner.append((i, raw))
        if deferred:
            if split:
                got = yield [command("GET", k, keys=(k,)) for _, k in deferred]
            else:
                got = (yield [Plan(tuple(Command((b"GET", k), (k,)) for _, k in deferred))])[0]
            again = []
            for (i, _), found in zip(deferred, got):
                if found is None:
                    again.append(i)
                else:
                    inner.append((i, found))
            if again:
                for i, value in zip(again, (yield from self.get_many([keys[i] for i in again]))):
                    out[i] = value
        if inner:
            yield from self.need_dictionaries(v for _, v in inner if v[:1] in _ZSTD_HEADS)
            known = self.dicts.known
            for i, framed in inner:
                out[i] = cd.decode(framed, key=keys[i], dictionaries=known)
        return out

    def get(self, key: str, prefetch: bool = False) -> Flow[Any]:
        loc = self.locate(key)
        if prefetch:
            plans: list[Plan[Any]] = [Plan((Command(("HGET", loc.bucket, loc.field), (loc.bucket,)),
                                           Command(("GET", loc.ool), (loc.ool,))))]
            if self.fallback:
                plans.append(self.plain_get(key))
            got = yield plans
            (raw, oolval), plain = got[0], (got[1] if self.fallback else None)
            return (yield from self.resolve([key], [loc], [raw], [oolval], [plain]))[0]
        raw = yield from step(command("HGET", loc.bucket, loc.field, keys=(loc.bucket,)))
        return (yield from self.resolve([key], [loc], [raw]))[0]

    def exists(self, key: str) -> Flow[bool]:
        loc = self.locate(key)
        raw: Any = yield from step(command("HGET", loc.bucket, loc.field, keys=(loc.bucket,)))
        if self.live(raw) is not None:
            return True
        if self.fallback:
            k = key.encode("utf-8", "surrogateescape")
            return bool((yield from step(command("EXISTS", k, keys=(k,)))))
        return False

    def ttl_of(self, key: str) -> Flow[int]:
        """Like TTL: seconds left, -1 without expiry, -2 missing."""
        loc = self.locate(key)
        if self.field_ttl:  # HPEXPIRETIME: [-2] no such field, [-1] no TTL, [unix ms]
            at = yield from step(command("HPEXPIRETIME", loc.bucket, "FIELDS", 1, loc.field,
                                         keys=(loc.bucket,), decode=lambda r: int(r[0])))
            if at >= -1:  # whole seconds left, as packed expiries count them (a migrated TTL has ms)
                return at if at == -1 else max(0, (at - self.now() * 1000) // 1000)
            if self.fallback:
                k = key.encode("utf-8", "surrogateescape")
                return int((yield from step(command("TTL", k, keys=(k,)))))
            return -2
        raw: Any = yield from step(command("HGET", loc.bucket, loc.field, keys=(loc.bucket,)))
        if self.live(raw) is None:
            if self.fallback:
                k = key.encode("utf-8", "surrogateescape")
                return int((yield from step(command("TTL", k, keys=(k,)))))
            return -2
        exp, _ = cd.split_expiry(bytes(raw))
        return -1 if exp is None else exp - self.now()

    # -- writing ------------------------------------------------------------------------
    def adopt(self, key: str) -> Flow[None]:
        """During a migration: move the plain key of this name in before writing over it."""
        if self.fallback:
            from densekv.maps.migrate import move_keys

            yield from move_keys(self, [key.encode("utf-8", "surrogateescape")])

    def set(self, key: str, value: Any, ttl: float | None = None) -> Flow[bool]:
        loc = self.locate(key)
        expires = self.expiry_of(ttl)
        stored, ool = self.frame(key, value, expires)
        if self.fallback:
            k = key.encode("utf-8", "surrogateescape")
            yield [self.write_plan(loc, stored, ool, expires), command("DEL", k, keys=(k,))]
        else:
            yield [self.write_plan(loc, stored, ool, expires)]
        return True

    def set_many(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]], ttl: float | None = None) -> Flow[bool]:
        pairs = list(items.items() if isinstance(items, Mapping) else items)
        expires = self.expiry_of(ttl)
        plans = []
        for key, value in pairs:  # every value framed (and refused) before anything is sent
            key = _key(key)
            loc = self.locate(key)
            stored, ool = self.frame(key, value, expires)
            plans.append(self.write_plan(loc, stored, ool, expires))
            if self.fallback:
                k = key.encode("utf-8", "surrogateescape")
                plans.append(command("DEL", k, keys=(k,)))
        if plans:
            yield plans
        return True

    def setnx(self, key: str, value: Any, ttl: float | None = None) -> Flow[bool]:
        loc = self.locate(key)
        expires = self.expiry_of(ttl)
        stored, ool = self.frame(key, value, expires)
        yield from self.adopt(key)
        if self.field_ttl:
            done: Any = yield from step(script_call(
                script("map_setnx_field"), [loc.bucket, loc.ool],
                [loc.field, stored, ool or b"", expires * 1000 if expires else 0,
                 (expires + OOL_SLACK) * 1000 if (ool and expires) else 0]))
            return bool(done)
        done = yield from step(script_call(
            script("map_setnx"), [loc.bucket, loc.ool],
            [loc.field, stored, ool or b"", (expires + OOL_SLACK) if (ool and expires) else 0, self.now()]))
        return bool(done)

    def getset(self, key: str, value: Any, ttl: float | None = None) -> Flow[Any]:
        loc = self.locate(key)
        expires = self.expiry_of(ttl)
        stored, ool = self.frame(key, value, expires)
        yield from self.adopt(key)
        write = self.write_plan(loc, stored, ool, expires)
        steps = (Command(("HGET", loc.bucket, loc.field), (loc.bucket,)),
                 Command(("GET", loc.ool), (loc.ool,)), *write.steps)
        if ool is None:
            steps += (Command(("DEL", loc.ool), (loc.ool,)),)
        old_raw, old_ool = (yield [Plan(steps, atomic=True)])[0][:2]
        old = self.live(old_raw)
        if old is None:
            return None
        if old == OOL:
            if old_ool is None:
                return None
            old = bytes(old_ool)
        yield from self.need_dictionaries([old])
        return cd.decode(old, key=key, dictionaries=self.dicts.known)

    def incrby(self, key: str, delta: int) -> Flow[int]:
        if isinstance(delta, bool) or not isinstance(delta, int) or not cd.INT64_MIN <= delta <= cd.INT64_MAX:
            raise TypeError("incrby takes a 64-bit integer delta")
        loc = self.locate(key)
        expires = self.expiry_of(None)
        yield from self.adopt(key)
        if self.field_ttl:
            call: Plan[Any] = script_call(script("map_incr_field"), [loc.bucket],
                                          [loc.field, delta, expires * 1000 if expires else 0])
        else:
            head = cd.with_expiry(b"", expires) if expires else b""
            call = script_call(script("map_incr"), [loc.bucket], [loc.field, delta, self.now(), head])
        ok, text = yield from step(call)
        if not ok:
            raise NotAnInteger(f"cannot add to {key!r}: {_text(text)}")
        return int(text)

    def delete_many(self, keys: Sequence[str]) -> Flow[int]:
        locs = [self.locate(k) for k in keys]
        plans: list[Plan[Any]] = [
            Plan((Command(("HGET", loc.bucket, loc.field), (loc.bucket,)),
                  Command(("HDEL", loc.bucket, loc.field), (loc.bucket,)),
                  Command(("DEL", loc.ool), (loc.ool,))), atomic=True)
            for loc in locs
        ]
        if self.fallback:
            plans += [command("DEL", k.encode("utf-8", "surrogateescape"), keys=(k.encode("utf-8", "surrogateescape"),))
                      for k in keys]
        replies = yield plans
        gone = [self.live(r[0]) is not None for r in replies[: len(keys)]]
        if self.fallback:
            gone = [g or bool(d) for g, d in zip(gone, replies[len(keys):])]
        return sum(gone)

    def expire(self, key: str, seconds: float | None) -> Flow[bool]:
        """Set the item's TTL (None: persist). seconds <= 0 deletes it, as EXPIRE does."""
        if seconds is not None and seconds <= 0:
            return bool((yield from self.delete_many([key])))
        loc = self.locate(key)
        yield from self.adopt(key)
        exp = 0 if seconds is None else self.now() + max(1, int(round(seconds)))
        if self.field_ttl:  # the field's TTL, and the out-of-line key's if there is one
            if exp:
                steps = (Command(("HEXPIREAT", loc.bucket, exp, "FIELDS", 1, loc.field), (loc.bucket,)),
                         Command(("EXPIREAT", loc.ool, exp + OOL_SLACK), (loc.ool,)))
            else:
                steps = (Command(("HPERSIST", loc.bucket, "FIELDS", 1, loc.field), (loc.bucket,)),
                         Command(("PERSIST", loc.ool), (loc.ool,)))
            # per field: 1 set (or removed), 2 deleted (a time past), -1 no TTL to remove, -2 no field
            code = yield from step(Plan(steps, lambda r: int(r[0][0]), atomic=True))
            return code != -2
        done: int = yield from step(script_call(script("map_expire"), [loc.bucket, loc.ool],
                                                [loc.field, exp, self.now(), self.geo.value_limit]))
        return bool(done)

    # -- whole-map work (bucket lists come from SCAN, outside the flows) ---------------------
    def items_of(self, buckets: Sequence[bytes]) -> Flow[list[tuple[str, Any]]]:
        replies = yield [command("HGETALL", b, keys=(b,)) for b in buckets]
        keys: list[str] = []
        locs: list[Location] = []
        raws: list[Any] = []
        for b, reply in zip(buckets, replies):
            pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
            for field, raw in pairs:
                keys.append(key_of(self.namespace, bytes(b), bytes(field), self.geo, self.aliases))
                locs.append(Location(bytes(b), bytes(field)))
                raws.append(raw)
        fallback, self.fallback = self.fallback, None
        try:
            values = yield from self.resolve(keys, locs, raws)
        finally:
            self.fallback = fallback
        return [(k, v) for k, v in zip(keys, values) if v is not MISSING]

    def sweep_buckets(self, buckets: Sequence[bytes]) -> Flow[int]:
        if self.field_ttl:  # the server expires items itself; nothing is packed to sweep
            return 0
        now = self.now()
        plans: list[Plan[Any]] = []
        for b in buckets:
            ns, code, rest = b.split(b":", 2)
            prefix = ns + b":o" + code + b":" + rest + b":"
            plans.append(script_call(script("map_sweep"), [b], [now, prefix]))
        return sum((yield plans))

    def reclaim(self, ool_keys: Sequence[bytes]) -> Flow[int]:
        """Delete the out-of-line keys their bucket no longer points to."""
        plans: list[Plan[Any]] = []
        for k in ool_keys:
            bucket, fld = self.ool_owner(k)
            plans.append(script_call(script("map_ool_reclaim"), [bucket, k], [fld]))
        return sum((yield plans))

    def ool_owner(self, ool_key: bytes) -> tuple[bytes, bytes]:
        """(bucket, field) an out-of-line key `<ns>:o<m|h>:{<tag>}:<field>` belongs to.
        A numeric bucket's tag holds the zipped key prefix, which may contain '}' and ':',
        but its field is an integer: split at the last ':'. A hashed bucket's tag is
        base62, but its field is the zipped key: split at the first '}:'."""
        head = self.namespace.encode() + b":"
        if not ool_key.startswith(head) or ool_key[len(head) : len(head) + 4] not in (b"om:{", b"oh:{"):
            raise ValueError(f"{ool_key!r} is not an out-of-line key of map {self.namespace!r}")
        code, rest = ool_key[len(head) + 1 : len(head) + 2], ool_key[len(head) + 3 :]
        cut = rest.rindex(b":") if code == b"m" else rest.index(b"}:") + 1
        return head + code + b":" + rest[:cut], rest[cut + 1 :]

    def train(self, samples: Iterable[Any], size: int) -> Flow[ZstdDictionary]:
        data = train_dictionary(samples, size=size, codec=Codec(self.codec.serializer))
        d = yield from step(plan_store(self.namespace, data))
        key = meta_key(self.namespace)
        yield [command("HSET", key, "zdict", str(d.id), keys=(key,))]
        self.use_dictionary(d)
        return d

    def use_dictionary(self, d: ZstdDictionary) -> None:
        self.dicts.add({d.id: d.data})
        self.write_dictionary = d.id
        self.codec = Codec(self.codec.serializer, "zstd", self.codec.level, d)

    def load_write_dictionary(self) -> Flow[None]:
        if self.write_dictionary and self.codec.compression == "zstd" and self.codec.dictionary is None:
            found = yield from step(plan_load(self.namespace, [self.write_dictionary]))
            if self.write_dictionary in found:
                self.use_dictionary(ZstdDictionary(self.write_dictionary, found[self.write_dictionary]))

    def explain(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace, "buckets": self.geo.buckets,
            "hash_max_listpack_entries": self.geo.entries_limit,
            "hash_max_listpack_value": self.geo.value_limit,
            "codec": {"serializer": self.codec.serializer, "compression": self.codec.compression,
                      "dictionary": self.codec.dictionary.id if self.codec.dictionary else None},
            "aliases": dict(self.aliases.forward), "ttl": self.ttl,
            "item_ttl": self.ttl_mode,
            "item_ttl_reason": ttl_mode_reason(self.facts, self.ttl_mode),
            "fallback": self.fallback,
        }


def meta_key(namespace: str) -> bytes:
    return f"{namespace}:zm:{{{namespace}}}".encode()


def alias_key(namespace: str) -> bytes:
    return f"{namespace}:za:{{{namespace}}}".encode()


TTL_MODES = ("auto", "packed", "field")


def choose_ttl_mode(facts: MapFacts) -> str:
    """ttl_mode="auto" for a new map: "field" only where the server keeps a hash with field
    TTLs compact (listpackex) and field TTL measured not larger than packed. Measured
    (module docstring, "Per-item TTL"): larger on the one server with listpackex (Redis
    7.4) except by 0.7 B/item for integers under holey ids, and 3.4-4x on Valkey 9.1
    (hashtable). So: packed, on every server of the matrix."""
    return "packed"


def ttl_mode_reason(facts: MapFacts, mode: str) -> str:
    if mode == "field":
        return ("the server's field TTL (set with the value in one command or MULTI; the server "
                "expires items, sweep() only reclaims out-of-line keys); a bucket with expiring items is "
                f"a {facts.field_ttl_encoding or 'whatever the server makes it'} here")
    packed = "expiry packed before the value (5 bytes, checked on read, swept by sweep()); "
    if facts.field_ttl == "none":
        return packed + "this server has no field TTL"
    if facts.field_ttl_encoding == "listpackex":
        return packed + ("the server's field TTL keeps listpacks here (listpackex) but measured no "
                         "smaller (larger for strings) and slower to write")
    return packed + (f"the server's field TTL ({facts.field_ttl}) turns a bucket into a "
                     f"{facts.field_ttl_encoding or 'hashtable'}: several times the bytes")


def init_flow(namespace: str, facts: MapFacts, expected: int, aliases: Mapping[str, str] | None,
              ttl_mode: str = "auto") -> Flow[tuple[dict[str, str], Aliases]]:
    """Create the map's meta in the server, or read what an earlier process stored. Bad
    settings (an unknown ttl_mode, field TTL on a server without it) raise before any write."""
    if ttl_mode not in TTL_MODES:
        raise ValueError(f"ttl_mode is one of {', '.join(TTL_MODES)}, not {ttl_mode!r}")
    if ttl_mode == "field" and facts.field_ttl == "none":
        raise FieldTtlUnavailable(
            "ttl_mode='field' needs hash field TTL (HEXPIRE: Redis 7.4+, Valkey 9+); this server has "
            "none: use ttl_mode='packed' (or 'auto')")
    wanted = Aliases(aliases)
    mode = choose_ttl_mode(facts) if ttl_mode == "auto" else ttl_mode
    meta = {"format": FORMAT, "buckets": str(bucket_count(expected, facts.entries_limit)),
            "entries": str(facts.entries_limit), "value": str(facts.value_limit), "ttl_mode": mode}
    args: list[Any] = [len(meta)]
    for k, v in meta.items():
        args += [k, v]
    for crumb, alias in wanted.forward.items():
        args += [crumb.encode("utf-8", "surrogatepass"), alias.encode("utf-8", "surrogatepass")]
    stored_meta: Any
    stored_aliases: Any
    stored_meta, stored_aliases = yield from step(script_call(
        script("map_init"), [meta_key(namespace), alias_key(namespace)], args))
    got_meta, got_aliases = _flat(stored_meta), Aliases(_flat(stored_aliases))
    if got_meta.get("format") != FORMAT:
        raise MapConfigError(f"map {namespace!r} in this server has format {got_meta.get('format')!r}, not {FORMAT}")
    if aliases is not None and got_aliases != wanted:
        raise MapConfigError(
            f"map {namespace!r} was created with aliases {got_aliases.forward}; an alias table is "
            "fixed when a map is created (pass aliases=None to use the stored one)")
    stored_mode = got_meta.setdefault("ttl_mode", "packed")  # maps made before ttl_mode: packed
    if ttl_mode != "auto" and stored_mode != ttl_mode:
        raise MapConfigError(
            f"map {namespace!r} was created with ttl_mode={stored_mode!r}; the TTL mode is fixed when a "
            "map is created (every process must agree; pass ttl_mode='auto' to use the stored one)")
    if stored_mode == "field" and facts.field_ttl == "none":
        raise FieldTtlUnavailable(
            f"map {namespace!r} keeps item TTLs as hash field TTLs, which this server does not have "
            "(HEXPIRE: Redis 7.4+, Valkey 9+)")
    return got_meta, got_aliases


def _check_namespace(namespace: str) -> None:
    if not namespace or not all(c.isalnum() or c in "_-." for c in namespace) or not namespace.isascii():
        raise ValueError("namespace is a non-empty string of letters, digits, '_', '-' and '.'")


# --- drivers ------------------------------------------------------------------------------


class _Driver:
    """Runs several flows together: each round trip carries every flow's next plans."""

    @staticmethod
    def start(flows: Sequence[Flow[Any]]) -> tuple[list[Any], dict[int, list[Plan[Any]]]]:
        results: list[Any] = [None] * len(flows)
        pending: dict[int, list[Plan[Any]]] = {}
        for i, flow in enumerate(flows):
            try:
                pending[i] = next(flow)
            except StopIteration as done:
                results[i] = done.value
        return results, pending

    @staticmethod
    def advance(flows: Sequence[Flow[Any]], results: list[Any], pending: dict[int, list[Plan[Any]]],
                replies: list[Any]) -> dict[int, list[Plan[Any]]]:
        nxt: dict[int, list[Plan[Any]]] = {}
        pos = 0
        for i, plans in pending.items():
            mine = replies[pos : pos + len(plans)]
            pos += len(plans)
            try:
                nxt[i] = flows[i].send(mine)
            except StopIteration as done:
                results[i] = done.value
        return nxt


def run_flows(ex: Any, flows: Sequence[Flow[Any]]) -> list[Any]:
    results, pending = _Driver.start(flows)
    while pending:
        replies = ex.run_many([p for plans in pending.values() for p in plans])
        pending = _Driver.advance(flows, results, pending, replies)
    return results


async def arun_flows(ex: Any, flows: Sequence[Flow[Any]]) -> list[Any]:
    results, pending = _Driver.start(flows)
    while pending:
        replies = await ex.run_many([p for plans in pending.values() for p in plans])
        pending = _Driver.advance(flows, results, pending, replies)
    return results


class Pending(Generic[T]):
    """The future result of one batched operation (like a redis-py pipeline's result)."""

    _unset: Any = object()

    def __init__(self) -> None:
        self._value: Any = Pending._unset

    @property
    def ready(self) -> bool:
        return self._value is not Pending._unset

    def result(self) -> T:
        if self._value is Pending._unset:
            raise DensekvError("the batch has not run yet: call execute() (or leave the with block)")
        return self._value  # type: ignore[no-any-return]


GET, MGET, SET, MSET, FLOW = range(5)  # kinds of a queued batch op
Queued = tuple[int, Any, "Pending[Any]", Any, tuple[str, ...]]  # (kind, data, future, default or post, keys written)


class _BatchOps:
    """Queues operations; subclasses run them. Each method returns a Pending.

    Gets and sets (get, mget, set, mset) are queued as data and run through
    MapCore.run_fast (grouped commands, see there); the other operations as flows. A
    transaction, or a map with a migration in progress, runs every operation as its flow."""

    def __init__(self, core: Callable[[], MapCore], transaction: bool) -> None:
        self._core = core
        self.transaction = transaction
        self._queued: list[Queued] = []
        self._mixed = False  # a write queued after a get: out-of-line prefetch may be needed
        self._reads = False

    def _add(self, make: Callable[[MapCore], Flow[Any]], post: Callable[[Any], Any] = lambda v: v,
             writes: tuple[str, ...] = ()) -> Pending[Any]:
        fut: Pending[Any] = Pending()
        self._queued.append((FLOW, make, fut, post, writes))
        self._mixed = self._mixed or (self._reads and bool(writes))
        return fut

    def __len__(self) -> int:
        return len(self._queued)

    def get(self, key: str, default: Any = None) -> Pending[Any]:
        fut: Pending[Any] = Pending()
        self._queued.append((GET, _key(key), fut, default, ()))
        self._reads = True
        return fut

    def mget(self, keys: Iterable[str]) -> Pending[list[Any]]:
        fut: Pending[Any] = Pending()
        self._queued.append((MGET, [_key(k) for k in keys], fut, None, ()))
        self._reads = True
        return fut

    def set(self, key: str, value: Any, ttl: float | None = None) -> Pending[bool]:
        fut: Pending[Any] = Pending()
        self._queued.append((SET, (_key(key), value, ttl), fut, None, ()))
        self._mixed = self._mixed or self._reads
        return fut

    def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> Pending[bool]:
        fut: Pending[Any] = Pending()
        self._queued.append((MSET, ([(_key(k), v) for k, v in items.items()], ttl), fut, None, ()))
        self._mixed = self._mixed or self._reads
        return fut

    def setnx(self, key: str, value: Any, ttl: float | None = None) -> Pending[bool]:
        k = _key(key)
        return self._add(lambda c: c.setnx(k, value, ttl), writes=(k,))

    def getset(self, key: str, value: Any, ttl: float | None = None) -> Pending[Any]:
        k = _key(key)
        return self._add(lambda c: c.getset(k, value, ttl), writes=(k,))

    def incr(self, key: str) -> Pending[int]:
        return self.incrby(key, 1)

    def incrby(self, key: str, delta: int) -> Pending[int]:
        k = _key(key)
        return self._add(lambda c: c.incrby(k, delta), writes=(k,))

    def delete(self, *keys: str) -> Pending[int]:
        ks = tuple(_key(k) for k in keys)
        return self._add(lambda c: c.delete_many(ks), writes=ks)

    def exists(self, key: str) -> Pending[bool]:
        k = _key(key)
        return self._add(lambda c: c.exists(k))

    def ttl(self, key: str) -> Pending[int]:
        k = _key(key)
        return self._add(lambda c: c.ttl_of(k))

    def expire(self, key: str, seconds: float | None) -> Pending[bool]:
        k = _key(key)
        return self._add(lambda c: c.expire(k, seconds), writes=(k,))

    def persist(self, key: str) -> Pending[bool]:
        return self.expire(key, None)

    # -- running ----------------------------------------------------------------------------
    def _take(self, split: bool) -> tuple[list[Queued], list[Flow[Any]], list[tuple[int, int, int]]]:
        """The queued ops, the flows that run them, and per op (flow, start, stop): its
        results are that flow's result[start:stop] (start < 0: the whole result)."""
        queued, self._queued = self._queued, []
        mixed, self._mixed, self._reads = self._mixed, False, False
        core = self._core()
        if self.transaction and core.fallback:
            raise TransactionError(
                f"map {core.namespace!r} has a migration in progress ({core.fallback!r}): a "
                "transaction cannot read or move the plain keys atomically; finish the migration "
                "(or use a batch without transaction=True)")
        if self.transaction or core.fallback:
            return queued, [_flow_of(core, q) for q in queued], [(i, -1, -1) for i in range(len(queued))]
        flows: list[Flow[Any]] = []
        spans: list[tuple[int, int, int]] = []
        prefetch = _later_writes(queued) if mixed else _NONE
        run_from = 0  # queued[run_from:n] is the current run of gets and sets
        items = 0
        for n, (kind, data, _, _, _) in enumerate(queued):
            if kind == FLOW:
                if run_from < n:
                    flows.append(core.run_fast(queued[run_from:n], prefetch, run_from, split))
                spans.append((len(flows), -1, -1))
                flows.append(data(core))
                run_from, items = n + 1, 0
                continue
            size = 1 if kind == GET or kind == SET else len(data) if kind == MGET else len(data[0])
            spans.append((len(flows), items, items + size))
            items += size
        if run_from < len(queued):
            flows.append(core.run_fast(queued[run_from:], prefetch, run_from, split))
        return queued, flows, spans

    @staticmethod
    def _settle(queued: list[Queued], spans: list[tuple[int, int, int]], results: list[Any]) -> list[Any]:
        out = []
        for (kind, _, fut, extra, _), (f, start, stop) in zip(queued, spans):
            if kind == GET:
                v = results[f] if start < 0 else results[f][start]
                value = extra if v is MISSING else v
            elif kind == SET or kind == MSET:
                value = True
            elif kind == MGET:
                value = [None if v is MISSING else v for v in (results[f] if start < 0 else results[f][start:stop])]
            else:
                value = extra(results[f])
            fut._value = value
            out.append(value)
        return out


def _flow_of(core: MapCore, q: Queued) -> Flow[Any]:
    kind, data = q[0], q[1]
    if kind == GET:
        return core.get(data, prefetch=True)
    if kind == MGET:
        return core.get_many(data, prefetch=True)
    if kind == SET:
        return core.set(*data)
    if kind == MSET:
        return core.set_many(*data)
    return data(core)  # type: ignore[no-any-return]


def _later_writes(queued: list[Queued]) -> dict[int, Any]:
    """Gets whose key a later op of the batch writes: their index -> True (an mget: a
    flag per key)."""
    later: set[str] = set()
    out: dict[int, Any] = {}
    for n in range(len(queued) - 1, -1, -1):
        kind, data, _, _, writes = queued[n]
        if kind == SET:
            later.add(data[0])
        elif kind == MSET:
            later.update(k for k, _ in data[0])
        elif kind == FLOW:
            later.update(writes)
        elif later:
            if kind == GET:
                if data in later:
                    out[n] = True
            else:
                out[n] = [k in later for k in data]
    return out


# --- transactions ---------------------------------------------------------------------


def _transaction_start(flows: Sequence[Flow[Any]], cluster: bool) -> tuple[
        list[Any], dict[int, list[Plan[Any]]], list[Plan[Any]], list[tuple[Plan[Any], int, int]]]:
    """Start every flow (values framed and refused here, before anything is sent) and
    wrap all their first plans in one MULTI/EXEC, preceded by SCRIPT LOAD of the scripts
    it calls (same round trip, same connection: EVALSHA inside the MULTI cannot miss)."""
    results, pending = _Driver.start(flows)
    steps: list[Command] = []
    parts: list[tuple[Plan[Any], int, int]] = []
    scripts: dict[str, Any] = {}
    for plans in pending.values():
        for plan in plans:
            start = len(steps)
            for st in plan.steps:
                if isinstance(st, ScriptCall):
                    scripts.setdefault(st.script.sha, st.script)
                    steps.append(Command(st.evalsha, st.keys))
                else:
                    steps.append(st)
            parts.append((plan, start, len(steps)))
    if not steps:
        return results, pending, [], parts
    keys = [k for st in steps for k in st.keys]
    if cluster:
        slots = {key_slot(k.encode() if isinstance(k, str) else k) for k in keys}
        if len(slots) > 1:
            raise TransactionError(
                f"this transaction touches keys in {len(slots)} cluster slots; a cluster runs a "
                "transaction in one slot only: keep its keys in one bucket (same prefix and the "
                "same id modulo the bucket count, see m.explain()['buckets']), or split it")
    anchor = tuple(keys[:1])  # routes the SCRIPT LOADs to the transaction's node
    wire: list[Plan[Any]] = [Plan((Command(("SCRIPT", "LOAD", s.source), anchor),)) for s in scripts.values()]
    wire.append(Plan(tuple(steps), atomic=True))
    return results, pending, wire, parts


def _transaction_replies(namespace: str, parts: list[tuple[Plan[Any], int, int]], replies: list[Any]) -> list[Any]:
    return [plan.decode(replies[a:b]) for plan, a, b in parts]


def _after_exec(namespace: str, pending: dict[int, list[Plan[Any]]]) -> None:
    """What a flow may still need after EXEC: only dictionaries (immutable, see module doc)."""
    from densekv.maps.dictionaries import dictionary_key

    allowed = dictionary_key(namespace)
    for plans in pending.values():
        for plan in plans:
            if any(k != allowed for st in plan.steps for k in st.keys):
                raise TransactionError("a transaction op needed a second round trip that is not a "
                                       "dictionary load (a bug: please report it)")


def run_transaction(ex: Any, namespace: str, flows: Sequence[Flow[Any]]) -> list[Any]:
    results, pending, wire, parts = _transaction_start(flows, isinstance(ex, ClusterExecutor))
    if wire:
        replies = ex.run_many(wire)[-1]
        pending = _Driver.advance(flows, results, pending, _transaction_replies(namespace, parts, replies))
    _after_exec(namespace, pending)
    while pending:
        replies = ex.run_many([p for plans in pending.values() for p in plans])
        pending = _Driver.advance(flows, results, pending, replies)
    return results


async def arun_transaction(ex: Any, namespace: str, flows: Sequence[Flow[Any]]) -> list[Any]:
    results, pending, wire, parts = _transaction_start(flows, False)
    if wire:
        replies = (await ex.run_many(wire))[-1]
        pending = _Driver.advance(flows, results, pending, _transaction_replies(namespace, parts, replies))
    _after_exec(namespace, pending)
    while pending:
        replies = await ex.run_many([p for plans in pending.values() for p in plans])
        pending = _Driver.advance(flows, results, pending, replies)
    return results


class MapBatch(_BatchOps):
    """Operations queued and sent together: `execute()` returns their results in order (and
    fills each Pending), like a redis-py pipeline. As a context manager it executes on exit.

    transaction=False: one round trip, plus one only for an out-of-line value or a
    dictionary not seen yet (or a migration fallback). transaction=True: every op in one
    MULTI/EXEC (see the module docstring for what that guarantees and refuses)."""

    def __init__(self, m: CompactMap, transaction: bool = False) -> None:
        super().__init__(lambda: m._core, transaction)
        self._map = m

    def execute(self) -> list[Any]:
        ex = self._map._ex
        queued, flows, spans = self._take(isinstance(ex, ClusterExecutor))
        if self.transaction:
            results = run_transaction(ex, self._map.namespace, flows)
        else:
            results = run_flows(ex, flows)
        return self._settle(queued, spans, results)

    def __enter__(self) -> MapBatch:
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        if exc_type is None:
            self.execute()


class AsyncMapBatch(_BatchOps):
    def __init__(self, m: AsyncCompactMap, transaction: bool = False) -> None:
        super().__init__(lambda: m._ready_core(), transaction)
        self._map = m

    async def execute(self) -> list[Any]:
        await self._map.ready()
        queued, flows, spans = self._take(False)
        if self.transaction:
            results = await arun_transaction(self._map._ex, self._map.namespace, flows)
        else:
            results = await arun_flows(self._map._ex, flows)
        return self._settle(queued, spans, results)

    async def __aenter__(self) -> AsyncMapBatch:
        await self._map.ready()
        return self

    async def __aexit__(self, exc_type: Any, *rest: object) -> None:
        if exc_type is None:
            await self.execute()


def _scan_keys(client: Any, pattern: bytes, count: int = 1000) -> Iterator[bytes]:
    for k in client.scan_iter(match=pattern, count=count):
        yield k if isinstance(k, bytes) else k.encode("utf-8", "surrogateescape")


def _chunks(it: Iterable[T], n: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for x in it:
        chunk.append(x)
        if len(chunk) >= n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class CompactMap:
    """key -> value at a few bytes per item; see the module docstring and README "Maps".

    `codec`: "auto", "int", "raw", "msgpack", "zlib", "lz4", "zstd" or a Codec. `expected`:
    the item count the buckets are sized for when the map is first created (stored; later
    instances use the stored geometry). `ttl`: default per-item TTL in seconds. `aliases`:
    crumb -> alias for key zipping, fixed at creation (None: use the stored table).
    `ttl_mode`: "auto", "packed" or "field", how items keep their TTL, fixed at creation
    ("auto": the stored mode, or for a new map the measured choice: packed; see the module
    docstring, "Per-item TTL"). "field" raises FieldTtlUnavailable on a server without
    hash field TTL.
    """

    def __init__(self, client: Any, namespace: str, codec: str | Codec = "auto", expected: int = 100_000,
                 ttl: float | None = None, *, aliases: Mapping[str, str] | None = None,
                 out_of_line: bool = True, ttl_mode: str = "auto", facts: MapFacts | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        _check_namespace(namespace)
        self.client = client
        self.namespace = namespace
        self._ex = executor_for(client)
        facts = facts or facts_from_probe(client)
        meta, stored_aliases = run_flows(
            self._ex, [init_flow(namespace, facts, expected, aliases, ttl_mode)])[0]
        self._core = MapCore(namespace, facts, meta, stored_aliases, Codec.named(codec), ttl, clock, out_of_line)
        run_flows(self._ex, [self._core.load_write_dictionary()])

    def _run(self, flow: Flow[T]) -> T:
        return run_flows(self._ex, [flow])[0]  # type: ignore[no-any-return]

    # -- the API ----------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        v = self._run(self._core.get(_key(key)))
        return default if v is MISSING else v

    def set(self, key: str, value: Any, ttl: float | None = None) -> bool:
        return self._run(self._core.set(_key(key), value, ttl))

    def setnx(self, key: str, value: Any, ttl: float | None = None) -> bool:
        return self._run(self._core.setnx(_key(key), value, ttl))

    def getset(self, key: str, value: Any, ttl: float | None = None) -> Any:
        return self._run(self._core.getset(_key(key), value, ttl))

    def incr(self, key: str) -> int:
        return self.incrby(key, 1)

    def incrby(self, key: str, delta: int) -> int:
        return self._run(self._core.incrby(_key(key), delta))

    def delete(self, *keys: str) -> int:
        return self._run(self._core.delete_many([_key(k) for k in keys]))

    def exists(self, key: str) -> bool:
        return self._run(self._core.exists(_key(key)))

    def mget(self, keys: Iterable[str]) -> list[Any]:
        b = self.batch()
        fut = b.mget(keys)
        b.execute()
        return fut.result()

    def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> bool:
        b = self.batch()
        b.mset(items, ttl)
        b.execute()
        return True

    def ttl(self, key: str) -> int:
        return self._run(self._core.ttl_of(_key(key)))

    def expire(self, key: str, seconds: float | None) -> bool:
        return self._run(self._core.expire(_key(key), seconds))

    def persist(self, key: str) -> bool:
        return self.expire(key, None)

    def batch(self, transaction: bool = False) -> MapBatch:
        """Queue operations, run them in one round trip (`transaction=True`: atomically)."""
        return MapBatch(self, transaction)

    pipeline = batch

    # -- dict-style ---------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        v = self._run(self._core.get(_key(key)))
        if v is MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (str, bytes)) and self.exists(key)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items())

    def keys(self) -> Iterator[str]:
        return iter(self)

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def buckets(self) -> Iterator[bytes]:
        for pattern in bucket_patterns(self.namespace):
            yield from _scan_keys(self.client, pattern)

    def items(self, batch: int = 100) -> Iterator[tuple[str, Any]]:
        """Every live item (SCAN over the buckets; an item changed during the walk may be
        seen old or new, as with SCAN). During a migration, plain keys not yet moved too."""
        for chunk in _chunks(self.buckets(), batch):
            yield from self._run(self._core.items_of(chunk))
        if self._core.fallback:
            from densekv.maps.migrate import plain_items

            yield from plain_items(self, self._core.fallback.encode())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def count(self) -> int:
        """Items stored, expired-but-unswept ones included (sum of HLEN, no values read)."""
        total = 0
        for chunk in _chunks(self.buckets(), 500):
            total += sum(self._ex.run_many([command("HLEN", b, keys=(b,)) for b in chunk]))
        return total

    def sweep(self, batch: int = 100) -> int:
        """Remove expired items (one Lua script per bucket) and out-of-line keys no bucket
        points to any more; returns the number of expired items removed (always 0 in
        ttl_mode "field": the server removes them itself)."""
        removed = 0
        for chunk in _chunks(() if self._core.field_ttl else self.buckets(), batch):
            removed += self._run(self._core.sweep_buckets(chunk))
        ns = self.namespace.encode()
        for code in (b"om", b"oh"):
            for chunk in _chunks(_scan_keys(self.client, ns + b":" + code + b":{*"), batch):
                self._run(self._core.reclaim(chunk))
        return removed

    def stats(self) -> dict[str, Any]:
        """Geometry, item count, the fullest bucket, and warnings near the listpack limit."""
        sizes: list[int] = []
        for chunk in _chunks(self.buckets(), 500):
            sizes += self._ex.run_many([command("HLEN", b, keys=(b,)) for b in chunk])
        limit = self._core.geo.entries_limit
        fullest = max(sizes, default=0)
        warnings = []
        if fullest > 0.9 * limit:
            warnings.append(
                f"the fullest bucket holds {fullest} items of the {limit} a listpack may hold: "
                "past that it becomes a hashtable (several times the memory); make a new map with a "
                "larger expected and migrate")
        enc = self._core.facts.field_ttl_encoding
        if self._core.field_ttl and enc not in (None, "listpack", "listpackex"):
            warnings.append(
                f"ttl_mode='field' on a server that makes a hash with an expiring field a {enc}: "
                "a bucket with one TTL costs several times its listpack (see explain()); "
                "ttl_mode='packed' keeps listpacks")
        return {**self.explain(), "items": sum(sizes), "bucket_keys": len(sizes),
                "fullest_bucket": fullest, "warnings": warnings}

    def explain(self) -> dict[str, Any]:
        return self._core.explain()

    def train(self, samples: Iterable[Any], size: int = 16384) -> ZstdDictionary:
        """Train a zstd dictionary on sample values, store it in the server and write new
        values with it (other processes pick it up when they open the map)."""
        return self._run(self._core.train(samples, size))

    # -- migration ------------------------------------------------------------------------------
    def migrate_from(self, pattern: str, *, batch: int = 500, pause: float = 0.0,
                     progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
        from densekv.maps.migrate import migrate_from

        return migrate_from(self, pattern, batch=batch, pause=pause, progress=progress)

    def migrate_to_plain(self, *, batch: int = 200, pause: float = 0.0) -> dict[str, int]:
        from densekv.maps.migrate import migrate_to_plain

        return migrate_to_plain(self, batch=batch, pause=pause)

    def verify(self, pattern: str | None = None) -> dict[str, Any]:
        from densekv.maps.migrate import verify

        return verify(self, pattern)

    @property
    def is_cluster(self) -> bool:
        return isinstance(self._ex, ClusterExecutor)


class AsyncCompactMap:
    """The asyncio twin of CompactMap: same names, awaited. The first operation (or
    `await m.ready()`) reads the server's limits and creates or opens the map."""

    def __init__(self, client: Any, namespace: str, codec: str | Codec = "auto", expected: int = 100_000,
                 ttl: float | None = None, *, aliases: Mapping[str, str] | None = None,
                 out_of_line: bool = True, ttl_mode: str = "auto", facts: MapFacts | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        _check_namespace(namespace)
        if ttl_mode not in TTL_MODES:
            raise ValueError(f"ttl_mode is one of {', '.join(TTL_MODES)}, not {ttl_mode!r}")
        self.client = client
        self.namespace = namespace
        self._ex = executor_for(client)
        self._args = (codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock)
        self._core: MapCore | None = None

    async def ready(self) -> MapCore:
        if self._core is None:
            codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock = self._args
            facts = facts or (await arun_flows(self._ex, [read_facts()]))[0]
            meta, stored = (await arun_flows(
                self._ex, [init_flow(self.namespace, facts, expected, aliases, ttl_mode)]))[0]
            core = MapCore(self.namespace, facts, meta, stored, Codec.named(codec), ttl, clock, out_of_line)
            await arun_flows(self._ex, [core.load_write_dictionary()])
            self._core = core
        return self._core

    def _ready_core(self) -> MapCore:
        if self._core is None:
            raise DensekvError("await m.ready() first")
        return self._core

    async def _run(self, make: Callable[[MapCore], Flow[T]]) -> T:
        core = await self.ready()
        return (await arun_flows(self._ex, [make(core)]))[0]  # type: ignore[no-any-return]

    async def get(self, key: str, default: Any = None) -> Any:
        k = _key(key)
        v = await self._run(lambda c: c.get(k))
        return default if v is MISSING else v

    async def set(self, key: str, value: Any, ttl: float | None = None) -> bool:
        k = _key(key)
        return await self._run(lambda c: c.set(k, value, ttl))

    async def setnx(self, key: str, value: Any, ttl: float | None = None) -> bool:
        k = _key(key)
        return await self._run(lambda c: c.setnx(k, value, ttl))

    async def getset(self, key: str, value: Any, ttl: float | None = None) -> Any:
        k = _key(key)
        return await self._run(lambda c: c.getset(k, value, ttl))

    async def incr(self, key: str) -> int:
        return await self.incrby(key, 1)

    async def incrby(self, key: str, delta: int) -> int:
        k = _key(key)
        return await self._run(lambda c: c.incrby(k, delta))

    async def delete(self, *keys: str) -> int:
        ks = [_key(k) for k in keys]
        return await self._run(lambda c: c.delete_many(ks))

    async def exists(self, key: str) -> bool:
        k = _key(key)
        return await self._run(lambda c: c.exists(k))

    async def mget(self, keys: Iterable[str]) -> list[Any]:
        b = self.batch()
        fut = b.mget(keys)
        await b.execute()
        return fut.result()

    async def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> bool:
        b = self.batch()
        b.mset(items, ttl)
        await b.execute()
        return True

    async def ttl(self, key: str) -> int:
        k = _key(key)
        return await self._run(lambda c: c.ttl_of(k))

    async def expire(self, key: str, seconds: float | None) -> bool:
        k = _key(key)
        return await self._run(lambda c: c.expire(k, seconds))

    async def persist(self, key: str) -> bool:
        return await self.expire(key, None)

    def batch(self, transaction: bool = False) -> AsyncMapBatch:
        return AsyncMapBatch(self, transaction)

    pipeline = batch

    async def items(self, batch: int = 100) -> Any:
        """Async iterator over live items (SCAN over the buckets)."""
        core = await self.ready()
        chunk: list[bytes] = []
        for pattern in bucket_patterns(self.namespace):
            async for k in self.client.scan_iter(match=pattern, count=1000):
                chunk.append(k if isinstance(k, bytes) else k.encode())
                if len(chunk) >= batch:
                    for item in (await arun_flows(self._ex, [core.items_of(chunk)]))[0]:
                        yield item
                    chunk = []
        if chunk:
            for item in (await arun_flows(self._ex, [core.items_of(chunk)]))[0]:
                yield item

    async def explain(self) -> dict[str, Any]:
        return (await self.ready()).explain()

