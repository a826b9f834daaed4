"""SessionStore and AsyncSessionStore: the session API over any layout.

Every operation is written once, as a *flow*: a generator that yields lists of plans and
receives their results (one list = one round trip). `SessionStore` drives flows with a
sync or cluster executor, `AsyncSessionStore` with an asyncio one, so the two cannot
drift. Invariants:
  * a malformed token never reaches the server (digest_of() is None -> "not found");
  * get/touch/sessions_of never return a session whose expiry has passed, swept or not;
  * data too large for the layout is refused before anything is written (the layout
    sizes each record as it builds the plan; plans are built before any is sent);
  * regenerate is one atomic step on the server (a script or RENAME on one slot): the
    new token is drawn until it falls in the old one's slot group;
  * the identity index gains an entry before a session can be found under a new digest
    and loses it after the session is gone, so destroy_all() never misses a live one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack
import redis

from densekv.errors import DensekvError, WrongType
from densekv.keys import partition_count
from densekv.plan import Plan, executor_for
from densekv.sessions.index import IdentityIndex
from densekv.sessions.layouts.base import Layout, LayoutLimits
from densekv.sessions.layouts.partitioned import (
    DenseLayout,
    FieldTtlLayout,
    PartitionedLayout,
    ZsetLayout,
)
from densekv.sessions.layouts.perkey import HashLayout, JsonLayout, PackedLayout
from densekv.sessions.model import (
    Identity,
    Record,
    Session,
    SessionDataTooLarge,
    check_identity,
    digest_of,
    new_token,
)

T = TypeVar("T")
Flow = Generator[list[Plan[Any]], list[Any], T]

LAYOUTS = ("json", "packed", "hash", "zset", "dense", "fieldttl")
DEFAULT_TTL = 30 * 24 * 3600
SWEEP_BATCH = 64  # partitions per round trip
META_RECHECK_S = 5.0  # while a repartition runs, re-read the store metadata this often


class LayoutUnavailable(DensekvError):
    """The layout asked for cannot run on this server (e.g. fieldttl without HEXPIRE)."""


@dataclass(frozen=True)
class ServerFacts:
    """What the store needs of the server (from the probe, or a few CONFIG GETs)."""

    limits: LayoutLimits
    field_ttl: str = "none"
    field_ttl_encoding: str | None = None
    cluster: bool = False


@dataclass(frozen=True)
class Choice:
    layout: str
    reason: str


def choose_layout(facts: ServerFacts) -> Choice:
    """`layout="auto"`: the densest layout for this server, with the reason."""
    if facts.field_ttl_encoding == "listpackex":
        why = ("field TTL stays in a listpack here (listpackex), but each expiring field "
               "carries its own TTL entry: dense (expiry inside the record) is still smaller")
    elif facts.field_ttl != "none":
        why = (f"field TTL exists here but converts the hash to a {facts.field_ttl_encoding}: "
               "dense keeps listpacks")
    else:
        why = "no field TTL on this server: dense keeps the expiry inside the record"
    return Choice("dense", why)


def make_layout(name: str, namespace: str, facts: ServerFacts, expected: int, partitions: int | None,
                meta: StoreMeta | None = None, fill: int | None = None) -> Layout:
    if name in ("json", "packed", "hash"):
        return {"json": JsonLayout, "packed": PackedLayout, "hash": HashLayout}[name](namespace)
    limit = facts.limits.hash_max_listpack_entries
    if name == "zset":
        limit = min(limit, facts.limits.zset_max_listpack_entries)
    p = partitions or partition_count(expected, limit, fill=fill)
    extra: dict[str, Any] = {}
    if meta is not None and meta.partitions:
        p = meta.partitions
        extra = {"base_partitions": meta.base, "from_partitions": meta.from_}
    if name == "dense":
        return DenseLayout(namespace, p, facts.limits, **extra)
    if name == "zset":
        return ZsetLayout(namespace, p, facts.limits, **extra)
    if name == "fieldttl":
        if facts.field_ttl == "none":
            raise LayoutUnavailable("layout fieldttl needs hash field TTL (Redis 7.4+, Valkey 9+)")
        layout = FieldTtlLayout(namespace, p, facts.limits, **extra)
        layout.hsetex = facts.field_ttl == "hsetex"
        return layout
    raise ValueError(f"unknown layout {name!r}: choose one of auto, {', '.join(LAYOUTS)}")


@dataclass(frozen=True)
class StoreMeta:
    """The store's metadata hash `{ns}:meta` (densekv/lua/store_meta.lua): every process
    opening the namespace adopts its layout and partition count, whatever it was told."""

    layout: str
    partitions: int  # 0 for the one-key-per-session layouts
    base: int
    from_: int | None = None

    @classmethod
    def from_reply(cls, reply: Any) -> StoreMeta | None:
        fields = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        if not fields:
            return None
        return cls(fields["layout"], int(fields["partitions"]), int(fields["base"]),
                   int(fields["from"]) if "from" in fields else None)


def meta_key(namespace: str) -> bytes:
    return f"{namespace}:meta".encode()


def plan_meta(namespace: str, op: str, *args: Any) -> Plan[StoreMeta | None]:
    from densekv.lua import script
    from densekv.plan import script_call

    key = meta_key(namespace)
    return script_call(script("store_meta"), (key,), (op, *args), StoreMeta.from_reply)


class SessionCore:
    """The flows; no I/O. Both stores hold one and drive its flows."""

    def __init__(
        self,
        facts: ServerFacts,
        *,
        namespace: str,
        layout: str,
        ttl: int,
        idle_ttl: int | None,
        expected_sessions: int,
        index_identities: bool,
        partitions: int | None,
        clock: Callable[[], float],
        fill: int | None = None,
    ) -> None:
        if ttl <= 0 or (idle_ttl is not None and idle_ttl <= 0):
            raise ValueError("ttl and idle_ttl are positive numbers of seconds")
        if not namespace or "{" in namespace or "}" in namespace:
            raise ValueError("namespace is a non-empty string without braces")
        self.facts = facts
        self.namespace = namespace
        self.expected_sessions = expected_sessions
        self.asked_partitions = partitions
        self.asked_layout = layout
        self.choice = choose_layout(facts) if layout == "auto" else Choice(layout, "asked for")
        self.fill = fill
        self.layout = make_layout(self.choice.layout, namespace, facts, expected_sessions, partitions, fill=fill)
        self.meta: StoreMeta | None = None
        self.meta_read_at = 0.0
        self.ttl = int(ttl)
        self.idle_ttl = int(idle_ttl) if idle_ttl else None
        self.index = (
            IdentityIndex(namespace, partition_count(expected_sessions, facts.limits.hash_max_listpack_entries),
                          self.layout.index_ref_len)
            if index_identities
            else None
        )
        self.clock = clock
        self.sweep_cursor = 0
        self.index_cursor = 0
        self.refused_too_large = 0

    def now(self) -> int:
        return int(self.clock())

    # -- the store's metadata (shared by every process) -----------------------------------
    def open(self) -> Flow[None]:
        """Create the metadata if this is the namespace's first store, then adopt it."""
        layout = self.layout
        partitions = layout.partitions if isinstance(layout, PartitionedLayout) else 0
        meta = (yield [plan_meta(self.namespace, "open", layout.name, partitions)])[0]
        self.adopt(meta)
        self.asked_partitions = None  # checked once, at open: later changes are repartitions

    def refresh(self) -> Flow[bool]:
        """Re-read the metadata; True if it changed (a repartition began or ended)."""
        meta = (yield [plan_meta(self.namespace, "read")])[0]
        if meta is None or meta == self.meta:
            self.meta_read_at = time.monotonic()
            return False
        self.adopt(meta)
        return True

    def adopt(self, meta: StoreMeta | None) -> None:
        self.meta_read_at = time.monotonic()
        if meta is None:
            return
        if meta.layout != self.layout.name:
            if self.asked_layout != "auto":
                raise DensekvError(
                    f"namespace {self.namespace!r} holds a {meta.layout!r} session store; open it "
                    f"with layout={meta.layout!r} (or 'auto'), or use another namespace"
                )
            self.choice = Choice(meta.layout, "the layout this namespace already holds")
        if self.asked_partitions and meta.partitions and self.asked_partitions != meta.partitions:
            raise DensekvError(
                f"namespace {self.namespace!r} holds {meta.partitions} partitions, not "
                f"{self.asked_partitions}: repartition it (densekv repartition) instead"
            )
        self.meta = meta
        self.layout = make_layout(self.choice.layout, self.namespace, self.facts, self.expected_sessions,
                                  None, meta)

    @property
    def migrating(self) -> bool:
        return isinstance(self.layout, PartitionedLayout) and self.layout.from_partitions is not None

    def _splits(self, digests: Iterable[bytes]) -> list[Plan[Any]]:
        """While a repartition runs: split the old partitions of these digests first."""
        layout = self.layout
        if not isinstance(layout, PartitionedLayout) or layout.from_partitions is None:
            return []
        olds = dict.fromkeys(layout.old_partition(d) for d in digests)
        return [layout.plan_split(p) for p in olds if p is not None]

    def _on(self, digests: Iterable[bytes], plans: list[Plan[Any]]) -> Flow[list[Any]]:
        """Run `plans` in one round trip, after the splits they need (same round trip)."""
        if len(plans) == 1 and not isinstance(plans[0], Plan):  # a layout's sub-flow
            return [(yield from plans[0])]
        splits = self._splits(digests)
        results = yield [*splits, *plans]
        return results[len(splits):]

    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> Flow[dict[str, Any]]:
        """Move the store to `partitions` (a larger power of two), online: split every old
        partition (a script each); writers that still use the old count meet a tombstone,
        re-read the metadata and follow. Resumable: rerun it after a crash."""
        layout = self.layout
        if not isinstance(layout, PartitionedLayout):
            raise DensekvError(f"layout {layout.name} has no partitions to grow")
        yield from self.refresh()
        layout = self.layout
        assert isinstance(layout, PartitionedLayout)
        if layout.from_partitions is None:
            if partitions <= layout.partitions:
                return {"partitions": layout.partitions, "moved": 0, "note": "already at or above that count"}
            if partitions & (partitions - 1) or partitions > layout.partitions * 256:
                raise DensekvError("the new partition count is a power of two, at most 256x the current one")
            meta = (yield [plan_meta(self.namespace, "begin", layout.partitions, partitions)])[0]
            self.adopt(meta)
            layout = self.layout
            assert isinstance(layout, PartitionedLayout)
            if layout.from_partitions is None:
                raise DensekvError("another process changed the partition count first; try again")
        elif partitions != layout.partitions:
            raise DensekvError(
                f"a repartition to {layout.partitions} is under way; finish it first (run it again "
                f"with partitions={layout.partitions})"
            )
        olds = list(range(layout.from_partitions))
        moved = 0
        for i in range(0, len(olds), SWEEP_BATCH):
            moved += sum((yield [layout.plan_split(p) for p in olds[i : i + SWEEP_BATCH]]))
            if progress is not None:
                progress(min(i + SWEEP_BATCH, len(olds)), len(olds))
        meta = (yield [plan_meta(self.namespace, "finish", layout.partitions)])[0]
        self.adopt(meta)
        return {"partitions": self.layout.partitions, "moved": moved}  # type: ignore[attr-defined]

    # -- helpers --------------------------------------------------------------------
    def _new_record(self, identity: Any, data: dict[str, Any] | None, ttl: int | None) -> tuple[Record, str]:
        identity = check_identity(identity)
        if data is not None and not isinstance(data, dict):
            raise TypeError("session data is a dict (or None)")
        now = self.now()
        absolute = now + int(ttl or self.ttl)
        expires = min(absolute, now + self.idle_ttl) if self.idle_ttl else absolute
        token = new_token()
        digest = digest_of(token)
        assert digest is not None
        return Record(digest, identity, expires, absolute, data), token

    def _token_in_group(self, old: bytes) -> tuple[str, bytes]:
        """A fresh token whose keys share the old one's slot (needed for one-step rename)."""
        group = self._group(old)
        while True:
            token = new_token()
            digest = digest_of(token)
            assert digest is not None
            if self._group(digest) == group:
                return token, digest

    def _group(self, digest: bytes) -> Any:
        # One server runs a script over any keys; a cluster needs the old and new keys
        # in one slot, which the layout knows.
        return self.layout.group_of(digest) if self.facts.cluster else 0

    # -- flows ------------------------------------------------------------------------
    def create(self, identity: Identity, data: dict[str, Any] | None, ttl: int | None) -> Flow[str]:
        tokens = yield from self.create_many([identity], data, ttl)
        return tokens[0]

    def create_many(self, identities: Iterable[Identity], data: dict[str, Any] | None, ttl: int | None) -> Flow[list[str]]:
        return (yield from self.put_records(self.new_records(identities, data, ttl)))

    def new_records(self, identities: Iterable[Identity], data: dict[str, Any] | None, ttl: int | None) -> list[tuple[Record, str]]:
        return [self._new_record(identity, data, ttl) for identity in identities]

    def put_records(self, made: list[tuple[Record, str]]) -> Flow[list[str]]:
        """Store new records (idempotent: a retry after a repartition tombstone rewrites the
        same fields, and the split moved any that the first try had stored)."""
        now = self.now()
        try:  # every plan is built (and every record sized) before anything is sent
            puts = [self.layout.plan_put(rec, now) for rec, _ in made]
        except SessionDataTooLarge:
            self.refused_too_large += 1
            raise
        if not made:
            return []
        yield from self._on([rec.digest for rec, _ in made], puts)
        if self.index is not None:
            yield [self.index.plan_add(rec.identity, rec.digest, rec.absolute_at) for rec, _ in made]
        return [token for _, token in made]

    def get(self, token: str) -> Flow[Session | None]:
        digest = digest_of(token)
        if digest is None:
            return None
        (rec,) = yield from self._on([digest], [self.layout.plan_get(digest)])
        if rec is None or not rec.live(self.now()):
            return None
        return rec.session(token)  # type: ignore[no-any-return]

    def touch(self, token: str) -> Flow[bool]:
        digest = digest_of(token)
        if digest is None:
            return False
        if self.idle_ttl is None:
            session = yield from self.get(token)
            return session is not None
        (new_expiry,) = yield from self._on([digest], [self.layout.plan_touch(digest, self.now(), self.idle_ttl)])
        return bool(new_expiry)

    def update(self, token: str, data: dict[str, Any] | None) -> Flow[bool]:
        digest = digest_of(token)
        if data is not None and not isinstance(data, dict):
            raise TypeError("session data is a dict (or None)")
        if digest is None:
            return False
        if isinstance(self.layout, PartitionedLayout):
            # exact check needs the identity: the script refuses (-1) past the limit
            payload = 0 if data is None else len(msgpack.packb(data, use_bin_type=True))
            if payload > self.facts.limits.hash_max_listpack_value:
                self.refused_too_large += 1
                raise SessionDataTooLarge(f"{payload} bytes of session data cannot fit a listpack value")
        (result,) = yield from self._on([digest], [self.layout.plan_update(digest, data, self.now())])
        if result == -1:
            self.refused_too_large += 1
            raise SessionDataTooLarge("this data would push the session's record past hash-max-listpack-value")
        return bool(result == 1)

    def destroy(self, token: str) -> Flow[bool]:
        digest = digest_of(token)
        if digest is None:
            return False
        return (yield from self.destroy_digest(digest))

    def destroy_id(self, session_id: str) -> Flow[bool]:
        try:
            digest = bytes.fromhex(session_id)
        except (ValueError, TypeError):
            return False
        if len(digest) != 16:
            return False
        return (yield from self.destroy_digest(digest))

    def destroy_digest(self, digest: bytes) -> Flow[bool]:
        (rec,) = yield from self._on([digest], [self.layout.plan_delete(digest)])
        if rec is None:
            return False
        if self.index is not None:
            yield [self.index.plan_remove(rec.identity, [digest])]
        return bool(rec.live(self.now()))

    def regenerate(self, token: str) -> Flow[str | None]:
        old = digest_of(token)
        if old is None:
            return None
        now = self.now()
        new_token_, new = self._token_in_group(old)
        if self.index is None:  # the rename script checks liveness itself
            (moved,) = yield from self._on([old, new], [self.layout.plan_rename(old, new, now)])
            return new_token_ if moved is not None else None
        (current,) = yield from self._on([old, new], [self.layout.plan_get(old)])
        if current is None or not current.live(now):
            return None
        # listed before it can be found: destroy_all never misses it
        yield [self.index.plan_add(current.identity, new, current.absolute_at)]
        (moved,) = yield from self._on([old, new], [self.layout.plan_rename(old, new, now)])
        yield [self.index.plan_remove(current.identity, [old if moved is not None else new])]
        return new_token_ if moved is not None else None

    def _live_records_of(self, identity: Identity) -> Flow[list[Record]]:
        """The live sessions of `identity`: index references, resolved and re-read; a stray
        match (another identity's session sharing a reference) is dropped here."""
        assert self.index is not None
        refs: list[bytes] = []
        cursor = 0
        while True:
            cursor, found = (yield [self.index.plan_scan(identity, cursor)])[0]
            refs.extend(found)
            if cursor == 0:
                break
        records: dict[bytes, Record] = {}
        pending = [(ref, 0) for ref in dict.fromkeys(refs)]
        while pending:
            replies = yield from self._on([ref + bytes(16 - len(ref)) for ref, _ in pending],
                                          [self.layout.plan_find(ref, cur) for ref, cur in pending])
            pending = [(ref, nxt) for (ref, _), (nxt, _) in zip(pending, replies) if nxt != 0]
            for _, recs in replies:
                records.update((r.digest, r) for r in recs)
        now = self.now()
        return [r for r in records.values() if r.identity == identity and r.live(now)]

    def _need_index(self) -> None:
        if self.index is None:
            raise DensekvError("this store was made with index_identities=False")

    def sessions_of(self, identity: Identity) -> Flow[list[Session]]:
        self._need_index()
        identity = check_identity(identity)
        records = yield from self._live_records_of(identity)
        return [Session("", r.identity, r.expires_at, r.data, id=r.digest.hex()) for r in records]

    def destroy_all(self, identity: Identity) -> Flow[int]:
        self._need_index()
        identity = check_identity(identity)
        records = yield from self._live_records_of(identity)
        if not records:
            return 0
        digests = [r.digest for r in records]
        removed = yield from self._on(digests, [self.layout.plan_delete(d) for d in digests])
        yield [self.index.plan_remove(identity, digests)]  # type: ignore[union-attr]
        now = self.now()
        return sum(1 for r in removed if r is not None and r.live(now) and r.identity == identity)

    def sweep(self, max_items: int | None) -> Flow[int]:
        """Remove expired sessions partition by partition, then identity-index entries past
        their absolute expiry. max_items=None: a full pass over both; otherwise stop near
        max_items removals and sweep one batch of index partitions (cursors carry on)."""
        units = list(self.layout.sweep_units())
        removed_total = 0
        budget = max_items if max_items is not None else float("inf")
        if units:
            visited = 0
            while visited < len(units) and removed_total < budget:
                batch = [units[(self.sweep_cursor + i) % len(units)] for i in range(min(SWEEP_BATCH, len(units) - visited))]
                now = self.now()
                # share what is left of the budget among this round trip's partitions
                left = budget - removed_total
                limit = 1 << 30 if max_items is None else max(1, -(-int(left) // len(batch)))
                results = yield from self._on_units(batch, [self.layout.plan_sweep(u, now, limit) for u in batch])
                self.sweep_cursor = (self.sweep_cursor + len(batch)) % len(units)
                visited += len(batch)
                gone: list[Record] = [r for rs in results for r in rs]
                removed_total += len(gone)
                if self.index is not None and gone:
                    by_identity: dict[Identity, list[bytes]] = {}
                    for r in gone:
                        by_identity.setdefault(r.identity, []).append(r.digest)
                    yield [self.index.plan_remove(i, ds) for i, ds in by_identity.items()]
        if self.index is not None:
            # a full pass visits every index partition; a bounded one, one batch of them
            parts = list(self.index.units())
            todo = len(parts) if max_items is None else min(SWEEP_BATCH, len(parts))
            for i in range(0, todo, SWEEP_BATCH):
                now = self.now()
                batch = [parts[(self.index_cursor + i + j) % len(parts)] for j in range(min(SWEEP_BATCH, todo - i))]
                yield [self.index.plan_sweep(p, now) for p in batch]
            self.index_cursor = (self.index_cursor + todo) % len(parts)
        return removed_total

    def _on_units(self, units: list[int], plans: list[Plan[Any]]) -> Flow[list[Any]]:
        """Partition-wide plans (sweep), after splitting their parents while migrating."""
        layout = self.layout
        splits: list[Plan[Any]] = []
        if isinstance(layout, PartitionedLayout) and layout.from_bits is not None:
            shift = layout.bits - layout.from_bits
            splits = [layout.plan_split(p) for p in dict.fromkeys(u >> shift for u in units)]
        results = yield [*splits, *plans]
        return results[len(splits):]

    def partition_sizes(self) -> Flow[list[int]]:
        """Sessions in every partition (expired-but-unswept ones included); while a
        repartition runs, each new partition counts the sessions its parent still holds
        for it only once the parent is split, so the parents' counts are added to the
        first child."""
        from densekv.lua import script
        from densekv.plan import command, script_call

        layout = self.layout
        assert isinstance(layout, PartitionedLayout)
        sizes: list[int] = []
        keys = [layout.hash_key(p) for p in range(layout.partitions)]
        if layout.from_bits is None:
            for i in range(0, len(keys), 512):
                sizes += (yield [command("HLEN", k, keys=(k,), decode=int) for k in keys[i : i + 512]])
            return sizes
        olds = [layout.key_at("sd", p, layout.from_bits) for p in range(layout.from_partitions or 0)]
        counted: list[int] = []
        every = keys + olds
        for i in range(0, len(every), 512):
            batch = every[i : i + 512]
            counted += (yield [script_call(script("part_len"), (k,), (), int) for k in batch])
        sizes = counted[: len(keys)]
        shift = layout.bits - layout.from_bits
        for p, n in enumerate(counted[len(keys):]):
            sizes[p << shift] += n
        return sizes

    def count_keys(self) -> Flow[int]:
        """Sessions of a one-key-per-session layout: a SCAN over the layout's keys (one
        server; the sync store scans every node of a cluster with redis-py's scan_iter)."""
        from densekv.keys import glob_escape
        from densekv.plan import command

        pattern = glob_escape(f"{self.namespace}:{self.layout.code}:".encode()) + b"*"  # type: ignore[attr-defined]
        cursor, total = 0, 0
        while True:
            cursor, keys = (yield [command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000,
                                           decode=lambda r: (int(r[0]), r[1]))])[0]
            total += len(keys)
            if cursor == 0:
                return total

    def count(self) -> Flow[int]:
        """Sessions stored (expired ones not yet swept included, for sweep-based layouts)."""
        return sum((yield from self.partition_sizes()))

    def fill_warnings(self, sizes: list[int]) -> list[str]:
        limit = self.facts.limits.hash_max_listpack_entries
        fullest = max(sizes, default=0)
        if fullest > 0.9 * limit:
            return [
                f"the fullest partition holds {fullest} sessions of the {limit} a listpack may "
                "hold: partitions are about to convert to hashtables (several times the memory); "
                "grow the store online: `densekv repartition --partitions N` (or "
                "store.repartition(N)) with N twice the current count or more"
            ]
        return []

    def explain(self) -> dict[str, Any]:
        return {
            **self.layout.describe(),
            "reason": self.choice.reason,
            "ttl": self.ttl,
            "idle_ttl": self.idle_ttl,
            "index_partitions": self.index.partitions if self.index else None,
            "server": {
                "hash_max_listpack_entries": self.facts.limits.hash_max_listpack_entries,
                "hash_max_listpack_value": self.facts.limits.hash_max_listpack_value,
                "field_ttl": self.facts.field_ttl,
                "field_ttl_encoding": self.facts.field_ttl_encoding,
                "cluster": self.facts.cluster,
            },
        }


def facts_from_probe(client: Any) -> ServerFacts:
    from densekv.server.probe import probe

    caps = probe(client)
    return ServerFacts(
        LayoutLimits(caps.hash_max_listpack_entries, caps.hash_max_listpack_value, caps.zset_max_listpack_entries),
        caps.field_ttl,
        caps.field_ttl_encoding,
        caps.cluster,
    )


class SessionStore:
    """Sessions in Redis/Valkey at a few dozen bytes each. See README "Sessions".

    layout: "auto" (dense on every server measured), or json, packed, hash, zset, dense,
    fieldttl. expected_sessions sizes the partitions of a new store; `partitions` forces a
    count (a power of two); `fill` caps the mean sessions per partition (smaller listpacks
    make HGET faster at ~70 bytes per extra partition key). A namespace's first store
    writes its layout and partition count to `{namespace}:meta`; later stores adopt them,
    and `repartition()` (or `densekv repartition`) grows the count online.
    """

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        namespace: str = "sess",
        layout: str = "auto",
        ttl: int = DEFAULT_TTL,
        idle_ttl: int | None = None,
        expected_sessions: int = 100_000,
        index_identities: bool = True,
        *,
        partitions: int | None = None,
        fill: int | None = None,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self._ex = executor_for(client)
        self._core = SessionCore(
            facts or facts_from_probe(client),
            namespace=namespace, layout=layout, ttl=ttl, idle_ttl=idle_ttl,
            expected_sessions=expected_sessions, index_identities=index_identities,
            partitions=partitions, clock=clock, fill=fill,
        )
        self._drive(self._core.open())

    def _drive(self, flow: Flow[T]) -> T:
        try:
            plans = next(flow)
            while True:
                plans = flow.send(self._ex.run_many(plans))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _run(self, flow_or_make: Flow[T] | Callable[[SessionCore], Flow[T]]) -> T:
        """Run a flow. Given a maker (core -> flow), a flow that meets a repartition
        tombstone (WrongType) re-reads the store metadata and runs again on the new
        partition count; while a repartition runs the metadata is re-read every few
        seconds, so every process sees its end."""
        core = self._core
        if not callable(flow_or_make):
            return self._drive(flow_or_make)
        if core.migrating and time.monotonic() - core.meta_read_at > META_RECHECK_S:
            self._drive(core.refresh())
        for attempt in range(4):
            try:
                return self._drive(flow_or_make(core))
            except WrongType:
                if attempt == 3 or not isinstance(core.layout, PartitionedLayout) or not self._drive(core.refresh()):
                    raise
        raise AssertionError("unreachable")

    @property
    def layout(self) -> str:
        return self._core.layout.name

    def explain(self) -> dict[str, Any]:
        return self._core.explain()

    def create(self, identity: Identity, data: dict[str, Any] | None = None, ttl: int | None = None) -> str:
        return self._run(lambda c: c.create(identity, data, ttl))

    def create_many(self, identities: Iterable[Identity], data: dict[str, Any] | None = None, ttl: int | None = None, *, batch: int = 1000) -> list[str]:
        """Create many sessions, one pipeline round trip (two with the index) per batch."""
        out: list[str] = []
        chunk: list[Identity] = []
        for identity in identities:
            chunk.append(identity)
            if len(chunk) >= batch:
                out += self._create_batch(chunk, data, ttl)
                chunk = []
        if chunk:
            out += self._create_batch(chunk, data, ttl)
        return out

    def _create_batch(self, identities: list[Identity], data: dict[str, Any] | None, ttl: int | None) -> list[str]:
        made = self._core.new_records(identities, data, ttl)  # the same records on a retry
        return self._run(lambda c: c.put_records(made))

    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Grow a partitioned store to `partitions` online (see SessionCore.repartition)."""
        return self._run(lambda c: c.repartition(partitions, progress))

    def get(self, token: str) -> Session | None:
        return self._run(lambda c: c.get(token))

    def touch(self, token: str) -> bool:
        return self._run(lambda c: c.touch(token))

    def update(self, token: str, data: dict[str, Any] | None) -> bool:
        return self._run(lambda c: c.update(token, data))

    def destroy(self, token: str) -> bool:
        return self._run(lambda c: c.destroy(token))

    def destroy_id(self, session_id: str) -> bool:
        """End a session listed by sessions_of() (by its id, not its token)."""
        return self._run(lambda c: c.destroy_id(session_id))

    def regenerate(self, token: str) -> str | None:
        return self._run(lambda c: c.regenerate(token))

    def sessions_of(self, identity: Identity) -> list[Session]:
        return self._run(lambda c: c.sessions_of(identity))

    def destroy_all(self, identity: Identity) -> int:
        return self._run(lambda c: c.destroy_all(identity))

    def sweep(self, max_items: int | None = None) -> int:
        return self._run(lambda c: c.sweep(max_items))

    def count(self) -> int:
        if isinstance(self._core.layout, PartitionedLayout):
            return self._run(lambda c: c.count())
        layout = self._core.layout
        pattern = f"{layout.namespace}:{layout.code}:*"  # type: ignore[attr-defined]
        return sum(1 for _ in self.client.scan_iter(match=pattern, count=1000))

    def stats(self) -> dict[str, Any]:
        """Layout, sessions stored, the fullest partition, refusals, and warnings."""
        out: dict[str, Any] = {**self.explain(), "refused_too_large": self._core.refused_too_large}
        if isinstance(self._core.layout, PartitionedLayout):
            sizes = self._run(lambda c: c.partition_sizes())
            out.update(sessions=sum(sizes), fullest_partition=max(sizes, default=0),
                       warnings=self._core.fill_warnings(sizes))
        else:
            out.update(sessions=self.count(), warnings=[])
        return out


class AsyncSessionStore:
    """The asyncio twin of SessionStore: same names, awaited. Unless `facts` is given, the
    first operation (or `await store.ready()`) reads the server's limits with CONFIG GET."""

    def __init__(
        self,
        client: Any,
        namespace: str = "sess",
        layout: str = "auto",
        ttl: int = DEFAULT_TTL,
        idle_ttl: int | None = None,
        expected_sessions: int = 100_000,
        index_identities: bool = True,
        *,
        partitions: int | None = None,
        fill: int | None = None,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self._ex = executor_for(client)
        self._args = dict(namespace=namespace, layout=layout, ttl=ttl, idle_ttl=idle_ttl,
                          expected_sessions=expected_sessions, index_identities=index_identities,
                          partitions=partitions, clock=clock, fill=fill)
        self._facts = facts
        self._core: SessionCore | None = None

    async def ready(self) -> SessionCore:
        if self._core is None:
            core = SessionCore(self._facts or await _afacts(self._ex), **self._args)  # type: ignore[arg-type]
            await self._drive(core.open())
            self._core = core
        return self._core

    async def _drive(self, flow: Flow[T]) -> T:
        try:
            plans = next(flow)
            while True:
                plans = flow.send(await self._ex.run_many(plans))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _run(self, make: Callable[[SessionCore], Flow[T]]) -> T:
        """As SessionStore._run: retried on a repartition tombstone."""
        core = await self.ready()
        if core.migrating and time.monotonic() - core.meta_read_at > META_RECHECK_S:
            await self._drive(core.refresh())
        for attempt in range(4):
            try:
                return await self._drive(make(core))
            except WrongType:
                if attempt == 3 or not isinstance(core.layout, PartitionedLayout) or not await self._drive(core.refresh()):
                    raise
        raise AssertionError("unreachable")

    async def explain(self) -> dict[str, Any]:
        return (await self.ready()).explain()

    async def create(self, identity: Identity, data: dict[str, Any] | None = None, ttl: int | None = None) -> str:
        return await self._run(lambda c: c.create(identity, data, ttl))

    async def create_many(self, identities: Iterable[Identity], data: dict[str, Any] | None = None, ttl: int | None = None) -> list[str]:
        made = (await self.ready()).new_records(list(identities), data, ttl)  # the same records on a retry
        return await self._run(lambda c: c.put_records(made))

    async def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        return await self._run(lambda c: c.repartition(partitions, progress))

    async def count(self) -> int:
        core = await self.ready()
        if isinstance(core.layout, PartitionedLayout):
            return await self._run(lambda c: c.count())
        return await self._run(lambda c: c.count_keys())

    async def stats(self) -> dict[str, Any]:
        core = await self.ready()
        out: dict[str, Any] = {**core.explain(), "refused_too_large": core.refused_too_large}
        if isinstance(core.layout, PartitionedLayout):
            sizes = await self._run(lambda c: c.partition_sizes())
            out.update(sessions=sum(sizes), fullest_partition=max(sizes, default=0),
                       warnings=core.fill_warnings(sizes))
        else:
            out.update(sessions=await self.count(), warnings=[])
        return out

    async def get(self, token: str) -> Session | None:
        return await self._run(lambda c: c.get(token))

    async def touch(self, token: str) -> bool:
        return await self._run(lambda c: c.touch(token))

    async def update(self, token: str, data: dict[str, Any] | None) -> bool:
        return await self._run(lambda c: c.update(token, data))

    async def destroy(self, token: str) -> bool:
        return await self._run(lambda c: c.destroy(token))

    async def destroy_id(self, session_id: str) -> bool:
        return await self._run(lambda c: c.destroy_id(session_id))

    async def regenerate(self, token: str) -> str | None:
        return await self._run(lambda c: c.regenerate(token))

    async def sessions_of(self, identity: Identity) -> list[Session]:
        return await self._run(lambda c: c.sessions_of(identity))

    async def destroy_all(self, identity: Identity) -> int:
        return await self._run(lambda c: c.destroy_all(identity))

    async def sweep(self, max_items: int | None = None) -> int:
        return await self._run(lambda c: c.sweep(max_items))


async def _afacts(ex: Any) -> ServerFacts:
    """The few server facts an async store needs, read with CONFIG GET / COMMAND INFO."""
    from densekv.plan import command

    def pair(reply: Any) -> int:
        items = list(reply.items()) if isinstance(reply, dict) else list(zip(reply[::2], reply[1::2]))
        return int(items[0][1])

    entries, value, zentries, hexpire, hsetex = await ex.run_many([
        command("CONFIG", "GET", "hash-max-listpack-entries", decode=pair),
        command("CONFIG", "GET", "hash-max-listpack-value", decode=pair),
        command("CONFIG", "GET", "zset-max-listpack-entries", decode=pair),
        command("COMMAND", "INFO", "HEXPIRE", decode=lambda r: bool(r) and r[0] is not None),
        command("COMMAND", "INFO", "HSETEX", decode=lambda r: bool(r) and r[0] is not None),
    ])
    field_ttl = "hsetex" if hsetex else "hexpire" if hexpire else "none"
    return ServerFacts(LayoutLimits(entries, value, zentries), field_ttl, None, cluster=False)
