"""Run a save flow of densekv/integrations/decide.py (`carry(decide(held), token)`) against a
session store: each Call it yields becomes the store method of that name, its result sent
back. The sync driver serves Flask, the async one Starlette and aiohttp (Django's engine has
its own drivers, django/calls.py, for the flows it writes around these)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from densekv.integrations.decide import Call

T = TypeVar("T")


def run(flow: Generator[Call, Any, T], store: Any) -> T:
    result: Any = None
    while True:
        try:
            call = flow.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result = getattr(store, call.name)(*call.args, **call.kwargs)


async def arun(flow: Generator[Call, Any, T], store: Any) -> T:
    result: Any = None
    while True:
        try:
            call = flow.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result = await getattr(store, call.name)(*call.args, **call.kwargs)
