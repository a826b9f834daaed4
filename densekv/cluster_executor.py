"""ClusterExecutor: plans on a redis-py `RedisCluster`, through resharding and failover;
AsyncClusterExecutor: the same on redis-py's asyncio `RedisCluster`; and `executor_for`,
which picks the executor of any redis-py client (executors.py's or these).

Both drive the same rounds (`_Run`, which does no I/O: it groups the pending steps by
node, folds each node's replies back, and says what to send again and how long to wait);
only sending, re-reading the slot map and sleeping differ.

Plans are grouped by the node that serves their slot and each group goes as one pipeline
(densekv/executors.py's Wire: SCRIPT LOAD ahead, MULTI/EXEC, EVALSHA). What a cluster answers
besides results, and what this executor does about it (everything here is retried until
RECOVERY_SECONDS after the call began, then ServerUnavailable says what kept failing):

  * MOVED: the slot has a new owner (a finished migration, a failover). The slot map is
    updated from the reply (redis-py's move_slot) and the redirected steps go there.
  * ASK: the slot is being migrated and this key is already (or only going to be) on the
    target. The steps go to the node named in the reply after ASKING, without changing
    the slot map: every command of a plain plan gets its own ASKING, an atomic plan one
    ASKING before MULTI (the flag lasts the transaction), a script's EVALSHA one. The
    plan's scripts are loaded on the target first when this pool has not loaded them
    there; a NOSCRIPT reply clears what we believe a node holds and sends again.
  * TRYAGAIN (a multi-key plan whose keys are split between source and target during a
    migration), CLUSTERDOWN, LOADING, MASTERDOWN, READONLY (a failover in progress): a
    short backoff (20 ms doubling to 250 ms) and the same steps again.
  * A step of a plain (non-atomic) plan that executed keeps its reply; only the steps
    that were redirected are sent again, so nothing runs twice. Atomic plans and
    scripts are all-or-nothing: a redirect means none of it ran, so all of it goes again.
  * The connection to a node fails (a SIGKILLed master, a timeout):
      - before the request was sent (the pool could not connect: refused, or the
        pooled socket was found closed): nothing ran. The topology is read again from
        the surviving nodes (CLUSTER SLOTS via redis-py's NodesManager) and the plans are
        sent to whoever serves their slots now, with backoff, until a replica has been
        promoted (node timeout + election: 2-4 s with the 1.5 s node timeout of
        densekv.embedded(cluster=3, replicas=1); about node-timeout + 1 s in general);
      - after it was sent (the reply was lost): a plan of reads only (plan.READS) is sent
        again; a plan that writes might have run, so it is never re-sent: WriteInDoubt
        (a ServerUnavailable) is raised once the other plans of the batch are done. The
        caller decides: read back, or repeat an operation that is idempotent (a set add,
        a destroy, a touch). densekv does not guess which scripts are idempotent.
  * durable: the WAIT of executors.Durability ends each node's pipeline that writes (on the
    node that took the writes, the ASK target included); too few acknowledgements raise
    NotDurable.
  * revocations (Plan.revokes: a session destroyed or regenerated) wait for a replica even
    without durable when the slot map lists one for the slot: WAIT 1 DURABLE_TIMEOUT_MS,
    NotDurable if none acknowledged. So a token given up is dead on a replica before the
    caller hears so, and a failover cannot make it live again. (On a single server with
    replicas only durable=True waits: the executor does not know its replicas there.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.cluster import ClusterNode
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)

from densekv.errors import ServerUnavailable, WriteInDoubt
from densekv.executors import (
    AsyncExecutor,
    AsyncManyRunner,
    Durability,
    ManyRunner,
    ScriptMemory,
    SyncExecutor,
    Wire,
    durability,
    finish_plans,
)
from densekv.lua import Script
from densekv.plan import Plan, plan_writes
from densekv.wire import aexchange, exchange

#: how long one run_many keeps retrying redirects, TRYAGAIN and a lost master
RECOVERY_SECONDS = 20.0
_WAITS = (TryAgainError, ClusterDownError, BusyLoadingError, MasterDownError, ReadOnlyError)
#: replies that mean a step did not run on the node that sent them
_REDIRECTS = (MovedError, AskError, NoScriptError, *_WAITS)


class _NotSent(Exception):
    """No byte of the request reached the node: nothing ran."""


class _Lost(Exception):
    """The request was (maybe) sent, the reply did not come back."""


def _send(pool: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    try:
        conn = pool.get_connection()
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise _NotSent(str(exc)) from exc
    try:
        return exchange(conn, commands)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        conn.disconnect()
        raise _Lost(str(exc)) from exc
    except BaseException:
        conn.disconnect()  # unwound mid-read: its replies must not meet the next round trip (wire.roundtrip)
        raise
    finally:
        pool.release(conn)


async def _asend(node: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """The same on a node of redis-py's asyncio RedisCluster (its own connection list)."""
    conn = None
    try:
        conn = node.acquire_connection()
        if not conn.is_connected:
            await conn.connect()
    except (redis.ConnectionError, redis.TimeoutError, OSError, RedisClusterException) as exc:
        if conn is not None:
            node.release(conn)
        raise _NotSent(str(exc)) from exc
    try:
        return await aexchange(conn, commands)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        await conn.disconnect()
        raise _Lost(str(exc)) from exc
    except BaseException:
        await conn.disconnect()  # cancelled mid-read: as in _send
        raise
    finally:
        node.release(conn)


