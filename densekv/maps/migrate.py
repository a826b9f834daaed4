"""Hot migration between plain string keys and a compact map, and its verification.

`migrate_from(pattern)` moves plain keys matching a glob pattern into the map while the
application keeps running: the map's meta records the pattern, so maps opened from then
on read a missing item from the plain key of the same name, and write operations move
that key in first. Keys are found with SCAN (never KEYS) in batches. Each key moves
atomically on one server (Lua map_move: only if the plain value is still what was read;
an item the application wrote into the map since wins). On a cluster, where the key and
its bucket are in different slots, a key moves in two idempotent steps: put-if-absent
into the map, then delete-if-unchanged of the plain key (undone if the plain key vanished
in between); that move is maps/core.py move_keys, which a write during a migration runs
too (MapCore.adopt), so the core does not import this module. A crash at any point leaves
every item in the plain key, the map, or (cluster, between the two steps) both with the
map's copy read first; rerunning finishes the job, so nothing is lost or duplicated. `verify` (maps/whole.py) reports what is left and
checks every item decodes and every bucket is still a listpack. `migrate_to_plain` is the
reverse. Every step is a flow (the plain keys come from a flows.Scan, the pauses are a
flows.Sleep), so the sync and the asyncio map run the same migration.

In a map with ttl_mode "field" a moved key's TTL becomes its field's TTL, to the
millisecond (PEXPIRETIME, then HPEXPIREAT in the same script or, on a cluster, in the
put-if-absent step), and the reverse migration gives the plain key the field's TTL
(HPEXPIRETIME, then SET PXAT).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from densekv import codec as cd
from densekv.errors import KeyTooLong
from densekv.flows import Flow, Scan, Sleep
from densekv.lua import script
from densekv.maps.buckets import OOL, Location
from densekv.maps.core import MAX_RETRIES, MISSING, MapCore, move_keys, plain_bytes, plain_value
from densekv.maps.meta import meta_key
from densekv.plan import Plan, command, script_call


def own_key(namespace: str, key: bytes) -> bool:
    """Keys of the map itself, which a broad pattern must never migrate."""
    ns = namespace.encode() + b":"
    return key.startswith(ns) and key[len(ns):].split(b":", 1)[0] in (b"m", b"h", b"om", b"oh", b"zm", b"za", b"zd")


def plain_scan(pattern: bytes, batch: int, count: int) -> Scan:
    """A scan of the plain string keys matching a pattern (own_key() filters the map's)."""
    return Scan(pattern, batch=batch, count=count, type="string")


def count_plain(namespace: str, pattern: bytes) -> Flow[int]:
    """Plain keys matching `pattern` still there (none of the map's own keys)."""
    scan, total = plain_scan(pattern, 1000, 1000), 0
    while chunk := (yield scan):
        total += sum(1 for k in chunk if not own_key(namespace, k))
    return total


def migrate_from(core: MapCore, pattern: str, batch: int = 500, pause: float = 0.0,
                 progress: Callable[[dict[str, int]], None] | None = None) -> Flow[dict[str, int]]:
    """Move the plain keys matching `pattern` in (see the module docstring); counts by
    outcome, and `remaining`: plain keys still there (0 clears the fallback)."""
    key = meta_key(core.namespace)
    yield [command("HSET", key, "fallback", pattern, keys=(key,))]
    core.set_fallback(pattern)
    totals = {"moved": 0, "in_map": 0, "gone": 0, "skipped": 0}
    scan = plain_scan(pattern.encode(), batch, batch)
    while found := (yield scan):
        chunk = [k for k in found if not own_key(core.namespace, k)]
        if not chunk:
            continue
        counts = yield from move_keys(core, chunk)
        for k, v in counts.items():
            totals[k] += v
        if progress:
            progress(dict(totals))
        if pause:
            yield Sleep(pause)
    remaining = yield from count_plain(core.namespace, pattern.encode())
    totals["remaining"] = remaining
    if remaining == totals["skipped"] == 0:
        yield [command("HDEL", key, "fallback", keys=(key,))]
        core.set_fallback(None)
    return totals


def plain_items_of(core: MapCore, keys: Sequence[bytes]) -> Flow[list[tuple[str, Any]]]:
    """Plain keys not yet moved (items() during a migration): those the map lacks."""
    chunk = [k for k in keys if not own_key(core.namespace, k)]
    names = [k.decode("utf-8", "surrogateescape") for k in chunk]
    locs: list[Location | None] = []  # None: too long for the map, so only plain
    for n in names:
        try:
            locs.append(core.locate(n))
        except KeyTooLong:
            locs.append(None)
    if not chunk:
        return []
    plans: list[Plan[Any]] = [command("GET", k, keys=(k,)) for k in chunk]
    plans += [command("HGET", loc.bucket, loc.field, keys=(loc.bucket,)) for loc in locs if loc]
    replies = yield plans
    values, in_map = replies[: len(chunk)], iter(replies[len(chunk):])
    out = []
    for name, loc, v in zip(names, locs, values):
        here = core.live(next(in_map)) is not None if loc else False
        if v is not None and not here:
            out.append((name, plain_value(bytes(v))))
    return out


def migrate_to_plain(core: MapCore, batch: int = 200, pause: float = 0.0) -> Flow[dict[str, int]]:
    """Move every item back to a plain string key of its name (with its TTL)."""
    totals = {"moved": 0, "expired": 0, "changed": 0}
    for _ in range(MAX_RETRIES):
        changed = 0
        for scan in core.bucket_scans(batch):  # a new walk per pass
            while chunk := (yield scan):
                counts = yield from _unmove(core, chunk)
                for k, v in counts.items():
                    totals[k] += v
                changed += counts["changed"]
                if pause:
                    yield Sleep(pause)
        if not changed:
            break
    return totals


def _unmove(core: MapCore, buckets: Sequence[bytes]) -> Flow[dict[str, int]]:
    names, locs, raws = yield from core.fields_of(buckets)
    counts = {"moved": 0, "expired": 0, "changed": 0}
    values = yield from core.resolve(names, locs, raws, fallback=False)
    pexp: dict[tuple[bytes, bytes], int] = {}
    if core.field_ttl and core.facts.cluster and locs:  # the field TTLs, for SET PXAT
        by_bucket: dict[bytes, list[bytes]] = {}
        for loc in locs:
            by_bucket.setdefault(loc.bucket, []).append(loc.field)
        got = yield [command("HPEXPIRETIME", b, "FIELDS", len(fs), *fs, keys=(b,)) for b, fs in by_bucket.items()]
        for (b, fs), times in zip(by_bucket.items(), got):
            pexp.update({(b, f): int(t) for f, t in zip(fs, times)})

    plans: list[Plan[Any]] = []
    follow = []
    for name, loc, raw, value in zip(names, locs, raws, values):
        if value is MISSING:
            counts["expired"] += 1
            continue
        exp, _ = cd.split_expiry(raw)
        k = name.encode("utf-8", "surrogateescape")
        data = plain_bytes(value)
        if not core.facts.cluster and core.field_ttl:
            plans.append(script_call(script("map_unmove"), [loc.bucket, loc.ool, k], [loc.field, raw, data, "field"]))
        elif not core.facts.cluster:
            plans.append(script_call(script("map_unmove"), [loc.bucket, loc.ool, k], [loc.field, raw, data, exp or 0]))
        else:
            at = pexp.get((loc.bucket, loc.field), -1)
            args: tuple[Any, ...] = ("SET", k, data) + (
                (("PXAT", at) if at > 0 else ()) if core.field_ttl else (("EXAT", exp) if exp else ()))
            plans.append(command(*args, keys=(k,), decode=lambda r: 1))
            follow.append((loc, raw))
    results = yield plans
    if core.facts.cluster and follow:
        dels = yield [script_call(script("map_del_if"), [loc.bucket], [raw, loc.field]) for loc, raw in follow]
        results = dels
        stale: list[Plan[Any]] = [command("DEL", loc.ool, keys=(loc.ool,))
                                  for (loc, raw), d in zip(follow, dels) if d and cd.split_expiry(raw)[1] == OOL]
        if stale:
            yield stale
    for r in results:
        counts["moved" if r else "changed"] += 1
    return counts


__all__ = ["count_plain", "migrate_from", "migrate_to_plain", "move_keys", "own_key", "plain_items_of",
           "plain_scan"]
