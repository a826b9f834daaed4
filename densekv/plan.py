"""Plans and the executors that run them: the one I/O mechanism of every densekv structure.

A *plan* is what one operation sends (commands, or one Lua script call, each with its keys
declared) plus the pure function that turns the raw replies into the result. Layouts only
build plans; they never touch a socket. Executors run plans:

  * SyncExecutor   - a redis-py `Redis` client: run(plan), run_many(plans) in one round trip
  * AsyncExecutor  - a redis-py asyncio client: the same, awaited
  * ClusterExecutor - a redis-py `RedisCluster`: plans grouped by slot, one pipeline per
    node, MOVED/ASK answered by refreshing the slot map and re-sending only what moved

So the logic of an operation is written once and sync, async, batch and cluster cannot
drift apart. Invariants kept here:
  * replies are raw RESP values (bytes, ints, lists): no redis-py response callbacks and
    no decode_responses, whatever the user's client was built with;
  * all keys of one plan hash to one slot (checked on a cluster), so an atomic plan
    (MULTI/EXEC) or a script can run there;
  * scripts go as EVALSHA. A batch of several plans always starts with SCRIPT LOAD of
    the scripts it uses (same round trip), so every plan runs in order. A single plan
    uses a script once its pool has it (SCRIPT LOAD on first use); a NOSCRIPT reply
    (SCRIPT FLUSH, restart) reloads and re-sends that one call, which did not run;
  * an error reply raises after the whole batch was read (the connection stays usable):
    WRONGTYPE as WrongType, a script error as ScriptError, others as redis.ResponseError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Union, cast

import redis
import redis.asyncio
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError, TryAgainError

from densekv.errors import PlanError, ScriptError, ServerUnavailable, WrongType
from densekv.lua import Script

T = TypeVar("T")
Key = Union[bytes, str]


@dataclass(frozen=True, slots=True)
class Command:
    """One command; `keys` are the keys among `args`, declared for slot routing."""

    args: tuple[Any, ...]
    keys: tuple[Key, ...] = ()


@dataclass(frozen=True, slots=True)
class ScriptCall:
    script: Script
    keys: tuple[Key, ...] = ()
    args: tuple[Any, ...] = ()

    @property
    def evalsha(self) -> tuple[Any, ...]:
        return ("EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args)


Step = Union[Command, ScriptCall]


def _identity(replies: list[Any]) -> Any:
    return replies


@dataclass(frozen=True)
class Plan(Generic[T]):
    """Steps to send and the decoding of their replies (a list, one reply per step)."""

    steps: tuple[Step, ...]
    decode: Callable[[list[Any]], T] = field(default=_identity)
    atomic: bool = False  # wrap the steps in MULTI/EXEC

    def __post_init__(self) -> None:
        if not self.steps:
            raise PlanError("a plan needs at least one step")
        if any(isinstance(s, ScriptCall) for s in self.steps) and (self.atomic or len(self.steps) > 1):
            raise PlanError("a plan is commands or one script call: a script is atomic already")

    def keys(self) -> list[Key]:
        return [k for step in self.steps for k in step.keys]

    def slot(self) -> int | None:
        """The one cluster slot of this plan's keys (None if it has no keys)."""
        slots = {key_slot(k.encode() if isinstance(k, str) else k) for k in self.keys()}
        if len(slots) > 1:
            raise PlanError(
                f"plan keys span {len(slots)} cluster slots; give them one hash tag"
            )
        return slots.pop() if slots else None


def command(*args: Any, keys: Sequence[Key] = (), decode: Callable[[Any], T] | None = None) -> Plan[T]:
    """A plan of one command whose result is decode(reply) (the raw reply by default)."""
    fn = decode or (lambda r: r)
    return Plan((Command(tuple(args), tuple(keys)),), lambda replies: fn(replies[0]))


