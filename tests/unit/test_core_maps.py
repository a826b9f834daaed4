"""MapCore's flows (densekv/maps/core.py) against scripted replies, no server: one row per
case (operation, scripted round trips with what each step must carry, result or error),
h11's table style. The core is opened with open_map against a scripted map_init reply, as
both shells open it; values are framed with the map's own codec (densekv/codec.py), and
where an item lives (bucket, field, out-of-line key) is the core's locate(), whose rules
tests/unit/test_map_buckets.py and test_map_zipkeys.py pin.

A map has no compare-and-set loop in its core (each write is one command, one MULTI or one
script, atomic on the server), so there is no version-conflict row here; NOSCRIPT is the
executors' (densekv/executors.py). Behaviour against real servers: tests/behaviour/test_maps.py and test_map_*.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
import redis

from densekv import codec as cd
from densekv.codec import Codec
from densekv.errors import (
    DecodeError,
    FieldTtlUnavailable,
    InvalidArgument,
    MapConfigError,
    MapValueInvalid,
    NotAnInteger,
    ValueTooLarge,
    WrongType,
)
from densekv.flows import Flow
from densekv.maps.core import MISSING, MapCore, open_map
from densekv.maps.settings import MapFacts
from tests.unit.scripted import Raises, Scripted, check, run

NOW = 1_800_000_000
FACTS = MapFacts(128, 64)
KEY = "user:1"


def meta(**extra: str) -> list[Any]:
    """map_init's reply: the stored meta hash (flat) and the alias table."""
    fields = {"format": "2", "buckets": "8", "entries": "128", "value": "64", "ttl_mode": "packed", **extra}
    return [[x.encode() for kv in fields.items() for x in kv], []]


def opened(facts: MapFacts = FACTS, out_of_line: bool = True, ttl: float | None = None, **stored: str) -> MapCore:
    ex = Scripted([[(("map_init", (b"m:zm:{m}", b"m:za:{m}")), meta(**stored))]])
    core = run(open_map("m", facts, 1000, None, "auto", Codec.named("auto"), ttl, lambda: NOW, out_of_line), ex)
    ex.done()
    assert isinstance(core, MapCore)
    return core


CORE = opened()
LOC = CORE.locate(KEY)
B, F, OOLKEY = LOC.bucket, LOC.field, LOC.ool
assert B.startswith(b"m:") and OOLKEY.startswith(b"m:om:")  # the naming of maps/buckets.py
SAME = next(k for k in (f"user:{i}" for i in range(2, 10_000)) if CORE.locate(k).bucket == B)  # shares KEY's bucket
OTHER = "user:2"
assert CORE.locate(OTHER).bucket != B


def enc(value: Any, expires: int | None = None) -> bytes:
    """The bucket value of `value` as the core frames it (expiry first, packed mode)."""
    return cd.with_expiry(CORE.codec.encode(value), expires)


OOL = bytes([cd.OUT_OF_LINE])
LONG = "x y " * 30  # framed past hash-max-listpack-value 64: out of line


def fits(limit: int) -> bytes:
    """A bytes value whose framing is exactly `limit` bytes (the boundary of inline)."""
    n = limit
    while len(enc(b"v" * n)) > limit:
        n -= 1
    assert len(enc(b"v" * n)) == limit
    return b"v" * n


EDGE = fits(64)


def hget(reply: Any) -> list[tuple[Any, Any]]:
    return [(("HGET", B, F), reply)]


class Case(NamedTuple):
    id: str
    op: Callable[[MapCore], Flow[Any]]
    script: list[list[tuple[Any, Any]]]
    expect: Any
    core: Callable[[], MapCore] = lambda: CORE


