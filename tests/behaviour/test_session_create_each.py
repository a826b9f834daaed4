"""create_each: one new session per (identity, data) pair, each with its own data, in
batches (the lab's containers loader and the web benchmark used the store's private
record path for this before; now they have a public call). Sync and async alike."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.tools.server.process import ServerProcess

PAIRS: list[tuple[Any, dict[str, Any] | None]] = [
    (7, {"cart": [1, 2]}), (None, {"anon": True}), ("alice", None), (7, {"n": 3}), (None, {"x": "y" * 90}),
]


def check(store: SessionStore, tokens: list[str], started: float) -> None:
    assert len(tokens) == len(PAIRS) == len(set(tokens))
    for token, (identity, data) in zip(tokens, PAIRS):
        got = store.get(token)
        assert got is not None and got.identity == identity and (got.data or None) == data
        assert started + 590 <= got.expires_at <= time.time() + 601  # the ttl given, not the store's
    assert sorted(s.data["n"] if s.data and "n" in s.data else 0 for s in store.sessions_of(7)) == [0, 3]


@pytest.mark.parametrize("layout", ["json", "dense"])
def test_each_session_gets_its_own_data_across_batches(client: redis.Redis, layout: str) -> None:
    store = SessionStore(client, namespace="each", layout=layout, ttl=86_400)
    started = time.time()
    tokens = store.create_each(iter(PAIRS), 600, batch=2)  # a generator, 3 batches
    check(store, tokens, started)


def test_the_async_twin_stores_the_same(client: redis.Redis, server: ServerProcess) -> None:
    async def main() -> list[str]:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            return await AsyncSessionStore(aclient, namespace="each", layout="dense", ttl=86_400).create_each(
                PAIRS, 600, batch=2)
        finally:
            await aclient.aclose()

    started = time.time()
    tokens = asyncio.run(main())
    check(SessionStore(client, namespace="each", layout="dense", ttl=86_400), tokens, started)
