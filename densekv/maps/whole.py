"""Whole-map work: flows that walk every bucket (count, stats, sweep, items, verify).

The buckets are found with SCAN (never KEYS): a flow yields a flows.Scan and the driver
answers with the next chunk of bucket names (on a cluster, from every primary), so each
operation is one flow that the sync and the asyncio map both run. An item changed during
a walk may be seen old or new, as with SCAN. items() streams, so its shells walk the
chunks themselves (`walks`) and run one flow per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from densekv.errors import DecodeError
from densekv.flows import Flow, Scan
from densekv.keys import tag
from densekv.lua import script
from densekv.maps.core import MISSING, MapCore
from densekv.plan import Plan, command, script_call

Walk = tuple[Scan, Callable[[list[bytes]], Flow[list[tuple[str, Any]]]]]


def items_of(core: MapCore, buckets: Sequence[bytes]) -> Flow[list[tuple[str, Any]]]:
    """The live items of these buckets (each read where it is: no migration fallback)."""
    keys, locs, raws = yield from core.fields_of(buckets)
    values = yield from core.resolve(keys, locs, raws, fallback=False)
    return [(k, v) for k, v in zip(keys, values) if v is not MISSING]


def walks(core: MapCore, batch: int) -> list[Walk]:
    """How items() walks the map: (a scan, the flow that reads one chunk of it). During a
    migration, plain keys not yet moved too (those the map lacks)."""
    out: list[Walk] = [(scan, lambda chunk: items_of(core, chunk)) for scan in core.bucket_scans(batch)]
    if core.fallback:  # a migration is under way: maps/migrate.py, loaded only then
        from densekv.maps.migrate import plain_items_of, plain_scan

        out.append((plain_scan(core.fallback.encode(), batch=200, count=1000),
                    lambda chunk: plain_items_of(core, chunk)))
    return out


def bucket_sizes(core: MapCore) -> Flow[list[int]]:
    """HLEN of every bucket (items stored, expired-but-unswept ones included)."""
    sizes: list[int] = []
    for scan in core.bucket_scans(500):
        while chunk := (yield scan):
            sizes += yield [command("HLEN", b, keys=(b,)) for b in chunk]
    return sizes


def count(core: MapCore) -> Flow[int]:
    return sum((yield from bucket_sizes(core)))


def stats(core: MapCore) -> Flow[dict[str, Any]]:
    """Geometry, item count, the fullest bucket, and warnings near the listpack limit."""
    sizes = yield from bucket_sizes(core)
    limit = core.geo.entries_limit
    fullest = max(sizes, default=0)
    warnings = []
    if fullest > 0.9 * limit:
        warnings.append(
            f"the fullest bucket holds {fullest} items of the {limit} a listpack may hold: "
            "past that it becomes a hashtable (several times the memory); make a new map with a "
            "larger expected and migrate")
    enc = core.facts.field_ttl_encoding
    if core.field_ttl and enc not in (None, "listpack", "listpackex"):
        warnings.append(
            f"ttl_mode='field' on a server that makes a hash with an expiring field a {enc}: "
            "a bucket with one TTL costs several times its listpack (see explain()); "
            "ttl_mode='packed' keeps listpacks")
    return {**core.explain(), "items": sum(sizes), "bucket_keys": len(sizes),
            "fullest_bucket": fullest, "warnings": warnings}


def sweep(core: MapCore, batch: int) -> Flow[int]:
    """Remove expired items (one Lua script per bucket) and out-of-line keys no bucket
    points to any more; the number of expired items removed (always 0 in ttl_mode
    "field": the server removes them itself)."""
    removed = 0
    for scan in () if core.field_ttl else core.bucket_scans(batch):
        while chunk := (yield scan):
            removed += yield from sweep_buckets(core, chunk)
    ns = core.namespace.encode()
    for code in (b"om", b"oh"):
        scan = Scan(ns + b":" + code + b":{*", batch=batch, count=batch)
        while chunk := (yield scan):
            yield from reclaim(core, chunk)
    return removed


def sweep_buckets(core: MapCore, buckets: Sequence[bytes]) -> Flow[int]:
    if core.field_ttl:  # the server expires items itself; nothing is packed to sweep
        return 0
    now = core.now()
    plans: list[Plan[Any]] = []
    for b in buckets:
        ns, code, rest = b.split(b":", 2)
        prefix = ns + b":o" + code + b":" + rest + b":"
        plans.append(script_call(script("map_sweep"), [b], [now, prefix]))
    return sum((yield plans))


def reclaim(core: MapCore, ool_keys: Sequence[bytes]) -> Flow[int]:
    """Delete the out-of-line keys their bucket no longer points to."""
    plans: list[Plan[Any]] = []
    for k in ool_keys:
        bucket, fld = ool_owner(core.namespace, k)
        plans.append(script_call(script("map_ool_reclaim"), [bucket, k], [fld]))
    return sum((yield plans))


def ool_owner(namespace: str, ool_key: bytes) -> tuple[bytes, bytes]:
    """(bucket, field) an out-of-line key `<ns>:o<m|h>:{<tag>}:<field>` belongs to.
    A numeric bucket's tag holds the zipped key prefix, which may contain '}' and ':',
    but its field is an integer: split at the last ':'. A hashed bucket's tag is
    base62, but its field is the zipped key: split at the first '}:'."""
    head = namespace.encode() + b":"
    if not ool_key.startswith(head) or ool_key[len(head) : len(head) + 4] not in (b"om:{", b"oh:{"):
        raise ValueError(f"{ool_key!r} is not an out-of-line key of map {namespace!r}")
    code, rest = ool_key[len(head) + 1 : len(head) + 2], ool_key[len(head) + 3 :]
    cut = rest.rindex(b":") if code == b"m" else rest.index(b"}:") + 1
    return tag(namespace, code.decode(), rest[1 : cut - 1]), rest[cut + 1 :]


def verify(core: MapCore, pattern: str | None = None) -> Flow[dict[str, Any]]:
    """Items that decode, any that do not (by key), buckets no longer listpacks, and plain
    keys still matching `pattern` (0 after a finished migration)."""
    items = 0
    errors: list[str] = []
    not_listpack = 0
    by_field_ttl = 0
    for scan in core.bucket_scans(100):
        while chunk := (yield scan):
            encodings = yield [command("OBJECT", "ENCODING", b, keys=(b,)) for b in chunk]
            odd = [(b, bytes(e)) for b, e in zip(chunk, encodings)
                   if e is not None and bytes(e) not in (b"listpack", b"listpackex")]
            if odd and core.field_ttl:
                # a server that keeps field TTLs in hashtables only (Valkey 9.1) converts a
                # bucket with one expiring field: expected in this mode, unless the bucket is
                # over the entries limit (then it would be a hashtable anyway)
                sizes = yield [command("HLEN", b, keys=(b,)) for b, _ in odd]
                fine = [n <= core.geo.entries_limit for n in sizes]
                by_field_ttl += sum(fine)
                odd = [o for o, f in zip(odd, fine) if not f]
            not_listpack += len(odd)
            try:
                items += len((yield from items_of(core, chunk)))
            except DecodeError:
                for b in chunk:  # find the culprits one bucket at a time
                    try:
                        items += len((yield from items_of(core, [b])))
                    except DecodeError as exc:
                        errors.append(str(exc.key))
    plain_left = 0
    if pattern:  # plain keys a migration left: maps/migrate.py, loaded only then
        from densekv.maps.migrate import count_plain

        plain_left = yield from count_plain(core.namespace, pattern.encode())
    return {"items": items, "decode_errors": errors, "buckets_not_listpack": not_listpack,
            "buckets_hashtable_by_field_ttl": by_field_ttl, "plain_keys_left": plain_left,
            "ok": not errors and not not_listpack and not plain_left}