CASES = [
    # get: one HGET; an expiry packed before the value is checked against the clock
    Case("get", lambda c: c.get(KEY), [hget(enc({"a": 1}))], {"a": 1}),
    Case("get-missing", lambda c: c.get(KEY), [hget(None)], MISSING),
    Case("get-live-ttl", lambda c: c.get(KEY), [hget(enc(5, NOW + 1))], 5),
    Case("get-expired", lambda c: c.get(KEY), [hget(enc(5, NOW))], MISSING),
    Case("get-out-of-line", lambda c: c.get(KEY), [hget(OOL), [(("GET", OOLKEY), CORE.codec.encode(LONG))]], LONG),
    Case("get-out-of-line-gone", lambda c: c.get(KEY), [hget(OOL), [(("GET", OOLKEY), None)]], MISSING),
    Case("get-prefetch", lambda c: c.get(KEY, prefetch=True),  # one round trip, the out-of-line key with it
         [[(("HGET", B, F), OOL), (("GET", OOLKEY), CORE.codec.encode(LONG))]], LONG),
    Case("get-undecodable", lambda c: c.get(KEY), [hget(b"\x03\xc1")], Raises(DecodeError, KEY)),
    Case("get-wrong-type", lambda c: c.get(KEY), [hget(redis.ResponseError("WRONGTYPE Operation against a key"))],
         Raises(WrongType, B.decode())),
    Case("get-many", lambda c: c.get_many([KEY, OTHER, SAME]),  # one HMGET per bucket, HGET for one field
         [[(("HMGET", B, F, CORE.locate(SAME).field), [enc(1), enc(3)]),
           (("HGET", CORE.locate(OTHER).bucket, CORE.locate(OTHER).field), None)]], [1, MISSING, 3]),
    Case("exists", lambda c: c.exists(KEY), [hget(enc(0))], True),
    Case("exists-expired", lambda c: c.exists(KEY), [hget(enc(0, NOW - 5))], False),
    Case("ttl", lambda c: c.ttl_of(KEY), [hget(enc(0, NOW + 30))], 30),
    Case("ttl-none", lambda c: c.ttl_of(KEY), [hget(enc(0))], -1),
    Case("ttl-missing", lambda c: c.ttl_of(KEY), [hget(None)], -2),
    # set: one HSET; out of line: SET of the value + HSET of the marker, in one MULTI
    Case("set", lambda c: c.set(KEY, {"a": 1}), [[(("HSET", B, F, enc({"a": 1})), 1)]], True),
    Case("set-ttl", lambda c: c.set(KEY, 5, ttl=10), [[(("HSET", B, F, enc(5, NOW + 10)), 1)]], True),
    Case("set-default-ttl", lambda c: c.set(KEY, 5), [[(("HSET", B, F, enc(5, NOW + 60)), 1)]], True,
         lambda: opened(ttl=60)),
    Case("set-at-the-value-limit", lambda c: c.set(KEY, EDGE), [[(("HSET", B, F, enc(EDGE)), 1)]], True),
    Case("set-one-past-the-limit", lambda c: c.set(KEY, EDGE + b"v"),
         [[(("SET", OOLKEY, CORE.codec.encode(EDGE + b"v")), "OK"), (("HSET", B, F, OOL), 1)]], True),
    Case("set-out-of-line-ttl", lambda c: c.set(KEY, LONG, ttl=10),  # the value key outlives its marker
         [[(("SET", OOLKEY, CORE.codec.encode(LONG), "EXAT", NOW + 11), "OK"), (("HSET", B, F, cd.with_expiry(OOL, NOW + 10)), 1)]],
         True),
    Case("set-too-large-inline-only", lambda c: c.set(KEY, LONG), [], Raises(ValueTooLarge, "64"),
         lambda: opened(out_of_line=False)),
    Case("set-a-python-set", lambda c: c.set(KEY, {1, 2}), [], Raises(MapValueInvalid)),
    Case("set-a-tuple", lambda c: c.set(KEY, [(1, 2)]), [], Raises(MapValueInvalid, "come back equal")),
    Case("set-ttl-0", lambda c: c.set(KEY, 1, ttl=0), [], Raises(InvalidArgument)),
    Case("set-many-empty", lambda c: c.set_many({}), [], True),
    Case("set-many", lambda c: c.set_many({KEY: 1, OTHER: 2}),  # every value framed first, one round trip
         [[(("HSET", B, F, enc(1)), 1), (("HSET", CORE.locate(OTHER).bucket, CORE.locate(OTHER).field, enc(2)), 1)]],
         True),
    Case("set-many-refuses-all", lambda c: c.set_many({KEY: 1, OTHER: {3}}), [], Raises(MapValueInvalid)),
    # setnx / incr / expire: one script each (read-then-write on a packed expiry)
    Case("setnx-new", lambda c: c.setnx(KEY, 5), [[(("map_setnx", (B, OOLKEY), F, enc(5), b"", 0, NOW), 1)]], True),
    Case("setnx-taken", lambda c: c.setnx(KEY, 5), [[("map_setnx", 0)]], False),
    Case("incr", lambda c: c.incrby(KEY, 5), [[(("map_incr", (B,), F, 5, NOW, b""), [1, b"6"])]], 6),
    Case("incr-with-ttl", lambda c: c.incrby(KEY, -1),  # a new item gets the map's ttl, packed
         [[(("map_incr", (B,), F, -1, NOW, cd.with_expiry(b"", NOW + 60)), [1, b"-1"])]], -1,
         lambda: opened(ttl=60)),
    Case("incr-not-an-integer", lambda c: c.incrby(KEY, 1), [[("map_incr", [0, b"value is not an integer"])]],
         Raises(NotAnInteger, "value is not an integer")),
    Case("incr-bool-delta", lambda c: c.incrby(KEY, True), [], Raises(NotAnInteger)),
    Case("incr-past-int64", lambda c: c.incrby(KEY, 2**63), [], Raises(NotAnInteger)),
    Case("expire", lambda c: c.expire(KEY, 10), [[(("map_expire", (B, OOLKEY), F, NOW + 10, NOW, 64), 1)]], True),
    Case("persist", lambda c: c.expire(KEY, None), [[(("map_expire", (B, OOLKEY), F, 0, NOW), 0)]], False),
    Case("expire-now-deletes", lambda c: c.expire(KEY, 0),
         [[(("HGET", B, F), enc(1)), (("HDEL", B, F), 1), (("DEL", OOLKEY), 0)]], True),
    # delete: per key one MULTI of HGET + HDEL + DEL of the out-of-line key; counts live items
    Case("delete", lambda c: c.delete_many([KEY]), [[(("HGET", B, F), enc(1)), (("HDEL", B, F), 1), ("DEL", 0)]], 1),
    Case("delete-expired-counts-0", lambda c: c.delete_many([KEY]),
         [[(("HGET", B, F), enc(1, NOW)), ("HDEL", 1), ("DEL", 0)]], 0),
    Case("delete-two", lambda c: c.delete_many([KEY, KEY]),
         [[("HGET", enc(1)), ("HDEL", 1), ("DEL", 0), ("HGET", None), ("HDEL", 0), ("DEL", 0)]], 1),
    # getset: the old value and the write in one MULTI
    Case("getset", lambda c: c.getset(KEY, 3),
         [[(("HGET", B, F), enc(2)), (("GET", OOLKEY), None), (("HSET", B, F, enc(3)), 0), (("DEL", OOLKEY), 0)]], 2),
    Case("getset-out-of-line", lambda c: c.getset(KEY, 3),
         [[("HGET", OOL), ("GET", CORE.codec.encode(LONG)), ("HSET", 0), ("DEL", 1)]], LONG),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_map_flows(case: Case) -> None:
    check(case.op(case.core()), case.script, case.expect)


def test_every_atomic_write_is_one_multi() -> None:
    ex = Scripted([[("SET", "OK"), ("HSET", 1)]])
    run(CORE.set(KEY, LONG), ex)
    assert all(s.atomic for s in ex.trips[0])
    ex = Scripted([[("HSET", 1)]])
    run(CORE.set(KEY, 1), ex)
    assert not ex.trips[0][0].atomic


@pytest.mark.parametrize(("op", "expect"), [(lambda c: c.delete_many([]), 0), (lambda c: c.get_many([]), [])],
                         ids=["delete", "get"])
def test_an_empty_batch_sends_nothing(op: Callable[[MapCore], Flow[Any]], expect: Any) -> None:
    check(op(CORE), [], expect)


# -- opening ----------------------------------------------------------------------------

def test_open_sends_the_meta_it_would_create_and_adopts_what_is_stored() -> None:
    ex = Scripted([[(("map_init", (b"m:zm:{m}", b"m:za:{m}"), 5, "format", "2", "buckets"), meta(buckets="32"))]])
    core = run(open_map("m", FACTS, 1000, None, "auto", Codec.named("auto"), None, lambda: NOW, True), ex)
    assert core.geo.buckets == 32  # another process made it with another `expected`: its geometry wins


@pytest.mark.parametrize(("stored", "error"), [
    ([[], []], Raises(MapConfigError, "did not write")),
    (meta(format="1"), Raises(MapConfigError, "format '1'")),
    (meta(ttl_mode="field"), Raises(FieldTtlUnavailable)),
], ids=["foreign-hash", "old-format", "field-ttl-here-none"])
def test_open_refuses_meta_it_cannot_use(stored: Any, error: Raises) -> None:
    check(open_map("m", FACTS, 1000, None, "auto", Codec.named("auto"), None, lambda: NOW, True),
          [[("map_init", stored)]], error)


def test_open_with_field_ttl_on_a_server_without_it_sends_nothing() -> None:
    check(open_map("m", FACTS, 1000, None, "field", Codec.named("auto"), None, lambda: NOW, True), [],
          Raises(FieldTtlUnavailable))


# -- field TTL mode: the server's own field expiry, set with the value ---------------------

HSETEX = MapFacts(128, 64, "hsetex", "hashtable")
HEXPIRE = MapFacts(128, 64, "hexpire", "listpackex")


def test_field_ttl_writes_value_and_ttl_together() -> None:
    core = opened(HSETEX, ttl_mode="field")
    check(core.set(KEY, 5, ttl=10), [[(("HSETEX", B, "EXAT", NOW + 10, "FIELDS", 1, F, enc(5)), 1)]], True)
    core = opened(HEXPIRE, ttl_mode="field")
    run_ = check(core.set(KEY, 5, ttl=10),
                 [[(("HSET", B, F, enc(5)), 1), (("HEXPIREAT", B, NOW + 10, "FIELDS", 1, F), [1])]], True)
    assert all(s.atomic for s in run_.ex.trips[0])
    check(core.set(KEY, 5), [[(("HSET", B, F, enc(5)), 1)]], True)  # no ttl: a plain HSET
    check(core.ttl_of(KEY), [[(("HPEXPIRETIME", B, "FIELDS", 1, F), [(NOW + 7) * 1000])]], 7)
    check(core.ttl_of(KEY), [[("HPEXPIRETIME", [-2])]], -2)
    check(core.setnx(KEY, 5, ttl=3), [[(("map_setnx", (B, OOLKEY), F, enc(5), b"", (NOW + 3) * 1000), 1)]],
          True)


# -- a migration in progress: plain keys of the same names are read and moved in -----------

def test_during_a_migration_a_missing_item_is_read_from_its_plain_key() -> None:
    core = opened(fallback="user:*")
    check(core.get(KEY), [hget(None), [(("GET", KEY), b"17")]], 17)
    check(core.get(KEY), [hget(None), [(("GET", KEY), b"text")]], b"text")
    check(core.set(KEY, 1), [[(("HSET", B, F, enc(1)), 1), (("DEL", KEY), 1)]], True)
