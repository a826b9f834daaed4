"""Which store serves a request (densekv/integrations/stores.py, `Stores`), the one rule of
every web shell, without a server: the stores here are built on redis-py clients that are
never used, and a constructor does no I/O (docs/api/densekv.md, "When densekv talks to the
server"), so nothing connects.

The table: what a shell is given (url / store / function, or a mistake) and what it gets
(the store it was given, one built per loop or process, or the error at setup). Then the
lifetimes: two event loops get two stores, a closed loop's store is forgotten and its client
closed, a store given serves one loop (RuntimeError on another, unless any_loop), a sync
store is built once per process and again in a forked child.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from densekv.errors import InvalidArgument
from densekv.integrations.stores import Stores
from densekv.sessions.store import AsyncSessionStore, SessionStore

URL = "redis://127.0.0.1:1/0"  # nothing listens there: nothing may connect

closed: list[Any] = []  # the clients whose aclose() ran


class Recorded(aredis.Redis):
    """A redis.asyncio client that records its aclose() (then closes as redis-py does)."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        closed.append(self)
        await super().aclose(close_connection_pool)


def astore(namespace: str = "t") -> AsyncSessionStore:
    return AsyncSessionStore(Recorded.from_url(URL), namespace=namespace)


def sstore(namespace: str = "t") -> SessionStore:
    return SessionStore(redis.Redis.from_url(URL), namespace=namespace)


GIVEN_ASYNC, GIVEN_SYNC = astore(), sstore()


def in_a_loop(stores: Stores[Any]) -> Any:
    """The store `stores` gives a request on a new event loop (closed when it returns)."""
    return asyncio.run(stores.current())


# -- the table: what a shell is given, and what it gets ------------------------------------------
# (kind, store argument, keywords, what comes out: "given", "built", or (error, message))
ROWS: list[tuple[str, type[Any], Any, dict[str, Any], Any]] = [
    ("async store", AsyncSessionStore, GIVEN_ASYNC, {}, "given"),
    ("async function", AsyncSessionStore, astore, {}, "built"),
    ("async url", AsyncSessionStore, None, {"url": URL, "url_arg": "url="}, "built"),
    ("sync store", SessionStore, GIVEN_SYNC, {}, "given"),
    ("sync function", SessionStore, sstore, {}, "built"),
    ("sync url", SessionStore, None, {"url": URL}, "built"),
    ("neither, with a url form", AsyncSessionStore, None, {"url_arg": "url="},
     (TypeError, r"^Shell needs url= or store= \(one of them\)$")),
    ("both", AsyncSessionStore, astore, {"url": URL, "url_arg": "url="},
     (TypeError, r"^Shell needs url= or store= \(one of them\)$")),
    ("both, no url form named", SessionStore, sstore, {"url": URL},
     (TypeError, "Shell needs url= or store=")),
    ("neither, no url form", AsyncSessionStore, None, {},
     (TypeError, "^Shell takes an AsyncSessionStore or a function returning one, not NoneType$")),
    ("the wrong type", AsyncSessionStore, object(), {},
     (TypeError, "^Shell takes an AsyncSessionStore or a function returning one, not object$")),
    ("a sync store to an async shell", AsyncSessionStore, GIVEN_SYNC, {},
     (TypeError, "takes an AsyncSessionStore .* not SessionStore")),
    ("an async store to a sync shell", SessionStore, GIVEN_ASYNC, {},
     (TypeError, "takes a SessionStore .* not AsyncSessionStore")),
    ("not a url scheme", AsyncSessionStore, None, {"url": "http://127.0.0.1/0"},
     (InvalidArgument, "^Shell: url 'http://127.0.0.1/0' is not a URL")),
    ("a port that is no number", SessionStore, None, {"url": "redis://:s3cret@h:port/0"},
     (InvalidArgument, "^Shell: url 'redis://:\\*\\*\\*@h:port/0' is not a URL")),
]


