"""The session store's operations, each written once as a *flow*, with no I/O.

A flow is a generator that yields lists of plans and receives their results (one list =
one round trip). `SessionStore` drives flows with a sync or cluster executor,
`AsyncSessionStore` with an asyncio one (densekv/sessions/store.py), so the two cannot
drift. Invariants:
  * a malformed token never reaches the server (digest_of() is None -> "not found");
  * get/touch/sessions_of never return a session whose expiry has passed, swept or not;
  * data that would not come back equal, or is over max_data_bytes, is refused before
    anything is written (payload.py; every plan is built before any is sent), and so is
    a record the layout cannot hold;
  * a write of new data to an existing session (`apply`) is a compare-and-set on what was
    read: concurrent writers of different keys both keep their change, and a session
    destroyed meanwhile is never resurrected;
  * regenerate is one atomic step on the server (a script or RENAME on one slot): the
    new token is drawn until it falls in the old one's slot group;
  * the identity index gains an entry before a session can be found under a new digest
    and loses it after the session is gone, so destroy_all() never misses a live one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from densekv.codec import ZstdDictionary
from densekv.errors import DecodeError, DensekvError
from densekv.flows import Flow, gather, retrying
from densekv.keys import partition_count
from densekv.maps.dictionaries import plan_load, plan_store, train_dictionary
from densekv.plan import Command, Plan, command
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
    SessionDataInvalid,
    SessionDataTooLarge,
    check_identity,
    check_owner,
    digest_of,
    new_token,
)
from densekv.sessions.payload import DEFAULT_MAX_DATA_BYTES, PayloadCodec, pack_data

if TYPE_CHECKING:
    from densekv.server.probe import Capabilities

T = TypeVar("T")

LAYOUTS = ("json", "packed", "hash", "zset", "dense", "fieldttl")
DEFAULT_TTL = 30 * 24 * 3600
SWEEP_BATCH = 64  # partitions per round trip
META_RECHECK_S = 5.0  # while a repartition runs, re-read the store metadata this often
META_REFRESH_S = 60.0  # otherwise this often (a dictionary trained by another process)
MAX_CAS_TRIES = 50  # apply/login retries while other writers change the same session
TOUCH_GAIN = 0.25  # due_for_touch: roll the idle expiry once this part of the window has passed
AUTO_TRAIN = 2000  # payloads written before a store trains the namespace's dictionary
SAMPLE_SESSIONS = 2000  # sessions read to train a dictionary from the store itself
OUTSIDE_WEIGHT = 0.05  # moving average of reads that found an out-of-line payload ...
OUTSIDE_SPECULATE = 0.2  # ... above which a get reads the out-of-line key in the same round trip


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
    dictionary: int | None = None  # the zstd dictionary new payloads are written with

    @classmethod
    def from_reply(cls, reply: Any) -> StoreMeta | None:
        fields = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        if not fields:
            return None
        return cls(fields["layout"], int(fields["partitions"]), int(fields["base"]),
                   int(fields["from"]) if "from" in fields else None,
                   int(fields["dict"]) if "dict" in fields else None)


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
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
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
        self.codec = PayloadCodec(max_data_bytes)
        self.auto_train = auto_train
        self.samples: list[bytes] = []  # packed payloads written, until a dictionary exists
        self.outside_rate = 0.0  # recent reads that found their payload out of line

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
        yield from self._use_dictionary()

    def _use_dictionary(self) -> Flow[None]:
        """Write with the dictionary the metadata names (loaded once, cached by id)."""
        want = self.meta.dictionary if self.meta is not None else None
        current = self.codec.dictionary.id if self.codec.dictionary else None
        if want is None or want == current:
            return
        if want not in self.codec.known:
            found = (yield [plan_load(self.namespace, [want])])[0]
            if want not in found:
                raise DecodeError(f"store {self.namespace!r} names zstd dictionary {want}, which is not stored")
            self.codec.known.update(found)
        self.codec.use(ZstdDictionary(want, self.codec.known[want]))

    def refresh(self) -> Flow[bool]:
        """Re-read the metadata; True if it changed (a repartition began or ended)."""
        meta = (yield [plan_meta(self.namespace, "read")])[0]
        if meta is None or meta == self.meta:
            self.meta_read_at = time.monotonic()
            return False
        self.adopt(meta)
        yield from self._use_dictionary()
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

    def guarded(self, make: Callable[[SessionCore], Flow[T]]) -> Flow[T]:
        """The flow `make(self)`, as both shells run every operation: the metadata is
        re-read first when stale() (every few seconds while a repartition runs, once a
        minute otherwise, so every process sees its end and a new dictionary), and a run
        that meets a repartition tombstone (WrongType) re-reads it and runs again on the
        new partition count."""
        if self.stale():
            yield from self.refresh()
        return (yield from retrying(lambda: make(self), self._after_tombstone))

    def _after_tombstone(self, exc: Exception) -> Flow[bool]:
        """True to run again: a partitioned store whose metadata changed."""
        if not isinstance(self.layout, PartitionedLayout):
            return False
        return (yield from self.refresh())

    def stale(self) -> bool:
        """Time to re-read the metadata: often during a repartition, else once a minute."""
        age = time.monotonic() - self.meta_read_at
        return age > (META_RECHECK_S if self.migrating else META_REFRESH_S)

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

    # -- payloads -------------------------------------------------------------------
    def encode(self, data: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
        """(packed, framed) of session data, checked (typed errors, nothing written yet)."""
        if data is None:
            return None, None
        try:
            if not self.layout.holds_bytes:
                _no_bytes(data)
            if isinstance(self.layout, PartitionedLayout):
                return self.codec.encode(data)
            return pack_data(data, self.codec.max_bytes), None
        except SessionDataTooLarge:
            self.refused_too_large += 1
            raise

    def _complete(self, digest: bytes, rec: Record | None) -> Flow[Record | None]:
        """A record as read, with its payload decoded. A record that points out of line at
        a missing value (an update moved the payload between HGET and GET) is re-read."""
        for attempt in range(3):
            if rec is None or not rec.outside or rec.payload is not None or not rec.live(self.now()):
                break
            layout = self.layout
            if attempt == 0 and isinstance(layout, PartitionedLayout):  # read what the record names
                (rec,) = yield from self._on([digest], [layout.plan_fetch_outside(rec)])
            else:  # it moved meanwhile: read everything again
                (rec,) = yield from self._on([digest], [self.layout.plan_get(digest)])
        else:
            if rec is not None and rec.outside and rec.payload is None:
                raise DecodeError(f"session {digest.hex()} points at an out-of-line payload that is not stored", key=digest)
        if rec is None:
            return None
        return (yield from self._decode_payloads([rec]))[0]

    def _decode_payloads(self, records: list[Record]) -> Flow[list[Record]]:
        """Decode framed payloads, loading any dictionary they name that is not cached."""
        need = sorted({d for r in records if r.payload is not None and (d := self.codec.missing(r.payload))})
        if need:
            self.codec.known.update((yield [plan_load(self.namespace, need)])[0])
        out = []
        for r in records:
            if r.payload is None:
                out.append(r)
                continue
            try:
                data = self.codec.decode(r.payload, key=r.digest)
            except DecodeError:
                raise
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                raise DecodeError(f"session {r.digest.hex()} holds a payload that does not decode: {exc}",
                                  key=r.digest) from exc
            out.append(replace(r, data=data))
        return out

    def _fill_outside(self, records: list[Record]) -> Flow[list[Record]]:
        """Records found by a scan carry only their inline part: read the rest."""
        layout = self.layout
        missing = [i for i, r in enumerate(records) if r.outside and r.payload is None]
        if missing and isinstance(layout, PartitionedLayout):
            filled = yield [layout.plan_fetch_outside(records[i]) for i in missing]
            fresh: list[Record | None] = list(records)
            for i, rec in zip(missing, filled):
                fresh[i] = rec
            records = [r for r in fresh if r is not None]
        now = self.now()  # gone or expired meanwhile: dropped
        records = [r for r in records if not (r.outside and r.payload is None) and r.live(now)]
        return (yield from self._decode_payloads(records))

    def _sample(self, packed: list[bytes]) -> Flow[None]:
        """Keep payloads until the namespace has a dictionary; then train it (once)."""
        if (self.auto_train is None or self.codec.dictionary is not None
                or not isinstance(self.layout, PartitionedLayout)):
            return
        self.samples.extend(packed[: self.auto_train - len(self.samples)])
        if len(self.samples) >= self.auto_train:
            samples, self.samples = self.samples, []
            yield from self.refresh()  # another process may have trained one meanwhile
            if self.codec.dictionary is None:
                yield from self._store_dictionary(samples)

    def train_dictionary(self, samples: Iterable[dict[str, Any]] | None = None) -> Flow[int]:
        """Train the namespace's zstd dictionary on `samples` (session data dicts), or on
        up to SAMPLE_SESSIONS sessions read from the store; store it, and make it the one
        new payloads are written with (every process adopts it within a minute)."""
        if not isinstance(self.layout, PartitionedLayout):
            raise DensekvError(f"layout {self.layout.name} keeps payloads as they are: no dictionary")
        if samples is not None:
            packed = [pack_data(d, self.codec.max_bytes) for d in samples]
        else:
            packed = []
            layout = self.layout
            for p in range(layout.partitions):
                if len(packed) >= SAMPLE_SESSIONS:
                    break
                key = layout.hash_key(p)
                _, flat = (yield [Plan((Command(("HSCAN", key, 0, "COUNT", 1000), (key,)),), lambda r: r[0])])[0]
                from densekv.keys import join_digest
                from densekv.sessions.record import unpack_record

                recs = [unpack_record(join_digest(p, flat[i], layout.bits), flat[i + 1]) for i in range(0, len(flat), 2)]
                recs = yield from self._fill_outside([r for r in recs if r.payload is not None or r.outside])
                packed += [pack_data(r.data, self.codec.max_bytes) for r in recs if r.data is not None]
        return (yield from self._store_dictionary(packed))

    def _store_dictionary(self, packed: list[bytes]) -> Flow[int]:
        data = train_dictionary(packed, size=4096)
        stored = (yield [plan_store(self.namespace, data)])[0]
        meta = (yield [plan_meta(self.namespace, "dict", stored.id)])[0]
        self.codec.known[stored.id] = stored.data
        self.adopt(meta)
        yield from self._use_dictionary()
        return int(stored.id)

    # -- helpers --------------------------------------------------------------------
    def new_record(self, identity: Any, data: dict[str, Any] | None, ttl: int | None,
                    token: str | None = None) -> tuple[Record, str, bytes | None]:
        identity = check_owner(identity)
        packed, framed = self.encode(data)
        now = self.now()
        absolute = now + int(ttl or self.ttl)
        expires = min(absolute, now + self.idle_ttl) if self.idle_ttl else absolute
        if token is None:
            token = new_token()
        digest = digest_of(token)
        if digest is None:
            raise ValueError("token= takes a session token: 22 to 86 URL-safe characters")
        return Record(digest, identity, expires, absolute, data, framed), token, packed

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

    def due_for_touch(self, session: Session) -> bool:
        """True when TOUCH_GAIN of the idle window has passed since the expiry was last
        rolled and a touch would still move it (so a backend writes on a few requests,
        not on every one, and an active session never idles out)."""
        if self.idle_ttl is None:
            return False
        now = self.now()
        target = min(session.absolute_at or session.expires_at, now + self.idle_ttl)
        return target > session.expires_at and session.expires_at - now <= self.idle_ttl * (1 - TOUCH_GAIN)

    # -- flows ------------------------------------------------------------------------
    def create(self, identity: Identity | None, data: dict[str, Any] | None, ttl: int | None,
               token: str | None = None) -> Flow[str]:
        tokens = yield from self.put_records([self.new_record(identity, data, ttl, token)])
        return tokens[0]

    def create_many(self, identities: Iterable[Identity | None], data: dict[str, Any] | None, ttl: int | None) -> Flow[list[str]]:
        return (yield from self.put_records(self.new_records(identities, data, ttl)))

    def new_records(self, identities: Iterable[Identity | None], data: dict[str, Any] | None,
                    ttl: int | None) -> list[tuple[Record, str, bytes | None]]:
        return [self.new_record(identity, data, ttl) for identity in identities]

    def put_records(self, made: list[tuple[Record, str, bytes | None]]) -> Flow[list[str]]:
        """Store new records (idempotent: a retry after a repartition tombstone rewrites the
        same fields, and the split moved any that the first try had stored)."""
        now = self.now()
        try:  # every plan is built (and every record sized) before anything is sent
            puts = [self.layout.plan_put(rec, now) for rec, _, _ in made]
        except SessionDataTooLarge:
            self.refused_too_large += 1
            raise
        if not made:
            return []
        if self.index is not None:  # listed before it can be found: destroy_all never misses it
            adds = [self.index.plan_add(rec.identity, rec.digest, rec.absolute_at)
                    for rec, _, _ in made if rec.identity is not None]
            if adds:
                yield adds
        yield from self._on([rec.digest for rec, _, _ in made], puts)
        yield from self._sample([p for _, _, p in made if p is not None])
        return [token for _, token, _ in made]

    def get(self, token: str) -> Flow[Session | None]:
        digest = digest_of(token)
        if digest is None:
            return None
        rec = yield from self._read(digest)
        return None if rec is None else rec.session(token)

    def get_many(self, tokens: list[str]) -> Flow[list[Session | None]]:
        """get() of every token, their round trips shared (one pipeline per step)."""
        return (yield from gather([self.get(t) for t in tokens]))

    def _read(self, digest: bytes) -> Flow[Record | None]:
        """The live record of a digest, payload decoded; None if missing or expired. The
        out-of-line key is read in the same round trip only while recent reads needed it
        (OUTSIDE_SPECULATE): stores of small sessions send one HGET, stores of large ones
        one round trip of HGET + GET."""
        layout = self.layout
        if isinstance(layout, PartitionedLayout):
            plan = layout.plan_get(digest, outside=self.outside_rate > OUTSIDE_SPECULATE)
        else:
            plan = layout.plan_get(digest)
        (rec,) = yield from self._on([digest], [plan])
        if rec is None or not rec.live(self.now()):
            return None
        self.outside_rate += OUTSIDE_WEIGHT * ((1.0 if rec.outside else 0.0) - self.outside_rate)
        return (yield from self._complete(digest, rec))

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
        """Replace the whole payload of a live session (None clears it)."""
        digest = digest_of(token)
        packed, framed = self.encode(data)
        if digest is None:
            return False
        if not self.layout.needs_read:
            (result,) = yield from self._on([digest], [self.layout.plan_replace(digest, None, data, framed, self.now())])
            if result == 1 and packed is not None:
                yield from self._sample([packed])
            return bool(result == 1)
        return (yield from self._change(digest, lambda _: data)) is not None

    def apply(self, token: str, changes: dict[str, Any], removed: Iterable[str] = ()) -> Flow[dict[str, Any] | None]:
        """Merge `changes` into the stored data and drop the keys in `removed`, as a
        compare-and-set on the record read: the merged data, or None if the session is
        gone (it is never written again)."""
        if not isinstance(changes, dict):
            raise SessionDataInvalid("changes is a dict of top-level session keys")
        removed = list(removed)
        digest = digest_of(token)
        if digest is None:
            return None

        def merge(old: dict[str, Any] | None) -> dict[str, Any] | None:
            new = {**(old or {}), **changes}
            for key in removed:
                new.pop(key, None)
            return new or None

        return (yield from self._change(digest, merge))

    def _change(self, digest: bytes, merge: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Flow[dict[str, Any] | None]:
        for _ in range(MAX_CAS_TRIES):
            current = yield from self._read(digest)
            if current is None:
                return None
            data = merge(current.data)
            packed, framed = self.encode(data)
            (result,) = yield from self._on([digest], [self.layout.plan_replace(digest, current, data, framed, self.now())])
            if result == 1:
                if packed is not None:
                    yield from self._sample([packed])
                return data if data is not None else {}
            if result == 0:
                return None
        raise DensekvError(f"session {digest.hex()} kept changing under {MAX_CAS_TRIES} tries to write it")

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
        if self.index is not None and rec.identity is not None:
            yield [self.index.plan_remove(rec.identity, [digest])]
        return bool(rec.live(self.now()))

    def regenerate(self, token: str) -> Flow[str | None]:
        return (yield from self._move(token, ...))

    def login(self, token: str, identity: Identity) -> Flow[str | None]:
        """A new token for the session, the old one dead and `identity` set, in one step
        on the server (listed under the identity before it can be found)."""
        identity = check_identity(identity)
        return (yield from self._move(token, identity))

    def _move(self, token: str, identity: Any) -> Flow[str | None]:
        """Regenerate (identity ...) or log in (a new identity): one atomic rename."""
        old = digest_of(token)
        if old is None:
            return None
        new_token_, new = self._token_in_group(old)
        if self.index is None and identity is ...:
            (moved,) = yield from self._on([old, new], [self.layout.plan_rename(old, new, self.now())])
            return new_token_ if moved is not None else None
        for _ in range(MAX_CAS_TRIES):
            now = self.now()
            (current,) = yield from self._on([old, new], [self.layout.plan_get(old)])
            if current is None or not current.live(now):
                return None
            owner = current.identity if identity is ... else identity
            if self.index is not None and owner is not None:
                yield [self.index.plan_add(owner, new, current.absolute_at)]
            (moved,) = yield from self._on([old, new], [self.layout.plan_rename(old, new, now, identity, current)])
            if self.index is not None:
                drop = [self.index.plan_remove(current.identity, [old])] if moved not in (None, -2) and current.identity is not None else []
                if moved in (None, -2) and owner is not None:
                    drop = [self.index.plan_remove(owner, [new])]
                if drop:
                    yield drop
            if moved != -2:
                return new_token_ if moved is not None else None
        raise DensekvError(f"session {old.hex()} kept changing under {MAX_CAS_TRIES} tries to move it")

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

    def _live_sessions_of(self, identity: Identity) -> Flow[list[Record]]:
        records = yield from self._fill_outside((yield from self._live_records_of(identity)))
        return [r for r in records if r.identity == identity]  # a re-read may find a login

    def _need_index(self) -> None:
        if self.index is None:
            raise DensekvError("this store was made with index_identities=False")

    def sessions_of(self, identity: Identity) -> Flow[list[Session]]:
        self._need_index()
        identity = check_identity(identity)
        records = yield from self._live_sessions_of(identity)
        return [r.session("") for r in records]

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
                cleanup: list[Plan[Any]] = []
                if isinstance(self.layout, PartitionedLayout):
                    outside = [self.layout.ool_key(r.digest) for r in gone if r.outside and r.part is None]
                    cleanup += [command("DEL", k, keys=(k,)) for k in outside]
                if self.index is not None and gone:
                    by_identity: dict[Identity, list[bytes]] = {}
                    for r in gone:
                        if r.identity is not None:
                            by_identity.setdefault(r.identity, []).append(r.digest)
                    cleanup += [self.index.plan_remove(i, ds) for i, ds in by_identity.items()]
                if cleanup:
                    yield cleanup
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
                (f"the fullest partition holds {fullest} sessions of the {limit} a listpack may "
                "hold: partitions are about to convert to hashtables (several times the memory); "
                "grow the store online: `densekv repartition --partitions N` (or "
                "store.repartition(N)) with N twice the current count or more")
            ]
        return []

    def explain(self) -> dict[str, Any]:
        return {
            **self.layout.describe(),
            "reason": self.choice.reason,
            "ttl": self.ttl,
            "idle_ttl": self.idle_ttl,
            "index_partitions": self.index.partitions if self.index else None,
            "max_data_bytes": self.codec.max_bytes,
            "dictionary": self.codec.dictionary.id if self.codec.dictionary else None,
            "server": {
                "hash_max_listpack_entries": self.facts.limits.hash_max_listpack_entries,
                "hash_max_listpack_value": self.facts.limits.hash_max_listpack_value,
                "field_ttl": self.facts.field_ttl,
                "field_ttl_encoding": self.facts.field_ttl_encoding,
                "cluster": self.facts.cluster,
            },
        }


def _no_bytes(value: Any) -> None:
    """The JSON layout's extra rule: no bytes anywhere in the data."""
    if isinstance(value, (bytes, bytearray)):
        raise SessionDataInvalid("layout json cannot hold bytes in session data (JSON has no bytes)")
    if isinstance(value, dict):
        for v in value.values():
            _no_bytes(v)
    elif isinstance(value, list):
        for v in value:
            _no_bytes(v)


def facts_of(caps: Capabilities) -> ServerFacts:
    """What a session store needs of the probe's Capabilities (a pure projection)."""
    return ServerFacts(
        LayoutLimits(caps.hash_max_listpack_entries, caps.hash_max_listpack_value, caps.zset_max_listpack_entries),
        caps.field_ttl,
        caps.field_ttl_encoding,
        caps.cluster,
    )


def facts_from_probe(client: Any) -> ServerFacts:
    """The facts of a sync (or cluster) client's server: facts_of(probe(client))."""
    from densekv.server.probe import probe

    return facts_of(probe(client))
