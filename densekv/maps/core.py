"""MapCore: the single-item operations of a compact map, each a flow; no I/O.

One instance per open map, built from the server facts (maps/settings.py) and the stored
meta (maps/meta.py). The bytes: an item is a field of a listpack hash bucket (key layout
in maps/buckets.py), its value framed with a one-byte codec header (densekv/codec.py);
in ttl_mode "packed" the expiry (0x0E + 4-byte unix seconds) comes first. A framed value
longer than hash-max-listpack-value goes to its own key `<ns>:o<m|h>:{<tag>}:<field>`
and the bucket holds the marker 0x0F (OOL); that key is written with its marker in one
MULTI and outlives it by OOL_SLACK (clock rounding). get is one HGET, set one HSET (two
commands only for out-of-line values); read-then-write operations on a packed expiry
(setnx, incr, expire) are one Lua script. The batch fast path is maps/fast.py, whole-map
work maps/whole.py, migration maps/migrate.py; the move of one plain key into the map
(move_keys, at the end) is here, since a write during a migration runs it too (adopt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from densekv import codec as cd
from densekv.codec import Codec, ZstdDictionary
from densekv.dictionaries import DictionaryCache, plan_load, plan_store, train_dictionary
from densekv.errors import (
    CodecError,
    DecodeError,
    InvalidArgument,
    KeyTooLong,
    MapKeyInvalid,
    MapValueInvalid,
    NotAnInteger,
    ValueTooLarge,
)
from densekv.flows import Flow, Scan, step
from densekv.lua import script
from densekv.maps.buckets import (
    OOL,
    OOL_SLACK,
    Geometry,
    Location,
    Locator,
    bucket_patterns,
    key_of,
)
from densekv.maps.meta import init_flow, meta_key, ttl_mode_reason
from densekv.maps.settings import MapFacts
from densekv.maps.zipkeys import Aliases
from densekv.plan import Command, Plan, command, script_call

MISSING: Any = object()  # an item not there (a get's result before the default is applied)


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def key_str(key: Any) -> str:
    """A map key as the str it is stored under (bytes: utf-8, surrogates kept)."""
    if isinstance(key, bytes):
        return key.decode("utf-8", "surrogateescape")
    if not isinstance(key, str):
        raise MapKeyInvalid(f"map keys are str (or bytes), not {type(key).__name__}")
    return key


#: Value types the codec stores exactly as given (a str as UTF-8 with surrogatepass).
_EXACT = (int, str, bytes, bytearray, memoryview)


def check_round_trip(codec: Codec, key: str, value: Any) -> None:
    """MapValueInvalid unless `value` decodes back equal: msgpack turns a tuple into a list,
    NaN never equals itself, a dict with tuple keys does not decode at all. Checked on the
    uncompressed framing, before anything is written (the codec's own decode, not a copy)."""
    try:
        kind, payload = codec.payload(value)
    except CodecError as exc:
        raise MapValueInvalid(f"the value of {key!r}: {exc}") from None
    try:
        back = cd.decode(bytes([kind]) + payload, key=key)
    except DecodeError:
        back = _UNREADABLE
    if back != value:
        raise MapValueInvalid(
            f"the value of {key!r} would not come back equal (a tuple reads back as a list, NaN "
            "never equals itself, tuple dict keys do not decode): store lists, dicts, str, bytes, numbers"
        )


_UNREADABLE = object()


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

    def set_fallback(self, pattern: str | None) -> None:
        """Read plain keys matching `pattern` through the map from now on (a migration
        stored it in the meta, maps/migrate.py), or no more (None: nothing left to move)."""
        self.fallback = pattern

    def locate(self, key: str) -> Location:
        return Location(*self.place(key))

    def expiry_of(self, ttl: float | None) -> int | None:
        ttl = self.ttl if ttl is None else ttl
        if ttl is None:
            return None
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < 2**32:
            raise InvalidArgument(f"ttl is a positive number of seconds (or None), not {ttl!r}")
        return self.now() + max(1, round(ttl))

    def frame(self, key: str, value: Any, expires: int | None) -> tuple[bytes, bytes | None]:
        """(what the bucket stores, the out-of-line value or None). Raises before writing.
        The expiry is packed before the value in ttl_mode "packed" only."""
        try:
            framed = self.codec.encode(value)
        except MapValueInvalid:
            raise
        except CodecError as exc:  # a set, a datetime, an int past 2**64: one public error
            raise MapValueInvalid(f"the value of {key!r}: {exc}") from None
        if type(value) not in _EXACT:
            check_round_trip(self.codec, key, value)
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
                oolvals: Sequence[Any] | None = None, plains: Sequence[Any] | None = None,
                fallback: bool = True) -> Flow[list[Any]]:
        """Bucket replies -> values (MISSING where absent): out-of-line values and the
        migration fallback fetched in one more round trip each unless prefetched (batches
        prefetch them, so that later operations of the batch cannot slip in between), and
        dictionaries (immutable) loaded once. fallback=False: never read plain keys (a walk
        over the buckets reads each item where it is)."""
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
        plain_at = [i for i, v in enumerate(inner) if v is None] if fallback and self.fallback else []
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

    def fields_of(self, buckets: Sequence[bytes]) -> Flow[tuple[list[str], list[Location], list[bytes]]]:
        """Every field of these buckets (HGETALL): the item's key, location and raw value."""
        replies = yield [command("HGETALL", b, keys=(b,)) for b in buckets]
        keys: list[str] = []
        locs: list[Location] = []
        raws: list[bytes] = []
        for b, reply in zip(buckets, replies):
            pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
            for field, raw in pairs:
                keys.append(key_of(self.namespace, bytes(b), bytes(field), self.geo, self.aliases))
                locs.append(Location(bytes(b), bytes(field)))
                raws.append(bytes(raw))
        return keys, locs, raws

    def bucket_scans(self, batch: int, count: int = 1000) -> list[Scan]:
        """Scans of the map's buckets (a Scan asks the driver for keys: flows.py)."""
        return [Scan(p, batch=batch, count=count) for p in bucket_patterns(self.namespace)]

    def need_dictionaries(self, framed: Iterable[bytes | None]) -> Flow[None]:
        ids = self.dicts.missing(cd.needed_dictionary(v) for v in framed if v)
        if ids:
            self.dicts.add((yield [plan_load(self.namespace, ids)])[0])

    def plain_get(self, key: str) -> Plan[Any]:
        k = key.encode("utf-8", "surrogateescape")
        return command("GET", k, keys=(k,))

    def get_many(self, keys: Sequence[str], prefetch: bool = False) -> Flow[list[Any]]:
        """prefetch: read out-of-line (and fallback) values in the same round trip."""
        if not keys:
            return []  # flows never yield an empty round trip
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
            key = key_str(key)
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
                script("map_setnx"), [loc.bucket, loc.ool],
                [loc.field, stored, ool or b"", expires * 1000 if expires else 0,
                 (expires + OOL_SLACK) * 1000 if (ool and expires) else 0, "field"]))
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
            raise NotAnInteger(f"incrby takes a 64-bit integer delta, not {delta!r:.40}")
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
        if not keys:
            return 0  # flows never yield an empty round trip
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
        exp = 0 if seconds is None else self.now() + max(1, round(seconds))
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


