"""Accepted, then unreadable (issue 17): for every kind, what a call accepts must read back as
exactly what was given, and what it refuses must be a typed error with nothing written.

Tables of edge values (ints at the int64 and uint64 edges, floats, empty, huge, non-UTF-8,
lone surrogates, tuples, NaN, text that is almost hex) go through the public API of each
kind on a real server; plus a hypothesis property per kind mixing valid and invalid values.
Each value either raises a DensekvError and leaves the keyspace as it was, or comes back
equal (and of the same type) through every read: get, sessions_of/destroy_all, keys(),
iteration, members().
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from densekv import CompactMap, CompactSet, SessionStore, SetFamily
from densekv.capabilities import probe
from densekv.errors import BadItem, DensekvError
from densekv.sessions.meta import LAYOUTS  # every session layout, from its registry

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def dump_all(client: redis.Redis) -> dict[bytes, bytes | None]:
    return {k: client.dump(k) for k in client.scan_iter(count=1000)}


def same(a: Any, b: Any) -> bool:
    """Equal and of the same shape all the way down (a list is not a tuple, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    return bool(a == b)


# --- sessions ---------------------------------------------------------------------------

IDENTITIES: list[Any] = [
    None, 0, 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1, "", "a", "s", "\x07", "é" * 127, "x" * 254,
    "x" * 255, "é" * 128, "\ud800", "a\x00b", "0", "{x}", 1.5, True, b"ab", 10**30,
]
DATA: list[Any] = [
    {}, {"a": None}, {"a": 2**64 - 1}, {"a": -(2**63)}, {"a": 2**64}, {"a": -(2**63) - 1}, {"a": -0.0},
    {"a": float("inf")}, {"a": float("nan")}, {"a": 1e308}, {"a": ""}, {"a": b""}, {"a": b"\xff\x00"},
    {"a": "\ud800"}, {"\udcff": 1}, {"a": "x" * 100_000}, {"a": "0" * 40}, {"a": "AB" * 20}, {"a": "A" * 43},
    {"a": str(uuid.UUID(int=0))}, {"a": str(uuid.UUID(int=0)).upper()}, {"a": [1, [2, {"b": None}]]},
    {"a": (1, 2)}, {1: "int key"}, {"a": {1, 2}}, {"a": {"b": (1,)}}, {"": {"": ""}}, {"a": 3 + 0j},
]




def store_for(client: redis.Redis, layout: str) -> SessionStore:
    if layout == "fieldttl" and probe(client).field_ttl == "none":
        pytest.skip("no hash field TTL on this server")
    return SessionStore(client, layout=layout, expected_sessions=1000, idle_ttl=3600, auto_train=None)


def check_session(store: SessionStore, client: redis.Redis, identity: Any, data: Any) -> None:
    before = dump_all(client)
    try:
        token = store.create(identity, data)
    except DensekvError:
        assert dump_all(client) == before, f"refused {identity!r} / {data!r:.60} but wrote"
        return
    got = store.get(token)
    assert got is not None, f"accepted {identity!r} / {data!r:.60}, then not found"
    assert same(got.identity, identity) and same(got.data, data), f"{identity!r} / {data!r:.60} came back as {got}"
    assert store.touch(token)
    if identity is not None:
        assert [s.id for s in store.sessions_of(identity)] == [got.id]
    token = store.regenerate(token)
    assert token is not None and same(store.get(token).data, data)  # type: ignore[union-attr]
    if identity is not None:
        assert store.destroy_all(identity) == 1
    else:
        assert store.destroy(token)
    assert store.get(token) is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_session_identities_read_back_or_are_refused(client: redis.Redis, layout: str) -> None:
    store = store_for(client, layout)
    for identity in IDENTITIES:
        check_session(store, client, identity, {"k": 1})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_session_data_reads_back_or_is_refused(client: redis.Redis, layout: str) -> None:
    store = store_for(client, layout)
    for data in DATA:
        check_session(store, client, 42, data)


leaves = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**65), max_value=2**65),
                   st.floats(allow_nan=True), st.text(max_size=20), st.binary(max_size=20),
                   st.from_regex(r"\A[0-9a-f]{8,44}\Z"), st.tuples(st.integers()))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=8)


@PROPERTY
@given(identity=st.one_of(st.none(), st.integers(min_value=-1, max_value=2**64), st.text(max_size=300)),
       data=st.dictionaries(st.text(max_size=8), values, max_size=4))
def test_session_property_accepted_means_readable(client: redis.Redis, identity: Any, data: Any) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=1000, auto_train=None)
    check_session(store, client, identity, data)


# --- compact maps -------------------------------------------------------------------------

MAP_KEYS: list[Any] = ["", "a", "é", "\ud800", "\udcff", b"\xff\xfe", b"", "x" * 300, "0", "007", "-1",
                       "9223372036854775808", "a\x00b", "{a}", "*", "key:1", 5, None]
MAP_VALUES: list[Any] = [
    0, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 1.5, -0.0, float("inf"), float("nan"),
    "", b"", "é", "\ud800", b"\xff", "x" * 100_000, b"\x00" * 70_000, None, True, False, [1, [2]],
    {"a": {"b": None}}, {1: 2}, {b"k": 1}, (1, 2), [1, (2,)], {"a": (1,)}, {(1, 2): 3}, {"a": {1}},
    [float("nan")], 10**30, 3 + 0j,
]


def check_map_item(m: CompactMap, client: redis.Redis, key: Any, value: Any) -> None:
    before = dump_all(client)
    try:
        m.set(key, value)
    except DensekvError:
        assert dump_all(client) == before, f"refused {key!r:.30} = {value!r:.30} but wrote"
        return
    expect = bytes(key).decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key
    got = m.get(key)
    assert same(got, value), f"{key!r:.30} = {value!r:.30} came back as {got!r:.40}"
    assert expect in set(m.keys())
    assert m.delete(key) == 1


