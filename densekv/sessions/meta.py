"""What a session store is, and where it is decided: the server's facts, the registry of
layouts and the layout choice, the store's shared metadata and its owner.

Deciding apart from doing: SPECS is the one registry of session layouts (name, class,
what the server must have, the partition limit, the placement rule, a bytes formula);
the store, the planner, the lab and the tests iterate it, so a new layout is its class
and one entry here. `choose_layout` picks the layout for `layout="auto"` from ServerFacts
(a pure projection of the probe's Capabilities: facts_of) and `make_layout` builds it;
StoreMeta is the namespace's metadata hash `{ns}:meta` (written once by the first store,
densekv/lua/store_meta.lua; every later process adopts its layout, partition count,
repartition state and dictionary id, whatever it was told). Metadata is the one owner of
what a store holds of it (the StoreMeta read, when, the layout built from it), with its
open / refresh / recover flows; SessionCore holds one. No I/O here: plans and flows.

The lifecycle options (Lifecycle: track_devices, max_sessions_per_identity, on_limit,
events_stream) are the namespace's too, recorded in the same hash as one field `life`, a
short canonical text (`devices=1 limit=3 on_limit=evict stream=10000`; `on_limit` only with
a limit, `none` for an option off). One field, not four: the record is present or absent as
a whole (an HSETNX writes it into a hash made before it was kept; a field per option would
leave "absent" meaning either "off" or "never recorded"), it is compared as one string, and
a later option is a new key in the same text, which an older reader refuses (DecodeError)
rather than half-honours. Stores that disagree would break each other (one enforces a limit
the other ignores, index values in two formats, events in the stream from some processes
only), so a store whose options differ from the record refuses to open (LifecycleMismatch),
and `change_life` rewrites the record (a compare-and-set: store_meta.lua's "life"), which
every process adopts at its next metadata read (adopt: the owners that hold the options,
registered with `follow`, take the new ones; logged at INFO).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from densekv.dictionaries import plan_store, plan_stored
from densekv.errors import DecodeError, DensekvError, InvalidArgument, LifecycleMismatch
from densekv.errors import LayoutUnavailable as _LayoutUnavailable
from densekv.errors import moved as _moved
from densekv.flows import MAX_CAS_TRIES, Flow
from densekv.keys import key, partition_count
from densekv.listpack import int_entry_size, string_entry_size
from densekv.lua import script
from densekv.plan import Plan, command, script_call
from densekv.sessions.index import LIMIT_POLICIES
from densekv.sessions.layouts.base import Layout, LayoutLimits
from densekv.sessions.layouts.partitioned import DenseLayout, FieldTtlLayout, ZsetLayout, placement
from densekv.sessions.layouts.perkey import HashLayout, JsonLayout, PackedLayout

if TYPE_CHECKING:
    from densekv.capabilities import Capabilities
    from densekv.sessions.payload_flows import Payloads

log = logging.getLogger(__name__)

META_RECHECK_S = 5.0  # while a repartition runs, re-read the store metadata this often
META_REFRESH_S = 60.0  # otherwise this often (a dictionary trained by another process)
#: A new store's partitions hold this many sessions on average at most (SessionStore's
#: `fill=`; None: as many as the listpack entry limit allows). A partition hash is a
#: listpack, read by a scan from its start, and a split session's read scans for two
#: entries: at the densest count (about 100-250 sessions, 200-500 entries a partition) the
#: scans were most of the server's time per web request (issue 30; benchmarks/web_sessions.py
#: --parts e2e --e2e-fill). Each extra partition costs about 74 bytes (a key and a small
#: listpack: session_memory_partitions.jsonl), shared by the sessions it holds.
DEFAULT_FILL = 64


@dataclass(frozen=True)
class ServerFacts:
    """What the store needs of the server (from the probe, or a few CONFIG GETs)."""

    limits: LayoutLimits
    field_ttl: str = "none"
    field_ttl_encoding: str | None = None
    cluster: bool = False

    def capabilities(self) -> frozenset[str]:
        """The server capabilities a layout may need (LayoutSpec.needs): CAPABILITIES."""
        return frozenset({"field_ttl"} if self.field_ttl != "none" else ())

    def describe(self) -> dict[str, Any]:
        """What explain() says of the server."""
        return {
            "hash_max_listpack_entries": self.limits.hash_max_listpack_entries,
            "hash_max_listpack_value": self.limits.hash_max_listpack_value,
            "field_ttl": self.field_ttl,
            "field_ttl_encoding": self.field_ttl_encoding,
            "cluster": self.cluster,
        }


#: capability -> (what it is, which servers have it): what LayoutSpec.needs may name
CAPABILITIES = {"field_ttl": ("hash field TTL", "Redis 7.4+, Valkey 9+")}


@dataclass(frozen=True)
class LayoutSpec:
    """One session layout, its facts in one place: what `layout=` names, the class that
    builds its plans, what the server must have (CAPABILITIES), which structures' listpack
    entry limits bound a partition (none: one key per session), where a payload goes
    (placement), and the listpack bytes a session adds where a formula is kept."""

    name: str
    cls: type[Layout]
    summary: str
    needs: tuple[str, ...] = ()
    #: the structures a partition is made of whose `<s>-max-listpack-entries` bound the
    #: sessions it may hold ("hash", "zset"); () for one key per session
    sized_by: tuple[str, ...] = ()
    #: (field bytes, record bytes, expires_at) -> listpack bytes one session adds to its
    #: partition's structures (entries only: the partitions' own overhead is shared)
    entry_bytes: Callable[[int, int, int], int] | None = None
    #: the seed's key-per-session baselines: measured by the lab, never advised
    baseline: bool = False
    #: listpack entries a session may take in its partition hash: 2 where a split payload's
    #: rest is a continuation field beside the record (partitions are sized for that)
    hash_entries: int = 1
    #: constructor options this layout takes from the server's facts
    options: Callable[[ServerFacts], dict[str, Any]] = field(default=lambda facts: {})

    def __post_init__(self) -> None:
        unknown = [c for c in self.needs if c not in CAPABILITIES]
        unknown += [s for s in self.sized_by if not hasattr(LayoutLimits, f"{s}_max_listpack_entries")]
        if unknown:
            raise ValueError(f"layout {self.name}: unknown capabilities or structures {unknown}")

    @property
    def partitioned(self) -> bool:
        return bool(self.sized_by)

    def partition_limit(self, limits: LayoutLimits) -> int | None:
        """Sessions a partition may hold on a server of these limits (None: no partitions)."""
        if not self.sized_by:
            return None
        return min(int(getattr(limits, f"{s}_max_listpack_entries")) // (self.hash_entries if s == "hash" else 1)
                   for s in self.sized_by)

    def missing(self, have: Iterable[str]) -> list[str]:
        """The capabilities this layout needs that are not in `have`."""
        have = set(have)
        return [c for c in self.needs if c not in have]

    def unavailable(self, facts: ServerFacts) -> str | None:
        """Why this layout cannot run on the server of `facts`, or None."""
        missing = self.missing(facts.capabilities())
        if not missing:
            return None
        return f"layout {self.name} needs " + ", ".join(f"{what} ({where})" for what, where in
                                                        (CAPABILITIES[c] for c in missing))

    def placement(self, record: int, bare: int, limit: int) -> str | None:
        """Where a payload goes in this layout: "inline", "split" or "out of line"
        (layouts/partitioned.py placement) for a record of `record` bytes (`bare` without
        its payload) under hash-max-listpack-value `limit`; None: one key per session
        holds the whole value."""
        if not self.partitioned:
            return None
        return placement(record, bare, limit, self.cls.splits)

    def build(self, namespace: str, facts: ServerFacts, partitions: int, **extra: Any) -> Layout:
        """The layout itself (`extra`: base_partitions, from_partitions of a repartition)."""
        make: Any = self.cls
        if not self.partitioned:
            return make(namespace)  # type: ignore[no-any-return]
        return make(namespace, partitions, facts.limits, **extra, **self.options(facts))  # type: ignore[no-any-return]


def _hash_entries(fieldlen: int, record: int, expires_at: int) -> int:
    return string_entry_size(fieldlen) + string_entry_size(record)


def _hash_and_zset_entries(fieldlen: int, record: int, expires_at: int) -> int:
    return _hash_entries(fieldlen, record, expires_at) + string_entry_size(fieldlen) + int_entry_size(expires_at)


#: Every session layout, in the order `layout=` lists them.
SPECS: tuple[LayoutSpec, ...] = (
    LayoutSpec("json", JsonLayout, "a JSON string key per session, SET ... EXAT (the seed's baseline)",
               baseline=True),
    LayoutSpec("packed", PackedLayout, "a msgpack string key per session, binary key name", baseline=True),
    LayoutSpec("hash", HashLayout, "a HASH per session (identity, expiry, data) + EXPIREAT", baseline=True),
    LayoutSpec("zset", ZsetLayout, "partition HASHes of compact records + a ZSET of their expiries",
               sized_by=("hash", "zset"), entry_bytes=_hash_and_zset_entries, hash_entries=2),
    LayoutSpec("dense", DenseLayout, "partition HASHes of compact records, each with its expiry inside",
               sized_by=("hash",), entry_bytes=_hash_entries, hash_entries=2),
    LayoutSpec("fieldttl", FieldTtlLayout, "partition HASHes of compact records, the server's field TTL on each",
               needs=("field_ttl",), sized_by=("hash",),
               options=lambda facts: {"hsetex": facts.field_ttl == "hsetex"}),
)
LAYOUTS = tuple(spec.name for spec in SPECS)


def spec_of(name: str) -> LayoutSpec:
    """The registry entry of layout `name` (ValueError names the known ones)."""
    for spec in SPECS:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown layout {name!r}: choose one of auto, {', '.join(s.name for s in SPECS)}")


@dataclass(frozen=True)
class Choice:
    layout: str
    reason: str


AUTO_LAYOUT = "dense"  # what `layout="auto"` picks on every server measured (choose_layout)


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
    return Choice(AUTO_LAYOUT, why)


def make_layout(name: str, namespace: str, facts: ServerFacts, expected: int, partitions: int | None,
                meta: StoreMeta | None = None, fill: int | None = DEFAULT_FILL) -> Layout:
    """Layout `name` for this server: `partitions`, the metadata's, or enough for
    `expected` sessions at the spec's partition limit and at most `fill` on average
    (LayoutUnavailable where the server lacks what it needs, ValueError for a name the
    registry does not hold)."""
    spec = spec_of(name)
    limit = spec.partition_limit(facts.limits)
    if limit is None:
        return spec.build(namespace, facts, 0)
    p = partitions or partition_count(expected, limit, fill=fill)
    extra: dict[str, Any] = {}
    if meta is not None and meta.partitions:
        p = meta.partitions
        extra = {"base_partitions": meta.base, "from_partitions": meta.from_, "here": meta.here}
    why = spec.unavailable(facts)
    if why is not None:
        raise _LayoutUnavailable(why)
    return spec.build(namespace, facts, p, **extra)


@dataclass(frozen=True)
class Lifecycle:
    """A session store's lifecycle options, as its namespace's metadata records them (the
    field `life`: `text()`); `of` checks them (InvalidArgument). on_limit means nothing
    without a limit: it is "evict" then, so two stores that differ only there agree."""

    track_devices: bool = False
    limit: int | None = None  # max_sessions_per_identity
    on_limit: str = "evict"
    stream: int | None = None  # events_stream: the event stream's cap

    @classmethod
    def of(cls, track_devices: bool, limit: int | None, on_limit: str, stream: int | None,
           indexed: bool) -> Lifecycle:
        """The options a store was given, checked before anything is sent."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidArgument("max_sessions_per_identity is a number of sessions from 1, or None")
        if on_limit not in LIMIT_POLICIES:
            raise InvalidArgument(f"on_limit is one of {', '.join(LIMIT_POLICIES)}, not {on_limit!r}")
        if (track_devices or limit is not None) and not indexed:
            raise InvalidArgument("track_devices and max_sessions_per_identity list sessions under their "
                                  "identity: they need index_identities=True")
        if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int) or stream < 1):
            raise InvalidArgument("events_stream is the number of recent events the stream keeps, or None")
        return cls(bool(track_devices), limit, on_limit if limit is not None else "evict", stream)

    def changed(self, changes: dict[str, Any], indexed: bool) -> Lifecycle:
        """These options with `changes` (keyword -> value; ... keeps the option), checked."""
        now = self.keywords()
        unknown = sorted(set(changes) - set(now))
        if unknown:
            raise InvalidArgument(f"unknown lifecycle options {unknown}: choose from {', '.join(now)}")
        now.update((k, v) for k, v in changes.items() if v is not ...)
        return Lifecycle.of(now["track_devices"], now["max_sessions_per_identity"], now["on_limit"],
                            now["events_stream"], indexed)

    def text(self) -> str:
        """The record: `devices=1 limit=3 on_limit=evict stream=10000` (none: off)."""
        limit = "none" if self.limit is None else f"{self.limit} on_limit={self.on_limit}"
        return f"devices={int(self.track_devices)} limit={limit} stream={'none' if self.stream is None else self.stream}"

    @classmethod
    def parse(cls, text: str) -> Lifecycle:
        """The options a record holds (DecodeError: not a record this release writes)."""
        try:
            fields = dict(part.split("=", 1) for part in text.split(" "))
            if set(fields) - {"devices", "limit", "on_limit", "stream"} or fields["devices"] not in ("0", "1") \
                    or ("on_limit" in fields) != (fields["limit"] != "none"):
                raise ValueError(text)
            limit = None if fields["limit"] == "none" else int(fields["limit"])
            stream = None if fields["stream"] == "none" else int(fields["stream"])
            life = cls.of(fields["devices"] == "1", limit, fields.get("on_limit", "evict"), stream, True)
        except (KeyError, ValueError, InvalidArgument) as exc:
            raise DecodeError(f"the namespace's metadata records lifecycle options {text!r}, which this "
                              "densekv does not read (written by a later release?)") from exc
        if life.text() != text:
            raise DecodeError(f"the namespace's metadata records lifecycle options {text!r} in a form "
                              "densekv does not write")
        return life

    def keywords(self) -> dict[str, Any]:
        """As SessionStore's keyword arguments (a tool that opens a namespace with its record's)."""
        return {"track_devices": self.track_devices, "max_sessions_per_identity": self.limit,
                "on_limit": self.on_limit, "events_stream": self.stream}

    def describe(self) -> str:
        """As the store's keywords: what an error message names."""
        return (f"track_devices={self.track_devices}, max_sessions_per_identity={self.limit}, "
                f"on_limit={self.on_limit!r}, events_stream={self.stream}")


