"""What the planner knows of each kind: its candidate layouts, and how to load them.

For each kind (sessions, set, map) a `KindPlanner` says
  * which layouts may hold the workload on this server, at which partition count, with
    which server config (`candidates`, from the probe's limits - never read globally);
  * the *shape* that a calibration depends on (entry widths, payload, TTL), for the cache;
  * how to load a calibration sample: `sample_loader` fills a chosen subset of the
    planned partitions at the planned fill, through the kind's own plan builders / public
    API, so every entry has exactly the width it will have at full size;
  * how to load the whole workload through the public API (`load_full`, for --verify and
    the accuracy benchmark), and the constructor call that reproduces the plan (`usage`,
    every feature on), with, for a feature the figures leave out, the call with it off
    and what that loses (`lighter`: the sessions' identity index).
Workloads (documented in the CLI help): sessions carry 4-byte integer identities, a 30-day
expiry (plus a 1-hour idle expiry with --ttl) and --payload bytes of random (incompressible)
msgpack data, or the sessions of a --sample file with their own identities, framed as the
store frames them, dictionary included (densekv/tools/planner/payloads.py); sets
hold random IDs of --payload bytes (default 16); maps hold keys `item:<n>` with sequential
n and random 31-bit integers (or --payload random bytes) as values, with --ttl a 1-day
expiry per item.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from densekv.capabilities import Capabilities
from densekv.errors import PlannerError
from densekv.keys import partition_bits, partition_count
from densekv.tools.planner.payloads import Incompressible, Payloads, era_of, store_era

SESSION_TTL = 30 * 86400
IDLE_TTL = 3600
MAP_TTL = 86400
NAMESPACE = "plan"
Loader = Callable[[int, int], None]


@dataclass(frozen=True)
class Workload:
    kind: str
    items: int
    payload: int = 0
    ttl: bool = False
    seed: int = 20240601
    #: sessions: the payloads priced (densekv/tools/planner/payloads.py; None: --payload bytes
    #: of incompressible data)
    sessions: Payloads | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Candidate:
    """One way to store the workload: a layout at a partition count (and a config)."""

    layout: str
    partitions: int
    distribution: str  # "poisson" (random keys) | "even" (sequential ids)
    shape: dict[str, Any]
    options: dict[str, str] = field(default_factory=dict)  # config it needs (advice only)
    note: str = ""


def _chunks(lo: int, hi: int, size: int) -> Iterator[tuple[int, int]]:
    for a in range(lo, hi, size):
        yield a, min(hi, a + size)


# --- sessions --------------------------------------------------------------------------


@lru_cache(maxsize=32)
def incompressible(payload: int, seed: int) -> Incompressible:
    return Incompressible(payload, seed)


def payloads_of(wl: Workload) -> Payloads:
    """The sessions a workload prices: its sample, else --payload bytes of random data."""
    return wl.sessions if wl.sessions is not None else incompressible(wl.payload, wl.seed)


PLACED = {"split": "split over a continuation entry", "out of line": "out of line, in a key of its own"}


def placement_text(where: list[str | None], recs: list[tuple[int, int]], limit: int) -> str:
    """Where the records of `recs` go under hash-max-listpack-value `limit` (their
    placements `where`), in words: one size, or the share of each placement."""
    lo, hi = min(r for r, _ in recs), max(r for r, _ in recs)
    if lo == hi and len(set(where)) == 1:
        return (f"a {hi}-byte session record (its payload framed as the store frames it) is over "
                f"hash-max-listpack-value {limit}: each payload is {PLACED[str(where[0])]}")
    shares = [f"{100 * where.count(w) / len(where):.0f}% {words}" for w, words in
              (("inline", "inline"), *PLACED.items()) if w in where]
    return (f"session records of {lo}-{hi} bytes (payloads framed as the store frames them) under "
            f"hash-max-listpack-value {limit}: {', '.join(shares)}")


def session_specs() -> list[Any]:
    """The session layouts the planner weighs: the registry's (densekv/sessions/meta.py
    SPECS) less the seed's baselines, the one `layout="auto"` picks first."""
    from densekv.sessions.meta import AUTO_LAYOUT, SPECS

    return sorted((s for s in SPECS if not s.baseline), key=lambda s: s.name != AUTO_LAYOUT)


