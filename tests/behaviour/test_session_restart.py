"""A session store across a server that loses its data (restart without persistence),
and sessions that cannot be decoded: nothing ever reads back as another session's data.

The defect these pin down (issue 21): dictionary ids were counted from 1 per namespace, so
after a restart a new process trained another dictionary under id 1 while an old process
still wrote with its own id-1 dictionary; each then decoded the other's payloads into
other data (another user's `_user_id`, HTTP 200). Ids now come from the dictionary's bytes
(codec.content_id), the first create after a loss writes the metadata and dictionary
again, and a web read of a session that does not decode is no session (get(undecodable=
"none")), never an error that locks the user out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import redis

from densekv.codec import content_id
from densekv.dictionaries import dictionary_key
from densekv.errors import DecodeError, DensekvError, ScriptError, SessionDataInvalid
from densekv.sessions import SessionStore
from densekv.sessions.meta import meta_key
from densekv.sessions.payload import MAX_NESTING
from densekv.tools.lab.session_profiles import session, sessions
from densekv.tools.server.process import ServerProcess
from tests.behaviour.test_reliability_limits import LAYOUTS, store_for

SERVERS = ["valkey-9.1", "redis-7.0"]


def _store(server: ServerProcess, **options: object) -> tuple[SessionStore, redis.Redis]:
    client = server.client()
    return SessionStore(client, layout="dense", expected_sessions=10_000, **options).open(), client  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SERVERS)
def test_no_session_reads_back_as_other_data_after_a_restart_without_persistence(
        fresh_server: Callable[..., ServerProcess], name: str) -> None:
    server = fresh_server(name)
    old, old_client = _store(server, auto_train=200)
    for ident, data in sessions("P1", 200):  # the old worker trains its dictionary ...
        old.create(ident, data)
    d_old = old.explain()["dictionary"]
    assert d_old is not None
    server.restart()  # ... and the server forgets everything, the dictionary too
    for _ in range(3):  # the old worker's pooled connections died with the server
        try:
            old_client.ping()
            break
        except redis.ConnectionError:
            continue
    # old and new workers write side by side; the new one trains its own dictionary
    new, _ = _store(server, auto_train=200)
    written: dict[str, tuple[int | None, dict[str, object]]] = {}
    for n in range(200):
        ident, data = session("P1", 90_000 + n)
        written[new.create(ident, data)] = (ident, data)
    d_new = new.explain()["dictionary"]
    assert d_new is not None and d_new != d_old  # two dictionaries, two ids
    for n in range(40):  # the old worker writes with its own (until it adopts the new one)
        ident, data = session("P1", 70_000 + n)
        written[old.create(ident, data)] = (ident, data)
    later, _ = _store(server)  # a worker started after all that
    for reader in (old, new, later):
        for token, (ident, data) in written.items():
            got = reader.get(token)
            assert got is not None and got.identity == ident and got.data == data
    # the first create after the loss wrote the metadata and the old dictionary again
    assert old_client.exists(meta_key("sess")) == 1
    assert old_client.hexists(dictionary_key("sess"), str(d_old))
    assert old_client.hexists(dictionary_key("sess"), str(d_new))


def test_a_store_whose_metadata_vanished_writes_it_again_on_its_next_refresh(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=1000, auto_train=None).open()
    store.train_dictionary(d for _, d in sessions("P1", 300))
    d = store.explain()["dictionary"]
    token = store.create(*session("P1", 1))
    client.flushall()
    store._drive(store._core.refresh())
    assert client.exists(meta_key("sess")) and client.hexists(dictionary_key("sess"), str(d))
    assert store.get(token) is None  # the data is gone with the server's, not replaced
    again = store.create(*session("P1", 2))
    assert SessionStore(client, layout="dense").open().get(again).data == session("P1", 2)[1]  # type: ignore[union-attr]


def test_a_dictionary_is_stored_under_its_content_and_never_over_another(client: redis.Redis) -> None:
    store = SessionStore(client, layout="dense", expected_sessions=1000, auto_train=None).open()
    d = store.train_dictionary(d for _, d in sessions("P2", 300))
    stored = client.hget(dictionary_key("sess"), str(d))
    assert stored is not None and content_id(stored) == d
    assert store.train_dictionary(d for _, d in sessions("P2", 300)) == d  # same bytes, same id
    client.hset(dictionary_key("sess"), str(content_id(b"x" * 5000)), b"other bytes")
    from densekv.dictionaries import plan_store

    with pytest.raises(ScriptError, match="holds other bytes"):
        store._drive(yield_once(plan_store("sess", b"x" * 5000)))


def yield_once(plan: object):  # type: ignore[no-untyped-def]
    return (yield [plan])[0]


@pytest.mark.parametrize("layout", ["dense", "zset"])
def test_an_undecodable_session_is_no_session_for_a_web_read(
        client: redis.Redis, layout: str, caplog: pytest.LogCaptureFixture) -> None:
    writer = store_for(client, layout, index_identities=True)
    writer.train_dictionary(d for _, d in sessions("P1", 300))
    token = writer.create(*session("P1", 7))
    ident = session("P1", 7)[0]
    client.delete(dictionary_key("sess"))  # its dictionary is lost
    reader = store_for(client, layout)
    with pytest.raises(DecodeError):
        reader.get(token)
    with caplog.at_level(logging.WARNING, logger="densekv.sessions"):
        assert reader.get(token, undecodable="none") is None
    assert token not in caplog.text and "does not decode" in caplog.text
    assert reader.sessions_of(ident) == []  # a listing leaves it out (with a warning) ...
    # what a web backend then does with it works: a new session, the old one ended
    fresh = reader.create(ident, {"a": 1})
    assert reader.get(fresh).data == {"a": 1}  # type: ignore[union-attr]
    assert reader.destroy(token) is True and reader.get(token) is None
    assert [s.data for s in reader.sessions_of(ident)] == [{"a": 1}]  # ... and lists the rest
    with pytest.raises(Exception, match="undecodable"):
        reader.get(token, undecodable="maybe")


@pytest.mark.parametrize("first", [True, False])
def test_stores_that_disagree_on_the_identity_index_refuse_to_share_a_namespace(
        client: redis.Redis, first: bool) -> None:
    SessionStore(client, index_identities=first, expected_sessions=1000).open()
    with pytest.raises(DensekvError, match="index_identities"):
        SessionStore(client, index_identities=not first, expected_sessions=1000).open()
    SessionStore(client, index_identities=first, expected_sessions=1000).open()  # agreeing is fine


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nesting_past_the_limit_is_refused_before_anything_is_written(client: redis.Redis, layout: str) -> None:
    store = store_for(client, layout)
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(MAX_NESTING - 1):  # the session's dict and MAX_NESTING - 1 inside it
        inner["k"] = {}
        inner = inner["k"]  # type: ignore[assignment]
    token = store.create(None, deep)
    assert store.get(token).data == deep  # type: ignore[union-attr]
    keys = client.dbsize()
    inner["k"] = [1]
    with pytest.raises(SessionDataInvalid, match="deep"):
        store.create(None, deep)
    with pytest.raises(SessionDataInvalid, match="deep"):
        store.apply(token, {"k": deep})
    assert client.dbsize() == keys
    assert store.get(token).data == {"k": deep["k"]} or store.get(token) is not None  # type: ignore[union-attr]


@pytest.mark.parametrize("name", SERVERS)
def test_the_first_read_after_a_restart_succeeds(fresh_server: Callable[..., ServerProcess], name: str) -> None:
    """The pool's connections broke with the restart: a read is sent again on a new one
    (once); with AOF the session is still there."""
    import asyncio

    import redis.asyncio

    from densekv.sessions import AsyncSessionStore

    server = fresh_server(name, aof=True)
    store, _ = _store(server, auto_train=None)
    token = store.create(5, {"a": 1})

    async def aread() -> object:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        astore = AsyncSessionStore(client, layout="dense", expected_sessions=10_000)
        assert (await astore.get(token)) is not None  # a pooled connection exists ...
        server.restart()  # ... and breaks here
        got = await astore.get(token)
        await client.aclose()
        return got

    assert store.get(token) is not None
    got = asyncio.run(aread())  # restarts the server, reads on the async store
    assert got is not None and got.data == {"a": 1}  # type: ignore[attr-defined]
    got = store.get(token)  # the sync store's pooled connection broke too
    assert got is not None and got.data == {"a": 1}


def test_without_zstandard_the_store_keeps_writing_plainly(server: ServerProcess) -> None:
    """A framework extra without zstandard (as `pip install 'densekv[flask]'` was): the
    write that reaches auto_train must not fail (it did: CodecUnavailable, a 500, and the
    session written anyway); the store warns once and writes without a dictionary."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import sys, logging, io
        sys.modules["zstandard"] = None  # as if not installed
        log = io.StringIO()
        logging.getLogger("densekv").addHandler(logging.StreamHandler(log))
        import redis
        from densekv.sessions import SessionStore
        client = redis.Redis(port={server.port})
        store = SessionStore(client, namespace="nozstd", layout="dense", auto_train=50)
        tokens = [store.create(i, {{"_user_id": str(i), "csrf": "ab" * 20}}) for i in range(120)]
        assert all(store.get(t).data["_user_id"] == str(i) for i, t in enumerate(tokens))
        assert store.explain()["dictionary"] is None
        assert log.getvalue().count("without a zstd dictionary") == 1, log.getvalue()
        client.delete(*client.keys("nozstd:*"))
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_with_the_session_read_writes_without_reading_again(client: redis.Redis, layout: str) -> None:
    """A web save: the request read the session, then apply(read=) writes in one round trip;
    a change made meanwhile by another request is still merged, never lost."""
    store = store_for(client, layout, idle_ttl=600)
    token = store.create(3, {"a": 1})
    read = store.get(token)
    assert read is not None and read.read is not None
    calls = lambda: sum(int(v["calls"]) for k, v in client.info("commandstats").items()
                        if k.split("_", 1)[1] in ("hget", "get", "multi", "hmget"))
    before = calls()
    assert store.apply(token, {"b": 2}, read=read) == {"a": 1, "b": 2}
    with_read = calls() - before  # (a script's own reads count too)
    before = calls()
    assert store.apply(token, {"b": 2}) == {"a": 1, "b": 2}
    assert with_read < calls() - before  # no read of its own: against what get() gave
    read = store.get(token)
    stale = read  # another request changed it since this one read it
    assert store.apply(token, {"c": 3}, read=stale) == {"a": 1, "b": 2, "c": 3}
    assert store.get(token).data == {"a": 1, "b": 2, "c": 3}  # type: ignore[union-attr]
    store.destroy(token)
    assert store.apply(token, {"d": 4}, read=stale) is None  # never resurrected
    assert store.get(token) is None