@pytest.mark.parametrize("codec", ["auto", "msgpack", "zlib"])
def test_map_keys_and_values_read_back_or_are_refused(client: redis.Redis, codec: str) -> None:
    m = CompactMap(client, "m", codec=codec, expected=1000)
    for key in MAP_KEYS:
        check_map_item(m, client, key, 1)
    for value in MAP_VALUES:
        check_map_item(m, client, "k", value)


@PROPERTY
@given(key=st.one_of(st.text(max_size=40), st.binary(max_size=40)), value=values)
def test_map_property_accepted_means_readable(client: redis.Redis, key: Any, value: Any) -> None:
    check_map_item(CompactMap(client, "p", expected=1000), client, key, value)


# --- compact sets -------------------------------------------------------------------------

SET_ITEMS: list[Any] = [
    bytes(16), b"\xff" * 16, 0, 2**128 - 1, 2**128, -1, "00" * 16, "ff" * 16, "FF" * 16, str(uuid.UUID(int=5)),
    "{" + str(uuid.UUID(int=6)) + "}", "urn:uuid:" + str(uuid.UUID(int=7)), "URN:UUID:" + str(uuid.UUID(int=8)),
    uuid.UUID(int=9), " " + "00" * 16, "00" * 16 + "\n", "00 112233445566778899aabbccdd ee", "0_" + "0" * 30,
    "\u0660" * 32, "--" + "0" * 32, "{" + "0" * 32 + "}", "urn:uuid:" + "0" * 32, "0" * 31, "0" * 33,
    "zz" * 16, b"short", bytearray(16), True, 1.5, None,
]


@pytest.mark.parametrize("layout", ["dense", "flat", "hash", "set", "zset"])
def test_set_items_read_back_or_are_refused(client: redis.Redis, layout: str) -> None:
    from densekv.sets.items import ItemCodec

    s = CompactSet(client, "s", layout=layout, expected=1000)
    plain = ItemCodec(16, spread=False)
    for item in SET_ITEMS:
        before = dump_all(client)
        try:
            assert s.add(item)
        except BadItem:
            assert dump_all(client) == before, f"refused {item!r} but wrote"
            continue
        canonical = plain.canonical(item)
        assert len(canonical) == 16 and list(s) == [canonical], f"{item!r} stored as {list(s)}"
        assert s.contains(item) and s.contains(canonical)
        assert s.remove(item) and len(s) == 0


@pytest.mark.parametrize("text", ["00 112233445566778899aabbccdd ee", " " + "ab" * 16, "ab" * 16 + "\n",
                                  "0_" + "0" * 30, "\u0660" * 32, "--" + "0" * 32, "{" + "0" * 32 + "}",
                                  "urn:uuid:" + "0" * 32, "0000000-00000-0000-0000-000000000000"])
def test_set_text_items_are_strict(client: redis.Redis, text: str) -> None:
    s = CompactSet(client, "s", layout="dense", expected=100)
    with pytest.raises(BadItem):
        s.add(text)
    with pytest.raises(BadItem):
        s.add_many([bytes(16), text])
    assert len(s) == 0


@pytest.mark.parametrize("size", [1, 4, 8, 16, 20, 32])
def test_set_items_of_every_size_read_back(client: redis.Redis, size: int) -> None:
    s = CompactSet(client, f"w{size}", layout="dense", expected=100, item_size=size)
    items = [bytes(size), b"\xff" * size, (b"\x01" * size).hex(), 2 ** (8 * size) - 1]
    s.add_many(items)
    assert sorted(s) == sorted({bytes(size), b"\xff" * size, b"\x01" * size})
    for bad in [(b"\x01" * size).hex() + " ", "0" * (2 * size - 1), 2 ** (8 * size), b"\x00" * (size + 1)]:
        with pytest.raises(BadItem):
            s.add(bad)


# --- set families -------------------------------------------------------------------------

CHILDREN: list[Any] = [0, -1, 2**64, 10**40, "", "é", "\ud800", b"\xff", b"", "007", "-0", " 5", "1_0", "abc",
                       "x" * 1000, True, 1.5, None]


@pytest.mark.parametrize("kind", [bytes, str, int])
@pytest.mark.parametrize("encoding", ["hash", "set"])
def test_family_children_read_back_or_are_refused(client: redis.Redis, kind: type, encoding: str) -> None:
    f = SetFamily(client, "f", encoding=encoding, children=kind)
    for parent in ["p", b"\xff", 7, "\ud800", ""]:
        for child in CHILDREN:
            before = dump_all(client)
            try:
                f.add(parent, child)
            except DensekvError:
                assert dump_all(client) == before, f"refused {parent!r}/{child!r} but wrote"
                continue
            members = f.members(parent)  # raised on the old code for a str family holding b"\xff"
            assert len(members) == 1
            (back,) = members
            assert type(back) is kind
            assert f.contains(parent, back) and f.contains(parent, child)
            if kind is int:
                assert back == child if isinstance(child, int) else str(back) == (
                    child.decode() if isinstance(child, bytes) else child)
            assert f.remove(parent, child) and f.count(parent) == 0


def test_family_add_many_with_one_unreadable_child_writes_nothing(client: redis.Redis) -> None:
    f = SetFamily(client, "f", children=int)
    with pytest.raises(BadItem):
        f.add_many("p", [1, 2, "three"])
    assert dump_all(client) == {}
    f2 = SetFamily(client, "g", children=str)
    with pytest.raises(BadItem):
        f2.add_many("p", ["a", b"\xff"])
    assert dump_all(client) == {}
