"""Every sync class and its asyncio twin expose the same operations with the same parameters.

The twins are thin shells over the same flows (README, "For developers"); this keeps a new
method from landing on one shell only. Both open the same way, and both have `open()`
(docs/api/densekv.md, "When densekv talks to the server"); `ready()` is the async twins'
older name for it, kept (it returns the opened core).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import densekv

PAIRS = [
    (densekv.SessionStore, densekv.AsyncSessionStore),
    (densekv.CompactSet, densekv.AsyncCompactSet),
    (densekv.SetFamily, densekv.AsyncSetFamily),
    (densekv.CompactMap, densekv.AsyncCompactMap),
    (densekv.MapBatch, densekv.AsyncMapBatch),
    (densekv.BloomFilter, densekv.AsyncBloomFilter),
]
ASYNC_ONLY = {"ready"}


def public(cls: type) -> dict[str, Any]:
    return {n: m for n, m in inspect.getmembers(cls) if not n.startswith("_")}


def parameters(member: Any) -> list[tuple[str, Any, Any]] | None:
    if isinstance(member, property) or not callable(member):
        return None
    sig = inspect.signature(member)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_the_async_twin_has_every_operation_of_the_sync_class(sync: type, twin: type) -> None:
    mine, theirs = public(sync), public(twin)
    assert sorted(set(mine) - set(theirs)) == []
    assert sorted(set(theirs) - set(mine) - ASYNC_ONLY) == []


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_each_operation_takes_the_same_parameters(sync: type, twin: type) -> None:
    mine, theirs = public(sync), public(twin)
    differ = {n: (parameters(mine[n]), parameters(theirs[n])) for n in set(mine) & set(theirs)
              if parameters(mine[n]) != parameters(theirs[n])}
    assert differ == {}
    if sync is not densekv.MapBatch:  # made by map.batch(), not by users
        assert parameters(sync.__init__) == parameters(twin.__init__)


@pytest.mark.parametrize(("sync", "twin"), [p for p in PAIRS if p[0] is not densekv.MapBatch],
                         ids=[s.__name__ for s, _ in PAIRS if s is not densekv.MapBatch])
def test_both_open_the_same_way(sync: type, twin: type) -> None:
    """open() on each (sync: OpensOnce, the twin: AsyncOpensOnce, one lock per object); the
    twin's is a coroutine function. BloomFilter's `open` on the class opens a stored filter."""
    from densekv.twins import AsyncOpensOnce, OpensOnce

    assert issubclass(sync, OpensOnce) and issubclass(twin, AsyncOpensOnce)
    assert not issubclass(sync, AsyncOpensOnce) and not issubclass(twin, OpensOnce)
    assert inspect.iscoroutinefunction(twin._open_core)
    assert not inspect.iscoroutinefunction(sync._open_core)