@dataclass(frozen=True)
class StoreMeta:
    """The store's metadata hash `{ns}:meta` (densekv/lua/store_meta.lua): every process
    opening the namespace adopts its layout and partition count, whatever it was told."""

    layout: str
    partitions: int  # 0 for the one-key-per-session layouts
    base: int
    from_: int | None = None
    dictionary: int | None = None  # the zstd dictionary new payloads are written with
    index: bool | None = None  # the stores keep the identity index (None: not recorded)
    #: split payloads keep their rest in the partition hash ("cont" = "here": a store made,
    #: or repartitioned, after densekv 0.1.0, its partitions sized for two entries a session)
    here: bool = False
    #: the stores' lifecycle options (None: not recorded, a hash of an earlier release)
    life: Lifecycle | None = None

    @classmethod
    def from_reply(cls, reply: Any) -> StoreMeta | None:
        try:
            fields = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
            if not fields:
                return None
            meta = cls(fields["layout"], int(fields["partitions"]), int(fields["base"]),
                       int(fields["from"]) if "from" in fields else None,
                       int(fields["dict"]) if "dict" in fields else None,
                       fields["index"] == "1" if "index" in fields else None,
                       fields.get("cont") == "here",
                       Lifecycle.parse(fields["life"]) if "life" in fields else None)
        except (KeyError, ValueError, UnicodeDecodeError, AttributeError, IndexError) as exc:
            raise DecodeError("the namespace's metadata hash was not written by densekv: "
                              "use another namespace, or delete that key") from exc
        if all(spec.name != meta.layout for spec in SPECS):
            raise DecodeError(f"the namespace's metadata names layout {meta.layout!r}, which densekv "
                              "does not know: use another namespace, or delete that key")
        return meta