def script_call(
    script: Script,
    keys: Sequence[Key],
    args: Sequence[Any],
    decode: Callable[[Any], T] | None = None,
) -> Plan[T]:
    fn = decode or (lambda r: r)
    return Plan((ScriptCall(script, tuple(keys), tuple(args)),), lambda replies: fn(replies[0]))


# --- wire: plans -> flat command list -> replies -> per-plan replies ------------------


@dataclass
class _Wire:
    """A batch of plans flattened to commands, and how to fold the replies back."""

    plans: Sequence[Plan[Any]]
    commands: list[tuple[Any, ...]] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # reply slice per plan

    @classmethod
    def build(cls, plans: Sequence[Plan[Any]], preload: Sequence[Script]) -> _Wire:
        wire = cls(plans)
        for s in preload:
            wire.commands.append(("SCRIPT", "LOAD", s.source))
        for plan in plans:
            start = len(wire.commands)
            if plan.atomic:
                wire.commands.append(("MULTI",))
            for step in plan.steps:
                wire.commands.append(step.evalsha if isinstance(step, ScriptCall) else step.args)
            if plan.atomic:
                wire.commands.append(("EXEC",))
            wire.spans.append((start, len(wire.commands)))
        return wire

    def replies_of(self, replies: list[Any]) -> list[list[Any]]:
        out = []
        for plan, (start, end) in zip(self.plans, self.spans):
            chunk = replies[start:end]
            if plan.atomic:
                exec_reply = chunk[-1]
                if isinstance(exec_reply, Exception):
                    queued = [r for r in chunk[1:-1] if isinstance(r, Exception)]
                    exec_reply = queued[0] if queued else exec_reply
                    chunk = [exec_reply] * len(plan.steps)
                else:
                    chunk = list(exec_reply)
            out.append(chunk)
        return out


def _raise_errors(plan: Plan[Any], replies: list[Any]) -> None:
    for step, reply in zip(plan.steps, replies):
        if isinstance(reply, Exception):
            raise _translate(reply, step)


def _translate(exc: Exception, step: Step) -> Exception:
    text = str(exc)
    if text.startswith("WRONGTYPE") or (isinstance(step, ScriptCall) and "WRONGTYPE" in text):
        keys = ", ".join(k.decode(errors="replace") if isinstance(k, bytes) else k for k in step.keys)
        return WrongType(f"key {keys} holds a value of another type; densekv left it untouched")
    if isinstance(step, ScriptCall) and not isinstance(exc, NoScriptError):
        return ScriptError(f"script {step.script.name} failed: {text}")
    return exc


def _finish(plans: Sequence[Plan[Any]], per_plan: list[list[Any]]) -> list[Any]:
    for plan, replies in zip(plans, per_plan):
        _raise_errors(plan, replies)
    return [plan.decode(replies) for plan, replies in zip(plans, per_plan)]


def _noscript_positions(wire: _Wire, per_plan: list[list[Any]]) -> list[tuple[int, int]]:
    return [
        (p, s)
        for p, replies in enumerate(per_plan)
        for s, reply in enumerate(replies)
        if isinstance(reply, NoScriptError)
    ]


def _reload_commands(wire: _Wire, failed: list[tuple[int, int]]) -> tuple[list[Script], list[tuple[Any, ...]]]:
    """SCRIPT LOAD of the scripts that were missing, then the failed calls again."""
    calls = [wire.plans[p].steps[s] for p, s in failed]
    scripts = list({c.script.sha: c.script for c in calls if isinstance(c, ScriptCall)}.values())
    commands: list[tuple[Any, ...]] = [("SCRIPT", "LOAD", s.source) for s in scripts]
    commands += [c.evalsha for c in calls if isinstance(c, ScriptCall)]
    return scripts, commands


def _scripts_of(plans: Sequence[Plan[Any]]) -> list[Script]:
    seen: dict[str, Script] = {}
    for plan in plans:
        for step in plan.steps:
            if isinstance(step, ScriptCall):
                seen.setdefault(step.script.sha, step.script)
    return list(seen.values())


