"""Rotations: regenerate and login, a session moved to a new token in one step on the server.

Kept apart from SessionCore (densekv/sessions/core.py) because a rotation is one concern
with its own rules: the new token is drawn until its keys share the old one's slot (one
script or RENAME moves the record atomically, on a cluster too); the identity index lists
the new digest before the session can be found there and drops the old one after; with
devices or a per-identity limit (identities.Lines) the move is admitted first, and what
the limit evicted ends whatever became of the move. Flows only, no I/O, no state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from densekv.errors import DensekvError
from densekv.flows import MAX_CAS_TRIES, Flow, cas_pause
from densekv.sessions.identities import Identities, Lines
from densekv.sessions.index import IdentityIndex
from densekv.sessions.meta import Metadata
from densekv.sessions.model import Identity, Record, check_identity, digest_of, new_token
from densekv.sessions.payload_flows import RunOn

__all__ = ["Rotations"]


@dataclass(frozen=True, slots=True)
class Rotations:
    """regenerate and login for SessionCore, which holds one (`core.rotations`). Frozen: it
    keeps no state but what it was given, the store's meta.Metadata (the layout), the identity
    index (None: a store without one), the devices and limit (identities.Lines), eviction
    (identities.Identities), and SessionCore's run_on, clock, event recording and
    destroy_digest (a session the limit evicted while it moved ends, not moves)."""

    metadata: Metadata
    index: IdentityIndex | None
    lines: Lines
    identities: Identities
    run_on: RunOn
    now: Callable[[], int]
    emit: Callable[..., None]
    destroy_digest: Callable[[bytes, str], Flow[bool]]
    cluster: bool

    def regenerate(self, token: str) -> Flow[str | None]:
        return (yield from self._move(token, ...))

    def login(self, token: str, identity: Identity, label: str | None = None) -> Flow[str | None]:
        """A new token for the session, the old one dead and `identity` set, in one step
        on the server (listed under the identity before it can be found). `label`: the
        device's label (track_devices); SessionLimitReached when the identity has
        max_sessions_per_identity live sessions and on_limit is "refuse"."""
        identity = check_identity(identity)
        label = self.lines.check_label(label)
        return (yield from self._move(token, identity, label))

    def _move(self, token: str, identity: Any, label: str | None = None) -> Flow[str | None]:
        """Regenerate (identity ...) or log in (a new identity): one atomic rename."""
        old = digest_of(token)
        if old is None:
            return None
        new_token_, new = self._token_in_group(old)
        if self.index is None and identity is ...:
            (moved,) = yield from self.run_on([old, new], [self.metadata.layout.plan_rename(old, new, self.now())])
            if moved is None:
                return None
            self.emit("rotated", new, moved.identity if isinstance(moved, Record) else None, "regenerate", old)
            return new_token_
        owed: list[tuple[Any, list[bytes]]] = []  # sessions the limit evicted for this move
        try:
            result = yield from self._move_tries(old, new_token_, new, identity, label, owed)
        except DensekvError:
            if owed:
                yield from self.identities.evict(owed)
            raise
        if owed:  # after the move's own check: whatever became of it, they end
            yield from self.identities.evict(owed)
        return result

    def _move_tries(self, old: bytes, new_token_: str, new: bytes, identity: Any, label: str | None,
                    owed: list[tuple[Any, list[bytes]]]) -> Flow[str | None]:
        """_move's compare-and-set rounds; what the limit evicted is added to `owed`."""
        for tries in range(MAX_CAS_TRIES):
            yield from cas_pause(tries)
            now = self.now()
            (current,) = yield from self.run_on([old, new], [self.metadata.layout.plan_get(old)])
            if current is None or not current.live(now):
                return None
            owner = current.identity if identity is ... else identity
            if self.index is not None and owner is not None and self.lines.on:
                admitted = yield from self.lines.admit_move(current, owner, new, label, now)
                if admitted is None:  # evicted meanwhile: the session is ended, not moved
                    yield from self.destroy_digest(old, "limit")
                    return None
                if admitted:
                    owed.append((owner, admitted))
            elif self.index is not None and owner is not None:
                yield [self.index.plan_add(owner, new, current.absolute_at)]
            (moved,) = yield from self.run_on(
                [old, new], [self.metadata.layout.plan_rename(old, new, now, identity, current)])
            if self.index is not None:
                drop = [self.index.plan_remove(current.identity, [old])] if moved not in (None, -2) and current.identity is not None else []
                if moved in (None, -2) and owner is not None:
                    drop = [self.index.plan_remove(owner, [new])]
                if drop:
                    yield drop
            if moved != -2:
                if moved is None:
                    return None
                if self.lines.limit is not None and owner is not None and self.index is not None:
                    # a login racing others of the same identity may have been evicted
                    # between its listing and its move: then it ends here (the evictor
                    # found no record under the new digest yet)
                    (listed,) = yield [self.index.plan_listed(owner, new)]
                    if not listed:
                        yield from self.destroy_digest(new, "limit")
                        return None
                self.emit("rotated", new, owner, "regenerate" if identity is ... else "login", old,
                          label=label)
                return new_token_
        raise DensekvError(f"session {old.hex()} kept changing under {MAX_CAS_TRIES} tries to move it")

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
        return self.metadata.layout.group_of(digest) if self.cluster else 0
