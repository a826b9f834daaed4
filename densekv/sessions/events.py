"""Session lifecycle events and operation records: what a store tells its observers.

An observer is any object with the methods it cares about (duck-typed, see `Observer`):
  * `on_event(event)`: a session was created, rotated (login / regenerate: old and new
    id), destroyed (with its cause) or expired (idle or absolute, and who found it);
  * `on_operation(name, seconds, error)`: one store operation ended (`error` the exception's
    type name, or None), for metrics (densekv/integrations/prometheus.py, .../otel.py);
  * `on_payloads(sizes)`: the bytes of each session payload the operation encoded to store
    (after compression; a compare-and-set that tried again encoded again), before its
    `on_operation`, only for operations that encoded one.
`SessionStore.observe(obj)` adds one; an async store awaits an observer's coroutine methods.

Where events come from (the core records them through its Recorder, densekv/sessions/core.py,
only while an observer listens: a store without one builds no event and costs nothing more):
  * an event is the store's own step: created when a create stored the record, rotated
    when the rename landed, destroyed when the delete removed a live record, expired when
    the script that removed a dead one (sweep, or a destroy that met it) returned it. So
    each removal of a record is reported once, by the process that removed it;
  * a read that meets an expired, unswept record answers "no session" and reports
    nothing: the sweep that removes it reports it (a read reporting it too would report
    every such expiry twice). Layouts whose server expires the data itself (json, packed,
    hash keys with EXPIRE; fieldttl's field TTLs) have no sweep and report no expiry;
  * never a token: `session_id` is the digest in hex, as `Session.id` (destroy_id takes it).
Delivery is in-process and after the operation's round trips (an operation that failed
half-way still reports what it did); an observer that raises is logged, never the caller's
error. What a killed process had not delivered is lost: in-process events are at most once.

The event stream (a store's `events_stream=N`): the same events, XADDed to the capped
Redis Stream `{ns}:ev:{ns}` (MAXLEN ~ N, hash-tagged with the namespace: one slot), for
other services to read with consumer groups. Fields: kind, id, identity ("" when
anonymous), itype ("int", "str" or ""), cause, at, and old, found_by, label when set;
`event_from_stream` reads one back. Expiries are announced before they are removed: sweep
runs its script dry first, XADDs what it would remove, then removes (the same `now`), so a
sweep killed in between announces them again on its next run (at least once, and a
duplicate per interrupted round at most); the other kinds are XADDed by the process that
did the step, right after the operation (at most once: lost if it dies in between).
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import redis

from densekv.errors import DensekvError, InvalidArgument
from densekv.flows import Flow
from densekv.keys import tag
from densekv.plan import Plan, command
from densekv.sessions.model import Identity, Record

if TYPE_CHECKING:
    from densekv.sessions.meta import Lifecycle

__all__ = ["CAUSES", "KINDS", "EventBuffer", "Observer", "Recorder", "SessionEvent", "event_from_stream",
           "plan_publish", "stream_key"]

log = logging.getLogger("densekv.sessions")

Kind = Literal["created", "rotated", "destroyed", "expired"]
KINDS: tuple[str, ...] = ("created", "rotated", "destroyed", "expired")
#: by kind, the causes an event may carry
CAUSES: dict[str, tuple[str, ...]] = {
    "created": ("create",),
    "rotated": ("login", "regenerate"),
    # logout: destroy(token); logout_everywhere: destroy_all(identity); limit: evicted by
    # max_sessions_per_identity; admin: destroy_id(session_id) (an admin, or a user's
    # "your devices" revoke)
    "destroyed": ("logout", "logout_everywhere", "limit", "admin"),
    "expired": ("idle", "absolute"),
}


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One lifecycle step of one session. `at`: the store's clock (unix s) when the
    process saw the step done; `found_by` (expired only): "sweep" or "destroy"."""

    kind: str
    session_id: str
    identity: Identity | None
    cause: str
    at: int
    old_session_id: str | None = None  # rotated: the id the session had before
    found_by: str | None = None
    label: str | None = None  # the device label given at login (track_devices), if any


