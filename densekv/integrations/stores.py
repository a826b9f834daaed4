"""Which densekv store serves a request: the one rule of every web shell (issue 31), held by
`Stores`. A shell is given one of three things and asks its `Stores` for the store:

  * url= (with store_options for the store, client_options for densekv.connect.from_url):
    checked when the shell is set up (urls.check_url: a wrong URL fails at setup in every
    shell), its client and store built on first use, never at import or app creation;
  * store=<a store>: used as it is; the store and its client stay the caller's;
  * store=<a function of no arguments returning a store>: called where a store is needed,
    in the process or the event loop that will use it.

A sync shell (Flask, Django's sync views) calls `get()`: one store per process, built again
in a forked child (gunicorn --preload forks after the app is made; a client's sockets are
not shared across processes). An async shell (Quart, Starlette, Litestar, aiohttp, Django's
async views) awaits `current()`: one store per running event loop (loops.StoresPerLoop: its
client closed with the loop, a closed loop's store forgotten), as a redis.asyncio client
serves only the loop that first used it. A store given directly serves the one loop it first
served, and a request on another raises RuntimeError saying how to get a store per loop;
`any_loop=True` lifts that rule for Django's async_client, documented as the caller's to
keep on one loop (docs/django.md). A function's store of the wrong kind is a TypeError, in
both cases.

`made` / `gone`, if given, are called with each store once it is made (a given one: once it
first serves) and once it is forgotten (its loop closed, or a new one was built in a forked
child): what Django's densekv_each_store hands observers. Nothing here does I/O until a
store is asked for, and then only what a client's constructor does (none for redis://).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from densekv.connect import from_url
from densekv.integrations.loops import StoresPerLoop
from densekv.integrations.urls import check_url
from densekv.sessions.store import AsyncSessionStore, SessionStore

__all__ = ["Stores", "url_factory"]

S = TypeVar("S", bound=SessionStore | AsyncSessionStore)


def _a(kind: type) -> str:
    return ("an " if kind.__name__[:1] in "AEIOU" else "a ") + kind.__name__


def url_factory(url: str, kind: type[S], where: str, store_options: Mapping[str, Any] | None = None,
                client_options: Mapping[str, Any] | None = None) -> Callable[[], S]:
    """A function building a `kind` store (SessionStore or AsyncSessionStore) on a new client
    for `url`; the URL is checked now (InvalidArgument naming `where`), not at the first
    request."""
    check_url(url, where)
    options, client = dict(store_options or {}), dict(client_options or {})
    asynchronous = issubclass(kind, AsyncSessionStore)

    def build() -> S:
        return kind(from_url(url, asyncio=asynchronous, **client), **options)

    return build


class Stores(Generic[S]):
    """The store of this process (`get()`) or of the running event loop (`await
    current()`) for one shell (`who`, named in errors) of stores of `kind`. `store`: a store
    or a function returning one; or `url` with its options (exactly one of the two).
    `url_arg`: how this shell's users give a URL (say "url="), None if they cannot; errors
    name it."""

    def __init__(self, who: str, kind: type[S], store: S | Callable[[], S] | None = None, *,
                 url: str | None = None, url_arg: str | None = None,
                 store_options: Mapping[str, Any] | None = None,
                 client_options: Mapping[str, Any] | None = None, any_loop: bool = False,
                 made: Callable[[S], Any] | None = None,
                 gone: Callable[[S], Any] | None = None) -> None:
        self.who, self.url_arg, self.any_loop = who, url_arg, any_loop
        self.kind: type[S] = kind
        self.asynchronous = issubclass(kind, AsyncSessionStore)
        self.made: Callable[[S], Any] | None = made
        self.gone: Callable[[S], Any] | None = gone
        both, neither = url is not None and store is not None, url is None and store is None
        if both or (neither and url_arg is not None):  # neither, with no URL form: the type error
            raise TypeError(f"{who} needs {url_arg or 'url='} or store= (one of them)")
        self.given: S | None = None
        self.factory: Callable[[], S] | None = None
        self.owns_clients = url is not None  # what close() closes
        if url is not None:
            self.factory = url_factory(url, kind, f"{who}: url", store_options, client_options)
        elif isinstance(store, kind):
            self.given = store
        elif callable(store):
            self.factory = store
        else:
            raise TypeError(f"{who} takes {_a(kind)} or a function returning one, "
                            f"not {type(store).__name__}")
        self._lock = threading.Lock()
        self._served = False  # a given store: it has served (made was called)
        self._home: asyncio.AbstractEventLoop | None = None  # a given async store: its loop
        self._process: tuple[S, int] | None = None  # a sync store made here, and its pid
        self._per_loop: StoresPerLoop | None = None
        if self.factory is not None and self.asynchronous:
            self._per_loop = StoresPerLoop(cast(Callable[[], AsyncSessionStore], self._build),
                                           made=cast(Callable[[AsyncSessionStore], Any] | None, made),
                                           gone=cast(Callable[[AsyncSessionStore], Any] | None, gone))

    def _build(self) -> S:
        assert self.factory is not None
        store = self.factory()
        if not isinstance(store, self.kind):
            raise TypeError(f"the store factory of {self.who} returned {_a(type(store))}, "
                            f"not {_a(self.kind)}")
        return store

    def _first_serve(self) -> None:
        """A given store's first use: `made` is told of it once."""
        with self._lock:
            first, self._served = not self._served, True
        if first and self.made is not None:
            assert self.given is not None
            self.made(self.given)

    # -- sync: one store per process -------------------------------------------------------
    def get(self) -> S:
        """The store of this process: the one given, or one built here (again after a fork)."""
        if self.asynchronous:
            raise TypeError(f"{self.who} holds AsyncSessionStores: await current()")
        if self.given is not None:
            if not self._served:
                self._first_serve()
            return self.given
        entry, pid = self._process, os.getpid()
        if entry is not None and entry[1] == pid:
            return entry[0]
        with self._lock:
            old = self._process
            if old is None or old[1] != pid:
                self._process = (self._build(), pid)
            entry = self._process
        assert entry is not None
        if old is not entry:
            if old is not None and self.gone is not None:
                self.gone(old[0])  # the parent's, copied into this child
            if self.made is not None:
                self.made(entry[0])
        return entry[0]

    # -- async: one store per running event loop -------------------------------------------
    async def current(self) -> S:
        """The store of the running event loop: one made in it from a function or a URL
        (its client closed with the loop), or the one given if this loop is its own."""
        if self._per_loop is not None:
            return cast(S, await self._per_loop.current())
        if not self.asynchronous:
            raise TypeError(f"{self.who} holds SessionStores: get()")
        assert self.given is not None
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._home is None:
                self._home = loop
        if self._home is not loop and not self.any_loop:
            fix = f"{self.url_arg} or a function returning a store" if self.url_arg else (
                "a function returning a store instead")
            raise RuntimeError(
                f"this {self.who} was given one {self.kind.__name__}, whose redis.asyncio client "
                "serves the event loop it first served, and this request runs on another (a "
                f"TestClient without `with`, for one, runs each request on a new loop): give it "
                f"{fix}, and densekv builds one store per loop")
        if not self._served:
            self._first_serve()
        return self.given

    # -- what is held ----------------------------------------------------------------------
    def alive(self) -> list[S]:
        """The stores in use: the one given once it has served, this process's, or those of
        loops not closed yet."""
        if self._per_loop is not None:
            return cast(list[S], self._per_loop.alive())
        if self.given is not None:
            return [self.given] if self._served else []
        entry = self._process
        return [entry[0]] if entry is not None and entry[1] == os.getpid() else []

    def close(self) -> None:
        """Close the client of this process's store if it was built here from a URL (a store
        given, or a function's, stays the caller's; a loop's closes with its loop)."""
        entry = self._process
        if self.owns_clients and entry is not None and entry[1] == os.getpid():
            entry[0].client.close()