# --- connection-level round trips ----------------------------------------------------


def _roundtrip(pool: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Send all commands in one write, read every reply raw; errors come back as values."""
    conn = pool.get_connection()
    try:
        if _hiredis is not None and getattr(conn, "_sock", None) is not None and len(commands) > 1:
            return _hiredis_roundtrip(conn, commands)
        conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(conn.read_response(disable_decoding=True))
            except ResponseError as exc:
                replies.append(exc)
        return replies
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        conn.disconnect()
        raise ServerUnavailable(f"lost the server in the middle of a batch: {exc}") from exc
    finally:
        pool.release(conn)


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
    sock = conn._sock
    sock.sendall(b"".join([_hiredis.pack_command(c) for c in commands]))
    reader = _hiredis.Reader(replyError=_ErrorText)
    # hiredis's stub says str | bytes; its C reader takes any buffer (no copy of `buf`)
    feed = cast("Callable[[bytearray, int, int], None]", reader.feed)
    replies: list[Any] = []
    want = len(commands)
    buf = bytearray(1 << 16)
    while len(replies) < want:
        reply = reader.gets()
        if reply is False:
            n = sock.recv_into(buf)
            if not n:
                raise redis.ConnectionError("the server closed the connection")
            feed(buf, 0, n)
            continue
        if isinstance(reply, _ErrorText):
            reply = _parse_error(str(reply))
        elif isinstance(reply, list):  # EXEC's array: errors of queued commands inside
            reply = _nested_errors(reply)
        replies.append(reply)
    return replies


def _nested_errors(reply: list[Any]) -> list[Any]:
    """An array reply with hiredis error values turned into redis-py's, at any depth."""
    return [_parse_error(str(r)) if isinstance(r, _ErrorText)
            else _nested_errors(r) if isinstance(r, list) else r for r in reply]


def _parse_error(text: str) -> ResponseError:
    from redis._parsers.base import BaseParser

    return BaseParser.parse_error(text)  # type: ignore[no-untyped-call, no-any-return]  # redis-py: untyped


async def _aroundtrip(pool: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    conn = await pool.get_connection()
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response(disable_decoding=True))
            except ResponseError as exc:
                replies.append(exc)
        return replies
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        await conn.disconnect()
        raise ServerUnavailable(f"lost the server in the middle of a batch: {exc}") from exc
    finally:
        await pool.release(conn)


class _ScriptMemory:
    """Which script SHAs a connection pool is known to hold."""

    def __init__(self) -> None:
        self.loaded: set[str] = set()

    def missing(self, plans: Sequence[Plan[Any]]) -> list[Script]:
        """Scripts to load ahead: all of a batch's, or a single plan's unseen ones."""
        if len(plans) > 1:
            return _scripts_of(plans)
        return [s for s in _scripts_of(plans) if s.sha not in self.loaded]

    def mark(self, scripts: Sequence[Script]) -> None:
        self.loaded.update(s.sha for s in scripts)


class SyncExecutor:
    """Runs plans on a redis-py `Redis` client (its connection pool, raw replies)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.pool = client.connection_pool
        self._scripts = _ScriptMemory()

    def run(self, plan: Plan[T]) -> T:
        result: T = self.run_many([plan])[0]
        return result

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        """All plans in one round trip (plus one more only after a NOSCRIPT)."""
        if not plans:
            return []
        preload = self._scripts.missing(plans)
        wire = _Wire.build(plans, preload)
        replies = _roundtrip(self.pool, wire.commands)
        self._scripts.mark(preload)
        per_plan = wire.replies_of(replies)
        self._retry_noscript(wire, per_plan)
        return _finish(plans, per_plan)

    def _retry_noscript(self, wire: _Wire, per_plan: list[list[Any]]) -> None:
        failed = _noscript_positions(wire, per_plan)
        if not failed:
            return
        self._scripts.loaded.clear()
        scripts, commands = _reload_commands(wire, failed)
        replies = _roundtrip(self.pool, commands)[len(scripts) :]
        self._scripts.mark(scripts)
        for (p, s), reply in zip(failed, replies):
            per_plan[p][s] = reply


class AsyncExecutor:
    """Runs plans on a redis-py asyncio `Redis` client."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.pool = client.connection_pool
        self._scripts = _ScriptMemory()

    async def run(self, plan: Plan[T]) -> T:
        result: T = (await self.run_many([plan]))[0]
        return result

    async def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        preload = self._scripts.missing(plans)
        wire = _Wire.build(plans, preload)
        replies = await _aroundtrip(self.pool, wire.commands)
        self._scripts.mark(preload)
        per_plan = wire.replies_of(replies)
        failed = _noscript_positions(wire, per_plan)
        if failed:
            self._scripts.loaded.clear()
            scripts, commands = _reload_commands(wire, failed)
            retry = (await _aroundtrip(self.pool, commands))[len(scripts) :]
            self._scripts.mark(scripts)
            for (p, s), reply in zip(failed, retry):
                per_plan[p][s] = reply
        return _finish(plans, per_plan)


class ClusterExecutor:
    """Runs plans on a redis-py `RedisCluster`: grouped by slot, one pipeline per node."""

    MAX_REDIRECTS = 5

    def __init__(self, client: redis.RedisCluster) -> None:
        self.client = client
        self._scripts: dict[str, _ScriptMemory] = {}

    def run(self, plan: Plan[T]) -> T:
        result: T = self.run_many([plan])[0]
        return result

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        per_plan: list[list[Any] | None] = [None] * len(plans)
        pending = list(range(len(plans)))
        for _ in range(self.MAX_REDIRECTS):
            by_node: dict[str, tuple[Any, list[int]]] = {}
            for i in pending:
                slot = plans[i].slot()
                node = (
                    self.client.nodes_manager.get_node_from_slot(slot)
                    if slot is not None
                    else self.client.get_default_node()  # type: ignore[no-untyped-call]  # redis-py: untyped
                )
                by_node.setdefault(node.name, (node, []))[1].append(i)
            redirected: list[int] = []
            for name, (node, indexes) in by_node.items():
                memory = self._scripts.setdefault(name, _ScriptMemory())
                group = [plans[i] for i in indexes]
                pool = self.client.get_redis_connection(node).connection_pool
                preload = memory.missing(group)
                wire = _Wire.build(group, preload)
                replies = _roundtrip(pool, wire.commands)
                memory.mark(preload)
                for i, replies_i in zip(indexes, wire.replies_of(replies)):
                    if any(isinstance(r, (MovedError, AskError, TryAgainError)) for r in replies_i):
                        redirected.append(i)
                    elif any(isinstance(r, NoScriptError) for r in replies_i):
                        memory.loaded.clear()
                        redirected.append(i)
                    else:
                        per_plan[i] = replies_i
            if not redirected:
                break
            # Slots moved (resharding) or a script vanished: refresh, re-send what failed.
            self.client.nodes_manager.initialize()
            pending = redirected
        else:
            raise ServerUnavailable("cluster kept redirecting: slots are still moving")
        return _finish(plans, [r for r in per_plan if r is not None])


Executor = Union[SyncExecutor, ClusterExecutor]


def executor_for(client: Any) -> Any:
    """The executor that fits a redis-py client (sync, cluster or asyncio)."""
    if isinstance(client, redis.RedisCluster):
        return ClusterExecutor(client)
    if isinstance(client, redis.asyncio.Redis):
        return AsyncExecutor(client)
    if isinstance(client, redis.asyncio.RedisCluster):
        raise TypeError("asyncio cluster clients are not supported yet: use redis.RedisCluster")
    if isinstance(client, redis.Redis):
        return SyncExecutor(client)
    raise TypeError(f"densekv needs a redis-py client, got {type(client).__name__}")
