"""The one place that knows redis-py's internals: every densekv round trip's bytes go through here.

Why it exists: densekv's executors, bulk loading and the analyzer each need more than
redis-py's public API offers (a checkout without the pool's per-call probe, hiredis reading
replies straight off the socket, RESP packed once for a whole batch). Those uses of redis-py's
private parts are kept in this module, so a redis-py release that moves them breaks one file,
and tests/unit/test_wire_adapter.py fails if any other densekv module touches them.

What it uses of redis-py beyond the public API (checked on both ends of REDIS_PY_RANGE):
  * `Connection._sock`: the connected socket (None when disconnected); hiredis reads it
    directly, and `_take` connects a pooled connection whose socket is gone;
  * `ConnectionPool._lock`, `._available_connections`, `._in_use_connections` (with the
    public `pid` and `connection_kwargs`): the pool checkout `_take` / `_give_back`, on a
    plain `redis.ConnectionPool` only (`_plain_pool` says which);
  * `redis._parsers.base.BaseParser.parse_error`: an error reply's text to redis-py's
    exception class (MOVED, ASK, NOSCRIPT, NOPERM... as redis-py's own reader makes them);
  * asyncio (`aexchange`, `aroundtrip`): `redis.asyncio.Connection._writer` (its
    StreamWriter; the write is posted on its transport) and `._parser` (its reply reader,
    `read_response`), and a plain `redis.asyncio.ConnectionPool`'s `_lock`,
    `_available_connections`, `_in_use_connections` (the checkout `_atake` / `_agive_back`).
Public parts it relies on: `send_packed_command`, `pack_commands`, `read_response(
disable_decoding=True)`, `get_connection()` / `release()`, `should_reconnect()` (when present).

Supported redis-py: REDIS_PY_RANGE, `>=8.0` (8.0.0 up to the newest release), the same as
pyproject's `redis[hiredis]` requirement. The lower end is tested by scripts/ci-lowest-redis
(LOWEST_REDIS, redis-py 8.0.0), the upper by CI's main run on the newest release pip picks;
tests/unit/test_wire_adapter.py checks that the three agree and that the installed redis-py
is in range.

RESP encoding of raw batches: densekv/resp.py (`pack`), whose bytes `send_packed` writes. One
list of the commands that never write: READS (the executors resend a batch of them after a
broken connection and send no WAIT for it; the analyzer's allow-list is a subset of it).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

import redis
import redis.asyncio
from redis.exceptions import ResponseError

from densekv.errors import ServerUnavailable

if TYPE_CHECKING:
    from densekv.deadlines import Deadlines

__all__ = [
    "EXEC", "MULTI", "READS", "REDIS_PY_RANGE", "NothingRead", "aexchange", "aroundtrip", "exchange", "roundtrip",
    "send_packed",
]

#: the redis-py releases this module is written and tested against (pyproject's requirement)
REDIS_PY_RANGE = ">=8.0"

#: a transaction's first and last command: the executors send these very tuples, which
#: _hiredis_roundtrip writes as their RESP made once (a transaction is the split get's
#: hot path, issue 22)
MULTI: tuple[Any, ...] = ("MULTI",)
EXEC: tuple[Any, ...] = ("EXEC",)

#: commands that never write: a round trip of these only needs no WAIT, and a lost reply
#: can be asked again. Anything else (and every script) counts as a write.
READS = frozenset({
    "GET", "MGET", "STRLEN", "GETRANGE", "EXISTS", "TYPE", "TTL", "PTTL", "EXPIRETIME",
    "PEXPIRETIME", "HGET", "HMGET", "HGETALL", "HLEN", "HEXISTS", "HKEYS", "HVALS", "HSTRLEN",
    "HSCAN", "HRANDFIELD", "HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "SISMEMBER",
    "SMISMEMBER", "SMEMBERS", "SCARD", "SSCAN", "SRANDMEMBER", "ZSCORE", "ZMSCORE", "ZCARD",
    "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT", "ZSCAN", "ZRANK", "SCAN", "DBSIZE", "RANDOMKEY",
    "MEMORY", "OBJECT", "INFO", "COMMAND", "CLUSTER", "CONFIG", "MODULE", "PING", "SCRIPT",
    "XLEN", "XRANGE", "XREVRANGE", "XREAD", "BF.EXISTS", "BF.MEXISTS", "BF.INFO", "BF.CARD",
    "WAIT", "LLEN", "LRANGE",
})


# --- connection-level round trips (the executors) --------------------------------------


class NothingRead(redis.ConnectionError):
    """The connection broke before the batch's first reply: a pooled connection whose server
    went away (restarted) while it sat idle, which the pool's check cannot always see (an
    asyncio stream learns of the EOF only when read)."""


def roundtrip(pool: Any, commands: list[tuple[Any, ...]], plans: Sequence[Any] = (),
               reads_only: Callable[[Sequence[Any]], bool] | None = None) -> list[Any]:
    """Send all commands in one write, read every reply raw; errors come back as values.
    A batch whose connection broke before its first reply (NothingRead), or at any point
    when `reads_only(plans)` says the plans it carries only read (the caller's judgement:
    this module knows commands, not plans; asked only then, never on the way of a call
    that succeeds), is sent once more on a new connection: the first request after a
    server restart succeeds. A timeout is not retried. (A write the server ran
    just before dying is then sent twice: densekv's writes are compare-and-set or
    idempotent, so the second finds the first's result.)"""
    conn = _take(pool) if _plain_pool(pool) else None
    fast = conn is not None
    if conn is None:
        conn = pool.get_connection()
    try:
        return exchange(conn, commands)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        conn.disconnect()
        if _broken(exc) and (isinstance(exc, NothingRead) or (
                plans and reads_only is not None and reads_only(plans))):
            _give_back(pool, conn) if fast else pool.release(conn)
            conn = None
            return roundtrip(pool, commands)
        raise ServerUnavailable(f"lost the server in the middle of a batch: {exc}") from exc
    except BaseException:
        # unwound in the middle of the round trip (a worker's timeout signal, gevent's
        # Timeout, KeyboardInterrupt): its replies may still be on their way, and the next
        # round trip on this connection would read them as its own - another request's
        # data. The pool's can_read() probe is not run on this path (see _take), so drop it.
        conn.disconnect()
        raise
    finally:
        if conn is not None:
            _give_back(pool, conn) if fast else pool.release(conn)


# The checkout of a plain redis-py ConnectionPool (the pool of every `redis.Redis`) without
# the pool's per-call extras: get_connection() + release() cost ~5.5 us of client CPU per
# round trip (redis-py 8.1, measured on the dev machine; a session get is ~25-50 us in
# all): the can_read() probe (a poll() system call), the deprecated-arguments wrapper,
# four observability counters, two getpid() calls and the release event. densekv does not
# need the probe: a connection always comes back with every reply read (or is
# disconnected), and one the server closed while it sat idle fails its first read, which
# roundtrip sends again on a new connection (NothingRead). A connection that asks to
# reconnect (redis-py's maintenance notifications) is disconnected on release, as the pool
# does. Any other pool (blocking, sentinel, a client-side cache, a subclass, a credential
# provider, a pool of another process, a pool whose get_connection was replaced on the
# instance) takes the pool's own get_connection / release.
_FAST_POOL_ATTRS = ("_lock", "_available_connections", "_in_use_connections", "pid", "connection_kwargs")


_pid = [os.getpid()]  # this process's id, kept current without a getpid() system call per call
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _pid.__setitem__(0, os.getpid()))


