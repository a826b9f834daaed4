"""The executors of plans on one server (densekv/plan.py holds the plans themselves).

  * SyncExecutor   - a redis-py `Redis` client: run(plan), run_many(plans) in one round trip
  * AsyncExecutor  - a redis-py asyncio client: the same, awaited
  * ClusterExecutor, AsyncClusterExecutor - redis-py's `RedisCluster`s: plans grouped by slot,
    one pipeline per node; MOVED, ASK, TRYAGAIN, a dead master and a failover are handled
    there (densekv/cluster_executor.py, which states the rules, builds on Wire below and on
    densekv/wire.py, and holds `executor_for`, the choice of executor for a client)

Invariants kept here:
  * replies are raw RESP values (bytes, ints, lists): no redis-py response callbacks and
    no decode_responses, whatever the user's client was built with;
  * scripts go as EVALSHA. A batch of several plans always starts with SCRIPT LOAD of
    the scripts it uses (same round trip), so every plan runs in order. A single plan
    uses a script once its pool has it (SCRIPT LOAD on first use); a NOSCRIPT reply
    (SCRIPT FLUSH, restart) reloads and re-sends that one call, which did not run;
  * the hot path (issue 22): one plan of one command, of a loaded script's call or one
    transaction, without durability, skips the batch machinery (SyncExecutor._run_single,
    _run_transaction), and a plain redis-py pool lends its connection without its per-call
    probe and counters (densekv/wire.py: _take / _give_back, whose comment says when);
  * an error reply raises after the whole batch was read (the connection stays usable):
    WRONGTYPE as WrongType, a script error as ScriptError, others as redis.ResponseError;
  * durable (`executor_for(client, durable=True)`): a round trip that holds a write (any
    command not in READS, any script) ends with WAIT 1 <DURABLE_TIMEOUT_MS> on the same
    connection (no extra round trip), and a reply below 1 raises NotDurable instead of
    returning: the write is on the primary, no replica confirmed it. A round trip of reads
    only sends no WAIT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.exceptions import NoScriptError

from densekv.errors import NotDurable, ScriptError, WrongType
from densekv.lua import Script
from densekv.plan import Command, Plan, ScriptCall, Step, plan_writes, reads_only
from densekv.wire import EXEC, MULTI, aroundtrip, roundtrip

T = TypeVar("T")

# --- durability ------------------------------------------------------------------------

#: how long a durable write waits for a replica's acknowledgement (WAIT's timeout)
DURABLE_TIMEOUT_MS = 2000


@dataclass(frozen=True)
class Durability:
    """WAIT `replicas` `timeout_ms` after each round trip that writes; fewer acks: NotDurable."""

    replicas: int = 1
    timeout_ms: int = DURABLE_TIMEOUT_MS

    def wait_for(self, plans: Sequence[Plan[Any]]) -> tuple[Any, ...] | None:
        return ("WAIT", self.replicas, self.timeout_ms) if any(plan_writes(p) for p in plans) else None

    def check(self, reply: Any, where: str = "the server") -> None:
        if isinstance(reply, Exception) or not isinstance(reply, int) or reply < self.replicas:
            got = reply if isinstance(reply, int) else f"an error ({reply})"
            raise NotDurable(
                f"no replica of {where} acknowledged the write within {self.timeout_ms} ms "
                f"(WAIT {self.replicas} {self.timeout_ms} answered {got}): it is on the primary "
                f"only and a failover could lose it; check the replicas' links"
            )


def durability(durable: bool | Durability | None) -> Durability | None:
    if isinstance(durable, Durability):
        return durable
    return Durability() if durable else None


# --- wire: plans -> flat command list -> replies -> per-plan replies ------------------


@dataclass
class Wire:
    """A batch of plans flattened to commands, and how to fold the replies back."""

    plans: Sequence[Plan[Any]]
    commands: list[tuple[Any, ...]] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # reply slice per plan
    asking: frozenset[int] = frozenset()  # plans sent after ASKING (an ASK redirection)
    wait_at: int | None = None  # where WAIT's reply is (durable)

    @classmethod
    def build(cls, plans: Sequence[Plan[Any]], preload: Sequence[Script], *,
              asking: frozenset[int] = frozenset(), wait: tuple[Any, ...] | None = None) -> Wire:
        """ASKING goes before each command of a plan in `asking` (before MULTI for an
        atomic one: the flag holds for the whole transaction); WAIT, if given, last."""
        wire = cls(plans, asking=asking)
        for s in preload:
            wire.commands.append(("SCRIPT", "LOAD", s.source))
        for i, plan in enumerate(plans):
            start = len(wire.commands)
            ask = i in asking
            if plan.atomic:
                if ask:
                    wire.commands.append(("ASKING",))
                wire.commands.append(MULTI)
            for step in plan.steps:
                if ask and not plan.atomic:
                    wire.commands.append(("ASKING",))
                wire.commands.append(step.evalsha if isinstance(step, ScriptCall) else step.args)
            if plan.atomic:
                wire.commands.append(EXEC)
            wire.spans.append((start, len(wire.commands)))
        if wait is not None:
            wire.wait_at = len(wire.commands)
            wire.commands.append(wait)
        return wire

    def wait_reply(self, replies: list[Any]) -> Any:
        assert self.wait_at is not None
        return replies[self.wait_at]

    def replies_of(self, replies: list[Any]) -> list[list[Any]]:
        out = []
        for i, (plan, (start, end)) in enumerate(zip(self.plans, self.spans)):
            chunk = replies[start:end]
            if i in self.asking:  # drop ASKING's +OK replies
                chunk = chunk[1:] if plan.atomic else chunk[1::2]
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


def finish_plans(plans: Sequence[Plan[Any]], per_plan: list[list[Any]]) -> list[Any]:
    for plan, replies in zip(plans, per_plan):
        _raise_errors(plan, replies)
    return [plan.decode(replies) for plan, replies in zip(plans, per_plan)]


def _noscript_positions(wire: Wire, per_plan: list[list[Any]]) -> list[tuple[int, int]]:
    return [
        (p, s)
        for p, replies in enumerate(per_plan)
        for s, reply in enumerate(replies)
        if isinstance(reply, NoScriptError)
    ]


def _reload_commands(wire: Wire, failed: list[tuple[int, int]]) -> tuple[list[Script], list[tuple[Any, ...]]]:
    """SCRIPT LOAD of the scripts that were missing, then the failed calls again."""
    calls = [wire.plans[p].steps[s] for p, s in failed]
    scripts = list({c.script.sha: c.script for c in calls if isinstance(c, ScriptCall)}.values())
    commands: list[tuple[Any, ...]] = [("SCRIPT", "LOAD", s.source) for s in scripts]
    commands += [c.evalsha for c in calls if isinstance(c, ScriptCall)]
    return scripts, commands


def _single_command(plan: Plan[Any], loaded: set[str]) -> tuple[Any, ...] | None:
    """The one command a plan of one step sends, when nothing goes with it: a command, or
    the EVALSHA of a script the pool holds (None: a transaction, several steps, a script
    to load first)."""
    if plan.atomic or len(plan.steps) != 1:
        return None
    step = plan.steps[0]
    if type(step) is Command:
        return step.args
    return step.evalsha if step.script.sha in loaded else None  # type: ignore[union-attr]  # a ScriptCall


def _finish_one(plan: Plan[Any], reply: Any) -> Any:
    """finish_plans of one plan of one step."""
    if isinstance(reply, Exception):
        raise _translate(reply, plan.steps[0])
    return plan.decode([reply])


def _scripts_of(plans: Sequence[Plan[Any]]) -> list[Script]:
    seen: dict[str, Script] = {}
    for plan in plans:
        for step in plan.steps:
            if isinstance(step, ScriptCall):
                seen.setdefault(step.script.sha, step.script)
    return list(seen.values())



class ScriptMemory:
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


class ManyRunner:
    """What the sync executors share: `run` is `run_many` of one plan."""

    def run(self, plan: Plan[T]) -> T:
        result: T = self.run_many([plan])[0]
        return result

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        raise NotImplementedError


class SyncExecutor(ManyRunner):
    """Runs plans on a redis-py `Redis` client (its connection pool, raw replies)."""

    def __init__(self, client: redis.Redis, durable: bool | Durability | None = None) -> None:
        self.client = client
        self.pool = client.connection_pool
        self._scripts = ScriptMemory()
        self.durable = durability(durable)

    def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        """All plans in one round trip (plus one more only after a NOSCRIPT)."""
        if not plans:
            return []
        if len(plans) == 1 and self.durable is None:
            one = _single_command(plans[0], self._scripts.loaded)
            if one is not None:
                return [self._run_single(plans[0], one)]
            if plans[0].atomic:  # commands only (Plan refuses a script in a transaction)
                return [self._run_transaction(plans[0])]
        preload = self._scripts.missing(plans)
        wait = self.durable.wait_for(plans) if self.durable else None
        wire = Wire.build(plans, preload, wait=wait)
        replies = roundtrip(self.pool, wire.commands, plans, reads_only)
        self._scripts.mark(preload)
        per_plan = wire.replies_of(replies)
        self._retry_noscript(wire, per_plan)
        if self.durable and wait is not None:
            self.durable.check(wire.wait_reply(replies))
        return finish_plans(plans, per_plan)

    def _run_single(self, plan: Plan[Any], one: tuple[Any, ...]) -> Any:
        """The common case, one plan of one command (or a loaded script's call) without
        durability: no Wire, no preload, the reply decoded as finish_plans would. A NOSCRIPT
        (the call did not run) goes the whole way again, which loads the script first."""
        reply = roundtrip(self.pool, [one], (plan,), reads_only)[0]
        if isinstance(reply, NoScriptError):
            self._scripts.loaded.clear()
            return self.run_many([plan])[0]  # not loaded now: the general path loads it
        return _finish_one(plan, reply)

    def _run_transaction(self, plan: Plan[Any]) -> Any:
        """One atomic plan without durability: MULTI, its commands, EXEC, and the replies
        folded as Wire.replies_of folds them (an aborted EXEC: the queueing error, else
        EXEC's own, for every step)."""
        # Commands only (Plan refuses a script here); MULTI and EXEC as wire's constants,
        # which it sends packed once
        commands: list[tuple[Any, ...]] = [MULTI, *[step.args for step in plan.steps], EXEC]
        replies = roundtrip(self.pool, commands, (plan,), reads_only)
        done = replies[-1]
        if isinstance(done, Exception):
            queued = [r for r in replies[1:-1] if isinstance(r, Exception)]
            return finish_plans((plan,), [[queued[0] if queued else done] * len(plan.steps)])[0]
        for step, reply in zip(plan.steps, done):  # finish_plans of one plan, EXEC's array as it came
            if isinstance(reply, Exception):
                raise _translate(reply, step)
        return plan.decode(done)

    def _retry_noscript(self, wire: Wire, per_plan: list[list[Any]]) -> None:
        failed = _noscript_positions(wire, per_plan)
        if not failed:
            return
        self._scripts.loaded.clear()
        scripts, commands = _reload_commands(wire, failed)
        if self.durable:  # the calls sent again write too
            commands.append(("WAIT", self.durable.replicas, self.durable.timeout_ms))
        replies = roundtrip(self.pool, commands)
        self._scripts.mark(scripts)
        if self.durable:
            self.durable.check(replies.pop())
        for (p, s), reply in zip(failed, replies[len(scripts) :]):
            per_plan[p][s] = reply


class AsyncManyRunner:
    """What the asyncio executors share: `run` is `run_many` of one plan, awaited."""

    async def run(self, plan: Plan[T]) -> T:
        result: T = (await self.run_many([plan]))[0]
        return result

    async def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        raise NotImplementedError


class AsyncExecutor(AsyncManyRunner):
    """Runs plans on a redis-py asyncio `Redis` client."""

    def __init__(self, client: redis.asyncio.Redis, durable: bool | Durability | None = None) -> None:
        self.client = client
        self.pool = client.connection_pool
        self._scripts = ScriptMemory()
        self.durable = durability(durable)

    async def run_many(self, plans: Sequence[Plan[Any]]) -> list[Any]:
        if not plans:
            return []
        if len(plans) == 1 and self.durable is None:  # as SyncExecutor._run_single
            one = _single_command(plans[0], self._scripts.loaded)
            if one is not None:
                reply = (await aroundtrip(self.pool, [one], plans, reads_only))[0]
                if not isinstance(reply, NoScriptError):
                    return [_finish_one(plans[0], reply)]
                self._scripts.loaded.clear()  # it did not run: the general path loads and sends it
        preload = self._scripts.missing(plans)
        wait = self.durable.wait_for(plans) if self.durable else None
        wire = Wire.build(plans, preload, wait=wait)
        replies = await aroundtrip(self.pool, wire.commands, plans, reads_only)
        self._scripts.mark(preload)
        per_plan = wire.replies_of(replies)
        failed = _noscript_positions(wire, per_plan)
        if failed:
            self._scripts.loaded.clear()
            scripts, commands = _reload_commands(wire, failed)
            if self.durable:
                commands.append(("WAIT", self.durable.replicas, self.durable.timeout_ms))
            retry = await aroundtrip(self.pool, commands)
            self._scripts.mark(scripts)
            if self.durable:
                self.durable.check(retry.pop())
            for (p, s), reply in zip(failed, retry[len(scripts) :]):
                per_plan[p][s] = reply
        if self.durable and wait is not None:
            self.durable.check(wire.wait_reply(replies))
        return finish_plans(plans, per_plan)


__all__ = [
    "DURABLE_TIMEOUT_MS", "AsyncExecutor", "AsyncManyRunner", "Durability", "ManyRunner",
    "ScriptMemory", "SyncExecutor", "Wire", "durability", "finish_plans",
]
