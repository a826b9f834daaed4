"""The two drivers of every web shell's session flows: `run` against a sync SessionStore
(Flask, Django's sync views), `arun` against an AsyncSessionStore (Quart, Starlette,
Litestar, aiohttp, Django's async views). A flow (integrations/calls.py) yields one typed
call at a time and is sent its result; what a call does is calls.perform's, once for both.

Errors are thrown into the flow, at the yield of the call that raised, as densekv/flows.py's
drivers do with a round trip's: a flow may handle one (Django's engine writes data the store
refuses once more in its serialized form, a move-in takes SessionExists as another request's
move-in), and a flow that does not raises it out of the driver unchanged, its `finally`
clauses run at once. Every shell is driven so.

`store`: the store, or a function of no arguments that gives it (called at the first call
that needs the store, so a flow that makes none, or only calls an old source, opens none).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from densekv.integrations.calls import StoreCall, perform

if TYPE_CHECKING:
    from densekv.sessions.store import AsyncSessionStore, SessionStore

__all__ = ["Flow", "arun", "run"]

T = TypeVar("T")
#: a web-session flow: yields calls, is sent each one's result, returns a T
Flow = Generator[StoreCall, Any, T]


def run(flow: Flow[T], store: SessionStore | Callable[[], SessionStore]) -> T:
    """Run `flow` to its result against a sync store."""
    opened: SessionStore | None = None if callable(store) else store
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            if opened is None and call.on_store:
                assert callable(store)
                opened = store()
            result = perform(opened, call)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: closed, not left to warn
                raise TypeError(f"{call!r} needs the async driver (an async store or source)")
        except Exception as exc:  # noqa: BLE001 - thrown into the flow (module docstring)
            result, error = None, exc


async def arun(flow: Flow[T], store: AsyncSessionStore | Callable[[], Awaitable[AsyncSessionStore]]) -> T:
    """Run `flow` to its result against an async store (awaiting each call that does I/O)."""
    opened: AsyncSessionStore | None = None if callable(store) else store
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            if opened is None and call.on_store:
                assert callable(store)
                opened = await store()
            result = perform(opened, call)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # noqa: BLE001 - thrown into the flow (module docstring)
            result, error = None, exc