def _plain_pool(pool: Any) -> bool:
    """True for a pool whose connections _take / _give_back may hand out (see above)."""
    ok: bool | None = getattr(pool, "_densekv_fast", None)
    if ok is None:
        ok = (type(pool) is redis.ConnectionPool and all(hasattr(pool, a) for a in _FAST_POOL_ATTRS)
              and getattr(pool, "cache", None) is None
              and pool.connection_kwargs.get("credential_provider") is None)
        try:
            pool._densekv_fast = ok  # noqa: SLF001  # our own mark on the pool
        except AttributeError:
            return False
    # a get_connection set on the pool itself (instrumentation, a test counting round
    # trips) is honoured: such a pool takes its own path
    return ok and pool.pid == _pid[0] and "get_connection" not in pool.__dict__


def _take(pool: Any) -> Any:
    """An idle connection of the pool, connected, or None when it has none idle (then the
    pool's get_connection makes one)."""
    with pool._lock:  # noqa: SLF001  # the pool's own lock, as get_connection takes it
        conn = pool._available_connections.pop() if pool._available_connections else None  # noqa: SLF001
        if conn is not None:
            pool._in_use_connections.add(conn)  # noqa: SLF001
    if conn is None:
        return None
    if conn._sock is None:  # noqa: SLF001  # disconnected (an error, a fork): connect it
        try:
            conn.connect()
        except BaseException:
            _give_back(pool, conn)
            raise
    return conn


