"""What a session layout is: a builder of plans, with no I/O and no global state.

A layout turns one logical operation on a session (keyed by its 16-byte digest) into a
Plan and decodes the replies into Records. The store (densekv/sessions/store.py) adds
tokens, clocks, the identity index and the sync/async shells; every layout passes the
same behavioural suite (tests/behaviour/test_sessions.py) against a reference model.
Limits (listpack sizes, partition counts) are passed in, never read here.

The store's flows never ask which class a layout is: they ask what it declares
(`partitions`, `framed`, `outside`, `partitioning()`) and call the plan builders, whose
defaults here are right for a layout without partitions. Which layouts exist, where each
runs and its limits: the registry in densekv/sessions/meta.py (SPECS).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from densekv.lua import script
from densekv.plan import Command, Plan, script_call
from densekv.sessions.model import Record


@dataclass(frozen=True)
class LayoutLimits:
    """What the partitioned layouts need to know of the server."""

    hash_max_listpack_entries: int = 128
    hash_max_listpack_value: int = 64
    zset_max_listpack_entries: int = 128


class Partitioned(Protocol):
    """What the partition-wide flows (densekv/sessions/sweep.py: repartition, sizes,
    counts; a dictionary's samples) need of a layout whose sessions share partitions."""

    partitions: int
    from_partitions: int | None
    bits: int
    from_bits: int | None

    def key_at(self, code: str, partition: int, bits: int) -> bytes: ...
    def hash_key(self, partition: int) -> bytes: ...
    def cont_key(self, partition: int) -> bytes: ...
    def is_cont(self, field: bytes) -> bool: ...
    def plan_split(self, old: int) -> Plan[int]: ...
    def structures(self, partition: int) -> dict[str, bytes]: ...


class Layout(ABC):
    #: name used by `layout=` and in stats/explain
    name: str
    #: how many partitions the sessions share (0: a key of their own per session)
    partitions: int = 0
    #: while a repartition runs: the old partition count (None otherwise)
    from_partitions: int | None = None
    #: payloads are framed by the store's codec (packed, zstd with the namespace's
    #: dictionary); otherwise stored as they are, with no dictionary
    framed: bool = False
    #: a record may hold only part of its payload, the rest outside it
    #: (plan_fetch_outside reads it, plan_drop_outside removes it after a sweep)
    outside: bool = False
    #: a payload over the listpack value limit may be split over a continuation entry
    #: (layouts/partitioned.py placement); otherwise it goes out of line
    splits: bool = False
    #: the server removes expired sessions itself (SETEX / field TTL); sweep only cleans
    #: the identity index
    server_expires: bool = False
    #: plan_replace needs the current record (compare-and-set on an opaque value)
    needs_read: bool = False
    #: session data may hold bytes values (not in JSON)
    holds_bytes: bool = True

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def payload_room(self, bare: int) -> int | None:
        """The most bytes a framed payload may take in a record of `bare` other bytes and
        still be stored in one value (None: no such bound, a key of its own holds it all)."""
        return None

    # -- writes ---------------------------------------------------------------------
    @abstractmethod
    def plan_put(self, rec: Record, now: int) -> Plan[None]:
        """Store a new session (the digest is fresh: nothing to overwrite). Raises
        SessionDataTooLarge, while building the plan, if the record cannot stay compact."""

    def plan_put_new(self, rec: Record, now: int) -> Plan[bool]:
        """plan_put, run only if no live session holds the digest (lua/put_new.lua), in one
        atomic step: True stored, False taken (nothing written)."""
        put = self.plan_put(rec, now)
        guard_keys, guard_args = self.put_guard(rec.digest)
        keys: list[Any] = list(guard_keys)
        args: list[Any] = [*guard_args, now, len(put.steps)]
        for step in put.steps:
            assert isinstance(step, Command), "a put is plain commands"
            keys += [k for k in step.keys if k not in keys]
            args += [len(step.args), *step.args]
        return script_call(script("put_new"), keys, args, lambda r: bool(int(r)))

    @abstractmethod
    def put_guard(self, digest: bytes) -> tuple[tuple[bytes, ...], tuple[Any, ...]]:
        """(KEYS, ARGV) of lua/put_new.lua's check for this digest."""

    @abstractmethod
    def plan_get(self, digest: bytes, outside: bool | str = True) -> Plan[Record | None]:
        """The stored record, expired or not (the store filters by its clock). `outside`
        (layouts that declare `outside`): which rest of the payload to read with it."""

    def plan_fetch_outside(self, rec: Record) -> Plan[Record | None]:
        """The rest of a record read without it (layouts that declare `outside`)."""
        raise NotImplementedError(f"layout {self.name} keeps every payload whole")

    def plan_drop_outside(self, gone: list[Record]) -> list[Plan[Any]]:
        """What removes the parts kept outside these swept records (none here)."""
        return []

    @abstractmethod
    def plan_touch(self, digest: bytes, now: int, idle_ttl: int) -> Plan[int]:
        """Roll the idle expiry; reply the new expires_at, 0 if missing or expired."""

    @abstractmethod
    def plan_replace(self, digest: bytes, current: Record | None, data: dict[str, Any] | None,
                     framed: bytes | None, now: int, times: tuple[int, int] | None = None) -> Plan[int]:
        """Replace the payload of a live session (`data`; `framed` is its encoding for the
        partitioned layouts): 1 done, 0 missing or expired, -2 changed since `current` was
        read (nothing written). current=None writes unconditionally, except where
        `needs_read`. `times` (set_ttl; with `current`): the new (expires_at, absolute_at),
        written in the same step."""

    @abstractmethod
    def plan_delete(self, digest: bytes) -> Plan[Record | None]:
        """Remove the session; reply what was removed (for the identity index)."""

    @abstractmethod
    def plan_rename(self, old: bytes, new: bytes, now: int, identity: Any = ...,
                    current: Record | None = None) -> Plan[Any]:
        """Move a live session to a new digest atomically (same slot group); with
        `identity` (login), set that identity in the same step (`current`: the record as
        read, for layouts that compare-and-set). Reply: the moved record, None if the old
        one is missing or expired, -2 if it changed since `current` was read."""

    # -- the identity index -------------------------------------------------------------
    #: bytes of the digest the identity index keeps to find a session again
    index_ref_len: int = 16

    def plan_find(self, ref: bytes, cursor: int) -> Plan[tuple[int, list[Record]]]:
        """The stored records whose digest starts with `ref` (an index reference), as
        (next cursor, records); cursor 0 starts and ends. This default takes the whole
        digest: one read."""
        get = self.plan_get(ref)
        return Plan(get.steps, lambda r: (0, [rec] if (rec := get.decode(r)) is not None else []),
                    atomic=get.atomic)

    # -- housekeeping ---------------------------------------------------------------
    @abstractmethod
    def group_of(self, digest: bytes) -> Hashable:
        """Digests with equal groups have all their keys in one cluster slot (the store
        draws a regenerated token in the old one's group, on a cluster only)."""

    # -- partitions and repartition (none here) ------------------------------------------
    def partitioning(self) -> Partitioned | None:
        """This layout's partitions, for the partition-wide flows; None: it has none."""
        return None

    def plan_splits(self, digests: Iterable[bytes]) -> list[Plan[int]]:
        """While a repartition runs: the splits to run before touching these digests."""
        return []

    def plan_unit_splits(self, units: Iterable[Any]) -> list[Plan[int]]:
        """While a repartition runs: the splits to run before these sweep units."""
        return []

    def count_match(self) -> bytes | None:
        """The SCAN MATCH pattern of this layout's session keys, when there is one key per
        session (count() then counts keys); None for a partitioned layout."""
        return None

    def sweep_units(self) -> Iterator[Any]:
        """What sweep visits one at a time (partitions); none for server-expired data."""
        return iter(())

    def plan_sweep(self, unit: Any, now: int, limit: int, dry: bool = False) -> Plan[list[Record]]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"layout": self.name}
