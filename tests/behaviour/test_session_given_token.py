"""create(token=...): a session stored under a token it was given (moved in from another
store under its old cookie value; Django's save(must_create=True) with a key). A live
session holding that token is never overwritten: SessionExists, nothing written, checked
and stored in one atomic step (lua/put_new.lua) on every layout. A dead session's token
may be reused, its old payload parts removed. Before: the second create overwrote the
first, so two requests moving in the same session could lose the first one's changes.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from densekv import SessionExists, SessionStore
from densekv.sessions.meta import LAYOUTS  # every session layout, from its registry
from densekv.tools.server.process import ServerProcess
from tests.behaviour.test_reliability_limits import dump_all, store_for
from tests.behaviour.test_sessions import Clock

TOKEN = "k2x9ab7qv0m1n8c3d4e5f6g7h8i9j0l1"  # Django's 32 chars of [a-z0-9]




@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_live_token_is_never_overwritten(client: redis.Redis, layout: str) -> None:
    store = store_for(client, layout)
    assert store.create(5, {"cart": [1]}, ttl=600, token=TOKEN) == TOKEN
    before = dump_all(client)
    with pytest.raises(SessionExists):
        store.create(None, {"other": "x" * 500}, ttl=600, token=TOKEN)  # out of line if it were stored
    assert dump_all(client) == before
    got = store.get(TOKEN)
    assert got is not None and got.identity == 5 and got.data == {"cart": [1]}


@pytest.mark.parametrize("layout", ["dense", "zset"])  # the others: the server expires them itself
def test_a_dead_sessions_token_may_be_given_again(client: redis.Redis, layout: str) -> None:
    """A dead record not yet swept: its token is free again, and its payload's key goes."""
    clock = Clock()
    store = store_for(client, layout, clock=clock)
    store.create(None, {"big": "y." * 400}, ttl=10, token=TOKEN)  # payload outside the record
    clock.now += 11
    assert store.get(TOKEN) is None
    assert store.create(7, {"n": 1}, ttl=600, token=TOKEN) == TOKEN
    got = store.get(TOKEN)
    assert got is not None and got.identity == 7 and got.data == {"n": 1}
    layout_ = store._core.layout  # type: ignore[attr-defined]
    assert not list(client.scan_iter(match=f"{layout_.namespace}:so:*"))  # the dead payload's key went
    assert sum(client.hlen(k) for k in client.scan_iter(match=f"{layout_.namespace}:sc:*")) == 0


def test_two_movers_in_one_wins_and_the_other_hears_so(client: redis.Redis, server: ServerProcess) -> None:
    """Eight threads create the same given token at once: exactly one stores it, the other
    seven get SessionExists, and the stored data is the winner's."""
    results: list[Any] = []
    barrier = threading.Barrier(8)

    def mover(i: int) -> None:
        own = SessionStore(server.client(), layout="dense", expected_sessions=100)
        barrier.wait()
        try:
            own.create(None, {"by": i}, ttl=600, token=TOKEN)
            results.append(i)
        except SessionExists:
            results.append(None)

    threads = [threading.Thread(target=mover, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r is not None]
    assert len(results) == 8 and len(winners) == 1
    got = SessionStore(client, layout="dense", expected_sessions=100).get(TOKEN)
    assert got is not None and got.data == {"by": winners[0]}
