"""An asyncio round trip posts its write to the event loop's next round while other round
trips of the loop await replies (densekv/wire.py, aexchange), so that the commands of the
tasks that ran in one round go out back to back; alone, it writes at once. What must hold
whatever the timing: each task reads its own replies, a batch too big to post is written at
once, and a round trip cancelled just after posting leaves nothing for the next one to read.
Real servers, no mocks (wire._write_posted is wrapped to count the posted writes).
"""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from densekv import wire
from densekv.executors import AsyncExecutor
from densekv.plan import command
from densekv.tools.server.process import ServerProcess


def test_tasks_of_one_round_each_read_their_own_replies(server: ServerProcess, client: redis.Redis) -> None:
    """32 tasks on one loop, a connection each: each posts in the same rounds as the others
    and gets the value of its own key, every time."""
    client.mset({f"posted:{i}": f"value {i}" for i in range(32)})

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        ex = AsyncExecutor(aclient)

        async def reader(i: int) -> None:
            for n in range(20):
                got = await ex.run_many([command("GET", f"posted:{i}"), command("INCR", f"count:{i}")])
                assert got == [f"value {i}".encode(), n + 1]

        await asyncio.gather(*(reader(i) for i in range(32)))
        await aclient.aclose()

    asyncio.run(main())
    assert [int(client.get(f"count:{i}") or 0) for i in range(32)] == [20] * 32


def test_a_batch_bigger_than_a_posted_write_is_written_at_once(server: ServerProcess, client: redis.Redis) -> None:
    value = b"x" * 1000
    batch = [command("SET", f"big:{i}", value) for i in range(2 * wire._POST_MAX // len(value))]

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        ex = AsyncExecutor(aclient)
        assert await ex.run_many(batch) == [b"OK"] * len(batch)  # raw replies
        assert await ex.run_many([command("GET", "big:0")]) == [value]
        await aclient.aclose()

    asyncio.run(main())
    assert client.dbsize() == len(batch)


@pytest.mark.parametrize("rounds", [0, 1, 2], ids=["before-it-starts", "after-it-posted", "after-the-write-round"])
def test_a_round_trip_cancelled_around_its_posted_write_leaves_no_reply_behind(
        server: ServerProcess, client: redis.Redis, rounds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled before the loop's round that writes, in it, or after: the connection is
    dropped either way, and the next round trip on the pool reads its own reply."""
    posted = count_posted(monkeypatch)
    client.set("mine", b"my session")
    client.set("theirs", b"their session")

    async def main() -> None:
        # two pooled connections: one held by a round trip that waits on the server (so the
        # others post their writes), the other reused by every round trip of the test
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port, max_connections=2)
        ex = AsyncExecutor(aclient)
        waiter = asyncio.ensure_future(ex.run_many([command("BLPOP", "never-pushed", 60)]))
        # the waiter counts itself once its connection is up: on a busy machine that can take
        # longer than any fixed sleep, so wait for it (and for the server to hold it blocked)
        deadline = asyncio.get_running_loop().time() + 30
        while wire._WAITING.round_trips != 1 or client.info("clients")["blocked_clients"] != 1:
            assert asyncio.get_running_loop().time() < deadline, "the waiting round trip never started"
            await asyncio.sleep(0.01)
        assert await ex.run_many([command("GET", "mine")]) == [b"my session"]
        for _ in range(5):
            task = asyncio.ensure_future(ex.run_many([command("GET", "theirs")]))
            for _ in range(rounds):
                await asyncio.sleep(0)
            task.cancel()
            try:
                got = await task
            except asyncio.CancelledError:
                pass
            else:  # done before the cancel reached it: its own reply
                assert got == [b"their session"]
            assert await ex.run_many([command("GET", "mine")]) == [b"my session"]
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await aclient.aclose()

    asyncio.run(main())
    assert posted, "no write was posted: the cancelled round trips did not take the posted path"


def test_a_round_trip_alone_writes_at_once_and_busy_ones_post(
        server: ServerProcess, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls awaited one after the other post nothing (a posted write would cost each a loop
    round); tasks on one loop at once post theirs; the count of waiting round trips is back
    to 0 after both, and after a failed one."""
    posted = count_posted(monkeypatch)
    client.set("k", b"v")

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        ex = AsyncExecutor(aclient)
        for _ in range(20):
            assert await ex.run_many([command("GET", "k")]) == [b"v"]
        assert posted == [] and wire._WAITING.round_trips == 0
        await asyncio.gather(*(ex.run_many([command("GET", "k")]) for _ in range(16)))
        assert len(posted) >= 8 and wire._WAITING.round_trips == 0
        with pytest.raises(redis.ResponseError):
            await ex.run_many([command("INCR", "k")])  # not an integer: an error reply
        assert wire._WAITING.round_trips == 0
        await aclient.aclose()

    asyncio.run(main())


def count_posted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each posted write's size, from now on (wire._write_posted wrapped)."""
    posted: list[int] = []
    write = wire._write_posted

    def counted(transport: asyncio.WriteTransport, data: bytes) -> None:
        posted.append(len(data))
        write(transport, data)

    monkeypatch.setattr(wire, "_write_posted", counted)
    return posted
