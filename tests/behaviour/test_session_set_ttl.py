"""SessionStore.set_ttl: a live session's lifetime changed after it was made (Django's
set_expiry on an existing session, "remember me" after login), on every layout of every
server: longer or shorter than the store's ttl, idle expiry kept, the identity index told
(destroy_all still finds a session that now outlives its first expiry), nothing written
for a gone session or a bad ttl, and a record that grows by the 4 bytes of its absolute
expiry never converts its partition (it is split like any record over the limit).
"""

from __future__ import annotations

import os

import pytest
import redis

from densekv.errors import InvalidArgument
from densekv.sessions.meta import LAYOUTS  # every session layout, from its registry
from tests.behaviour.test_reliability_limits import dump_all, store_for
from tests.behaviour.test_sessions import Clock


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_longer_and_a_shorter_lifetime(client: redis.Redis, layout: str) -> None:
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=100)
    token = store.create(7, {"cart": [1, 2]})
    other = store.create(7, {"n": 1})
    assert store.set_ttl(token, 1000)
    got = store.get(token)
    assert got is not None and got.expires_at == int(clock.now) + 1000 and got.data == {"cart": [1, 2]}
    clock.now += 500  # past the store's ttl: the other session is over, this one is not
    assert store.get(other) is None
    got = store.get(token)
    assert got is not None and got.identity == 7
    assert [s.data for s in store.sessions_of(7)] == [{"cart": [1, 2]}]
    assert store.set_ttl(token, 10)  # shorter than what is left
    clock.now += 11
    assert store.get(token) is None
    assert not store.set_ttl(token, 1000)  # over: never brought back
    assert store.get(token) is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_idle_expiry_still_applies_and_destroy_all_finds_the_session(client: redis.Redis, layout: str) -> None:
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=100, idle_ttl=30)
    token = store.create("alice", {"a": 1}, ttl=20)  # absolute = expires: no absolute in the record
    assert store.set_ttl(token, 5000)
    got = store.get(token)
    assert got is not None and got.expires_at == int(clock.now) + 30  # the idle window
    for _ in range(10):  # touched every 25 s, it lives past its first ttl (20) and the store's (100)
        clock.now += 25
        assert store.touch(token)
    assert store.get(token) is not None
    assert store.destroy_all("alice") == 1  # the index was told of the longer life
    assert store.get(token) is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_index_keeps_a_session_past_its_first_day(client: redis.Redis, layout: str) -> None:
    """The identity index drops an entry once its day has passed (sweep): a session given
    days more must be listed with its new day, or "log out everywhere" misses it."""
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=60)
    token = store.create(42, {"a": 1})
    assert store.set_ttl(token, 3 * 86400)
    clock.now += 2 * 86400
    store.sweep()
    assert [s.data for s in store.sessions_of(42)] == [{"a": 1}]
    assert store.destroy_all(42) == 1
    assert store.get(token) is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_bad_ttl_or_a_gone_session_writes_nothing(client: redis.Redis, layout: str) -> None:
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=100)
    token = store.create(1, {"a": 1})
    before = dump_all(client)
    for bad in (0, -5, 2**32, "60", True, 1.5e12):
        with pytest.raises(InvalidArgument):
            store.set_ttl(token, bad)  # type: ignore[arg-type]
    assert not store.set_ttl("x" * 43, 100)
    assert not store.set_ttl("", 100)
    assert dump_all(client) == before


