"""The flows over an identity's sessions: sessions_of and destroy_all ("log out
everywhere"), found through the identity index (densekv/sessions/index.py) and re-read.

Identities holds them for SessionCore (densekv/sessions/core.py), kept apart because they
are one concern: the index only points, every session it names is read again and its identity checked, and
destroy_all runs find-and-delete rounds until two quiet rounds agree, so a session that
rotates its token meanwhile (listed under its new digest before it moves) is ended too.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from densekv.errors import DensekvError, InvalidArgument, SessionLimitReached
from densekv.flows import MAX_CAS_TRIES, Flow, cas_pause
from densekv.sessions.index import (
    LABEL_MAX,
    IdentityIndex,
    pack_device,
    pack_entry,
    unpack_entry,
)
from densekv.sessions.meta import Lifecycle, Metadata
from densekv.sessions.model import Device, Identity, Record, Session, check_identity, digest_of
from densekv.sessions.payload_flows import Payloads, RunOn

__all__ = ["Identities", "Lines"]


class Identities:
    """sessions_of and destroy_all over the store's identity index (None: a store made
    without one; these flows then refuse). SessionCore holds one (`core.identities`); it
    keeps no state but the index it was given, reads the layout from the store's
    meta.Metadata and the payloads through payload_flows.Payloads, and runs its plans with
    SessionCore.run_on (the repartition splits first)."""

    def __init__(self, index: IdentityIndex | None, metadata: Metadata, payloads: Payloads, run_on: RunOn,
                 now: Callable[[], int], emit_removed: Callable[..., None], lines: Lines,
                 idle_ttl: int | None) -> None:
        self.index = index
        self.metadata = metadata
        self.payloads = payloads
        self.run_on = run_on
        self.now = now
        self.emit_removed = emit_removed
        self.lines = lines  # whether the store tracks devices (lines.track_devices), as it changes
        self.idle_ttl = idle_ttl

    def _live_records_of(self, identity: Identity) -> Flow[list[Record]]:
        """The live sessions of `identity`: index references, resolved and re-read; a stray
        match (another identity's session sharing a reference) is dropped here."""
        return (yield from self._live_refs_and_records(identity))[1]

    def _live_refs_and_records(self, identity: Identity,
                               values: dict[bytes, bytes] | None = None) -> Flow[tuple[list[bytes], list[Record]]]:
        """(the index references of `identity`, sorted; its live sessions); `values`, if
        given, receives each reference's index value (devices)."""
        assert self.index is not None
        refs: list[bytes] = []
        cursor = 0
        while True:
            cursor, found = (yield [self.index.plan_scan(identity, cursor)])[0]
            refs.extend(ref for ref, _ in found)
            if values is not None:
                values.update(found)
            if cursor == 0:
                break
        records = yield from self.find(list(dict.fromkeys(refs)))
        now = self.now()
        return sorted(set(refs)), [r for r in records if r.identity == identity and r.live(now)]

    def find(self, refs: list[bytes]) -> Flow[list[Record]]:
        """The stored records (live or not) whose digests start with the index references
        `refs`, every layout's plan_find paged to its end, each record once."""
        records: dict[bytes, Record] = {}
        pending = [(ref, 0) for ref in refs]
        while pending:
            replies = yield from self.run_on([ref + bytes(16 - len(ref)) for ref, _ in pending],
                                          [self.metadata.layout.plan_find(ref, cur) for ref, cur in pending])
            pending = [(ref, nxt) for (ref, _), (nxt, _) in zip(pending, replies) if nxt != 0]
            for _, recs in replies:
                records.update((r.digest, r) for r in recs)
        return list(records.values())

    def evict(self, evicted: list[tuple[Any, list[bytes]]]) -> Flow[None]:
        """End the sessions the limit evicted (their index entries are gone already): found
        by reference, their identity checked, deleted; each a destroyed event (cause limit)."""
        found: dict[bytes, Record] = {}
        for identity, refs in evicted:
            found.update((r.digest, r) for r in (yield from self.find(refs)) if r.identity == identity)
        if found:
            digests = list(found)
            removed = yield from self.run_on(digests, [self.metadata.layout.plan_delete(d) for d in digests])
            now = self.now()
            for r in removed:
                if r is not None:
                    self.emit_removed(r, "limit", "destroy", now)

    def _live_sessions_of(self, identity: Identity, values: dict[bytes, bytes] | None = None) -> Flow[list[Record]]:
        found = (yield from self._live_refs_and_records(identity, values))[1]
        records = yield from self.payloads.fill_outside(self.metadata.layout, found)
        return [r for r in records if r.identity == identity]  # a re-read may find a login

    def _need_index(self) -> None:
        if self.index is None:
            raise DensekvError("this store was made with index_identities=False")

    def sessions_of(self, identity: Identity) -> Flow[list[Session]]:
        self._need_index()
        identity = check_identity(identity)
        if not self.lines.track_devices:
            return [r.session("") for r in (yield from self._live_sessions_of(identity))]
        assert self.index is not None
        ref_len = self.index.ref_len
        values: dict[bytes, bytes] = {}
        records = yield from self._live_sessions_of(identity, values)
        return [replace(r.session(""), device=self._device(r, values.get(r.digest[:ref_len])))
                for r in records]

    def _device(self, rec: Record, value: bytes | None) -> Device | None:
        """A listed session's device (index.py's format-1 or -2 value): last seen is when its
        idle expiry was last rolled (the touch granularity), else its login."""
        entry = unpack_entry(value) if value is not None else None
        if entry is None:
            return None
        seen = entry.created_at
        if self.idle_ttl is not None and rec.expires_at < rec.absolute_at:
            seen = max(seen, rec.expires_at - self.idle_ttl)
        return Device(entry.created_at, seen, entry.label)

    def destroy_all(self, identity: Identity, keep: str | None = None) -> Flow[int]:
        """End every session of `identity` (but the one of token `keep`: "log out my other
        devices"); the count ended. Rounds of find-and-delete
        until two rounds in a row find no live session through the same index entries: a
        session that rotates (regenerate, login) while this runs is listed under its new
        digest before it moves there, so the round after the move finds it, and a move
        that lands after a round found nothing has a source that round would have found
        live. What it does not end: a session created after its last round began."""
        self._need_index()
        assert self.index is not None
        identity = check_identity(identity)
        spared = digest_of(keep) if keep is not None else None
        ended = 0
        last: tuple[list[bytes], bool] | None = None
        for tries in range(MAX_CAS_TRIES):
            yield from cas_pause(tries - 1)
            refs, records = yield from self._live_refs_and_records(identity)
            records = [r for r in records if r.digest != spared]
            if not records:
                if last == (refs, False):
                    return ended
                last = (refs, False)
                continue
            last = None
            digests = [r.digest for r in records]
            removed = yield from self.run_on(digests, [self.metadata.layout.plan_delete(d) for d in digests])
            yield [self.index.plan_remove(identity, digests)]
            now = self.now()
            for r in removed:
                if r is not None:
                    self.emit_removed(r, "logout_everywhere", "destroy", now)
            ended += sum(1 for r in removed if r is not None and r.live(now) and r.identity == identity)
        raise DensekvError(f"the sessions of one identity kept changing under {MAX_CAS_TRIES} rounds of destroy_all")


class Lines:
    """Devices and the per-identity limit: the index values (index.py) a store with
    max_sessions_per_identity writes (format 1: one "line" per device through its
    rotations) or with track_devices alone (format 2), listed by lua/ix_admit.lua with
    the limit applied. No I/O of its own: its flows yield the index's plans. SessionCore holds one (`core.lines`); `on` is False for a
    store with neither option, whose index keeps format 0. The options are the namespace's
    (meta.Lifecycle, checked there): `use` takes new ones when the metadata's change
    (change_lifecycle); entries already written keep their format until their session's next
    write of its entry (a login, a regenerate, set_ttl, a limited store's touch): every
    reader takes every format."""

    def __init__(self, index: IdentityIndex | None, life: Lifecycle) -> None:
        self.index = index
        self.use(life)

    def use(self, life: Lifecycle) -> None:
        """The namespace's lifecycle options from now on (meta.Metadata.follow)."""
        self.track_devices = life.track_devices
        self.limit = life.limit
        self.on_limit = life.on_limit
        self.on = self.track_devices or self.limit is not None

    def check_label(self, label: object) -> str | None:
        """A device label (<= LABEL_MAX bytes of UTF-8), refused before anything is written."""
        if label is None:
            return None
        if not self.track_devices:
            raise InvalidArgument("a device label needs a store made with track_devices=True")
        if not isinstance(label, str) or len(label.encode("utf-8", "surrogatepass")) > LABEL_MAX:
            raise InvalidArgument(f"a device label is a str of at most {LABEL_MAX} bytes of UTF-8")
        try:
            label.encode()
        except UnicodeEncodeError:
            raise InvalidArgument("a device label is UTF-8 text (this one holds a lone surrogate)") from None
        return label or None

    def entry_of(self, rec: Record, label: str | None, now: int) -> bytes:
        """A new line's index value for `rec`: index.py's format 1 under a limit, else
        format 2 (devices only: 8 bytes less, nothing the limit would read)."""
        if self.limit is None:
            return pack_device(rec.absolute_at, now, label)
        return pack_entry(rec.absolute_at, rec.expires_at, now, secrets.randbits(32), label)

    def _refused(self) -> SessionLimitReached:
        return SessionLimitReached(f"the identity has {self.limit} live sessions, the store's "
                                   "max_sessions_per_identity (on_limit='refuse'): nothing was written")

    def admit_new(self, recs: list[Record], label: str | None, now: int) -> Flow[list[tuple[Any, list[bytes]]]]:
        """List new identified sessions (format 1), the limit applied: (identity, evicted
        references) to end after the records are stored; SessionLimitReached (policy refuse)
        with nothing of this batch listed."""
        assert self.index is not None
        if not recs:
            return []
        replies = yield [self.index.plan_admit(cast(Identity, r.identity), r.digest, self.entry_of(r, label, now),
                                               None, True, now, self.limit or 0, self.on_limit) for r in recs]
        if any(r == 0 for r in replies):
            listed = [r for r, reply in zip(recs, replies) if reply != 0]
            if listed:
                yield [self.index.plan_remove(cast(Identity, r.identity), [r.digest]) for r in listed]
            raise self._refused()
        return [(r.identity, reply) for r, reply in zip(recs, replies) if isinstance(reply, list) and reply]

    def admit_move(self, current: Record, owner: Identity, new: bytes, label: str | None,
                   now: int) -> Flow[list[bytes] | None]:
        """List a rotating session's new digest (format 1): the same line as its old one
        when the identity stays (created time and label kept, unless a label is given), a
        new line under the limit otherwise. The evicted references, or None when the old
        one is no longer listed under a limit (evicted: the session must end)."""
        assert self.index is not None
        source = current.digest if current.identity == owner else None
        value = self.entry_of(current, label, now)
        plan = self.index.plan_admit(owner, new, value, source, label is not None, now, self.limit or 0,
                                     self.on_limit)
        (reply,) = yield [plan]
        if reply == -1:
            if self.limit is not None:
                return None
            # devices only: an old entry gone (swept early, an index written before) starts a line
            (reply,) = yield [self.index.plan_admit(owner, new, value, None, True, now, 0, self.on_limit)]
        if reply == 0:
            raise self._refused()
        return reply if isinstance(reply, list) else []