def open_map(namespace: str, facts: MapFacts, expected: int, aliases: Mapping[str, str] | None,
             ttl_mode: str, codec: Codec, ttl: float | None, clock: Callable[[], float],
             out_of_line: bool) -> Flow[MapCore]:
    """Create or open the map in the server (init_flow) and load the dictionary new values
    are written with: what both shells run first."""
    meta, stored_aliases = yield from init_flow(namespace, facts, expected, aliases, ttl_mode)
    core = MapCore(namespace, facts, meta, stored_aliases, codec, ttl, clock, out_of_line)
    yield from core.load_write_dictionary()
    return core


# -- moving plain keys in (a migration: maps/migrate.py, and MapCore.adopt before a write) --
MAX_RETRIES = 5  # rounds of move_keys (what still changes is then skipped); passes of migrate_to_plain


def move_keys(core: MapCore, keys: Sequence[bytes]) -> Flow[dict[str, int]]:
    """Move these plain keys into the map; counts by outcome."""
    counts = {"moved": 0, "in_map": 0, "gone": 0, "skipped": 0}
    todo = list(keys)
    for _ in range(MAX_RETRIES):
        if not todo:
            break
        ttl_cmd = "PEXPIRETIME" if core.field_ttl else "TTL"  # field mode: absolute ms
        reads = yield [Plan((Command(("GET", k), (k,)), Command((ttl_cmd, k), (k,))), atomic=True) for k in todo]
        retry: list[bytes] = []
        work: list[tuple[bytes, bytes, Location, bytes, int]] = []
        for k, (raw, ttl) in zip(todo, reads):
            if raw is None:
                counts["gone"] += 1
                continue
            name = k.decode("utf-8", "surrogateescape")
            try:
                loc = core.locate(name)
            except KeyTooLong:
                counts["skipped"] += 1
                continue
            work.append((k, bytes(raw), loc, core.codec.encode(plain_value(bytes(raw))), int(ttl)))
        if not work:
            break
        if not core.facts.cluster:
            results = yield [script_call(script("map_move_field" if core.field_ttl else "map_move"),
                                         [k, loc.bucket, loc.ool],
                                         [loc.field, raw, framed, core.geo.value_limit])
                             for k, raw, loc, framed, _ in work]
            for (k, *_), r in zip(work, results):
                if r == 1:
                    counts["moved"] += 1
                elif r == 2:
                    counts["in_map"] += 1
                elif r == 0:
                    counts["gone"] += 1
                else:
                    retry.append(k)
        else:
            yield from _move_two_step(core, work, counts, retry)
        todo = retry
    counts["skipped"] += len(todo) if todo else 0
    return counts