@pytest.mark.parametrize(("kind", "store", "keywords", "outcome"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_what_a_shell_is_given_and_what_it_gets(kind: type[Any], store: Any, keywords: dict[str, Any],
                                                outcome: Any) -> None:
    if isinstance(outcome, tuple):
        error, message = outcome
        with pytest.raises(error, match=message):
            Stores("Shell", kind, store, **keywords)
        return
    stores = Stores("Shell", kind, store, **keywords)
    assert stores.alive() == []  # nothing built, nothing served: constructors do no I/O
    got = in_a_loop(stores) if kind is AsyncSessionStore else stores.get()
    assert isinstance(got, kind)
    assert (got is store) == (outcome == "given")
    if outcome == "built" and kind is SessionStore:
        assert stores.get() is got and stores.alive() == [got]  # one per process


def test_a_url_gives_its_options_to_the_client_and_the_store() -> None:
    stores = Stores("Shell", SessionStore, url=URL, store_options={"namespace": "web", "ttl": 60},
                    client_options={"socket_timeout": 1.5})
    store = stores.get()
    assert store.namespace == "web" and store._args["ttl"] == 60  # ttl itself would open the store
    assert store.client.connection_pool.connection_kwargs["socket_timeout"] == 1.5
    assert store.client.connection_pool.connection_kwargs["port"] == 1
    loop_stores = Stores("Shell", AsyncSessionStore, url=URL, store_options={"namespace": "web"})
    made = in_a_loop(loop_stores)
    assert made.namespace == "web" and isinstance(made.client, aredis.Redis)


@pytest.mark.parametrize("kind", [AsyncSessionStore, SessionStore])
def test_a_function_returning_the_wrong_kind_is_refused_when_it_is_called(kind: type[Any]) -> None:
    stores = Stores("Shell", kind, lambda: "a store")
    with pytest.raises(TypeError, match=f"the store factory of Shell returned a str, not an? {kind.__name__}"):
        in_a_loop(stores) if kind is AsyncSessionStore else stores.get()


def test_each_kind_is_asked_for_its_own_way() -> None:
    with pytest.raises(TypeError, match="await current"):
        Stores("Shell", AsyncSessionStore, astore).get()
    with pytest.raises(TypeError, match="get()"):
        in_a_loop(Stores("Shell", SessionStore, sstore))


# -- event loops ------------------------------------------------------------------------------
def recorder() -> tuple[list[str], Callable[[Any], None], Callable[[Any], None]]:
    told: list[str] = []
    return told, lambda s: told.append(f"made {s.namespace}"), lambda s: told.append(f"gone {s.namespace}")


def test_two_event_loops_get_two_stores_and_a_closed_loops_store_goes_with_its_client() -> None:
    numbers = iter(range(100))
    told, made, gone = recorder()
    stores = Stores("Shell", AsyncSessionStore, lambda: astore(f"n{next(numbers)}"), made=made, gone=gone)

    async def twice() -> AsyncSessionStore:
        first = await stores.current()
        assert await stores.current() is first  # one store per loop
        assert stores.alive() == [first]
        return first

    closed.clear()
    one = asyncio.run(twice())
    assert closed == [one.client]  # closed when asyncio.run shut its loop down
    assert stores.alive() == []  # its loop is closed
    two = asyncio.run(twice())
    assert two is not one and closed == [one.client, two.client]
    assert told == ["made n0", "gone n0", "made n1"]  # forgotten when the next loop made its own


def test_a_store_given_serves_the_loop_it_first_served_and_says_so_on_another() -> None:
    store = astore("given")
    told, made, gone = recorder()
    stores = Stores("Shell", AsyncSessionStore, store, url_arg="url=", made=made, gone=gone)
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(stores.current()) is store
        assert loop.run_until_complete(stores.current()) is store
        with pytest.raises(RuntimeError, match=r"^this Shell was given one AsyncSessionStore, .*"
                                               r"TestClient without `with`.*give it url= or a function "
                                               r"returning a store, and densekv builds one store per loop$"):
            in_a_loop(stores)
    finally:
        loop.close()
    assert told == ["made given"] and stores.alive() == [store]  # the caller's: never gone
    assert closed.count(store.client) == 0  # nor closed
    without_url = Stores("Shell", AsyncSessionStore, store)
    in_a_loop(without_url)
    with pytest.raises(RuntimeError, match="give it a function returning a store instead"):
        in_a_loop(without_url)


def test_any_loop_lets_a_given_store_serve_every_loop() -> None:
    """Django's async_client: shared by every loop, the caller's to keep on one."""
    store = astore("shared")
    told, made, gone = recorder()
    stores = Stores("Shell", AsyncSessionStore, store, any_loop=True, made=made, gone=gone)
    assert in_a_loop(stores) is store and in_a_loop(stores) is store
    assert told == ["made shared"]


# -- processes --------------------------------------------------------------------------------
def in_a_child(work: Callable[[], Any]) -> Any:
    """`work()` run in a forked child; what it returned, pickled back."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork in a threaded process (3.12)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, pickle.dumps(work()))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        answer = reader.read()
    os.waitpid(pid, 0)
    return pickle.loads(answer)


def test_a_sync_store_is_built_once_per_process_and_again_after_a_fork() -> None:
    numbers = iter(range(100))
    told, made, gone = recorder()
    stores = Stores("Shell", SessionStore, lambda: sstore(f"n{next(numbers)}"), made=made, gone=gone)
    parent = stores.get()
    assert stores.get() is parent and told == ["made n0"]

    def child() -> tuple[str, bool, list[str], list[str]]:
        store = stores.get()
        return store.namespace, stores.get() is store, [s.namespace for s in stores.alive()], told

    assert in_a_child(child) == ("n1", True, ["n1"], ["made n0", "gone n0", "made n1"])
    assert stores.get() is parent and told == ["made n0"]  # the parent's is its own still


def test_a_sync_store_given_is_kept_after_a_fork() -> None:
    store = sstore("given")
    stores = Stores("Shell", SessionStore, store)
    assert stores.get() is store
    assert in_a_child(lambda: stores.get().namespace) == "given"


def test_close_closes_only_a_client_built_from_the_url() -> None:
    shut: list[str] = []

    class Counted(redis.Redis):
        def close(self) -> None:
            shut.append("closed")
            super().close()

    given = Stores("Shell", SessionStore, lambda: SessionStore(Counted.from_url(URL), namespace="t"))
    given.get()
    given.close()
    assert shut == []  # a function's store: its client is the caller's
    from_url = Stores("Shell", SessionStore, url=URL)
    from_url.close()  # nothing built yet: nothing to close
    store = from_url.get()
    disconnected: list[bool] = []
    store.client.connection_pool.disconnect = lambda *a, **k: disconnected.append(True)  # type: ignore[method-assign]
    from_url.close()
    assert disconnected == [True]
