"""One async session store per running event loop, shared by the asyncio backends.

A redis.asyncio client belongs to the event loop that first used it ("Future attached to a
different loop" on any other), and web stacks run more than one loop per process:
Starlette's TestClient without `with` runs each request on a new loop, Django runs async
views on per-thread loops under WSGI. StoresPerLoop builds one store per loop from a
factory, parks a generator on that loop whose cleanup closes the store's client when the
loop shuts down (asyncio.run, uvicorn and anyio's portal call shutdown_asyncgens), and
forgets stores of closed loops. Which store a shell's request gets (a URL, a store, a
function) is integrations/stores.py's `Stores`, which builds this for a URL or a function.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from densekv.sessions.store import AsyncSessionStore

__all__ = ["StoresPerLoop", "closing"]


async def closing(client: Any) -> AsyncIterator[None]:
    """Parked at its yield for the life of an event loop: the loop's shutdown_asyncgens()
    closes this generator, and the loop's client with it."""
    try:
        yield
    finally:
        await client.aclose()


class StoresPerLoop:
    """`await current()`: the store of the running loop, made by `factory` there once.
    `made` / `gone`, if given, are called with each store once it is made (in its loop) and
    once it is forgotten (its loop closed): what the Django engine's densekv_each_store
    hands an observer such as the metrics'."""

    def __init__(self, factory: Callable[[], AsyncSessionStore],
                 made: Callable[[AsyncSessionStore], Any] | None = None,
                 gone: Callable[[AsyncSessionStore], Any] | None = None) -> None:
        self.factory = factory
        self.made, self.gone = made, gone
        self._lock = threading.Lock()
        self._stores: dict[asyncio.AbstractEventLoop, tuple[AsyncSessionStore, Any]] = {}

    def alive(self) -> list[AsyncSessionStore]:
        """The stores of loops not closed yet."""
        with self._lock:
            return [store for loop, (store, _) in self._stores.items() if not loop.is_closed()]

    async def current(self) -> AsyncSessionStore:
        loop = asyncio.get_running_loop()
        entry = self._stores.get(loop)  # one dict read, atomic: the lock guards the changes below
        if entry is None:
            store = self.factory()
            keeper = closing(store.client)
            await keeper.__anext__()  # runs to its yield at once: registered with this loop
            entry = (store, keeper)
            with self._lock:
                closed = [old for old in self._stores if old.is_closed()]
                forgotten = [self._stores.pop(old)[0] for old in closed]  # their clients closed with them
                self._stores[loop] = entry
            for old_store in forgotten:
                if self.gone is not None:
                    self.gone(old_store)
            if self.made is not None:
                self.made(store)
        return entry[0]

