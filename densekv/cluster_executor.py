"""ClusterExecutor: plans on a redis-py `RedisCluster`, through resharding and failover.

Plans are grouped by the node that serves their slot and each group goes as one pipeline
(densekv/plan.py's wire: SCRIPT LOAD ahead, MULTI/EXEC, EVALSHA). What a cluster answers
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
  * durable: the WAIT of plan.Durability ends each node's pipeline that writes (on the
    node that took the writes, the ASK target included); too few acknowledgements raise
    NotDurable.
  * revocations (Plan.revokes: a session destroyed or regenerated) wait for a replica even
    without durable when the slot map lists one for the slot: WAIT 1 DURABLE_TIMEOUT_MS,
    NotDurable if none acknowledged. So a token given up is dead on a replica before the
    caller hears so, and a failover cannot make it live again. (On a single server with
    replicas only durable=True waits: the executor does not know its replicas there.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis
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
from densekv.plan import (
    Durability,
    ManyRunner,
    Plan,
    ScriptMemory,
    Wire,
    durability,
    exchange,
    finish_plans,
    plan_writes,
)

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
    finally:
        pool.release(conn)


class ClusterExecutor(ManyRunner):
    """Runs plans on a redis-py `RedisCluster`: grouped by slot, one pipeline per node,
    through migrations and failovers (see the module docstring)."""

    def __init__(self, client: redis.RedisCluster, durable: bool | Durability | None = None,
                 recovery: float = RECOVERY_SECONDS) -> None:
        self.client = client
        self.durable = durability(durable)
        self.recovery = recovery
        self.revocation = Durability()  # the wait of a revoking plan (see module docstring)
        self._scripts: dict[str, ScriptMemory] = {}

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        return _Run(self, plans).finish()

    # -- routing --------------------------------------------------------------------------
    def node_for(self, plan: Plan[Any]) -> Any:
        slot = plan.slot()
        if slot is None:
            return self.client.get_default_node()  # type: ignore[no-untyped-call]  # redis-py: untyped
        return self.client.nodes_manager.get_node_from_slot(slot)

    def node_at(self, host: str, port: int) -> Any:
        node = self.client.nodes_manager.get_node(host=host, port=port)
        return node if node is not None else ClusterNode(host, port)  # type: ignore[no-untyped-call]  # redis-py: untyped

    def memory(self, node: Any) -> ScriptMemory:
        return self._scripts.setdefault(node.name, ScriptMemory())

    def send(self, node: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        return _send(self.client.get_redis_connection(node).connection_pool, commands)

    def refresh(self) -> str | None:
        """Read the slot map again from the nodes that answer; the error text if none did."""
        try:
            self.client.nodes_manager.initialize()
        except (RedisClusterException, redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            return str(exc)
        return None


class _Run:
    """One run_many: which steps of which plans are still to send, and where."""

    def __init__(self, ex: ClusterExecutor, plans: Sequence[Plan[Any]]) -> None:
        self.ex = ex
        self.plans = plans
        self.replies: list[list[Any]] = [[None] * len(p.steps) for p in plans]
        self.todo: dict[int, list[int]] = {i: list(range(len(p.steps))) for i, p in enumerate(plans)}
        self.ask: dict[int, Any] = {}  # plan -> ASK target, for the next send only
        self.doubt: list[int] = []
        self.last_problem = ""

    def finish(self) -> list[Any]:
        started = time.monotonic()
        attempt = 0
        while self.todo:
            wait, refresh = self._round()
            if not self.todo:
                break
            if time.monotonic() - started > self.ex.recovery:
                raise ServerUnavailable(
                    f"the cluster did not recover within {self.ex.recovery:.0f} s: {self.last_problem}"
                )
            if refresh:
                problem = self.ex.refresh()
                if problem:
                    self.last_problem = f"no node gave a slot map: {problem}"
            if wait or refresh or attempt >= 2:
                time.sleep(min(0.25, 0.02 * 2 ** min(attempt, 4)))
            attempt += 1
        if self.doubt:
            names = ", ".join(str(self.plans[i].keys()[:1]) for i in self.doubt[:3])
            raise WriteInDoubt(
                f"lost the connection after sending {len(self.doubt)} write(s) (keys {names}): "
                f"they may or may not have been applied ({self.last_problem}); read back before repeating"
            )
        return finish_plans(self.plans, self.replies)

    def _sub(self, i: int) -> Plan[Any]:
        plan, steps = self.plans[i], self.todo[i]
        if len(steps) == len(plan.steps):
            return plan
        return Plan(tuple(plan.steps[j] for j in steps), revokes=plan.revokes)

    def _round(self) -> tuple[bool, bool]:
        """Send every pending step once; (should back off, should refresh the slot map)."""
        groups: dict[str, tuple[Any, list[int]]] = {}
        refresh = wait = False
        for i in self.todo:
            try:
                node = self.ask.get(i) or self.ex.node_for(self.plans[i])
            except RedisClusterException as exc:  # slot not covered: the map is stale
                self.last_problem = str(exc)
                refresh = True
                continue
            groups.setdefault(node.name, (node, []))[1].append(i)
        for node, indexes in groups.values():
            w, r = self._send_group(node, indexes)
            wait, refresh = wait or w, refresh or r
        return wait, refresh

    def _send_group(self, node: Any, indexes: list[int]) -> tuple[bool, bool]:
        subs = [self._sub(i) for i in indexes]
        asking = frozenset(k for k, i in enumerate(indexes) if i in self.ask)
        memory = self.ex.memory(node)
        preload = memory.missing(subs)
        check = self.ex.durable
        wait_cmd = check.wait_for(subs) if check else None
        if wait_cmd is None and self._replicated(subs):
            check = self.ex.revocation
            wait_cmd = ("WAIT", check.replicas, check.timeout_ms)
        wire = Wire.build(subs, preload, asking=asking, wait=wait_cmd)
        asked = {i: self.ask.pop(i) for i in indexes if i in self.ask}
        try:
            raw = self.ex.send(node, wire.commands)
        except _NotSent as exc:
            self.last_problem = f"{node.name} does not answer: {exc}"
            return True, True
        except _Lost as exc:
            self.last_problem = f"lost {node.name}: {exc}"
            for i, sub in zip(indexes, subs):
                if plan_writes(sub):
                    self.doubt.append(i)
                    del self.todo[i]
            return True, True
        memory.mark(preload)
        wait = refresh = wrote = False
        for i, sub, got in zip(indexes, subs, wire.replies_of(raw)):
            wrote = wrote or (plan_writes(sub) and any(not isinstance(r, _REDIRECTS) for r in got))
            w, r = self._take(i, got, memory, asked.get(i))
            wait, refresh = wait or w, refresh or r
        # Only a write that ran here needs the replica's word. When every write of the
        # pipeline was redirected (a manual failover turned this node into a replica while
        # our commands waited: MOVED, and WAIT refused on a replica), nothing ran here and
        # the WAIT goes with the writes to their new node.
        if check is not None and wire.wait_at is not None and wrote:
            check.check(wire.wait_reply(raw), node.name)
        return wait, refresh

    def _replicated(self, subs: list[Plan[Any]]) -> bool:
        """A revoking plan among `subs` whose slot has a replica in the slot map."""
        cache = self.ex.client.nodes_manager.slots_cache
        slots = [p.slot() for p in subs if p.revokes]
        return any(s is not None and len(cache.get(s, ())) > 1 for s in slots)

    def _take(self, i: int, got: list[Any], memory: ScriptMemory, asked: Any = None) -> tuple[bool, bool]:
        """Keep the replies of steps that ran; queue the redirected ones again (to the
        same ASK target, `asked`, after NOSCRIPT or TRYAGAIN there)."""
        plan, steps = self.plans[i], self.todo[i]
        again: list[int] = []
        wait = refresh = False
        for j, reply in zip(steps, got):
            if isinstance(reply, MovedError):
                self.last_problem = f"slot {reply.slot_id} moved to {reply.host}:{reply.port}"
                try:
                    self.ex.client.nodes_manager.move_slot(reply)
                except (KeyError, RedisClusterException):
                    refresh = True
            elif isinstance(reply, AskError):
                self.last_problem = f"slot {reply.slot_id} is migrating to {reply.host}:{reply.port}"
                self.ask[i] = self.ex.node_at(reply.host, reply.port)
            elif isinstance(reply, _WAITS):
                self.last_problem = f"{type(reply).__name__}: {reply}"
                wait = True
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
        return wait, refresh
