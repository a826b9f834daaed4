"""The hot path of a single plan (issue 22): one plan of one command, or of a loaded script's
call, goes without the batch machinery and takes its connection from a plain redis-py pool
without the pool's per-call probe (densekv/executors.py). These check that it gives what the
general path gives, hands every connection back, survives what the probe was there for (a
connection the server closed while it sat idle), reloads a script the server lost, and
leaves an instrumented pool its own checkout; and that the small decoders made cheaper for
it (with_data, the one-byte varint) agree with the slow forms."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
import redis
import redis.asyncio

from densekv import codec
from densekv.errors import WrongType
from densekv.executors import AsyncExecutor, SyncExecutor
from densekv.lua import script
from densekv.plan import Command, Plan, command, script_call
from densekv.sessions.model import Record
from densekv.sessions.record import replaced, with_data
from densekv.tools.server.process import ServerProcess

on_one_server = pytest.mark.parametrize("server_name", ["valkey-9.1"], indirect=True)


def _pool_counts(client: redis.Redis) -> tuple[int, int]:
    pool = client.connection_pool
    return len(pool._available_connections), len(pool._in_use_connections)


@on_one_server
def test_single_plans_match_the_batch_path_and_give_connections_back(client: redis.Redis) -> None:
    client.flushall()
    ex = SyncExecutor(client)
    touch = script("hrec_touch")
    plans = [
        command("SET", "{a}:k", "v", keys=("{a}:k",)),
        command("GET", "{a}:k", keys=("{a}:k",)),
        command("HSET", "{a}:h", "f", b"\x80\x00\x00\x00\x10", keys=("{a}:h",)),
        script_call(touch, ("{a}:h",), (b"f", 1, 100, "plain"), int),  # first use: loads the script
        script_call(touch, ("{a}:h",), (b"f", 5, 100, "plain"), int),  # loaded: the single path
        Plan((Command(("GET", "{a}:k"), ("{a}:k",)), Command(("STRLEN", "{a}:k"), ("{a}:k",))), atomic=True),
    ]
    one_by_one = [ex.run(p) for p in plans]
    assert one_by_one[:3] == [b"OK", b"v", 1]
    assert one_by_one[3:5] == [16, 16]  # expiry 16, no absolute one: now + 100 is capped at 16
    assert one_by_one[5] == [b"v", 1]
    client.flushall()
    assert [ex.run(p) for p in plans] == one_by_one  # the same again, script already loaded
    assert _pool_counts(client) == (1, 0)  # one connection made, idle again after every call


@on_one_server
def test_a_connection_the_server_closed_while_idle_is_replaced(client: redis.Redis) -> None:
    ex = SyncExecutor(client)
    assert ex.run(command("PING")) == b"PONG"
    killer = redis.Redis(**{k: v for k, v in client.connection_pool.connection_kwargs.items()
                            if k in ("host", "port", "unix_socket_path", "db")})
    client_id = ex.run(command("CLIENT", "ID"))
    killer.client_kill_filter(_id=client_id)
    killer.close()
    assert ex.run(command("GET", "nothing-here", keys=("nothing-here",))) is None  # sent again on a new one
    assert _pool_counts(client) == (1, 0)


@on_one_server
def test_a_script_the_server_lost_is_loaded_again(client: redis.Redis) -> None:
    client.flushall()
    ex = SyncExecutor(client)
    client.hset("{b}:h", "f", b"\x80\x00\x00\x00\x10")
    touch = script("hrec_touch")
    assert ex.run(script_call(touch, ("{b}:h",), (b"f", 1, 100, "plain"), int)) == 16
    client.script_flush()
    assert ex.run(script_call(touch, ("{b}:h",), (b"f", 1, 100, "plain"), int)) == 16  # NOSCRIPT: reloaded, sent again
    assert touch.sha in ex._scripts.loaded


@on_one_server
def test_a_pool_whose_get_connection_was_replaced_keeps_its_own_checkout(
        client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = SyncExecutor(client)
    pool = client.connection_pool
    taken: list[object] = []
    real = pool.get_connection
    monkeypatch.setattr(pool, "get_connection", lambda *a, **k: taken.append(1) or real(*a, **k))
    for _ in range(3):
        ex.run(command("PING"))
    assert len(taken) == 3


def test_with_data_is_replace_without_its_cost() -> None:
    rec = Record(b"d" * 16, 7, 100, 200, None, b"\x01abc", False, b"raw", part=None)
    new = with_data(rec, {"a": 1})
    assert new == replace(rec, data={"a": 1})
    assert rec.data is None  # the record read stays as it was
    assert type(new) is Record
    rest = replaced(rec, payload=b"\x01abcdef", ool=b"def")
    assert rest == replace(rec, payload=b"\x01abcdef", ool=b"def")
    assert rec.payload == b"\x01abc"
    with pytest.raises(TypeError):
        replaced(rec, nope=1)


@pytest.mark.parametrize("dict_id", [0, 1, 5, 127, 128, 300, 2**21 + 3])
def test_one_byte_varints_read_as_the_long_form(dict_id: int) -> None:
    raw = codec.varint(dict_id)
    assert codec.read_varint(b"\x51" + raw + b"tail", 1) == (dict_id, 1 + len(raw))
    for head in (0x21, 0x51, 0x52):
        assert codec.needed_dictionary(bytes([head]) + raw + b"xx") == (dict_id or None)


@on_one_server
def test_a_single_transaction_folds_its_replies_as_a_batch_does(client: redis.Redis) -> None:
    client.flushall()
    ex = SyncExecutor(client)
    client.set("{c}:s", "text")
    both = Plan((Command(("SET", "{c}:n", 5), ("{c}:n",)), Command(("INCR", "{c}:n"), ("{c}:n",))),
                atomic=True)
    assert ex.run(both) == [b"OK", 6]
    wrong = Plan((Command(("INCR", "{c}:n"), ("{c}:n",)), Command(("HGET", "{c}:s", "f"), ("{c}:s",))),
                 atomic=True)
    with pytest.raises(WrongType):  # run by EXEC, its error inside EXEC's array
        ex.run(wrong)
    assert client.get("{c}:n") == b"7"  # the rest of the transaction ran, as MULTI does
    refused = Plan((Command(("INCR", "{c}:n"), ("{c}:n",)), Command(("NOSUCHCOMMAND", "{c}:n"), ("{c}:n",))),
                   atomic=True)
    with pytest.raises(redis.ResponseError, match="unknown command"):  # refused when queued
        ex.run(refused)
    assert client.get("{c}:n") == b"7"  # EXEC aborted: nothing ran
    assert ex.run_many([both, both]) == [[b"OK", 6], [b"OK", 6]]  # the batch path agrees


@on_one_server
def test_the_asyncio_single_path_reloads_scripts_and_raises_typed_errors(server: ServerProcess) -> None:
    touch = script("hrec_touch")

    async def main() -> list[object]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            await client.flushall()
            await client.hset("{d}:h", "f", b"\x80\x00\x00\x00\x10")
            await client.set("{d}:s", "text")
            ex = AsyncExecutor(client)
            call = script_call(touch, ("{d}:h",), (b"f", 1, 100, "plain"), int)
            got: list[object] = [await ex.run(call), await ex.run(call)]  # loaded, then the single path
            await client.script_flush()
            got.append(await ex.run(call))  # NOSCRIPT: loaded again and sent again
            try:
                await ex.run(command("HGET", "{d}:s", "f", keys=("{d}:s",)))
            except WrongType:
                got.append("WrongType")
            return got
        finally:
            await client.aclose()

    assert asyncio.run(main()) == [16, 16, 16, "WrongType"]


@on_one_server
def test_threads_sharing_one_pool_each_get_their_own_connection(client: redis.Redis) -> None:
    client.flushall()
    ex = SyncExecutor(client)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(200):
                key = f"{{t}}:{n}:{i}"
                assert ex.run(command("SET", key, f"{n}-{i}", keys=(key,))) == b"OK"
                assert ex.run(command("GET", key, keys=(key,))) == f"{n}-{i}".encode()
        except BaseException as exc:  # noqa: BLE001  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    idle, in_use = _pool_counts(client)
    assert in_use == 0 and 1 <= idle <= 8  # every connection back, none made beyond the threads


# --- the asyncio path (issue 30): a plain redis.asyncio pool's connections lent without its
# checkout, the commands written and their replies read under one socket_timeout


def _apool_counts(client: redis.asyncio.Redis) -> tuple[int, int]:
    pool = client.connection_pool
    return len(pool._available_connections), len(pool._in_use_connections)


@on_one_server
def test_asyncio_single_plans_match_the_batch_path_and_give_connections_back(server: ServerProcess) -> None:
    touch = script("hrec_touch")
    plans = [
        command("SET", "{a}:k", "v", keys=("{a}:k",)),
        command("GET", "{a}:k", keys=("{a}:k",)),
        command("SET", "{a}:b", bytearray(b"raw"), keys=("{a}:b",)),  # hiredis refuses it: redis-py's packer
        command("HSET", "{a}:h", "f", b"\x80\x00\x00\x00\x10", keys=("{a}:h",)),
        script_call(touch, ("{a}:h",), (b"f", 1, 100, "plain"), int),  # first use: loads the script
        script_call(touch, ("{a}:h",), (b"f", 5, 100, "plain"), int),  # loaded: the single path
        Plan((Command(("GET", "{a}:k"), ("{a}:k",)), Command(("STRLEN", "{a}:k"), ("{a}:k",))), atomic=True),
    ]

    async def main() -> tuple[list[object], list[object], list[object], tuple[int, int]]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            await client.flushall()
            ex = AsyncExecutor(client)
            one_by_one = [await ex.run(p) for p in plans]
            await client.flushall()
            again = [await ex.run(p) for p in plans]
            await client.flushall()
            batch = await ex.run_many(plans)
            return one_by_one, again, batch, _apool_counts(client)
        finally:
            await client.aclose()

    one_by_one, again, batch, counts = asyncio.run(main())
    assert one_by_one[:4] == [b"OK", b"v", b"OK", 1]
    assert one_by_one[4:6] == [16, 16]
    assert one_by_one[6] == [b"v", 1]
    assert again == one_by_one and batch == one_by_one
    assert counts == (1, 0)  # one connection made, idle again after every call


@on_one_server
def test_asyncio_a_connection_the_server_closed_while_idle_is_replaced(server: ServerProcess) -> None:
    async def main() -> tuple[object, tuple[int, int]]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            ex = AsyncExecutor(client)
            client_id = await ex.run(command("CLIENT", "ID"))
            killer = server.client()
            killer.client_kill_filter(_id=client_id)
            killer.close()
            got = await ex.run(command("GET", "nothing-here", keys=("nothing-here",)))  # sent again on a new one
            return got, _apool_counts(client)
        finally:
            await client.aclose()

    assert asyncio.run(main()) == (None, (1, 0))


@on_one_server
def test_asyncio_a_pool_whose_get_connection_was_replaced_keeps_its_own_checkout(server: ServerProcess) -> None:
    async def main() -> int:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            pool = client.connection_pool
            taken: list[object] = []
            real = pool.get_connection

            async def counted(*args: object, **kwargs: object) -> object:
                taken.append(1)
                return await real(*args, **kwargs)  # type: ignore[arg-type]

            pool.get_connection = counted  # type: ignore[method-assign]
            ex = AsyncExecutor(client)
            for _ in range(3):
                assert await ex.run(command("PING")) == b"PONG"
            return len(taken)
        finally:
            await client.aclose()

    assert asyncio.run(main()) == 3


@on_one_server
def test_asyncio_tasks_sharing_one_pool_each_get_their_own_connection(server: ServerProcess) -> None:
    async def work(ex: AsyncExecutor, n: int) -> None:
        for i in range(100):
            key = f"{{t}}:{n}:{i}"
            assert await ex.run(command("SET", key, f"{n}-{i}", keys=(key,))) == b"OK"
            assert await ex.run_many([command("GET", key, keys=(key,)), command("STRLEN", key, keys=(key,))]) == \
                [f"{n}-{i}".encode(), len(f"{n}-{i}")]

    async def main() -> tuple[int, int]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            ex = AsyncExecutor(client)
            await asyncio.gather(*(work(ex, n) for n in range(8)))
            return _apool_counts(client)
        finally:
            await client.aclose()

    idle, in_use = asyncio.run(main())
    assert in_use == 0 and 1 <= idle <= 8  # every connection back, none made beyond the tasks


@on_one_server
def test_asyncio_health_checked_connections_take_redis_pys_path(server: ServerProcess) -> None:
    async def main() -> list[object]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, health_check_interval=30)
        try:
            await client.flushall()
            await client.set("{h}:s", "text")
            ex = AsyncExecutor(client)
            got: list[object] = [await ex.run(command("GET", "{h}:s", keys=("{h}:s",)))]
            try:
                await ex.run(command("HGET", "{h}:s", "f", keys=("{h}:s",)))
            except WrongType:
                got.append("WrongType")
            got += await ex.run_many([command("STRLEN", "{h}:s", keys=("{h}:s",)), command("PING")])
            return got
        finally:
            await client.aclose()

    assert asyncio.run(main()) == [b"text", "WrongType", 4, b"PONG"]
