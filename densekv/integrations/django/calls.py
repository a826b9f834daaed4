"""The calls an engine flow yields, and the two drivers that run them: every operation of
the engine is written once as a generator (engine.py) and run against the sync densekv store
or, awaited, against the async one of the running event loop."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

from densekv.integrations.django.backend import Backend
from densekv.sessions import AsyncSessionStore

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One store call a flow asks for. `on` None: the densekv store (the async store has
    the same method, awaited); otherwise an object whose async twin is "a" + name.
    `plain`: no I/O, called as is by both drivers (due_for_touch)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    on: Any = None
    plain: bool = False


Flow = Generator[Call, Any, T]


def drive(flow: Flow[T], backend: Backend) -> T:
    """Run a flow against the sync store (the calls a flow yields, in order)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            target = backend.sync() if call.on is None else call.on
            result, error = getattr(target, call.name)(*call.args, **call.kwargs), None
        except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
            result, error = None, exc


async def adrive(flow: Flow[T], backend: Backend) -> T:
    """Run a flow against the async store of the running loop, opened at the first call that
    needs it; with only a sync client configured, the sync driver in a thread."""
    if not backend.real_async:
        return await sync_to_async(drive)(flow, backend)
    store: AsyncSessionStore | None = None
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            if call.on is not None:
                result = await getattr(call.on, "a" + call.name)(*call.args, **call.kwargs)
            else:
                store = store or await backend.for_loop()
                method = getattr(store, call.name)
                result = method(*call.args, **call.kwargs) if call.plain else await method(
                    *call.args, **call.kwargs)
            error = None
        except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
            result, error = None, exc
