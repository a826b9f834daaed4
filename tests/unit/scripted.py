"""A scripted server for unit tests of the kinds' cores (h11's table style): a flow is run
against a *script* of round trips, each a list of (expected step, raw reply) pairs; every
step the flow sends is checked against the script as it goes, the replies are decoded by
the plans' own decoders (executors.finish_plans: WRONGTYPE -> WrongType, a script's error ->
ScriptError, exactly as the real executors do), and what was sent is kept for the test.

Steps are compared as the wire sees them: a command as its line ("HGET", key, field), a
Lua call as (script name, KEYS, *ARGV); str, bytes and ints are compared by their wire
bytes, a pattern may stop early (only its prefix is checked) and `ANY` matches anything.
So a refactor that sends the same commands passes, and a change of what goes to the server
fails. `answer=` instead of a script answers every step from a function (long batches).

tests/unit/canned.py (Canned) answers plain commands for tests of the flow runtime itself;
this one also answers Lua calls, Scans and Sleeps, and checks each step as it is sent.
`run` mirrors densekv.flows.drive (an error reply is thrown into the flow at its yield);
test_flows.py tests drive itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import ANY

from densekv.executors import finish_plans
from densekv.flows import Flow, Scan, Sleep
from densekv.plan import Command, Plan, ScriptCall

__all__ = ["ANY", "Raises", "Run", "Scripted", "Sent", "check", "run", "wire"]


def wire(x: Any) -> Any:
    """A value as its bytes on the wire (redis-py's encoding); tuples element-wise."""
    if x is ANY:
        return x
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, str):
        return x.encode("utf-8", "surrogateescape")
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return b"%d" % x
    if isinstance(x, float):
        return repr(x).encode()
    if isinstance(x, (tuple, list)):
        return tuple(wire(v) for v in x)
    return x


@dataclass(frozen=True)
class Sent:
    """One step a flow sent: a command, a Lua call ("lua"), a SCAN or a SLEEP."""

    name: str  # the command's name (upper case) or the Lua script's name
    keys: tuple[bytes, ...]
    args: tuple[Any, ...]  # a command's arguments after its name; a script's ARGV
    lua: bool = False
    atomic: bool = False  # its plan is a MULTI/EXEC
    revokes: bool = False

    @property
    def line(self) -> tuple[Any, ...]:
        """What a pattern is matched against: (name, *args), or (script, KEYS, *ARGV)."""
        return (self.name, self.keys, *self.args) if self.lua else (self.name, *self.args)

    def matches(self, pattern: str | tuple[Any, ...]) -> bool:
        if isinstance(pattern, str):
            return pattern == self.name
        line = self.line
        return len(pattern) <= len(line) and pattern[0] == self.name and all(
            wire(p) == wire(v) for p, v in zip(pattern[1:], line[1:]))

    def __repr__(self) -> str:
        return f"{self.name}{'[lua]' if self.lua else ''}{self.line[1:]!r}"


def sent_of(plan: Plan[Any]) -> list[Sent]:
    out = []
    for st in plan.steps:
        if isinstance(st, ScriptCall):
            out.append(Sent(st.script.name, tuple(wire(k) for k in st.keys), st.args, True,
                            plan.atomic, plan.revokes))
        else:
            assert isinstance(st, Command)
            name = st.args[0].decode() if isinstance(st.args[0], bytes) else str(st.args[0])
            out.append(Sent(name.upper(), tuple(wire(k) for k in st.keys), st.args[1:], False,
                            plan.atomic, plan.revokes))
    return out


Pattern = str | tuple[Any, ...]
#: a raw reply, an Exception (an error reply), or a function of the step sent -> either
Reply = Any
Trip = Sequence[tuple[Pattern, Reply]]


class Scripted:
    """An executor answering from a script of round trips (or `answer(sent)`), recording
    every round trip it was sent."""

    def __init__(self, script: Sequence[Trip] = (), answer: Callable[[Sent], Reply] | None = None) -> None:
        self.script = list(script)
        self.answer = answer
        self.trips: list[list[Sent]] = []
        self.sleeps: list[float] = []
        self.client = None

    def _next(self, sent: list[Sent]) -> list[Reply]:
        n = len(self.trips)
        if self.answer is not None and not self.script:
            return [self.answer(s) for s in sent]
        if not self.script:
            raise AssertionError(f"round trip {n} was not in the script: {sent}")
        trip = self.script.pop(0)
        if len(trip) != len(sent) or not all(s.matches(p) for s, (p, _) in zip(sent, trip)):
            raise AssertionError(f"round trip {n}:\n  sent     {sent}\n  expected {[p for p, _ in trip]}")
        return [r(s) if callable(r) else r for s, (_, r) in zip(sent, trip)]

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        assert plans, "a flow yielded an empty round trip (flows.py forbids it)"
        per_plan = [sent_of(p) for p in plans]
        sent = [s for ss in per_plan for s in ss]
        self.trips.append(sent)
        replies = self._next(sent)
        grouped, pos = [], 0
        for ss in per_plan:
            grouped.append(replies[pos : pos + len(ss)])
            pos += len(ss)
        return finish_plans(plans, grouped)

    def scan(self, ask: Scan) -> list[bytes]:
        sent = Sent("SCAN", (), (ask.pattern,))
        self.trips.append([sent])
        return list(self._next([sent])[0])

    def done(self) -> None:
        assert not self.script, f"the flow ended with {len(self.script)} scripted round trip(s) unsent: " \
                                f"{[[p for p, _ in t] for t in self.script]}"

    def names(self) -> list[list[str]]:
        """The names sent, per round trip (the shape of a flow)."""
        return [[s.name for s in trip] for trip in self.trips]


def run(flow: Flow[Any], ex: Scripted) -> Any:
    """Drive `flow` on `ex` as densekv.flows.drive does: an error of a round trip is thrown
    into the flow at its yield; a Scan is answered once from the script (then []), a Sleep
    recorded and answered at once."""
    scans: set[int] = set()
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        error = None
        try:
            if isinstance(ask, Scan):
                reply = [] if id(ask) in scans else ex.scan(ask)
                scans.add(id(ask))
            elif isinstance(ask, Sleep):
                ex.sleeps.append(ask.seconds)
                reply = []
            else:
                reply = ex.run_many(ask)
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001  # thrown into the flow, as drive() does
            error = exc


@dataclass(frozen=True)
class Raises:
    """The expected outcome of a row that fails: the error's type and a part of its text."""

    type: type[BaseException]
    match: str = ""


@dataclass
class Run:
    result: Any
    ex: Scripted
    error: BaseException | None = field(default=None)


def check(flow: Flow[Any], script: Sequence[Trip], expect: Any = ANY) -> Run:
    """Run `flow` against `script` (every round trip used), and check its result, or its
    error when `expect` is a Raises."""
    ex = Scripted(script)
    if isinstance(expect, Raises):
        try:
            got = run(flow, ex)
        except expect.type as exc:
            assert expect.match in str(exc), f"{exc!r} does not say {expect.match!r}"
            ex.done()
            return Run(None, ex, exc)
        raise AssertionError(f"expected {expect.type.__name__}, the flow returned {got!r}")
    got = run(flow, ex)
    ex.done()
    assert got == expect, f"result {got!r}, expected {expect!r}"
    return Run(got, ex)