class Observer(Protocol):
    """What a store calls; an observer may define either method (or both), sync or async."""

    def on_event(self, event: SessionEvent) -> Any: ...

    def on_operation(self, name: str, seconds: float, error: str | None) -> Any: ...

    def on_payloads(self, sizes: list[int]) -> Any: ...


class EventBuffer:
    """The events a core recorded and no shell has delivered yet (thread-safe append and
    pop: deque). Several operations of one store may run at once (threads, tasks): each
    delivers what is pending when it ends, so every event is delivered once."""

    __slots__ = ("pending", "sizes")

    def __init__(self) -> None:
        self.pending: deque[SessionEvent] = deque()
        self.sizes: deque[int] = deque()  # payload bytes encoded to store (on_payloads)

    def add(self, event: SessionEvent) -> None:
        self.pending.append(event)

    def sized(self, nbytes: int) -> None:
        self.sizes.append(nbytes)

    def take_sizes(self) -> list[int]:
        out: list[int] = []
        while self.sizes:
            try:
                out.append(self.sizes.popleft())
            except IndexError:
                break
        return out

    def take(self) -> list[SessionEvent]:
        out: list[SessionEvent] = []
        while True:
            try:
                out.append(self.pending.popleft())
            except IndexError:
                return out


class Recorder:
    """What a store records of its own steps: the events for its observers (`events`, an
    EventBuffer while one listens, else None) and for its event stream (`outbox`, while
    `stream`, its cap, is set). SessionCore holds one (`core.recorder`); only this class
    changes its fields, the store's shells drain the buffers after each operation. Nothing
    listening, it builds no event."""

    __slots__ = ("events", "now", "outbox", "stream")

    def __init__(self, stream: int | None, now: Callable[[], int]) -> None:
        """`stream`: the event stream's cap (None: no stream); `now`: the store's clock."""
        self.events: EventBuffer | None = None
        self.stream = stream
        self.outbox: EventBuffer | None = None  # events not yet XADDed to the stream
        if stream is not None:
            if isinstance(stream, bool) or not isinstance(stream, int) or stream < 1:
                raise InvalidArgument("events_stream is the number of recent events the stream keeps, or None")
            self.outbox = EventBuffer()
        self.now = now

    def use(self, life: Lifecycle) -> None:
        """The namespace's lifecycle options from now on (meta.Metadata.follow): its event
        stream's cap, or none (events recorded for a stream turned off are dropped)."""
        self.stream = life.stream
        if life.stream is None:
            self.outbox = None
        elif self.outbox is None:
            self.outbox = EventBuffer()

    def listen(self, on: bool) -> None:
        """Record events for observers from now on (an EventBuffer the store drains after
        each operation), or stop (`on` False: the last observer left)."""
        if not on:
            self.events = None
        elif self.events is None:
            self.events = EventBuffer()

    def sized(self, nbytes: int) -> None:
        """While observed: the stored size of a payload the operation encoded (on_payloads)."""
        if self.events is not None:
            self.events.sized(nbytes)

    def emit(self, kind: str, digest: bytes, identity: Identity | None, cause: str,
             old: bytes | None = None, found_by: str | None = None, label: str | None = None,
             stream: bool = True) -> None:
        """Record an event for the observers and (unless `stream` is False: announced
        already) the event stream."""
        outbox = self.outbox if stream else None
        if self.events is not None or outbox is not None:
            event = SessionEvent(kind, digest.hex(), identity, cause, self.now(),
                                 old.hex() if old is not None else None, found_by, label)
            if self.events is not None:
                self.events.add(event)
            if outbox is not None:
                outbox.add(event)

    def emit_removed(self, rec: Record, cause: str, found_by: str, now: int, stream: bool = True) -> None:
        """The event of a record this process removed: destroyed (`cause`) if it was live,
        expired (idle or absolute) if it was not."""
        if self.events is None and (self.outbox is None or not stream):
            return
        if rec.live(now):
            self.emit("destroyed", rec.digest, rec.identity, cause, stream=stream)
        else:
            self.emit("expired", rec.digest, rec.identity,
                      "idle" if rec.expires_at < rec.absolute_at else "absolute", found_by=found_by, stream=stream)

    def owes_events(self) -> bool:
        """Whether the operation recorded events or payload sizes for the observers (else it
        owes them only on_operation, which the store shells then call directly)."""
        events = self.events
        return events is not None and bool(events.pending or events.sizes)

    def owed(self, op: str, seconds: float, error: str | None) -> list[tuple[str, tuple[Any, ...]]]:
        """The observer calls an operation owes, its buffers drained: each event, the
        payload sizes it encoded, then the operation itself (what both store shells send
        through call_sync / call_async)."""
        calls: list[tuple[str, tuple[Any, ...]]] = []
        events = self.events
        if events is not None:
            if events.pending:
                calls += [("on_event", (event,)) for event in events.take()]
            if events.sizes:
                calls.append(("on_payloads", (events.take_sizes(),)))
        calls.append(("on_operation", (op, seconds, error)))
        return calls

    def publish(self, namespace: str) -> Flow[None] | None:
        """A flow of one round trip that XADDs what the operation recorded for the event
        stream, the outbox drained (None: nothing to send); a failure is logged, never the
        operation's error (what both store shells drive after each operation)."""
        plans = self.outbound(namespace)
        return _published(plans, namespace) if plans else None

    def outbound(self, namespace: str) -> list[Plan[Any]]:
        """The XADDs of what the operation recorded for the event stream, the outbox
        drained ([]: no stream, or nothing recorded)."""
        if self.outbox is None or self.stream is None:
            return []
        events = self.outbox.take()
        return plan_publish(namespace, self.stream, events) if events else []


