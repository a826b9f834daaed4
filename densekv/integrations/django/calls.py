"""The calls an engine flow yields, and the two drivers that run them: every operation of
the engine is written once as a generator (engine.py) and run against the sync densekv store
or, awaited, against the async one of the running event loop."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

from densekv.integrations.decide import Call  # a flow's calls: the save decision's too
from densekv.integrations.django.backend import Backend
from densekv.sessions import AsyncSessionStore

__all__ = ["Call", "Flow", "adrive", "drive"]

T = TypeVar("T")

Flow = Generator[Call, Any, T]


class _Stepper:
    """Feeds a flow the outcome of its last call (a result, or an error thrown into it) and
    hands back its next call; `value` is what the flow returned once `next` says None."""

    def __init__(self, flow: Flow[Any]) -> None:
        self.flow = flow
        self.result: Any = None
        self.error: BaseException | None = None
        self.value: Any = None

    def next(self) -> Call | None:
        try:
            return self.flow.send(self.result) if self.error is None else self.flow.throw(self.error)
        except StopIteration as done:
            self.value = done.value
            return None

    def done(self, result: Any) -> None:
        self.result, self.error = result, None

    def failed(self, error: BaseException) -> None:
        self.result, self.error = None, error


def drive(flow: Flow[T], backend: Backend) -> T:
    """Run a flow against the sync store (the calls a flow yields, in order)."""
    steps = _Stepper(flow)
    while (call := steps.next()) is not None:
        try:
            target = backend.sync() if call.on is None else call.on
            steps.done(getattr(target, call.name)(*call.args, **call.kwargs))
        except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
            steps.failed(exc)
    return steps.value  # type: ignore[no-any-return]


async def adrive(flow: Flow[T], backend: Backend) -> T:
    """Run a flow against the async store of the running loop, opened at the first call that
    needs it; with only a sync client configured, the sync driver in a thread."""
    if not backend.real_async:
        return await sync_to_async(drive)(flow, backend)
    store: AsyncSessionStore | None = None
    steps = _Stepper(flow)
    while (call := steps.next()) is not None:
        try:
            if call.on is not None:
                result = await getattr(call.on, "a" + call.name)(*call.args, **call.kwargs)
            else:
                store = store or await backend.for_loop()
                method = getattr(store, call.name)
                result = method(*call.args, **call.kwargs) if call.plain else await method(
                    *call.args, **call.kwargs)
            steps.done(result)
        except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
            steps.failed(exc)
    return steps.value  # type: ignore[no-any-return]