def _give_back(pool: Any, conn: Any) -> None:
    reconnect = getattr(conn, "should_reconnect", None)
    if reconnect is not None and reconnect():
        conn.disconnect()
    with pool._lock:  # noqa: SLF001
        if conn in pool._in_use_connections:  # noqa: SLF001
            pool._in_use_connections.remove(conn)  # noqa: SLF001
            pool._available_connections.append(conn)  # noqa: SLF001


def _broken(exc: BaseException) -> bool:
    """A connection that broke (closed, reset), not one that waited too long."""
    return not isinstance(exc, (redis.TimeoutError, TimeoutError))


def exchange(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """The commands on one connection taken from its pool: one write, every reply read."""
    if _hiredis is not None and getattr(conn, "_sock", None) is not None and len(commands) >= _HIREDIS_FROM:
        return _hiredis_roundtrip(conn, commands)
    replies: list[Any] = []
    try:
        conn.send_packed_command(_pack_one(commands) or conn.pack_commands(commands))
    except (redis.ConnectionError, OSError) as exc:
        _raise_broken(exc, replies)
    return _read_replies(conn, len(commands), replies)


def _read_replies(conn: Any, n: int, replies: list[Any]) -> list[Any]:
    """`n` replies read by redis-py into `replies` (an error reply in its place); a broken
    connection raises as _raise_broken says, with what was read."""
    try:
        for _ in range(n):
            try:
                replies.append(conn.read_response(disable_decoding=True))
            except ResponseError as exc:
                replies.append(exc)
    except (redis.ConnectionError, OSError) as exc:
        _raise_broken(exc, replies)
    return replies


#: round trips of at least this many commands take _hiredis_roundtrip (not a single one:
#: interleaved turns of session get measured it 1-4% slower that way than redis-py's
#: send and read)
_HIREDIS_FROM = 2


def _pack_one(commands: list[tuple[Any, ...]]) -> list[bytes] | None:
    """One command packed by hiredis itself (the bytes redis-py's hiredis packer makes,
    without its per-argument checks: ~2 us of a script call's ten arguments), or None:
    several commands, no hiredis, or an argument hiredis does not take."""
    if _hiredis is None or len(commands) != 1:
        return None
    try:
        return [_hiredis.pack_command(commands[0])]  # send_packed_command takes a list of chunks
    except TypeError:  # a bytearray, a memoryview...: redis-py's packer converts those
        return None


def _raise_broken(exc: BaseException, replies: list[Any]) -> NoReturn:
    """Re-raise a broken connection's error, as NothingRead if no reply had come."""
    if replies or isinstance(exc, (redis.TimeoutError, TimeoutError)):
        raise exc
    raise NothingRead(str(exc)) from exc


try:
    import hiredis as _hiredis
except ImportError:  # redis-py without the hiredis extra: its own (slower) packer and parser
    _hiredis = None  # type: ignore[assignment]


class _ErrorText(Exception):
    """An error reply as hiredis hands it over, turned into redis-py's class below."""


def _hiredis_roundtrip(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """The batch path: hiredis packs every command and parses every reply straight off the
    connection's socket (redis-py's per-command packer and per-reply reader cost about half
    the client time of a big batch). The connection is idle and its parser empty here (the
    pool hands out connections between whole round trips), so nothing else reads it."""
    sock = conn._sock  # noqa: SLF001  # redis-py keeps the socket private; hiredis reads it directly
    pack_command = _hiredis.pack_command
    try:
        sock.sendall(b"".join([_MULTI_RESP if c is MULTI else _EXEC_RESP if c is EXEC else pack_command(c)
                               for c in commands]))
    except OSError as exc:
        _raise_broken(exc, [])
    return _hiredis_read(conn, sock, len(commands))


_MULTI_RESP = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC_RESP = b"*1\r\n$4\r\nEXEC\r\n"


def _hiredis_read(conn: Any, sock: Any, want: int) -> list[Any]:
    """`want` replies parsed by the connection's hiredis reader off its socket (error replies
    as redis-py's exception values); a broken connection raises as _raise_broken says."""
    replies: list[Any] = []
    reader, buf = _reader_of(conn)
    # hiredis's stub says str | bytes; its C reader takes any buffer (no copy of `buf`)
    feed = cast("Callable[[bytearray, int, int], None]", reader.feed)
    try:
        while len(replies) < want:
            reply = reader.gets()
            if reply is False:
                try:
                    n = sock.recv_into(buf)
                except OSError as exc:
                    _raise_broken(exc, replies)
                if not n:
                    _raise_broken(redis.ConnectionError("the server closed the connection"), replies)
                feed(buf, 0, n)
                continue
            if type(reply) is not bytes:  # bulk and status replies (most) need no look
                if isinstance(reply, _ErrorText):
                    reply = _parse_error(str(reply))
                elif isinstance(reply, list) and not _plain_items(reply):  # EXEC's array: errors inside
                    reply = _nested_errors(reply)
            replies.append(reply)
    except BaseException:
        conn.__dict__.pop(_READER, None)  # it may hold part of a reply: the next round trip gets a new one
        raise
    return replies


_READER = "_densekv_reader"


def _reader_of(conn: Any) -> tuple[Any, bytearray]:
    """The connection's hiredis reader and receive buffer, made on its first batch and kept
    (a new 64 KiB buffer and reader per round trip cost a few us each): between round
    trips the reader is empty, every reply having been read, or dropped after an error."""
    state: tuple[Any, bytearray] | None = conn.__dict__.get(_READER)
    if state is None:
        state = (_hiredis.Reader(replyError=_ErrorText), bytearray(1 << 16))
        conn.__dict__[_READER] = state
    return state


def _plain_items(reply: list[Any]) -> bool:
    """True when an array reply holds only bytes, None and ints (no error, no array
    inside): kept as hiredis made it, not copied by _nested_errors."""
    for r in reply:
        if type(r) is not bytes and r is not None and type(r) is not int:
            return False
    return True


def _nested_errors(reply: list[Any]) -> list[Any]:
    """An array reply with hiredis error values turned into redis-py's, at any depth."""
    return [_parse_error(str(r)) if isinstance(r, _ErrorText)
            else _nested_errors(r) if isinstance(r, list) else r for r in reply]


def _parse_error(text: str) -> ResponseError:
    from redis._parsers.base import BaseParser

    return BaseParser.parse_error(text)  # type: ignore[no-untyped-call, no-any-return]  # redis-py: untyped


async def aexchange(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """`exchange` on an asyncio connection: one write, every reply read (error replies as
    ResponseError values). The commands go packed in one write and the replies are read by
    the connection's own parser, under one `socket_timeout` for the whole exchange, kept by
    the loop's `Deadlines` (densekv/deadlines.py; redis-py runs each send in a task of its own under
    asyncio.wait_for, then each read under a timeout: about a third of an asyncio round
    trip's client CPU, issue 30). A connection
    with health checks, or one of a class without redis-py's stream and parser, takes
    redis-py's send_packed_command and read_response.

    While other round trips of this thread's event loop await their replies (a busy loop: a
    web worker), the write is posted (`_write_posted`): it goes out at the loop's next round,
    with those of every task that ran in this one, not in the middle of this task's step.
    Those tasks then send their commands back to back, so the server's event loop finds
    several in one wake-up and its replies come back together, instead of a wake-up for each
    command spread over the other tasks' work (issue 30: with 16 tasks on one loop,
    benchmarks/async_concurrency.py). The reply could not have come before the next round
    anyway: this task waits for it there. A round trip alone (calls awaited one after the
    other) writes at once: posting would cost it a loop round and gather nothing."""
    writer = conn._writer  # noqa: SLF001  # redis-py's StreamWriter (None: disconnected)
    parser = conn._parser  # noqa: SLF001  # redis-py's reader of replies off the same stream
    if writer is None or conn.health_check_interval or not hasattr(parser, "read_response"):
        return await _aexchange_redis_py(conn, commands)
    data = _apacked(conn, commands)
    replies: list[Any] = []
    read = parser.read_response
    timeout = conn.socket_timeout
    waiting = _WAITING
    others = waiting.round_trips
    waiting.round_trips = others + 1
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else waiting.deadlines_of(loop).enter(timeout)
    try:
        transport = writer.transport
        if others and len(data) == 1 and len(data[0]) <= _POST_MAX \
                and not transport.get_write_buffer_size() and not transport.is_closing():
            loop.call_soon(_write_posted, transport, data[0])
        else:  # alone, a big batch, a busy or closing transport: written now, paced by drain()
            writer.writelines(data)
            await writer.drain()  # at once unless the transport's buffer is full
        for _ in commands:
            replies.append(await read(disable_decoding=True))  # an error reply: its exception, as a value
    except asyncio.CancelledError:
        if deadline is not None and deadline.timed_out():
            raise redis.TimeoutError(f"Timeout reading from {_host_of(conn)}") from None
        raise
    except (redis.ConnectionError, OSError) as exc:
        _raise_broken(exc, replies)
    finally:
        waiting.round_trips -= 1
        if deadline is not None:
            deadline.leave()
    return replies


class _Waiting(threading.local):
    """This thread's (its event loop's) asyncio round trips awaiting their replies, and
    the deadlines of those under a socket_timeout."""

    round_trips = 0
    deadlines: Deadlines | None = None

    def deadlines_of(self, loop: asyncio.AbstractEventLoop) -> Deadlines:
        deadlines = self.deadlines
        if deadlines is None or deadlines.loop is not loop:  # a thread's next loop (asyncio.run again)
            from densekv.deadlines import Deadlines  # asyncio only: not loaded by `import densekv`

            deadlines = self.deadlines = Deadlines(loop)
        return deadlines


_WAITING = _Waiting()


#: a posted write's largest payload (asyncio's default high-water mark): bigger ones are
#: written at once and paced by drain(), as a buffer past it pauses the writer
_POST_MAX = 1 << 16


def _write_posted(transport: asyncio.WriteTransport, data: bytes) -> None:
    """A posted write, at the event loop's next round: onto the connection unless it closed
    meanwhile (disconnected, or lost: the round trip's read then finds it closed, as after
    a write that went out: no reply came, NothingRead, and aroundtrip sends the batch again
    on a new connection)."""
    if not transport.is_closing():
        transport.write(data)


def _apacked(conn: Any, commands: list[tuple[Any, ...]]) -> list[bytes]:
    """The commands in RESP, as chunks for StreamWriter.writelines: hiredis's packer (one
    chunk; MULTI and EXEC as their bytes made once), or redis-py's where hiredis is missing or
    refuses an argument (a bytearray, a memoryview)."""
    if _hiredis is not None:
        pack_command = _hiredis.pack_command
        try:
            if len(commands) == 1:
                return [pack_command(commands[0])]
            return [b"".join([_MULTI_RESP if c is MULTI else _EXEC_RESP if c is EXEC else pack_command(c)
                              for c in commands])]
        except TypeError:
            pass
    return cast("list[bytes]", conn.pack_commands(commands))


def _host_of(conn: Any) -> str:
    """Where a connection goes, as redis-py's errors name it (host:port, or a socket's path)."""
    where = getattr(conn, "_host_error", None)
    return str(where()) if callable(where) else "the server"


async def _aexchange_redis_py(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """aexchange through redis-py's public send and read (health checks and all)."""
    replies: list[Any] = []
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        for _ in commands:
            try:
                replies.append(await conn.read_response(disable_decoding=True))
            except ResponseError as exc:
                replies.append(exc)
    except (redis.ConnectionError, OSError) as exc:
        _raise_broken(exc, replies)
    return replies



async def aroundtrip(pool: Any, commands: list[tuple[Any, ...]], plans: Sequence[Any] = (),
                      reads_only: Callable[[Sequence[Any]], bool] | None = None) -> list[Any]:
    """`roundtrip` on an asyncio pool (a read-only batch sent once more on a broken one). A
    plain redis.asyncio pool lends an idle connection without its checkout's probe, events
    and counters (_atake, as _take for the sync pool)."""
    conn = _atake(pool) if _plain_apool(pool) else None
    fast = conn is not None
    if conn is None:
        conn = await pool.get_connection()
    elif not conn.is_connected:  # disconnected after an error: connect it, as the pool would
        try:
            await conn.connect()
        except BaseException:
            _agive_back(pool, conn)
            raise
    try:
        return await aexchange(conn, commands)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        await conn.disconnect()
        if _broken(exc) and (isinstance(exc, NothingRead) or (
                plans and reads_only is not None and reads_only(plans))):
            _agive_back(pool, conn) if fast else await pool.release(conn)
            conn = None
            return await aroundtrip(pool, commands)
        raise ServerUnavailable(f"lost the server in the middle of a batch: {exc}") from exc
    except BaseException:
        await conn.disconnect()  # cancelled mid-read (a client went away): as in roundtrip
        raise
    finally:
        if conn is not None:
            if not fast:
                await pool.release(conn)
            else:
                reconnect = getattr(conn, "should_reconnect", None)
                if reconnect is not None and reconnect():  # as the pool's release does
                    await conn.disconnect()
                _agive_back(pool, conn)


# The checkout of a plain redis.asyncio ConnectionPool (every `redis.asyncio.Redis`'s) without
# its per-call extras, for the reasons _take gives: get_connection() + release() cost about
# 10 us of client CPU per round trip (redis-py 8.1: the pool lock taken twice, the
# connection's can_read() probe, four observability counters, the release event for
# streaming credentials). The lists are changed without an await in between, so no other
# task sees them half done; while another task holds the pool's lock (a release that
# disconnects, a re-authentication walking the idle connections) the pool's own path waits
# for it. Any other pool (blocking, a subclass, a credential provider, a get_connection set
# on the instance) takes the pool's own get_connection / release.
_AFAST_POOL_ATTRS = ("_lock", "_available_connections", "_in_use_connections", "connection_kwargs")


def _plain_apool(pool: Any) -> bool:
    ok: bool | None = getattr(pool, "_densekv_fast", None)
    if ok is None:
        ok = (type(pool) is redis.asyncio.ConnectionPool and all(hasattr(pool, a) for a in _AFAST_POOL_ATTRS)
              and isinstance(pool.connection_kwargs, dict)
              and pool.connection_kwargs.get("credential_provider") is None)
        try:
            pool._densekv_fast = ok  # noqa: SLF001  # our own mark on the pool
        except AttributeError:
            return False
    return ok and "get_connection" not in pool.__dict__ and not pool._lock.locked()  # noqa: SLF001


def _atake(pool: Any) -> Any:
    """An idle connection of an asyncio pool (maybe disconnected), or None when it has none."""
    idle = pool._available_connections  # noqa: SLF001
    if not idle:
        return None
    conn = idle.pop()
    pool._in_use_connections.add(conn)  # noqa: SLF001
    return conn


def _agive_back(pool: Any, conn: Any) -> None:
    if conn in pool._in_use_connections:  # noqa: SLF001  # not when the pool was reset meanwhile
        pool._in_use_connections.remove(conn)  # noqa: SLF001
        pool._available_connections.append(conn)  # noqa: SLF001


# --- raw batches: bulk loading and the analyzer -------------------------------------------


def send_packed(pool: Any, payload: bytes, n: int) -> list[Any]:
    """`payload` (RESP of `n` commands, from resp.pack or a template of its bytes) written on a
    connection of `pool` (its public get_connection / release), and the `n` raw replies read:
    bytes, ints, lists, None; an error reply is redis-py's ResponseError subclass in its place
    (NoPermissionError for NOPERM...), every reply read, so the connection stays usable. A
    broken connection is disconnected and raises redis.ConnectionError (NothingRead when no
    reply had come) or redis.TimeoutError; nothing is sent again."""
    conn = pool.get_connection()
    try:
        conn.send_packed_command([payload], check_health=False)
        sock = getattr(conn, "_sock", None)
        if _hiredis is not None and sock is not None:
            return _hiredis_read(conn, sock, n)
        return _read_replies(conn, n, [])
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