def default_fill() -> int | None:
    """The mean sessions a new store's partition holds at most (meta.DEFAULT_FILL): the
    planner sizes a store as SessionStore would."""
    from densekv.sessions.meta import DEFAULT_FILL

    return DEFAULT_FILL


class SessionsPlanner:
    kind = "sessions"

    @property
    def layouts(self) -> tuple[str, ...]:
        return tuple(s.name for s in session_specs())

    def check(self, wl: Workload) -> None:
        if wl.payload > 65_535:
            raise PlannerError("--payload for sessions is at most 65535 bytes of session data")

    def payloads(self, wl: Workload) -> dict[str, Any] | None:
        """What the plan priced as payload (Recommendation.payloads)."""
        return payloads_of(wl).to_dict(wl.items)

    def records(self, wl: Workload) -> list[tuple[int, int]]:
        """(record bytes, bytes without the payload) of the sessions most of the load is
        written as (payloads.typical: with the store's dictionary, where it has one)."""
        from densekv.sessions.model import Record
        from densekv.sessions.record import pack_record

        now = int(time.time())
        absolute = now + SESSION_TTL
        expires = now + IDLE_TTL if wl.ttl else absolute
        out = []
        for identity, framed in payloads_of(wl).typical(wl.items):
            rec = Record(bytes(16), identity, expires, absolute)
            out.append((len(pack_record(rec, framed)), len(pack_record(rec, b"" if framed is not None else None))))
        return out

    def candidates(self, wl: Workload, caps: Capabilities) -> list[Candidate]:
        """Each layout as the server is; where records are over hash-max-listpack-value
        (their payload is then split over a continuation entry, or out of line in a key of
        its own: the spec's placement rule), also with the limit raised so that every
        record stays inline: the planner measures both and advises the raise only where it
        saves. The records are the payloads' as the store frames them (payloads.py)."""
        from densekv.sessions.meta import facts_of

        facts = facts_of(caps)
        v = caps.hash_max_listpack_value
        recs = self.records(wl)
        longest = max(r for r, _ in recs)
        pl = payloads_of(wl)
        out = []
        for spec in session_specs():
            limit = spec.partition_limit(facts.limits)
            if spec.unavailable(facts) is not None or limit is None:
                continue
            variants: list[tuple[dict[str, str], str]] = [({}, "")]
            where = [spec.placement(r, bare, v) for r, bare in recs]
            over = [w for w in where if w not in (None, "inline")]
            if over:
                need = -(-longest // 16) * 16
                variants = [
                    ({}, f"{placement_text(where, recs, v)} (the partitions stay listpacks)"),
                    ({"hash-max-listpack-value": str(need)},
                     (f"with hash-max-listpack-value {need} every record (up to {longest} bytes) stays inline "
                      "(no continuation entry, no key of its own); a lookup scans longer listpack entries")),
                ]
            p = partition_count(wl.items, limit, fill=default_fill())
            shape = {"kind": "sessions", "field": 16 - partition_bits(p) // 8, "ttl": wl.ttl,
                     "record": longest, **pl.shape(wl.items)}
            out += [Candidate(spec.name, p, "poisson", shape, options, note) for options, note in variants]
        return out

    def _facts(self, client: Any) -> Any:
        from densekv.sessions.store import facts_from_probe

        return facts_from_probe(client)

    def sample_loader(self, client: Any, cand: Candidate, wl: Workload, chosen: list[int], n: int) -> Loader:
        """Sessions in the `chosen` partitions only (digests drawn with those top bits),
        written by the layout's own put plans, each with its payload framed as the store
        would frame it (payloads.era_of: plain and dictionary-framed in the load's mix)."""
        from densekv.executors import SyncExecutor
        from densekv.sessions.model import Record
        from densekv.sessions.store import make_layout

        layout = make_layout(cand.layout, NAMESPACE, self._facts(client), wl.items, cand.partitions)
        bits = partition_bits(cand.partitions)
        rng = random.Random(wl.seed)
        pl = payloads_of(wl)
        ex = SyncExecutor(client)

        def load(start: int, stop: int) -> None:
            now = int(time.time())
            for a, b in _chunks(start, stop, 2000):
                plans = []
                for j in range(a, b):
                    p = rng.choice(chosen)
                    low = rng.getrandbits(128 - bits) if bits < 128 else 0
                    digest = ((p << (128 - bits)) | low).to_bytes(16, "big")
                    absolute = now + SESSION_TTL
                    expires = now + IDLE_TTL if wl.ttl else absolute
                    identity, payload = pl.framed(*era_of(j, n, wl.items))
                    rec = Record(digest, identity, expires, absolute, payload=payload)
                    plans.append(layout.plan_put(rec, now))
                ex.run_many(plans)

        return load

    def load_full(self, client: Any, cand: Candidate, wl: Workload, n: int) -> None:
        """The first n sessions of the workload, through SessionStore (which frames and
        trains its dictionary as it always does)."""
        from densekv.sessions.store import SessionStore

        store = SessionStore(client, NAMESPACE, layout=cand.layout, ttl=SESSION_TTL,
                             idle_ttl=IDLE_TTL if wl.ttl else None, expected_sessions=wl.items,
                             index_identities=False, partitions=cand.partitions, facts=self._facts(client)).open()
        pl = payloads_of(wl)
        # batches of 1000 divide AUTO_TRAIN: the store frames exactly its first AUTO_TRAIN
        # plain, as sessions created one at a time are (payloads.py)
        store.create_each((pl.session(*store_era(i, n)) for i in range(n)), batch=1000)

    def usage(self, cand: Candidate, wl: Workload) -> str:
        """The constructor call, every feature on (the store's defaults)."""
        idle = f", idle_ttl={IDLE_TTL}" if wl.ttl else ""
        return (f"densekv.SessionStore(client, layout={cand.layout!r}, partitions={cand.partitions}, "
                f"expected_sessions={wl.items}{idle})")

    def lighter(self, cand: Candidate, wl: Workload) -> list[tuple[str, str, str]]:
        """(the call with a feature off, what that loses, the bytes of the feature) for each
        feature whose bytes the plan's figures leave out: they are measured without it."""
        off = self.usage(cand, wl)[:-1] + ", index_identities=False)"
        return [(off, "store.sessions_of() and store.destroy_all() (log out everywhere), which then refuse", INDEX_BYTES)]


    def heavier(self, cand: Candidate, wl: Workload) -> list[tuple[str, str, str]]:
        """(the call with an opt-in feature on, what it adds, its bytes) for the features
        that are off by default (docs/session-lifecycle.md)."""
        base = self.usage(cand, wl)[:-1]
        return [(base + ", track_devices=True)", '"your devices": login time, last seen and a label per session',
                 DEVICES_BYTES),
                (base + ", max_sessions_per_identity=N)", "a per-user session limit, atomic with each login",
                 LIMIT_BYTES)]


#: the bytes of the identity index, which the sessions' figures leave out (the planner loads
#: its samples without it); the figure is the benchmark's in docs/sessions.md
INDEX_BYTES = ("the identity index, about 17 B per logged-in session (not measured by this plan: docs/sessions.md, "
               "'With the identity index')")
#: the opt-in lifecycle features' bytes beyond the identity index's, from
#: `python benchmarks/session_devices.py --n 1000000` (docs/session-lifecycle.md, "What each costs")
DEVICES_BYTES = ("devices, 8 B more per logged-in session, 24-26 B with a 16-byte label (at 1M on valkey-9.1 / "
                 "redis-7.0: benchmarks/session_devices.py); with the limit too, the limit's entry")
LIMIT_BYTES = ("the limit, 16-18 B more per logged-in session (at 1M on valkey-9.1 / redis-7.0: "
               "benchmarks/session_devices.py); with devices too, the same entry")


# --- sets ----------------------------------------------------------------------------


class SetsPlanner:
    kind = "set"
    layouts = ("dense-set", "dense-hash")

    def item_size(self, wl: Workload) -> int:
        return wl.payload or 16

    def check(self, wl: Workload) -> None:
        if wl.ttl:
            raise PlannerError("sets keep no per-item expiry in densekv (CompactSet): plan a map with --ttl instead")
        if not 1 <= self.item_size(wl) <= 64:
            raise PlannerError("--payload for a set is the item size in bytes, 1 to 64 (default 16)")

    def candidates(self, wl: Workload, caps: Capabilities) -> list[Candidate]:
        from densekv.sets.compact import limits_of
        from densekv.sets.sizing import (
            Radix,
            best_dense_partitions,
            dense_item_bytes,
            min_partitions,
        )

        limits = limits_of(caps)
        size = self.item_size(wl)
        out = []
        for enc, limit, vlimit in (("set", limits.set_max_listpack_entries or 0, limits.set_max_listpack_value or 0),
                                   ("hash", limits.hash_max_listpack_entries, limits.hash_max_listpack_value)):
            if limit < 1:
                continue
            radix = Radix(min_partitions(wl.items, limit), size)
            width = radix.field_split[0] + 1 if enc == "hash" else radix.qbytes
            if width > vlimit:
                continue
            p, _ = best_dense_partitions(max(wl.items, 1), size, enc, limits)
            shape = {"kind": "set", "item_size": size, "entry": dense_item_bytes(enc, p, size)}
            out.append(Candidate(f"dense-{enc}", p, "poisson", shape))
        if not out:
            raise PlannerError(f"{size}-byte items fit no listpack on this server (value limits too low)")
        return out

    def _open(self, client: Any, cand: Candidate, wl: Workload, spread: bool) -> Any:
        from densekv.sets.compact import CompactSet, limits_from_probe

        return CompactSet(client, NAMESPACE, layout=cand.layout, expected=max(wl.items, 1),
                          item_size=self.item_size(wl), partitions=cand.partitions, spread=spread,
                          limits=limits_from_probe(client)).open()

    def sample_loader(self, client: Any, cand: Candidate, wl: Workload, chosen: list[int], n: int) -> Loader:
        """Random IDs whose partition (x mod P) is one of `chosen` (spread off, so the
        partition is the item's own)."""
        s = self._open(client, cand, wl, spread=False)
        size, p_count = self.item_size(wl), cand.partitions
        qlimit = max(1, ((1 << (8 * size)) - 1) // p_count)
        rng = random.Random(wl.seed)

        def load(start: int, stop: int) -> None:
            for a, b in _chunks(start, stop, 20_000):
                items = [(rng.randrange(qlimit) * p_count + rng.choice(chosen)).to_bytes(size, "big")
                         for _ in range(a, b)]
                s.add_many(items)

        return load

    def load_full(self, client: Any, cand: Candidate, wl: Workload, n: int) -> None:
        s = self._open(client, cand, wl, spread=True)
        rng = random.Random(wl.seed + 1)
        size = self.item_size(wl)
        for a, b in _chunks(0, n, 100_000):
            s.add_many([rng.randbytes(size) for _ in range(a, b)])

    def lighter(self, cand: Candidate, wl: Workload) -> list[tuple[str, str, str]]:
        return []  # no feature a set can turn off for bytes

    def payloads(self, wl: Workload) -> dict[str, Any] | None:
        return None  # the item size is the payload

    def usage(self, cand: Candidate, wl: Workload) -> str:
        return (f"densekv.CompactSet(client, name, layout={cand.layout!r}, partitions={cand.partitions}, "
                f"expected={wl.items}, item_size={self.item_size(wl)})")


# --- maps ----------------------------------------------------------------------------


class MapsPlanner:
    """CompactMap (densekv/maps/): numeric-tail keys in listpack hash buckets."""

    kind = "map"
    layouts = ("buckets",)

    def check(self, wl: Workload) -> None:
        if wl.payload > 1 << 20:
            raise PlannerError("--payload for a map is at most 1 MiB per value")
        import densekv.maps  # noqa: F401  (a clear error below if maps do not import)

    def value(self, rng: random.Random, wl: Workload) -> Any:
        return rng.randrange(1 << 31) if wl.payload == 0 else rng.randbytes(wl.payload)

    def stored_len(self, wl: Workload) -> int:
        from densekv import codec as cd

        framed = cd.Codec.named("auto").encode(self.value(random.Random(1), wl))
        return len(cd.with_expiry(framed, int(time.time()) + MAP_TTL if wl.ttl else None))

    def candidates(self, wl: Workload, caps: Capabilities) -> list[Candidate]:
        from densekv.maps.buckets import bucket_count, field_int
        from densekv.tools.planner.listpack import entry_size

        b = bucket_count(wl.items, caps.hash_max_listpack_entries)
        top_quotient = max(0, -(-wl.items // b) - 1)
        stored = self.stored_len(wl)
        shape = {"kind": "map", "payload": wl.payload, "ttl": wl.ttl, "stored": stored,
                 "field": entry_size(str(field_int(top_quotient)).encode())}
        out = [Candidate("buckets", b, "even", shape)]
        if stored > caps.hash_max_listpack_value:
            need = -(-stored // 16) * 16
            out.append(Candidate("buckets", b, "even", shape, {"hash-max-listpack-value": str(need)},
                                 f"values of {stored} bytes framed go out of line (a key each) over "
                                 f"hash-max-listpack-value {caps.hash_max_listpack_value}"))
        return out

    def _open(self, client: Any, wl: Workload) -> Any:
        from densekv.maps import CompactMap

        return CompactMap(client, NAMESPACE, expected=max(wl.items, 1), ttl=MAP_TTL if wl.ttl else None).open()

    def sample_loader(self, client: Any, cand: Candidate, wl: Workload, chosen: list[int], n: int) -> Loader:
        """Keys item:<f*B + b> for the chosen buckets b: each bucket filled as it will be."""
        m = self._open(client, wl)
        buckets = cand.partitions  # what the map computes from the same limits
        full, extra = divmod(wl.items, buckets)
        keys = [f * buckets + b for f in range(full + 1) for b in chosen if f < full or b < extra]
        rng = random.Random(wl.seed)

        def load(start: int, stop: int) -> None:
            for a, b in _chunks(start, min(stop, len(keys)), 5000):
                m.mset({f"item:{k}": self.value(rng, wl) for k in keys[a:b]})

        return load

    def sample_size(self, cand: Candidate, wl: Workload, chosen: list[int]) -> int:
        full, extra = divmod(wl.items, cand.partitions)
        return full * len(chosen) + sum(1 for b in chosen if b < extra)

    def load_full(self, client: Any, cand: Candidate, wl: Workload, n: int) -> None:
        m = self._open(client, wl)
        rng = random.Random(wl.seed + 1)
        for a, b in _chunks(0, n, 5000):
            m.mset({f"item:{k}": self.value(rng, wl) for k in range(a, b)})

    def lighter(self, cand: Candidate, wl: Workload) -> list[tuple[str, str, str]]:
        return []  # no feature a map can turn off for bytes

    def payloads(self, wl: Workload) -> dict[str, Any] | None:
        return None  # values: random integers, or --payload random bytes

    def usage(self, cand: Candidate, wl: Workload) -> str:
        ttl = f", ttl={MAP_TTL}" if wl.ttl else ""
        return f"densekv.CompactMap(client, namespace, expected={wl.items}{ttl})  # {cand.partitions} buckets"


KINDS: dict[str, Any] = {"sessions": SessionsPlanner(), "set": SetsPlanner(), "map": MapsPlanner()}
