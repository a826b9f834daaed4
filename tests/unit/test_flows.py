"""The flow runtime (densekv/flows.py) fed canned replies, no server: what a round trip
carries, in which order results come back, how an error reaches the flow, how gather
shares round trips, and how retrying recovers. The executor here answers each command
from a table (command name -> reply), as h11 tests its state machine with tables."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

from densekv.errors import WrongType
from densekv.flows import Flow, Sleep, adrive, computed, drive, drive_many, gather, retrying, step
from densekv.plan import command
from tests.unit.canned import ACanned, Canned


def echo(args: tuple[Any, ...]) -> Any:
    return args[1] if args[0] == "ECHO" else ValueError(f"unexpected {args}")


def echoes(*words: str) -> Flow[list[str]]:
    got: list[str] = []
    for w in words:
        got.append((yield from step(command("ECHO", w))))
    return got


def test_one_flow_one_round_trip_per_yield() -> None:
    ex = Canned(echo)
    assert drive(echoes("a", "b"), ex) == ["a", "b"]
    assert ex.trips == [[("ECHO", "a")], [("ECHO", "b")]]


def test_gather_shares_round_trips_and_keeps_order() -> None:
    ex = Canned(echo)
    results = drive_many([echoes("a", "b", "c"), echoes(), echoes("x")], ex)
    assert results == [["a", "b", "c"], [], ["x"]]
    assert ex.trips == [[("ECHO", "a"), ("ECHO", "x")], [("ECHO", "b")], [("ECHO", "c")]]


def test_gather_is_a_flow_and_nests() -> None:
    def outer() -> Flow[list[Any]]:
        first = yield from gather([echoes("a"), echoes("b")])
        return [first, (yield from echoes("c"))]

    ex = Canned(echo)
    assert drive(outer(), ex) == [[["a"], ["b"]], ["c"]]
    assert ex.trips == [[("ECHO", "a"), ("ECHO", "b")], [("ECHO", "c")]]


def test_an_error_is_thrown_into_the_flow_at_its_yield() -> None:
    seen: list[str] = []

    def flow() -> Flow[str]:
        try:
            yield [command("ECHO", "ok"), command("FAIL")]
        except redis.ResponseError as exc:
            seen.append(str(exc))
        finally:
            seen.append("cleaned up")
        return (yield from step(command("ECHO", "after")))

    def answer(args: tuple[Any, ...]) -> Any:
        return redis.ResponseError("ERR no") if args[0] == "FAIL" else echo(args)

    assert drive(flow(), Canned(answer)) == "after"
    assert seen == ["ERR no", "cleaned up"]


def test_an_uncaught_error_leaves_the_driver_and_gather_closes_the_others() -> None:
    closed: list[str] = []

    def waiting() -> Flow[None]:
        try:
            yield [command("ECHO", "1")]
            yield [command("ECHO", "2")]
        finally:
            closed.append("waiting")

    def failing() -> Flow[None]:
        yield [command("ECHO", "1")]
        yield [command("FAIL")]

    def answer(args: tuple[Any, ...]) -> Any:
        return WrongType("tombstone") if args[0] == "FAIL" else echo(args)

    with pytest.raises(WrongType):
        drive_many([waiting(), failing()], Canned(answer))
    assert closed == ["waiting"]


def test_retrying_recovers_then_runs_a_fresh_flow() -> None:
    state = {"tombstone": True, "made": 0}

    def answer(args: tuple[Any, ...]) -> Any:
        if args[0] == "GET" and state["tombstone"]:
            return WrongType("tombstone")
        if args[0] == "REFRESH":
            state["tombstone"] = False
            return 1
        return b"v"

    def make() -> Flow[Any]:
        state["made"] += 1
        return step(command("GET", "k"))

    def recover(exc: Exception) -> Flow[bool]:
        assert isinstance(exc, WrongType)
        return bool((yield from step(command("REFRESH"))))

    ex = Canned(answer)
    assert drive(retrying(make, recover), ex) == b"v"
    assert state["made"] == 2 and [t[0][0] for t in ex.trips] == ["GET", "REFRESH", "GET"]


def test_retrying_gives_up_when_recover_says_no_or_attempts_run_out() -> None:
    def tombstone(args: tuple[Any, ...]) -> Any:
        return WrongType("tombstone") if args[0] == "GET" else 1

    def no(exc: Exception) -> Flow[bool]:
        return False
        yield  # a flow

    with pytest.raises(WrongType):
        drive(retrying(lambda: step(command("GET", "k")), no), Canned(tombstone))
    ex = Canned(tombstone)
    with pytest.raises(WrongType):
        drive(retrying(lambda: step(command("GET", "k")), lambda e: step(command("REFRESH")), attempts=3), ex)
    assert [t[0][0] for t in ex.trips] == ["GET", "REFRESH", "GET", "REFRESH", "GET"]


def test_the_async_driver_runs_the_same_flows() -> None:
    def paused() -> Flow[list[str]]:
        first = yield from echoes("a")
        assert (yield Sleep(0)) == []
        return first + (yield from echoes("b"))

    ex = ACanned(echo)
    assert asyncio.run(adrive(gather([paused(), echoes("x", "y")]), ex)) == [["a", "b"], ["x", "y"]]
    assert ex.trips == [[("ECHO", "a"), ("ECHO", "x")], [("ECHO", "b"), ("ECHO", "y")]]  # the pause first


def _work_flow(work: Any) -> Flow[tuple[str, Any]]:
    """A round trip, a Compute of `work`, a round trip; its errors caught at the Compute."""
    first = yield from echoes("a")
    try:
        got = yield from computed(work)
    except ValueError as exc:
        got = f"caught {exc}"
    return first[0], got


def test_a_compute_runs_in_place_under_drive_and_its_error_reaches_the_flow() -> None:
    where: list[int] = []

    def work() -> str:
        where.append(threading.get_ident())
        return "done"

    def bad() -> str:
        raise ValueError("no")

    assert drive(_work_flow(work), Canned(echo)) == ("a", "done")
    assert where == [threading.get_ident()]  # the caller's thread: a sync store's own
    assert drive(_work_flow(bad), Canned(echo)) == ("a", "caught no")


def test_a_compute_runs_off_the_event_loop_under_adrive() -> None:
    """The loop keeps serving other tasks while the work runs (a dictionary's training on
    an asyncio web worker), and gather passes a Compute of one flow through to the driver."""
    where: list[int] = []

    def work() -> str:
        where.append(threading.get_ident())
        time.sleep(0.2)  # CPU work in real life; a sleep holds no GIL, as zstd's trainer
        return "done"

    async def main() -> tuple[Any, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        got = await adrive(gather([_work_flow(work), echoes("x")]), ACanned(echo))
        stop.set()
        await task
        return got, ticks

    (got, ticks) = asyncio.run(main())
    assert got == [("a", "done"), ["x"]]
    assert where and where[0] != threading.get_ident()  # a worker thread, not the loop's
    assert ticks >= 5  # the loop ran the ticker meanwhile (20 ticks if it had all 0.2 s)