@pytest.mark.parametrize("layout", ["dense", "zset"])
def test_a_record_at_the_limit_grows_without_converting_its_partition(client: redis.Redis, layout: str) -> None:
    """The record of an idle store that holds no absolute expiry (it equals expires_at)
    and is exactly hash-max-listpack-value long gains 4 bytes from set_ttl: the payload is
    split (or moved out of line), the partition stays a listpack, the data reads back."""
    limit = int(client.config_get("hash-max-listpack-value")["hash-max-listpack-value"])
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=100, idle_ttl=30, partitions=1, index_identities=False)
    key = store._core.layout.hash_key(0)  # type: ignore[attr-defined]
    n, token, data = limit // 2, "", {}
    for _ in range(40):  # size the payload (random bytes: nothing compresses) to the limit
        data = {"b": os.urandom(n)}
        token = store.create(None, data, ttl=20)
        length = max(len(v) for v in client.hvals(key))
        if length == limit:
            break
        store.destroy(token)
        n += limit - length
    assert max(len(v) for v in client.hvals(key)) == limit
    for _ in range(20):  # company in the partition, all inline
        store.create(None, {"k": 1})
    assert client.object("encoding", key) == b"listpack"
    assert store.set_ttl(token, 5000)
    assert client.object("encoding", key) == b"listpack"
    assert max(len(v) for v in client.hvals(key)) <= limit
    layout_ = store._core.layout  # type: ignore[attr-defined]
    outside = store.stats()["split_sessions"] + len(list(client.scan_iter(match=f"{layout_.namespace}:so:*")))
    assert outside == 1  # the payload was split (or moved out of line)
    got = store.get(token)
    assert got is not None and got.data == data and got.expires_at == int(clock.now) + 30
    clock.now += 25
    assert store.touch(token)
    clock.now += 25
    assert store.get(token) is not None  # past its first ttl of 20, inside the new one


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_with_a_ttl_changes_data_and_lifetime_in_one_write(client: redis.Redis, layout: str) -> None:
    """What the web backends send when a save also changes the expiry (Django's
    set_expiry, Flask's session.permanent): one compare-and-set, not apply then set_ttl."""
    clock = Clock()
    store = store_for(client, layout, clock=clock, ttl=100)
    token = store.create(3, {"a": 1})
    assert store.apply(token, {"b": 2}, ttl=5000) == {"a": 1, "b": 2}
    got = store.get(token)
    assert got is not None and got.data == {"a": 1, "b": 2} and got.expires_at == int(clock.now) + 5000
    assert store.apply(token, {"c": 3}) == {"a": 1, "b": 2, "c": 3}  # no ttl: the lifetime stays
    assert store.get(token).expires_at == int(clock.now) + 5000  # type: ignore[union-attr]
    before = dump_all(client)
    with pytest.raises(InvalidArgument):
        store.apply(token, {"d": 4}, ttl=0)
    assert dump_all(client) == before



@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_renewed_lifetime_writes_the_index_only_when_its_day_moves(client: redis.Redis, layout: str) -> None:
    """An index entry holds the day its session is surely dead (index.py): a write that
    renews the lifetime within that day sends no index command (aiohttp's max_age and
    Django's set_expiry renew it on every save); one that moves the day writes the entry.
    The index key's writes are counted by keyspace notifications."""
    clock = Clock()
    clock.now = float((int(clock.now) // 86400 + 1) * 86400 + 3600)  # 01:00 tomorrow: the day has hours left
    store = store_for(client, layout, clock=clock, ttl=600)
    token = store.create(42, {"a": 1})
    (index_key,) = client.scan_iter(match=f"{store.namespace}:si:*")
    old = client.config_get("notify-keyspace-events")["notify-keyspace-events"]
    client.config_set("notify-keyspace-events", "Kh")
    events = client.pubsub(ignore_subscribe_messages=True)
    try:
        events.subscribe(b"__keyspace@0__:" + index_key)
        events.get_message(timeout=1.0)

        def written() -> int:
            client.ping()  # a notification is published before the reply of the command that made it
            got = 0
            while events.get_message(timeout=0.2) is not None:
                got += 1
            return got

        clock.now += 60
        assert store.apply(token, {"b": 2}, ttl=600) == {"a": 1, "b": 2}  # a later time, the same day
        assert written() == 0
        clock.now += 60
        assert store.apply(token, {"c": 3}, ttl=3 * 86400)  # a later day: the entry follows
        assert written() == 1
    finally:
        events.close()
        client.config_set("notify-keyspace-events", old)
    clock.now += 2 * 86400
    store.sweep()  # the entry outlives its first day, so sessions_of still finds the session
    assert [s.data for s in store.sessions_of(42)] == [{"a": 1, "b": 2, "c": 3}]