class Metadata:
    """The store's metadata as this process holds it, and what it implies: the StoreMeta
    last read (`meta`), when (`read_at`, on the injected monotonic `ticks`), the layout
    choice and the layout built from them. SessionCore holds one (`core.metadata`; its
    `layout` is `core.layout`); only this class changes these fields.

    Its flows open the metadata (creating it for the namespace's first store), re-read it
    (a repartition began or ended, a dictionary was trained elsewhere) and write it again
    after the server lost it (a restart without persistence, a flush, a failover to an
    empty replica); the dictionary it names is the payloads' (payload_flows.Payloads), whose
    methods they call."""

    def __init__(self, facts: ServerFacts, namespace: str, layout: str, expected_sessions: int,
                 partitions: int | None, fill: int | None, indexed: bool, ticks: Callable[[], float],
                 life: Lifecycle = Lifecycle()) -> None:
        self.facts = facts
        self.namespace = namespace
        self.asked_layout = layout
        self.asked_partitions = partitions
        self.expected_sessions = expected_sessions
        self.indexed = indexed  # the store keeps the identity index (checked against the metadata's)
        self.life = life  # the lifecycle options the store uses: its own, until the metadata's differ
        self._followers: tuple[Callable[[Lifecycle], None], ...] = ()
        self.ticks = ticks
        self.choice = choose_layout(facts) if layout == "auto" else Choice(layout, "asked for")
        self.layout = make_layout(self.choice.layout, namespace, facts, expected_sessions, partitions, fill=fill)
        self.meta: StoreMeta | None = None
        self.read_at = 0.0
        self._present: tuple[int | None, tuple[Plan[Any], ...]] | None = None  # plans_present's, by dictionary

    @property
    def migrating(self) -> bool:
        return self.layout.from_partitions is not None

    def describe(self) -> dict[str, Any]:
        """What explain() says of the layout (Layout.describe) and why it was chosen."""
        return {**self.layout.describe(), "reason": self.choice.reason}

    def stale(self) -> bool:
        """Time to re-read the metadata: often during a repartition, else once a minute."""
        age = self.ticks() - self.read_at
        return age > (META_RECHECK_S if self.migrating else META_REFRESH_S)

    def plan_open(self) -> Plan[StoreMeta | None]:
        """store_meta.lua's open: the metadata as this store would make it, if missing."""
        layout = self.layout
        return plan_meta(self.namespace, "open", layout.name, layout.partitions, int(self.indexed),
                         self.life.text())

    def follow(self, *followers: Callable[[Lifecycle], None]) -> None:
        """Call each of `followers` with the lifecycle options whenever the store adopts
        other ones than it uses (the owners that hold them: identities.Lines, ...)."""
        self._followers = followers

    def open(self, payloads: Payloads) -> Flow[None]:
        """Create the metadata if this is the namespace's first store, then adopt it
        (LifecycleMismatch where it records other lifecycle options than the store's)."""
        meta = (yield [self.plan_open()])[0]
        self.adopt(meta, opening=True)
        self.asked_partitions = None  # checked once, at open: later changes are repartitions
        yield from payloads.use_dictionary(self.dictionary())

    def refresh(self, payloads: Payloads) -> Flow[bool]:
        """Re-read the metadata; True if it changed (a repartition began or ended). Metadata
        gone from a server that had it (a restart without persistence, a flush) is written
        again, with the dictionary the payloads are written with (recover)."""
        meta = (yield [plan_meta(self.namespace, "read")])[0]
        if meta is None and self.meta is not None:
            yield from self.recover(payloads)
            return False
        if meta is None or meta == self.meta:
            self.read_at = self.ticks()
            return False
        self.adopt(meta)
        yield from payloads.use_dictionary(self.dictionary())
        return True

    def recover(self, payloads: Payloads) -> Flow[None]:
        """The server lost the metadata or the dictionary (restart without persistence,
        flush, failover to an empty replica): write them again, so that what this store
        wrote (payloads naming its dictionary) reads in every process, and `densekv sweep`
        finds the store. Storing a dictionary again is harmless: its id is its content's
        (codec.content_id), so no other process can hold other bytes under it."""
        meta = (yield [self.plan_open()])[0]
        d = payloads.codec.dictionary
        if d is not None:
            yield [plan_store(self.namespace, d.data)]
            if meta is not None and meta.dictionary is None:
                meta = (yield [plan_meta(self.namespace, "dict", d.id)])[0]
        self.adopt(meta)
        yield from payloads.use_dictionary(self.dictionary())

    def name_dictionary(self, payloads: Payloads, dictionary_id: int) -> Flow[None]:
        """Name a stored dictionary in the metadata, as the one new payloads are written with
        (every process adopts it within META_REFRESH_S), and write with it here."""
        meta = (yield [plan_meta(self.namespace, "dict", dictionary_id)])[0]
        self.adopt(meta)
        yield from payloads.use_dictionary(self.dictionary())

    def change_life(self, payloads: Payloads, changes: dict[str, Any]) -> Flow[Lifecycle]:
        """Record lifecycle options `changes` (keyword -> value, ... to keep one) over the
        namespace's record, and use them here; every other process adopts them at its next
        metadata read. A compare-and-set on the record as this process holds it: a record
        changed meanwhile is adopted and the change made over it; metadata the server lost
        is written again first (recover)."""
        for _ in range(MAX_CAS_TRIES):
            new = self.life.changed(changes, self.indexed)  # InvalidArgument before anything is sent
            expected = self.meta.life if self.meta is not None else None
            meta = (yield [plan_meta(self.namespace, "life", expected.text() if expected else "", new.text())])[0]
            if meta is None:
                yield from self.recover(payloads)
                continue
            self.adopt(meta)
            if meta.life == new:
                return new
        raise DensekvError(f"the lifecycle record of namespace {self.namespace!r} kept changing under "
                           f"{MAX_CAS_TRIES} tries to change it")

    def dictionary(self) -> int | None:
        """The id of the dictionary the metadata names (None: none, or no metadata read)."""
        return self.meta.dictionary if self.meta is not None else None

    def plans_present(self, dictionary_id: int | None) -> list[Plan[Any]]:
        """What a create sends beside its records, in the same round trip: whether the
        server still holds the metadata and the dictionary `dictionary_id` this store writes
        with (False in either: recover)."""
        made = self._present
        if made is None or made[0] != dictionary_id:  # plans hold no state: made once per dictionary
            plans: list[Plan[Any]] = [command("EXISTS", meta_key(self.namespace), keys=(meta_key(self.namespace),),
                                              decode=bool)]
            if dictionary_id is not None:
                plans.append(plan_stored(self.namespace, dictionary_id))
            made = self._present = (dictionary_id, tuple(plans))
        return list(made[1])

    def adopt(self, meta: StoreMeta | None, opening: bool = False) -> None:
        """Take the metadata as the store's: its layout, partition count, repartition
        state and lifecycle options, whatever this store was told (DensekvError where the
        two cannot agree; `opening`: LifecycleMismatch where the lifecycle options differ,
        which a store already open adopts, as another process changed them)."""
        self.read_at = self.ticks()
        if meta is None:
            return
        if meta.index is not None and meta.index != self.indexed:
            said = "keep" if meta.index else "do not keep"
            raise DensekvError(
                f"namespace {self.namespace!r} is used by stores that {said} the identity index: "
                f"open it with index_identities={meta.index} (a store that disagrees would let "
                "destroy_all miss sessions), or use another namespace"
            )
        if meta.life is not None and meta.life != self.life and opening:
            raise LifecycleMismatch(
                f"namespace {self.namespace!r} records the lifecycle options {meta.life.describe()}; this "
                f"store was made with {self.life.describe()}. Open it with the recorded options, or change "
                "the record with change_lifecycle(...) on a store that is open (every process adopts it "
                f"within {META_REFRESH_S:.0f} s)"
            )
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
        if meta.life is not None and meta.life != self.life:
            log.info("densekv: namespace %r: lifecycle options %s adopted from its metadata (were %s)",
                     self.namespace, meta.life.text(), self.life.text())
            self.life = meta.life
            for follower in self._followers:
                follower(meta.life)


def meta_key(namespace: str) -> bytes:
    """The key of a namespace's store metadata (a hash; store_meta.lua writes it)."""
    return key(namespace, "meta")


def plan_meta(namespace: str, op: str, *args: Any) -> Plan[StoreMeta | None]:
    """One call of densekv/lua/store_meta.lua: open, read, begin, finish, dict, life."""
    k = meta_key(namespace)
    return script_call(script("store_meta"), (k,), (op, *args), StoreMeta.from_reply)


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
    from densekv.capabilities import probe

    return facts_of(probe(client))


__all__ = ["AUTO_LAYOUT", "CAPABILITIES", "DEFAULT_FILL", "LAYOUTS", "META_RECHECK_S", "META_REFRESH_S", "SPECS",
           "Choice", "LayoutLimits", "LayoutSpec", "Lifecycle", "Metadata", "ServerFacts", "StoreMeta", "choose_layout",
           "facts_from_probe", "facts_of", "make_layout", "meta_key", "plan_meta", "spec_of"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LayoutUnavailable",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
