"""Half-written on a limit (issue 17): an input inside one limit but outside another must be
refused with a typed error before the first write of a multi-step operation, so the server
holds exactly what it held before (compared key by key with DUMP, not just DBSIZE).

Sessions: a str identity of 255 UTF-8 bytes passed the identity check (1-255) but not the
identity index (b"s" + identity behind a one-byte length); a ttl <= 0 was accepted and
wrote a dead session; a ttl past 2106 failed inside the record packer. Maps: a batch or
mset holding one value that would not read back (a tuple) was written. Sets: one bad item
in a batch. Each case runs on every layout where it applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from densekv import CompactMap, CompactSet, SessionStore
from densekv.capabilities import probe
from densekv.errors import DensekvError, InvalidArgument, MapValueInvalid, SessionIdentityInvalid
from densekv.sessions.meta import LAYOUTS  # every session layout, from its registry
from densekv.sessions.model import MAX_STR_IDENTITY


def dump_all(client: redis.Redis) -> dict[bytes, bytes | None]:
    return {k: client.dump(k) for k in client.scan_iter(count=1000)}


def refused_and_untouched(client: redis.Redis, op: Callable[[], Any], error: type[Exception] = DensekvError) -> None:
    before = dump_all(client)
    with pytest.raises(error):
        op()
    assert dump_all(client) == before




def store_for(client: redis.Redis, layout: str, **options: Any) -> SessionStore:
    if layout == "fieldttl" and probe(client).field_ttl == "none":
        pytest.skip("no hash field TTL on this server")
    return SessionStore(client, layout=layout, expected_sessions=1000, auto_train=None, **options).open()


TOO_LONG = "x" * (MAX_STR_IDENTITY + 1)  # inside the old 1-255 check, outside the index


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("index", [True, False])
def test_session_identity_limits_are_checked_before_any_write(client: redis.Redis, layout: str, index: bool) -> None:
    store = store_for(client, layout, index_identities=index, idle_ttl=600)
    anon = store.create(None, {"csrf": "ab" * 20})
    owned = store.create(7, {"k": 1})
    for op in (lambda: store.create(TOO_LONG, {}),
               lambda: store.create_many([1, 2, TOO_LONG]),
               lambda: store.create_many([1, "\ud800"]),
               lambda: store.login(anon, TOO_LONG),
               lambda: store.login(owned, "\ud800"),
               lambda: store.create(-1, {}),
               lambda: store.create(2**64, {})):
        refused_and_untouched(client, op, SessionIdentityInvalid)
    assert store.get(anon) is not None and store.get(owned) is not None
    if index:
        assert [s.identity for s in store.sessions_of(7)] == [7]


def test_a_record_limit_and_the_index_agree(client: redis.Redis) -> None:
    """A dense record holds the identity inline (hash-max-listpack-value): an identity too
    long for it is refused before the index entry is written, on create and on login."""
    store = SessionStore(client, layout="dense", expected_sessions=1000, idle_ttl=600, auto_train=None).open()
    anon = store.create(None, {})
    long_identity = "y" * 100
    refused_and_untouched(client, lambda: store.create(long_identity, {}))
    before = dump_all(client)
    try:
        token = store.login(anon, long_identity)
    except DensekvError:
        assert dump_all(client) == before
    else:  # accepted: then it is whole, readable and listed
        assert token is not None and store.get(token).identity == long_identity  # type: ignore[union-attr]
        assert len(store.sessions_of(long_identity)) == 1
        assert store.destroy_all(long_identity) == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_session_ttl_is_checked_before_any_write(client: redis.Redis, layout: str) -> None:
    store = store_for(client, layout)
    for ttl in (0, -5, 0.5, float("nan"), 10**12, "60", True):
        refused_and_untouched(client, lambda: store.create(1, {}, ttl=ttl), InvalidArgument)  # noqa: B023
        refused_and_untouched(client, lambda: store.create_many([1, 2], ttl=ttl), InvalidArgument)  # noqa: B023
    token = store.create(1, {}, ttl=60)
    assert 0 < store.get(token).absolute_at - store._core.now() <= 60  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [(1, 2), float("nan"), {(1,): 2}, {"a": {1}}, 2**64, [b"x", (1,)]])
def test_a_map_batch_with_one_unreadable_value_writes_nothing(client: redis.Redis, bad: Any) -> None:
    m = CompactMap(client, "m", expected=1000).open()
    m.set("kept", 1)
    refused_and_untouched(client, lambda: m.set("k", bad), MapValueInvalid)
    refused_and_untouched(client, lambda: m.mset({"a": 1, "b": bad, "c": 3}), MapValueInvalid)
    refused_and_untouched(client, lambda: m.setnx("k", bad), MapValueInvalid)
    refused_and_untouched(client, lambda: m.getset("kept", bad), MapValueInvalid)

    def batch() -> None:
        b = m.batch()
        b.set("a", 1)
        b.incr("kept")
        b.setnx("b", bad)
        b.execute()

    refused_and_untouched(client, batch)
    assert m.get("kept") == 1 and m.get("a") is None


@pytest.mark.parametrize("args", [("k", 1, 0), ("k", 1, -1), ("k", 1, float("nan")), ("k", 1, 2**40)])
def test_a_map_ttl_is_checked_before_any_write(client: redis.Redis, args: tuple[Any, ...]) -> None:
    m = CompactMap(client, "m", expected=1000).open()
    refused_and_untouched(client, lambda: m.set(*args), InvalidArgument)
    refused_and_untouched(client, lambda: m.mset({"a": 1, "b": 2}, ttl=args[2]), InvalidArgument)


@pytest.mark.parametrize("delta", [1.5, "1", 2**63, None])
def test_a_map_incr_delta_is_typed(client: redis.Redis, delta: Any) -> None:
    m = CompactMap(client, "m", expected=1000).open()
    m.set("n", 1)
    refused_and_untouched(client, lambda: m.incrby("n", delta))
    assert m.get("n") == 1


@pytest.mark.parametrize("layout", ["dense", "flat", "hash", "set", "zset"])
def test_a_set_batch_with_one_lenient_text_item_writes_nothing(client: redis.Redis, layout: str) -> None:
    s = CompactSet(client, "s", layout=layout, expected=1000).open()
    s.add(bytes(16))
    good = [(i.to_bytes(16, "big")).hex() for i in range(1, 50)]
    refused_and_untouched(client, lambda: s.add_many([*good, " " + "ab" * 16]))
    refused_and_untouched(client, lambda: s.add_many([*good, "00 112233445566778899aabbccdd ee"]))
    assert list(s) == [bytes(16)]
