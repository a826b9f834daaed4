"""The deadlines of an event loop's asyncio round trips (densekv/wire.py, aexchange): the
client's socket_timeout, kept by one timer per loop instead of an asyncio.timeout per
round trip.

Why it exists: asyncio.timeout arms and cancels a timer handle on every round trip (a
Timeout, a TimerHandle pushed on the loop's heap, a cancelled one to pop), about 4.5 us, a
tenth of an asyncio round trip's client CPU (issue 30). Here a round trip enters its
deadline in a dict and leaves it; the one timer, armed for the earliest deadline, cancels
the tasks past theirs, and the round trip turns that cancellation into redis.TimeoutError.
Imported by wire.py at the first asyncio round trip of a loop, not by `import densekv`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

__all__ = ["Deadline", "Deadlines"]


class Deadlines:
    """An event loop's asyncio round trips under a socket_timeout, and one timer, armed for
    the earliest of their deadlines, that cancels each task past its own (the round trip
    raises redis.TimeoutError) and arms itself again for the next. A round trip that ends
    in time only enters and leaves a dict: when every one does, the timer fires about once
    a timeout, whatever the traffic. asyncio.timeout instead armed and cancelled a timer
    handle per round trip (a Timeout, a TimerHandle on the loop's heap, a cancelled one to
    pop): ~4.5 us, a tenth of an asyncio round trip's client CPU (issue 30)."""

    __slots__ = ("armed_at", "due", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: dict[int, Deadline] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.armed_at = _NEVER

    def enter(self, timeout: float) -> Deadline | None:
        """The running task's deadline, `timeout` seconds from now (None outside a task:
        nothing could cancel it, as asyncio.timeout refuses to)."""
        task = asyncio.current_task(self.loop)
        if task is None:
            return None
        deadline = Deadline(self, task, self.loop.time() + timeout)
        self.due[id(deadline)] = deadline
        if deadline.when < self.armed_at:
            self._arm(deadline.when)
        return deadline

    def _arm(self, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.armed_at = self.loop.call_at(when, self._fire), when

    def _fire(self) -> None:
        self.timer, self.armed_at = None, _NEVER
        now = self.loop.time() + _EARLY  # the loop runs a timer up to its clock's resolution early
        after = _NEVER
        for key, deadline in list(self.due.items()):
            if deadline.when <= now:
                del self.due[key]
                deadline.expire()
            elif deadline.when < after:
                after = deadline.when
        if after is not _NEVER:
            self._arm(after)


class Deadline:
    """One round trip's deadline: `expire` cancels its task; `timed_out`, in the round
    trip's handler of CancelledError, says whether that cancellation was this deadline's
    alone (then the task is uncancelled and the round trip raises redis.TimeoutError) or
    also someone else's (then CancelledError goes on), as asyncio.timeout decides."""

    __slots__ = ("cancelling", "deadlines", "expired", "task", "when")

    def __init__(self, deadlines: Deadlines, task: asyncio.Task[Any], when: float) -> None:
        self.deadlines, self.task, self.when, self.expired = deadlines, task, when, False
        self.cancelling = task.cancelling() if _UNCANCEL else 0  # type: ignore[attr-defined, unused-ignore]  # mypy's target is 3.10

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    def timed_out(self) -> bool:
        if not self.expired:
            return False
        return not _UNCANCEL or self.task.uncancel() <= self.cancelling  # type: ignore[attr-defined, unused-ignore]

    def leave(self) -> None:
        self.deadlines.due.pop(id(self), None)


_NEVER = float("inf")
_EARLY = 1e-3  # s: a deadline this close counts as passed when the timer runs
_UNCANCEL = sys.version_info >= (3, 11)  # Task.cancelling() and uncancel(); 3.10 converts every expiry
