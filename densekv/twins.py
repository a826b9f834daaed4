"""Sync classes and their asyncio twins document each operation once.

Every sync class has an async twin with the same operations (tests/unit/test_twins.py);
the docstring is written on the sync method, and `share_docstrings` gives it to the twin's
method that has none, so `help()` and the API reference show it on both.

They also open the same way (docs/api.md, "When densekv talks to the server"): a
constructor does no I/O; the first operation, or `open()` called when the application
chooses (at boot, to learn there that the server is wrong or unreachable), opens the object
once - probes the server and reads or writes its metadata. `OpensOnce` is that step for a
sync class (one open even when threads race to it), `AsyncOpensOnce` for a twin (one open
even when tasks race to it); the kind says what opening is (`_open_core`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["AsyncOpensOnce", "OpensOnce", "share_docstrings"]

K = TypeVar("K")


def share_docstrings(sync: type[Any], twin: type[Any]) -> None:
    """Give each public method of `twin` without a docstring the docstring of `sync`'s."""
    for name, member in vars(twin).items():
        if name.startswith("_") or not callable(member) or member.__doc__:
            continue
        doc = getattr(getattr(sync, name, None), "__doc__", None)
        if doc:
            member.__doc__ = doc


class OpensOnce(Generic[K]):
    """A sync class's opening: `_core` is None until the first operation (or `open()`)
    runs `_open_core` (the I/O), under a per-object lock, so threads racing to the first
    operation open it once. A failed open leaves it unopened: the next operation tries again.
    The class sets `_core = None` and `_opening = threading.Lock()` in its constructor."""

    _core: K | None
    _opening: threading.Lock

    def _open_core(self) -> K:
        raise NotImplementedError

    def _opened(self) -> K:
        """The open core, opening it first if need be."""
        core = self._core
        if core is None:
            with self._opening:
                core = self._core
                if core is None:
                    core = self._core = self._open_core()
        return core

    def open(self) -> Self:
        """Talk to the server now (once; later calls return at once): probe it and open
        this object as its first operation would. Returns the object, so
        `store = SessionStore(client).open()` fails on the spot if the server is wrong or
        unreachable (ServerUnavailable, a redis-py ConnectionError, ServerTooOld, ...)."""
        self._opened()
        return self


class AsyncOpensOnce(Generic[K]):
    """An asyncio twin's opening: `_core` is None until the first operation (or
    `await open()`) awaits `_open_core`, under an asyncio.Lock made on first need, so
    tasks racing to the first operation open it once. A failed (or cancelled) open leaves
    it unopened. The class sets `_core = None` in its constructor."""

    _core: K | None
    _opening: asyncio.Lock | None = None
    _not_open = "not open yet: await it.open() (or any operation) first"

    async def _open_core(self) -> K:
        raise NotImplementedError

    async def _ready(self) -> K:
        core = self._core
        if core is None:
            if self._opening is None:  # no await since the check: one lock per object
                self._opening = asyncio.Lock()
            async with self._opening:
                core = self._core
                if core is None:
                    core = self._core = await self._open_core()
        return core

    def _core_if_open(self) -> K:
        """The core, for what cannot await (properties): RuntimeError before it is open."""
        if self._core is None:
            raise RuntimeError(self._not_open)
        return self._core

    async def open(self) -> Self:
        await self._ready()
        return self
