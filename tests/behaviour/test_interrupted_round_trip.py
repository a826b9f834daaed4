"""A round trip interrupted before its replies were read must not leave them on a pooled
connection: the next round trip on that pool would read them as its own answers - another
user's session. The interruption is anything that unwinds a request in the middle of a read:
a worker's timeout signal, gevent's Timeout, KeyboardInterrupt (a BaseException; here a signal handler raises one), or the
cancellation of an asyncio task (a client that went away). densekv takes connections from a
plain redis-py pool without the pool's can_read() probe (densekv/wire.py), so the round trip
itself must drop such a connection. Real server, stopped with SIGSTOP so that the replies
arrive only after the interruption.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import pytest
import redis
import redis.asyncio

from densekv import wire
from densekv.errors import ServerUnavailable
from densekv.executors import AsyncExecutor, SyncExecutor
from densekv.plan import command
from densekv.tools.server.process import ServerProcess


class Interrupted(BaseException):
    """What a request timeout raises in the middle of a blocking read."""


@pytest.fixture
def stoppable(fresh_server: Callable[..., ServerProcess]) -> Iterator[ServerProcess]:
    srv = fresh_server("valkey-9.1")
    c = srv.client()
    c.set("user:a", b"alice's session")
    c.set("user:b", b"bob's session")
    c.close()
    yield srv
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGCONT)


def _resume_later(srv: ServerProcess, seconds: float) -> threading.Timer:
    assert srv.proc is not None
    timer = threading.Timer(seconds, srv.proc.send_signal, (signal.SIGCONT,))
    timer.start()
    return timer


@pytest.mark.parametrize("batch", [1, 2, 4], ids=["one-command", "two-commands", "four-commands"])
def test_a_sync_round_trip_interrupted_mid_read_leaves_no_reply_behind(stoppable: ServerProcess,
                                                                       batch: int) -> None:
    client = redis.Redis(host="127.0.0.1", port=stoppable.port, socket_timeout=10)
    ex = SyncExecutor(client)
    assert ex.run_many([command("GET", "user:b")]) == [b"bob's session"]  # a pooled connection

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted

    assert stoppable.proc is not None
    stoppable.proc.send_signal(signal.SIGSTOP)
    # SIGUSR1 from a timer thread (SIGALRM and its timer belong to pytest-timeout)
    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Interrupted):
            ex.run_many([command("GET", "user:a") for _ in range(batch)])
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    _resume_later(stoppable, 0.2).join()
    # alice's replies are on their way to whichever connection sent her request
    for _ in range(3):
        assert ex.run_many([command("GET", "user:b") for _ in range(batch)]) == [b"bob's session"] * batch
    client.close()


async def _stopped_after_a_read(srv: ServerProcess, socket_timeout: float) -> tuple[redis.asyncio.Redis, AsyncExecutor]:
    """A redis.asyncio client (and its executor) with a pooled connection that has read
    once, and the server then stopped (SIGSTOP): its replies come only after SIGCONT."""
    client = redis.asyncio.Redis(host="127.0.0.1", port=srv.port, socket_timeout=socket_timeout)
    ex = AsyncExecutor(client)
    assert await ex.run_many([command("GET", "user:b")]) == [b"bob's session"]
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGSTOP)
    return client, ex


def _resume(srv: ServerProcess) -> None:
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("batch", [1, 2, 4], ids=["one-command", "two-commands", "four-commands"])
def test_an_asyncio_round_trip_cancelled_mid_read_leaves_no_reply_behind(stoppable: ServerProcess,
                                                                         batch: int) -> None:
    async def main() -> None:
        client, ex = await _stopped_after_a_read(stoppable, 10)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ex.run_many([command("GET", "user:a") for _ in range(batch)]), 0.3)
        _resume(stoppable)
        await asyncio.sleep(0.2)
        for _ in range(3):
            got = await ex.run_many([command("GET", "user:b") for _ in range(batch)])
            assert got == [b"bob's session"] * batch
        await client.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("batch", [1, 3], ids=["one-command", "three-commands"])
def test_an_asyncio_round_trip_past_its_socket_timeout_is_server_unavailable(stoppable: ServerProcess,
                                                                             batch: int) -> None:
    """A server that does not answer within the client's socket_timeout: the same typed error
    as redis-py's own timeout gave (ServerUnavailable, not retried), and the connection
    dropped, so that the late replies never meet another round trip."""
    async def main() -> None:
        client, ex = await _stopped_after_a_read(stoppable, 0.3)
        with pytest.raises(ServerUnavailable, match="Timeout reading from 127.0.0.1"):
            await ex.run_many([command("GET", "user:a") for _ in range(batch)])
        _resume(stoppable)
        await asyncio.sleep(0.2)
        for _ in range(3):
            got = await ex.run_many([command("GET", "user:b") for _ in range(batch)])
            assert got == [b"bob's session"] * batch
        await client.aclose()

    asyncio.run(main())


def test_asyncio_round_trips_under_different_socket_timeouts_each_end_at_their_own(
        stoppable: ServerProcess) -> None:
    """One loop's round trips share one timer (densekv.deadlines.Deadlines), armed for the earliest
    deadline: a round trip under a short socket_timeout that starts after one under a long
    one still times out at its own deadline, the long one goes on waiting and ends with
    its reply, and round trips that end in time leave no deadline behind."""
    async def main() -> None:
        patient = redis.asyncio.Redis(host="127.0.0.1", port=stoppable.port, socket_timeout=30)
        hasty = redis.asyncio.Redis(host="127.0.0.1", port=stoppable.port, socket_timeout=0.3)
        slow, fast = AsyncExecutor(patient), AsyncExecutor(hasty)
        for _ in range(50):  # in time: entered and left
            assert await fast.run_many([command("GET", "user:b")]) == [b"bob's session"]
        assert await slow.run_many([command("GET", "user:b")]) == [b"bob's session"]
        loop = asyncio.get_running_loop()
        assert not wire._WAITING.deadlines_of(loop).due
        assert stoppable.proc is not None
        stoppable.proc.send_signal(signal.SIGSTOP)
        waiting = asyncio.ensure_future(slow.run_many([command("GET", "user:a")]))
        await asyncio.sleep(0.05)
        started = loop.time()
        with pytest.raises(ServerUnavailable, match="Timeout reading"):
            await fast.run_many([command("GET", "user:a")])
        assert 0.25 <= loop.time() - started < 5  # its own 0.3 s, not the patient one's 30
        assert not waiting.done()
        stoppable.proc.send_signal(signal.SIGCONT)
        assert await waiting == [b"alice's session"]
        assert await fast.run_many([command("GET", "user:b")]) == [b"bob's session"]
        assert not wire._WAITING.deadlines_of(loop).due
        await patient.aclose()
        await hasty.aclose()

    asyncio.run(main())


def test_an_asyncio_round_trip_cancelled_by_its_caller_is_cancelled_not_timed_out(
        stoppable: ServerProcess) -> None:
    """A cancellation that is not the deadline's goes on as CancelledError, also when the
    deadline passes while the cancelled task unwinds."""
    async def main() -> None:
        client, ex = await _stopped_after_a_read(stoppable, 0.2)
        task = asyncio.ensure_future(ex.run_many([command("GET", "user:a")]))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)  # past the deadline: nothing left to cancel
        assert not wire._WAITING.deadlines_of(asyncio.get_running_loop()).due
        _resume(stoppable)
        assert await ex.run_many([command("GET", "user:b")]) == [b"bob's session"]
        await client.aclose()

    asyncio.run(main())
