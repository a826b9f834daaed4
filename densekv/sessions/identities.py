"""The flows over an identity's sessions: sessions_of and destroy_all ("log out
everywhere"), found through the identity index (densekv/sessions/index.py) and re-read.

Identities holds them for SessionCore (densekv/sessions/core.py), kept apart because they
are one concern: the index only points, every session it names is read again and its identity checked, and
destroy_all runs find-and-delete rounds until two quiet rounds agree, so a session that
rotates its token meanwhile (listed under its new digest before it moves) is ended too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from densekv.errors import DensekvError
from densekv.flows import MAX_CAS_TRIES, Flow, cas_pause
from densekv.sessions.index import IdentityIndex, unpack_entry
from densekv.sessions.meta import Metadata
from densekv.sessions.model import Device, Identity, Record, Session, check_identity, digest_of
from densekv.sessions.payload_flows import Payloads, RunOn

__all__ = ["Identities"]


class Identities:
    """sessions_of and destroy_all over the store's identity index (None: a store made
    without one; these flows then refuse). SessionCore holds one (`core.identities`); it
    keeps no state but the index it was given, reads the layout from the store's
    meta.Metadata and the payloads through payload_flows.Payloads, and runs its plans with
    SessionCore.run_on (the repartition splits first)."""

    def __init__(self, index: IdentityIndex | None, metadata: Metadata, payloads: Payloads, run_on: RunOn,
                 now: Callable[[], int], emit_removed: Callable[..., None], track_devices: bool,
                 idle_ttl: int | None) -> None:
        self.index = index
        self.metadata = metadata
        self.payloads = payloads
        self.run_on = run_on
        self.now = now
        self.emit_removed = emit_removed
        self.track_devices = track_devices
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
        records: dict[bytes, Record] = {}
        pending = [(ref, 0) for ref in dict.fromkeys(refs)]
        while pending:
            replies = yield from self.run_on([ref + bytes(16 - len(ref)) for ref, _ in pending],
                                          [self.metadata.layout.plan_find(ref, cur) for ref, cur in pending])
            pending = [(ref, nxt) for (ref, _), (nxt, _) in zip(pending, replies) if nxt != 0]
            for _, recs in replies:
                records.update((r.digest, r) for r in recs)
        now = self.now()
        return sorted(set(refs)), [r for r in records.values() if r.identity == identity and r.live(now)]

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
        if not self.track_devices:
            return [r.session("") for r in (yield from self._live_sessions_of(identity))]
        assert self.index is not None
        ref_len = self.index.ref_len
        values: dict[bytes, bytes] = {}
        records = yield from self._live_sessions_of(identity, values)
        return [replace(r.session(""), device=self._device(r, values.get(r.digest[:ref_len])))
                for r in records]

    def _device(self, rec: Record, value: bytes | None) -> Device | None:
        """A listed session's device (index.py's format-1 value): last seen is when its
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
