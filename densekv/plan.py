"""Plans: the one I/O mechanism of every densekv structure, as values (no I/O here).

A *plan* is what one operation sends (commands, or one Lua script call, each with its keys
declared) plus the pure function that turns the raw replies into the result. Layouts only
build plans; they never touch a socket. Executors run plans (densekv/executors.py:
SyncExecutor, AsyncExecutor and how replies are folded back and errors translated;
densekv/cluster_executor.py: ClusterExecutor, AsyncClusterExecutor and `executor_for`), so
the logic of an operation is written once and sync, async, batch and cluster cannot drift
apart. Invariants kept here:
  * all keys of one plan hash to one slot (Plan.slot; checked on a cluster), so an atomic
    plan (MULTI/EXEC) or a script can run there;
  * a plan is commands or one script call (a script is atomic already);
  * whether a plan may write (plan_writes: a script, or a command not in wire.READS) is a
    fact of the plan: durability waits after writes, and a batch of reads only
    (reads_only) may be sent again after a broken connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from redis.crc import key_slot

from densekv.errors import PlanError
from densekv.lua import Script
from densekv.wire import READS

T = TypeVar("T")
Key = bytes | str


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


Step = Command | ScriptCall


def _identity(replies: list[Any]) -> Any:
    return replies


@dataclass(frozen=True)
class Plan(Generic[T]):
    """Steps to send and the decoding of their replies (a list, one reply per step)."""

    steps: tuple[Step, ...]
    decode: Callable[[list[Any]], T] = field(default=_identity)
    atomic: bool = False  # wrap the steps in MULTI/EXEC
    # gives up something a client held (a session token: destroy, regenerate): on a
    # cluster whose slot has replicas the round trip waits for one even without durable,
    # so a failover cannot bring it back (densekv/cluster_executor.py)
    revokes: bool = False

    def __post_init__(self) -> None:
        if not self.steps:
            raise PlanError("a plan needs at least one step")
        if self.atomic or len(self.steps) > 1:
            for s in self.steps:  # a loop, not any() over a generator: every multi-step plan pays it
                if isinstance(s, ScriptCall):
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


# --- writes: which plans may write -----------------------------------------------------


def plan_writes(plan: Plan[Any]) -> bool:
    """True if the plan may write: a script, or a command not in READS."""
    return any(isinstance(s, ScriptCall) or str(_name(s.args[0])).upper() not in READS for s in plan.steps)


def _name(arg: Any) -> str:
    return arg.decode() if isinstance(arg, bytes) else str(arg)


def reads_only(plans: Sequence[Plan[Any]]) -> bool:
    """A batch that writes nothing (plan.READS): safe to send again after a broken connection."""
    return not any(plan_writes(p) for p in plans)


#: the executors' old home (issue 33 moved them to densekv/executors.py): the names that
#: docs/api/densekv.md and CHANGELOG.md gave as densekv.plan's resolve there for one minor
#: release, with a DeprecationWarning; nothing in densekv reads them here
_MOVED_EXECUTORS = frozenset({"AsyncExecutor", "SyncExecutor"})


def __getattr__(name: str) -> Any:
    if name not in _MOVED_EXECUTORS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(f"densekv.plan.{name} moved to densekv.executors.{name}: import it from there "
                  "(the old path goes in the next minor release)", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module("densekv.executors"), name)


__all__ = ["Command", "Key", "Plan", "ScriptCall", "Step", "command", "plan_writes", "reads_only", "script_call"]