def _published(plans: list[Plan[Any]], namespace: str) -> Flow[None]:
    try:
        yield plans
    except (DensekvError, redis.RedisError, OSError):
        log.exception("densekv: %d session events not written to the event stream of %r", len(plans), namespace)


def call_sync(observers: Sequence[Any], method: str, *args: Any) -> None:
    """Call `method` of every observer that has it; a failure is logged, not raised."""
    for obs in observers:
        fn = getattr(obs, method, None)
        if fn is None:
            continue
        try:
            result = fn(*args)
            if result is not None and inspect.isawaitable(result):  # None: a plain method's, the common case
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                log.error("densekv: observer %r has an async %s: a SessionStore calls it synchronously; "
                          "use AsyncSessionStore, or a plain function", obs, method)
        except Exception:
            log.exception("densekv: observer %r failed in %s", obs, method)


async def call_async(observers: Sequence[Any], method: str, *args: Any) -> None:
    """As call_sync, awaiting what an observer returns."""
    for obs in observers:
        fn = getattr(obs, method, None)
        if fn is None:
            continue
        try:
            result = fn(*args)
            if result is not None and inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("densekv: observer %r failed in %s", obs, method)


def stream_key(namespace: str) -> bytes:
    """The namespace's event stream, `{ns}:ev:{<ns>}` (keys.CODES "ev")."""
    return tag(namespace, "ev", namespace)


def stream_fields(event: SessionEvent) -> list[str]:
    """An event as XADD field, value, ... (strings; no token, ever)."""
    ident = event.identity
    out = ["kind", event.kind, "id", event.session_id,
           "identity", "" if ident is None else str(ident),
           "itype", "" if ident is None else "int" if isinstance(ident, int) else "str",
           "cause", event.cause, "at", str(event.at)]
    for name in ("old_session_id", "found_by", "label"):
        value = getattr(event, name)
        if value is not None:
            out += ["old" if name == "old_session_id" else name, value]
    return out


def event_from_stream(fields: dict[Any, Any]) -> SessionEvent:
    """The SessionEvent of one stream entry's fields (bytes or str keys and values)."""
    f = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
         for k, v in fields.items()}
    identity: Identity | None = None
    if f.get("itype") == "int":
        identity = int(f["identity"])
    elif f.get("itype") == "str":
        identity = f["identity"]
    return SessionEvent(f["kind"], f["id"], identity, f["cause"], int(f["at"]), f.get("old"), f.get("found_by"),
                        f.get("label"))


def plan_publish(namespace: str, maxlen: int, events: list[SessionEvent]) -> list[Plan[Any]]:
    """One XADD per event to the namespace's stream, capped near `maxlen` entries."""
    key = stream_key(namespace)
    return [command("XADD", key, "MAXLEN", "~", maxlen, "*", *stream_fields(e), keys=(key,), decode=lambda r: r)
            for e in events]