class _Routing:
    """What both executors share: their settings, where a plan goes, the scripts each node
    is known to hold."""

    client: Any
    durable: Durability | None
    recovery: float
    revocation: Durability
    _scripts: dict[str, ScriptMemory]

    def _setup(self, client: Any, durable: bool | Durability | None, recovery: float) -> None:
        self.client = client
        self.durable = durability(durable)
        self.recovery = recovery
        self.revocation = Durability()  # the wait of a revoking plan (see module docstring)
        self._scripts = {}

    def node_for(self, plan: Plan[Any]) -> Any:
        slot = plan.slot()
        if slot is None:
            return self.client.get_default_node()
        return self.client.nodes_manager.get_node_from_slot(slot)

    def memory(self, node: Any) -> ScriptMemory:
        return self._scripts.setdefault(node.name, ScriptMemory())

    def node_at(self, host: str, port: int) -> Any:
        """The node an ASK reply names (known to the slot map or not)."""
        raise NotImplementedError


class ClusterExecutor(_Routing, ManyRunner):
    """Runs plans on a redis-py `RedisCluster`: grouped by slot, one pipeline per node,
    through migrations and failovers (see the module docstring)."""

    def __init__(self, client: redis.RedisCluster, durable: bool | Durability | None = None,
                 recovery: float = RECOVERY_SECONDS) -> None:
        self._setup(client, durable, recovery)

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        run = _Run(self, plans)
        while True:
            for send in run.round():
                try:
                    raw = self.send(send.node, send.wire.commands)
                except (_NotSent, _Lost) as exc:
                    run.failed(send, exc)
                else:
                    run.took(send, raw)
            for moved in run.take_moves():
                try:
                    self.client.nodes_manager.move_slot(moved)
                except (KeyError, RedisClusterException):
                    run.refresh = True
            pause = run.next_pause()
            if pause is None:
                return run.result()
            if run.refresh:
                run.refreshed(self.refresh())
            time.sleep(pause)

    def node_at(self, host: str, port: int) -> Any:
        node = self.client.nodes_manager.get_node(host=host, port=port)
        return node if node is not None else ClusterNode(host, port)  # type: ignore[no-untyped-call]  # redis-py: untyped

    def send(self, node: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        return _send(self.client.get_redis_connection(node).connection_pool, commands)

    def refresh(self) -> str | None:
        """Read the slot map again from the nodes that answer; the error text if none did."""
        try:
            self.client.nodes_manager.initialize()
        except (RedisClusterException, redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            return str(exc)
        return None


class AsyncClusterExecutor(_Routing, AsyncManyRunner):
    """The same on redis-py's asyncio `RedisCluster`: the same rounds (`_Run`), awaited."""

    def __init__(self, client: redis.asyncio.RedisCluster, durable: bool | Durability | None = None,
                 recovery: float = RECOVERY_SECONDS) -> None:
        self._setup(client, durable, recovery)

    async def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        await self.client.initialize()  # the slot map, on first use (a no-op after)
        run = _Run(self, plans)
        while True:
            for send in run.round():
                try:
                    raw = await _asend(send.node, send.wire.commands)
                except (_NotSent, _Lost) as exc:
                    run.failed(send, exc)
                else:
                    run.took(send, raw)
            for moved in run.take_moves():
                try:
                    await self.client.nodes_manager.move_slot(moved)
                except (KeyError, RedisClusterException):
                    run.refresh = True
            pause = run.next_pause()
            if pause is None:
                return run.result()
            if run.refresh:
                run.refreshed(await self.refresh())
            await asyncio.sleep(pause)

    def node_at(self, host: str, port: int) -> Any:
        manager = self.client.nodes_manager
        node = manager.get_node(host=host, port=port)
        return node if node is not None else AsyncClusterNode(host, port, **manager.connection_kwargs)

    async def refresh(self) -> str | None:
        try:
            await self.client.nodes_manager.initialize()
        except (RedisClusterException, redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            return str(exc)
        return None


@dataclass
class _Send:
    """One node's pipeline of a round: which plans (and steps) it carries, and how."""

    node: Any
    indexes: list[int]
    subs: list[Plan[Any]]
    preload: list[Script]
    check: Durability | None
    wire: Wire
    asked: dict[int, Any]


class _Run:
    """One run_many, without I/O: which steps of which plans are still to send, and where.
    The executor asks for a round of sends (`round`), hands back each reply (`took`) or
    failure (`failed`), applies the slot moves the replies announced (`take_moves`), and
    asks how long to pause before the next round (`next_pause`: None when all is done;
    ServerUnavailable once RECOVERY_SECONDS have passed)."""

    def __init__(self, ex: _Routing, plans: Sequence[Plan[Any]]) -> None:
        self.ex = ex
        self.plans = plans
        self.replies: list[list[Any]] = [[None] * len(p.steps) for p in plans]
        self.todo: dict[int, list[int]] = {i: list(range(len(p.steps))) for i, p in enumerate(plans)}
        self.ask: dict[int, Any] = {}  # plan -> ASK target, for the next send only
        self.doubt: list[int] = []
        self.moves: list[MovedError] = []
        self.last_problem = ""
        self.started = time.monotonic()
        self.attempt = 0
        self.wait = self.refresh = False

    def round(self) -> list[_Send]:
        """Every pending step, grouped into one pipeline per node."""
        self.wait = self.refresh = False
        groups: dict[str, tuple[Any, list[int]]] = {}
        for i in self.todo:
            try:
                node = self.ask.get(i) or self.ex.node_for(self.plans[i])
            except RedisClusterException as exc:  # slot not covered: the map is stale
                self.last_problem = str(exc)
                self.refresh = True
                continue
            groups.setdefault(node.name, (node, []))[1].append(i)
        return [self._prepare(node, indexes) for node, indexes in groups.values()]

    def _prepare(self, node: Any, indexes: list[int]) -> _Send:
        subs = [self._sub(i) for i in indexes]
        asking = frozenset(k for k, i in enumerate(indexes) if i in self.ask)
        preload = self.ex.memory(node).missing(subs)
        check = self.ex.durable
        wait_cmd = check.wait_for(subs) if check else None
        if wait_cmd is None and self._replicated(subs):
            check = self.ex.revocation
            wait_cmd = ("WAIT", check.replicas, check.timeout_ms)
        wire = Wire.build(subs, preload, asking=asking, wait=wait_cmd)
        asked = {i: self.ask.pop(i) for i in indexes if i in self.ask}
        return _Send(node, indexes, subs, preload, check, wire, asked)

    def _sub(self, i: int) -> Plan[Any]:
        plan, steps = self.plans[i], self.todo[i]
        if len(steps) == len(plan.steps):
            return plan
        return Plan(tuple(plan.steps[j] for j in steps), revokes=plan.revokes)

    def failed(self, send: _Send, exc: Exception) -> None:
        """Nothing came back: nothing ran (_NotSent), or writes are in doubt (_Lost)."""
        self.wait = self.refresh = True
        if isinstance(exc, _NotSent):
            self.last_problem = f"{send.node.name} does not answer: {exc}"
            return
        self.last_problem = f"lost {send.node.name}: {exc}"
        for i, sub in zip(send.indexes, send.subs):
            if plan_writes(sub):
                self.doubt.append(i)
                del self.todo[i]

    def took(self, send: _Send, raw: list[Any]) -> None:
        memory = self.ex.memory(send.node)
        memory.mark(send.preload)
        wrote = False
        for i, sub, got in zip(send.indexes, send.subs, send.wire.replies_of(raw)):
            wrote = wrote or (plan_writes(sub) and any(not isinstance(r, _REDIRECTS) for r in got))
            self._take(i, got, memory, send.asked.get(i))
        # Only a write that ran here needs the replica's word. When every write of the
        # pipeline was redirected (a manual failover turned this node into a replica while
        # our commands waited: MOVED, and WAIT refused on a replica), nothing ran here and
        # the WAIT goes with the writes to their new node.
        if send.check is not None and send.wire.wait_at is not None and wrote:
            send.check.check(send.wire.wait_reply(raw), send.node.name)

    def take_moves(self) -> list[MovedError]:
        """The MOVED replies of this round, for the executor to apply to its slot map."""
        moves, self.moves = self.moves, []
        return moves

    def next_pause(self) -> float | None:
        """Seconds to wait before the next round; None when every plan is done."""
        if not self.todo:
            return None
        if time.monotonic() - self.started > self.ex.recovery:
            raise ServerUnavailable(
                f"the cluster did not recover within {self.ex.recovery:.0f} s: {self.last_problem}"
            )
        pause = min(0.25, 0.02 * 2 ** min(self.attempt, 4)) if (self.wait or self.refresh or self.attempt >= 2) else 0.0
        self.attempt += 1
        return pause

    def refreshed(self, problem: str | None) -> None:
        if problem:
            self.last_problem = f"no node gave a slot map: {problem}"

    def result(self) -> list[Any]:
        if self.doubt:
            names = ", ".join(str(self.plans[i].keys()[:1]) for i in self.doubt[:3])
            raise WriteInDoubt(
                f"lost the connection after sending {len(self.doubt)} write(s) (keys {names}): "
                f"they may or may not have been applied ({self.last_problem}); read back before repeating"
            )
        return finish_plans(self.plans, self.replies)

    def _replicated(self, subs: list[Plan[Any]]) -> bool:
        """A revoking plan among `subs` whose slot has a replica in the slot map."""
        cache = self.ex.client.nodes_manager.slots_cache
        slots = [p.slot() for p in subs if p.revokes]
        return any(s is not None and len(cache.get(s, ())) > 1 for s in slots)

    def _take(self, i: int, got: list[Any], memory: ScriptMemory, asked: Any = None) -> None:
        """Keep the replies of steps that ran; queue the redirected ones again (to the
        same ASK target, `asked`, after NOSCRIPT or TRYAGAIN there)."""
        plan, steps = self.plans[i], self.todo[i]
        again: list[int] = []
        for j, reply in zip(steps, got):
            if isinstance(reply, MovedError):
                self.last_problem = f"slot {reply.slot_id} moved to {reply.host}:{reply.port}"
                self.moves.append(reply)
            elif isinstance(reply, AskError):
                self.last_problem = f"slot {reply.slot_id} is migrating to {reply.host}:{reply.port}"
                self.ask[i] = self.ex.node_at(reply.host, reply.port)
            elif isinstance(reply, _WAITS):
                self.last_problem = f"{type(reply).__name__}: {reply}"
                self.wait = True
                if asked is not None:
                    self.ask[i] = asked
            elif isinstance(reply, NoScriptError):
                self.last_problem = "NOSCRIPT"
                memory.loaded.clear()
                if asked is not None:
                    self.ask[i] = asked
            else:
                self.replies[i][j] = reply
                continue
            again.append(j)
        if again and plan.atomic:
            again = list(steps)  # all-or-nothing: none of it ran (EXEC aborted)
        if again:
            self.todo[i] = again
        else:
            del self.todo[i]


# -- the executor of a client (here, not in executors.py: this module builds on its Wire) --


def executor_for(client: Any, *, durable: bool = False) -> Any:
    """The executor that fits a redis-py client (sync, cluster or asyncio). `durable`:
    every round trip that writes waits for a replica (WAIT), or raises NotDurable."""
    if isinstance(client, redis.RedisCluster):
        return ClusterExecutor(client, durable=durable)
    if isinstance(client, redis.asyncio.Redis):
        return AsyncExecutor(client, durable=durable)
    if isinstance(client, redis.asyncio.RedisCluster):
        return AsyncClusterExecutor(client, durable=durable)
    if isinstance(client, redis.Redis):
        return SyncExecutor(client, durable=durable)
    raise TypeError(f"densekv needs a redis-py client, got {type(client).__name__}")


Executor = SyncExecutor | ClusterExecutor
