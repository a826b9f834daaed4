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
Each piece of a store's state has one owner, which the core holds and only that owner
changes: `metadata` (meta.Metadata: the StoreMeta every process shares, when it was read,
the layout built from it; open, refresh, recover after a loss), `payloads`
(payload_flows.Payloads: the codec, its dictionary's samples and training, the refusals
and read shares), `sweeper` (sweep.Sweeper: the sweep's cursors; sweep, repartition,
sizes, counts), `identities` and `lines` (identities.Identities: the flows over an
identity's sessions; identities.Lines: devices and the per-identity limit), `rotations`
(rotations.Rotations: regenerate and login), `recorder` (events.Recorder: the lifecycle
events, recorded only while an observer or the event stream listens) and `lifetime`
(model.Lifetime: ttl and idle_ttl, a record's expiries). SessionCore keeps the single-session
flows and delegates the rest (tests/unit/test_owners.py checks that no module assigns the
fields of another module's object, and that this module stays under 600 lines).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from types import EllipsisType
from typing import Any, TypeVar, cast

from densekv.errors import (
    DecodeError,
    DensekvError,
    InvalidArgument,
    WrongType,
)
from densekv.errors import SessionDataInvalid as _SessionDataInvalid
from densekv.errors import SessionDataTooLarge as _SessionDataTooLarge
from densekv.errors import SessionExists as _SessionExists
from densekv.errors import moved as _moved
from densekv.flows import MAX_CAS_TRIES, RETRY_RUNS, Flow, cas_pause, gather
from densekv.keys import partition_count
from densekv.plan import Plan
from densekv.sessions.identities import Identities, Lines
from densekv.sessions.index import IdentityIndex
from densekv.sessions.layouts.base import Layout
from densekv.sessions.meta import (
    DEFAULT_FILL,
    LAYOUTS,
    Choice,
    Lifecycle,
    Metadata,
    ServerFacts,
    StoreMeta,
    choose_layout,
    facts_from_probe,
    facts_of,
    make_layout,
    meta_key,
    plan_meta,
)
from densekv.sessions.model import (
    Identity,
    Lifetime,
    Record,
    Session,
    check_identity,
    check_owner,
    digest_of,
    new_token,
)
from densekv.sessions.payload import DEFAULT_MAX_DATA_BYTES
from densekv.sessions.payload_flows import AUTO_TRAIN, SAMPLE_SESSIONS, Payloads
from densekv.sessions.sweep import SWEEP_BATCH, Sweeper

T = TypeVar("T")
log = logging.getLogger("densekv.sessions")

DEFAULT_TTL = 30 * 24 * 3600


class OneCreate:
    """create()'s flow maker: the record is made in the first run (so a refusal, such as
    data that would not come back equal, is the operation's error) and is the same record
    on a retry (put_records is idempotent only for the same records)."""

    __slots__ = ("data", "identity", "label", "made", "token", "ttl")

    def __init__(self, identity: Identity | None, data: dict[str, Any] | None, ttl: int | None,
                 token: str | None, label: str | None = None) -> None:
        self.identity, self.data, self.ttl, self.token, self.label = identity, data, ttl, token, label
        self.made: list[tuple[Record, str, bytes | None]] | None = None

    def __call__(self, core: SessionCore) -> Flow[list[str]]:
        if self.made is None:
            self.label = core.lines.check_label(self.label)
            self.made = [core.new_record(self.identity, self.data, self.ttl, self.token)]
        return core.put_records(self.made, given=self.token is not None, label=self.label)


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
        fill: int | None = DEFAULT_FILL,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
        ticks: Callable[[], float] = time.monotonic,
        track_devices: bool = False,
        max_sessions_per_identity: int | None = None,
        on_limit: str = "evict",
        events_stream: int | None = None,
    ) -> None:
        """`clock`: wall-clock seconds (expiries); `ticks`: a monotonic clock (how long ago
        the metadata was read), both injected so a core runs without the real time."""
        self.lifetime: Lifetime = Lifetime.of(ttl, idle_ttl)
        if not namespace or "{" in namespace or "}" in namespace:
            raise InvalidArgument("namespace is a non-empty string without braces")
        self.facts = facts
        self.namespace = namespace
        life = Lifecycle.of(track_devices, max_sessions_per_identity, on_limit, events_stream, index_identities)
        self.metadata = Metadata(facts, namespace, layout, expected_sessions, partitions, fill, index_identities, ticks, life)
        self.index = (
            IdentityIndex(namespace, partition_count(expected_sessions, facts.limits.hash_max_listpack_entries),
                          self.metadata.layout.index_ref_len)
            if index_identities
            else None
        )
        self.lines = Lines(self.index, life)  # devices and the limit: index values of format 1 or 2 (index.py)
        self.clock = clock
        self.ticks = ticks
        self.payloads = Payloads(namespace, max_data_bytes, auto_train, self.now)
        # loaded with a store, not by `import densekv` (tests/unit/test_import_weight.py)
        from densekv.sessions.events import Recorder
        from densekv.sessions.rotations import Rotations

        self.recorder = Recorder(life.stream, self.now)  # lifecycle events, recorded only while listened to
        emit_removed = self.recorder.emit_removed
        self.sweeper = Sweeper(self.metadata, self.index, self.now, emit_removed)
        self.identities = Identities(self.index, self.metadata, self.payloads, self.run_on, self.now,
                                     emit_removed, self.lines, self.idle_ttl)
        self.rotations = Rotations(self.metadata, self.index, self.lines, self.identities, self.run_on, self.now,
                                   self.recorder.emit, self.destroy_digest, facts.cluster)
        self.metadata.follow(self.lines.use, self.recorder.use)  # the namespace's options, as they change

    @property
    def ttl(self) -> int:
        return self.lifetime.ttl

    @property
    def idle_ttl(self) -> int | None:
        return self.lifetime.idle_ttl

    def now(self) -> int:
        return int(self.clock())

    @property
    def layout(self) -> Layout:
        """The store's layout as the metadata last read makes it (meta.Metadata owns it)."""
        return self.metadata.layout

    def guarded(self, make: Callable[[SessionCore], Flow[T]]) -> Flow[T]:
        """The flow `make(self)`, as both shells run every operation: the metadata is
        re-read first when stale() (every few seconds while a repartition runs, once a
        minute otherwise, so every process sees its end and a new dictionary), and a run
        that meets a repartition tombstone (WrongType) re-reads it and runs again on the
        new partition count."""
        if self.metadata.stale():
            yield from self.refresh()
        # flows.retrying(lambda: make(self), self._after_tombstone), its loop written out:
        # one generator less on every operation's way (issue 22's hot path)
        for attempt in range(RETRY_RUNS):
            try:
                return (yield from make(self))
            except WrongType as exc:
                if attempt == RETRY_RUNS - 1 or not (yield from self._after_tombstone(exc)):
                    raise
        raise AssertionError("unreachable")

    def _after_tombstone(self, exc: Exception) -> Flow[bool]:
        """True to run again: a partitioned store whose metadata changed."""
        if not self.layout.partitions:
            return False
        return (yield from self.refresh())

    @property
    def migrating(self) -> bool:
        return self.metadata.migrating

    # -- the metadata (meta.Metadata), with the dictionary the payloads are written with --
    def open(self) -> Flow[None]:
        """Create the metadata if this is the namespace's first store, then adopt it."""
        return self.metadata.open(self.payloads)

    def refresh(self) -> Flow[bool]:
        """Re-read the metadata; True if it changed (a repartition began or ended)."""
        return self.metadata.refresh(self.payloads)

    def recover(self) -> Flow[None]:
        """Write the metadata and the dictionary again after the server lost them."""
        return self.metadata.recover(self.payloads)

    def change_lifecycle(self, changes: dict[str, Any]) -> Flow[Lifecycle]:
        """Record new lifecycle options for the namespace and use them (meta.Metadata)."""
        return self.metadata.change_life(self.payloads, changes)

    def name_dictionary(self, dictionary_id: int) -> Flow[None]:
        """Name a stored dictionary in the metadata and write with it (payload training)."""
        return self.metadata.name_dictionary(self.payloads, dictionary_id)

    def plans_present(self) -> list[Plan[Any]]:
        """What a create sends beside its records: is the metadata, and our dictionary, there."""
        d = self.payloads.codec.dictionary
        return self.metadata.plans_present(d.id if d is not None else None)

    def _splits(self, digests: Iterable[bytes]) -> list[Plan[Any]]:
        """While a repartition runs: split the old partitions of these digests first."""
        return self.layout.plan_splits(digests)

    def run_on(self, digests: Iterable[bytes], plans: list[Plan[Any]]) -> Flow[list[Any]]:
        """Run `plans` in one round trip, after the splits they need (same round trip)."""
        if len(plans) == 1 and not isinstance(plans[0], Plan):  # a layout's sub-flow
            return [(yield from plans[0])]
        splits = self._splits(digests)
        results = yield [*splits, *plans]
        return results[len(splits):]

    # -- partition-wide work (sweep.Sweeper), dictionaries (payload_flows.Payloads) and an
    # -- identity's sessions (identities.Identities) -----------------------------------
    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> Flow[dict[str, Any]]:
        return self.sweeper.repartition(partitions, progress, self.refresh)

    def sweep(self, max_items: int | None) -> Flow[int]:
        return self.sweeper.sweep(max_items)

    def partition_sizes(self) -> Flow[list[int]]:
        return self.sweeper.partition_sizes()

    def partition_counts(self) -> Flow[list[tuple[int, int]]]:
        return self.sweeper.partition_counts()

    def count(self) -> Flow[int]:
        return self.sweeper.count()

    def outside_counts(self, counts: list[tuple[int, int]] | None = None) -> Flow[tuple[int, int]]:
        return self.sweeper.outside_counts(counts)

    def fill_warnings(self, entries: list[int]) -> list[str]:
        return self.sweeper.fill_warnings(entries)

    def train_dictionary(self, samples: Iterable[dict[str, Any]] | None = None) -> Flow[int]:
        return self.payloads.train_dictionary(self.layout, samples, self)

    def sessions_of(self, identity: Identity) -> Flow[list[Session]]:
        return self.identities.sessions_of(identity)

    def destroy_all(self, identity: Identity, keep: str | None = None) -> Flow[int]:
        return self.identities.destroy_all(identity, keep)

    # -- helpers --------------------------------------------------------------------
    def encode(self, data: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
        """(packed, framed) of session data, checked (payload_flows.Payloads.encode); while
        observed, its stored size is recorded for metrics (events.py)."""
        out = self.payloads.encode(self.layout, data)
        if self.recorder.events is not None and data is not None:
            self.recorder.sized(len(out[1] if out[1] is not None else cast(bytes, out[0])))
        return out

    def sample(self) -> Flow[None]:
        """Train the dictionary, or look at its fit, when written payloads made it due (Payloads.keep)."""
        return self.payloads.sample(self.layout, self)

    def new_record(self, identity: Any, data: dict[str, Any] | None, ttl: int | None,
                    token: str | None = None) -> tuple[Record, str, bytes | None]:
        identity = check_owner(identity)
        packed, framed = self.encode(data)
        now = self.now()
        expires, absolute = self.lifetime.expiries(now, self.lifetime.seconds(ttl, now))
        if token is None:
            token = new_token()
        digest = digest_of(token)
        if digest is None:
            raise ValueError("token= takes a session token: 22 to 86 URL-safe characters")
        return Record(digest, identity, expires, absolute, data, framed), token, packed

    def due_for_touch(self, session: Session) -> bool:
        """Whether a touch would be worth its write now (model.Lifetime.due_for_touch)."""
        return self.lifetime.due_for_touch(session, self.now())

    # -- flows ------------------------------------------------------------------------
    def create(self, identity: Identity | None, data: dict[str, Any] | None, ttl: int | None,
               token: str | None = None) -> Flow[str]:
        tokens = yield from self.put_records([self.new_record(identity, data, ttl, token)], given=token is not None)
        return tokens[0]

    def create_many(self, identities: Iterable[Identity | None], data: dict[str, Any] | None, ttl: int | None) -> Flow[list[str]]:
        return (yield from self.put_records(self.new_records(identities, data, ttl)))

    def new_records(self, identities: Iterable[Identity | None], data: dict[str, Any] | None,
                    ttl: int | None) -> list[tuple[Record, str, bytes | None]]:
        return [self.new_record(identity, data, ttl) for identity in identities]

    def put_records(self, made: list[tuple[Record, str, bytes | None]], given: bool = False,
                    label: str | None = None) -> Flow[list[str]]:
        """Store new records (idempotent: a retry after a repartition tombstone rewrites the
        same fields, and the split moved any that the first try had stored). `given`: the
        tokens were given, not drawn (create(token=)): each is stored only if no live
        session holds it (one atomic check-and-put), else SessionExists."""
        now = self.now()
        try:  # every plan is built (and every record sized) before anything is sent
            puts: list[Plan[Any]] = [(self.layout.plan_put_new if given else self.layout.plan_put)(rec, now)
                                     for rec, _, _ in made]
        except _SessionDataTooLarge:
            self.payloads.refused()
            raise
        if not made:
            return []
        evicted: list[tuple[Any, list[bytes]]] = []
        if self.index is not None and self.lines.on:
            evicted = yield from self.lines.admit_new([rec for rec, _, _ in made if rec.identity is not None], label, now)
        elif self.index is not None:  # listed before it can be found: destroy_all never misses it
            adds = [self.index.plan_add(rec.identity, rec.digest, rec.absolute_at)
                    for rec, _, _ in made if rec.identity is not None]
            if adds:
                yield adds
        replies = yield from self.run_on([rec.digest for rec, _, _ in made], [*puts, *self.plans_present()])
        stored = replies[: len(puts)]
        if not all(replies[len(puts):]):  # the server lost the metadata or our dictionary
            yield from self.recover()
        if given and not all(stored):
            raise _SessionExists("a live session holds this token already: nothing was written")
        if self.recorder.events is not None or self.recorder.outbox is not None:
            for rec, _, _ in made:
                self.recorder.emit("created", rec.digest, rec.identity, "create", label=label)
        if evicted:
            yield from self.identities.evict(evicted)
        if self.payloads.keep(self.layout, [(p, rec.payload or b"", rec) for rec, _, p in made if rec.data is not None]):
            yield from self.sample()
        return [token for _, token, _ in made]

    def get(self, token: str, undecodable: str = "raise") -> Flow[Session | None]:
        """The live session of `token`, or None. A stored session that does not decode
        (corrupt bytes, a dictionary the server lost) raises DecodeError, or with
        undecodable="none" is None, with one warning naming the namespace and digest (never
        the token): what a web request does, so that its user can log in again."""
        if undecodable not in ("raise", "none"):
            raise InvalidArgument('undecodable is "raise" or "none"')
        digest = digest_of(token)
        if digest is None:
            return None
        try:
            rec = yield from self._read(digest)
        except DecodeError as exc:
            if undecodable == "raise":
                raise
            log.warning("densekv: session %s of namespace %r does not decode, read as no session: %s",
                        digest.hex(), self.namespace, exc)
            return None
        return None if rec is None else rec.session(token)

    def get_many(self, tokens: list[str]) -> Flow[list[Session | None]]:
        """get() of every token, their round trips shared (one pipeline per step)."""
        return (yield from gather([self.get(t) for t in tokens]))

    def _read(self, digest: bytes) -> Flow[Record | None]:
        """The live record of a digest, payload decoded; None if missing or expired. The
        rest of a payload is read in the same round trip only while recent reads needed
        that kind of rest (OUTSIDE_SPECULATE), and only that kind: stores of small sessions
        send one HGET (a split one found then takes a second command), of split ones one
        HMGET of the field and its continuation field (an inline one among them pays the
        missed field's lookup: 1.15 against 1.07 GETs of server CPU on valkey-9.1), of
        large ones HGET + GET."""
        layout = self.layout
        if layout.outside:
            plan = layout.plan_get(digest, outside=self.payloads.speculation())
        else:
            plan = layout.plan_get(digest)
        # not migrating: no split first, so the plan goes as it is (run_on's generator skipped)
        (rec,) = (yield [plan]) if type(plan) is Plan and layout.from_partitions is None else \
            (yield from self.run_on([digest], [plan]))
        if rec is None or not rec.live(self.now()):
            return None
        payloads = self.payloads
        payloads.note_read(rec)
        if rec.payload is not None and payloads.codec.missing(rec.payload) is None:  # complete()'s common case, no generator
            return payloads.decode_one(rec, rec.payload)
        return (yield from payloads.complete(layout, self.run_on, digest, rec))

    def touch(self, token: str) -> Flow[bool]:
        digest = digest_of(token)
        if digest is None:
            return False
        if self.idle_ttl is None:
            session = yield from self.get(token)
            return session is not None
        now = self.now()
        if self.lines.limit is not None and self.index is not None:
            # a limited store keeps each entry's expiry current (the limit counts live
            # sessions and evicts the least recently seen): the record is read for its
            # identity, then the entry and the record are written in one round trip
            rec = yield from self._read(digest)
            if rec is None:
                return False
            plans: list[Plan[Any]] = [self.layout.plan_touch(digest, now, self.idle_ttl)]
            if rec.identity is not None:
                expires = min(rec.absolute_at, now + self.idle_ttl)
                plans.insert(0, self.index.plan_seen(rec.identity, digest, rec.absolute_at, expires,
                                                     self.lines.entry_of(rec, None, now)))
            replies = yield from self.run_on([digest], plans)
            return bool(replies[-1])
        (new_expiry,) = yield from self.run_on([digest], [self.layout.plan_touch(digest, now, self.idle_ttl)])
        return bool(new_expiry)

    def set_ttl(self, token: str, ttl: int | None) -> Flow[bool]:
        """Give a live session a new lifetime: it now ends `ttl` seconds from now (None:
        the store's ttl), longer or shorter than before, and with an idle_ttl it also ends
        after idle_ttl seconds without a touch, as a new session would. True if the session
        was live. A compare-and-set on the record as read (the payload is written again
        with the new header, placed under the limit like any update); the identity index
        learns the new expiry first, so destroy_all never misses the session."""
        digest = digest_of(token)
        seconds = self.lifetime.seconds(ttl, self.now())  # InvalidArgument before anything is read
        if digest is None:
            return False
        return (yield from self._change(digest, lambda data: data, seconds, sample=False)) is not None

    def update(self, token: str, data: dict[str, Any] | None) -> Flow[bool]:
        """Replace the whole payload of a live session (None clears it)."""
        digest = digest_of(token)
        packed, framed = self.encode(data)
        if digest is None:
            return False
        if not self.layout.needs_read:
            (result,) = yield from self.run_on([digest], [self.layout.plan_replace(digest, None, data, framed, self.now())])
            if result == 1 and data is not None and self.payloads.keep(self.layout, ((packed, framed or b"", None),)):
                yield from self.sample()
            return bool(result == 1)
        return (yield from self._change(digest, lambda _: data)) is not None

    def apply(self, token: str, changes: dict[str, Any], removed: Iterable[str] = (),
              ttl: int | None | EllipsisType = ..., read: Session | None = None) -> Flow[dict[str, Any] | None]:
        """Merge `changes` into the stored data and drop the keys in `removed`, as a
        compare-and-set on the record read: the merged data, or None if the session is
        gone (it is never written again). `ttl` (not ...): a new lifetime in the same write,
        as set_ttl gives (None: the store's ttl). `read`: the session as this request got
        it from get(): the first compare-and-set is against it, with no read of its own
        (a web save in one round trip); if the session changed since, it reads and merges
        again as without it."""
        if not isinstance(changes, dict):
            raise _SessionDataInvalid("changes is a dict of top-level session keys")
        removed = list(removed)
        seconds = None if ttl is ... else self.lifetime.seconds(ttl, self.now())
        digest = digest_of(token)
        if digest is None:
            return None

        def merge(old: dict[str, Any] | None) -> dict[str, Any] | None:
            new = {**(old or {}), **changes}
            for key in removed:
                new.pop(key, None)
            return new or None

        known = read.read if read is not None and isinstance(read.read, Record) else None
        return (yield from self._change(digest, merge, seconds, known=known))

    def _change(self, digest: bytes, merge: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                seconds: int | None = None, sample: bool = True,
                known: Record | None = None) -> Flow[dict[str, Any] | None]:
        """Compare-and-set of the data `merge` makes of the stored data; with `seconds`, a
        new lifetime in the same write (the identity index told first of a later expiry).
        `known`: the record as the caller read it, used for the first try instead of a read."""
        if known is not None and (known.digest != digest or not known.live(self.now())):
            known = None
        for tries in range(MAX_CAS_TRIES):
            yield from cas_pause(tries)
            if known is not None:
                current: Record | None
                current, known = known, None
            else:
                current = yield from self._read(digest)
            if current is None:
                return None
            data = merge(current.data)
            packed, framed = self.encode(data)
            now = self.now()
            times = None
            if seconds is not None:
                times = self.lifetime.expiries(now, seconds)
                absolute = times[1]
                if self.index is not None and current.identity is not None and self.lines.on:
                    yield [self.index.plan_seen(current.identity, digest, absolute, times[0],
                                                self.lines.entry_of(current, None, now))]
                elif self.index is not None and current.identity is not None and self.index.outlives(absolute, current.absolute_at):
                    yield [self.index.plan_add(current.identity, digest, absolute)]
            plan = self.layout.plan_replace(digest, current, data, framed, now, times)  # not migrating: no split first
            (result,) = (yield [plan]) if type(plan) is Plan and not self.migrating else (yield from self.run_on([digest], [plan]))
            if result == 1:
                if data is not None and sample and self.payloads.keep(self.layout, ((packed, framed or b"", current),)):
                    yield from self.sample()
                return data if data is not None else {}
            if result == 0:
                return None
        raise DensekvError(f"session {digest.hex()} kept changing under {MAX_CAS_TRIES} tries to write it")

    def destroy(self, token: str) -> Flow[bool]:
        digest = digest_of(token)
        if digest is None:
            return False
        return (yield from self.destroy_digest(digest, "logout"))

    def destroy_id(self, session_id: str, identity: Identity | None = None) -> Flow[bool]:
        """End the session of a listed id (Session.id). With `identity`, only if the
        session belongs to it ("your devices": a user revokes only their own); a session
        keeps its identity for as long as it has this id (a login moves it to a new one)."""
        try:
            digest = bytes.fromhex(session_id)
        except (ValueError, TypeError):
            return False
        if len(digest) != 16:
            return False
        if identity is not None:
            identity = check_identity(identity)
            (rec,) = yield from self.run_on([digest], [self.layout.plan_get(digest)])
            if rec is None or rec.identity != identity:
                return False
        return (yield from self.destroy_digest(digest, "admin"))

    def destroy_digest(self, digest: bytes, cause: str) -> Flow[bool]:
        """Remove the session of `digest` (a destroyed event with `cause`, or expired if it
        was dead but unswept); True if it was live."""
        (rec,) = yield from self.run_on([digest], [self.layout.plan_delete(digest)])
        if rec is None:
            return False
        now = self.now()
        self.recorder.emit_removed(rec, cause, "destroy", now)
        if self.index is not None and rec.identity is not None:
            yield [self.index.plan_remove(rec.identity, [digest])]
        return bool(rec.live(now))

    def regenerate(self, token: str) -> Flow[str | None]:
        return self.rotations.regenerate(token)

    def login(self, token: str, identity: Identity, label: str | None = None) -> Flow[str | None]:
        return self.rotations.login(token, identity, label)

    def explain(self) -> dict[str, Any]:
        """The layout and why (meta.Metadata), lifetimes, index, payloads, server facts."""
        return {**self.metadata.describe(), "ttl": self.ttl, "idle_ttl": self.idle_ttl,
                "index_partitions": self.index.partitions if self.index else None,
                **self.payloads.describe(), "server": self.facts.describe()}


__all__ = [
    "AUTO_TRAIN",
    "DEFAULT_TTL",
    "LAYOUTS",
    "SAMPLE_SESSIONS",
    "SWEEP_BATCH",
    "Choice",
    "OneCreate",
    "ServerFacts",
    "SessionCore",
    "StoreMeta",
    "choose_layout",
    "facts_from_probe",
    "facts_of",
    "make_layout",
    "meta_key",
    "plan_meta",
]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LayoutUnavailable",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
