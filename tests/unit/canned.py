"""A canned executor for unit tests of flows: it answers each command from a function
(args -> raw reply, or an Exception for an error reply) and records every round trip. It
stands for the server only where a test feeds a flow (a sans-I/O generator) its replies;
behaviour against real servers is tested in tests/behaviour."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from densekv.plan import Command, Plan


class Canned:
    """An executor answering from `answer(args) -> raw reply or Exception`, recording each
    round trip; an error reply raises after the whole round trip, like a real executor."""

    def __init__(self, answer: Callable[[tuple[Any, ...]], Any]) -> None:
        self.answer = answer
        self.trips: list[list[tuple[Any, ...]]] = []
        self.client = None

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        sent = [st.args for plan in plans for st in plan.steps if isinstance(st, Command)]
        self.trips.append(sent)
        results, error = [], None
        for plan in plans:
            raws = [self.answer(st.args) for st in plan.steps if isinstance(st, Command)]
            error = error or next((r for r in raws if isinstance(r, Exception)), None)
            results.append(None if error else plan.decode(raws))
        if error is not None:
            raise error
        return results


class ACanned(Canned):
    async def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:  # type: ignore[override]
        return Canned.run_many(self, plans)