def _move_two_step(core: MapCore, work: list[tuple[bytes, bytes, Location, bytes, int]],
                   counts: dict[str, int], retry: list[bytes]) -> Flow[None]:
    now = core.now()
    puts: list[Plan[Any]] = []
    stored_of = []
    for k, raw, loc, framed, ttl in work:
        if core.field_ttl:  # ttl is the key's PEXPIRETIME: the field gets the same
            stored, ool = framed, None
            if len(framed) > core.geo.value_limit:
                stored, ool = OOL, framed
            stored_of.append(stored)
            puts.append(script_call(script("map_setnx"), [loc.bucket, loc.ool],
                                    [loc.field, stored, ool or b"", max(ttl, 0),
                                     ttl + 1000 * OOL_SLACK if (ool and ttl > 0) else 0, "field"]))
            continue
        expires = now + ttl if ttl > 0 else None
        stored = cd.with_expiry(framed, expires)
        ool = None
        if len(stored) > core.geo.value_limit:
            stored, ool = cd.with_expiry(OOL, expires), framed
        stored_of.append(stored)
        puts.append(script_call(script("map_setnx"), [loc.bucket, loc.ool],
                                [loc.field, stored, ool or b"", (expires + OOL_SLACK) if (ool and expires) else 0, now]))
    written = yield puts
    dels = yield [script_call(script("map_del_if"), [k], [raw, b""]) for k, raw, *_ in work]
    undo: list[Plan[Any]] = []
    for (k, raw, loc, *_), w, d, stored in zip(work, written, dels, stored_of):
        if d:
            counts["moved" if w else "in_map"] += 1
        elif w:  # the plain key vanished (deleted by the application) after we read it
            undo.append(script_call(script("map_del_if"), [loc.bucket], [stored, loc.field]))
            counts["gone"] += 1
        else:
            counts["gone"] += 1
    if undo:
        yield undo
