"""The session stores on the one flow runtime (densekv/flows.py) and the one probe:
get_many gives what get gives, token by token, in both stores; and the asyncio store
reads the server's facts with the same probe as the sync one, so both explain the same
server (it used to read a few CONFIG GETs and report the field-TTL encoding as None)."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.tools.server.process import ServerProcess


@pytest.mark.parametrize("layout", ["dense", "json"])
def test_get_many_reads_what_get_reads(client: redis.Redis, server: ServerProcess, layout: str) -> None:
    store = SessionStore(client, namespace="gm", layout=layout, expected_sessions=2000)
    tokens = store.create_many([i if i % 3 else None for i in range(300)], data={"n": 1})
    gone = tokens[::7]
    for t in gone:
        store.destroy(t)
    asked = [*tokens, "junk", "x" * 40, *gone[:3]]
    want = [store.get(t) for t in asked]
    assert store.get_many(asked) == want
    assert sum(s is not None for s in want) == len(tokens) - len(gone)

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            astore = AsyncSessionStore(aclient, namespace="gm", layout=layout)
            assert await astore.get_many(iter(asked)) == want
        finally:
            await aclient.aclose()

    asyncio.run(main())


def test_the_async_store_explains_the_server_as_the_sync_one(client: redis.Redis, server: ServerProcess) -> None:
    sync = SessionStore(client, namespace="ex")

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            astore = AsyncSessionStore(aclient, namespace="ex")
            explained = await astore.explain()
            assert explained["server"] == sync.explain()["server"]
            assert explained["reason"] == sync.explain()["reason"] and "None" not in explained["reason"]
        finally:
            await aclient.aclose()

    asyncio.run(main())
