"""A map's stored meta: its geometry, alias table and TTL mode, fixed in the server when
the map is created, and the TTL-mode decision (deciding apart from doing: choose_ttl_mode
decides from the server facts, init_flow writes or reads what was decided).

The meta hash `<ns>:zm:{<ns>}` holds format, buckets, entries, value, ttl_mode and, while
a migration runs, fallback (the glob pattern of the plain keys being moved in; see
maps/migrate.py) and zdict (the id of the zstd dictionary new values are written with);
the alias table is `<ns>:za:{<ns>}`. Any process, with any `expected`, finds every item.

Per-item TTL (`ttl_mode`, stored in the map's meta at creation; a map made before the
option existed has none and is "packed"; an explicit mode other than the stored one
raises MapConfigError):
  * "packed": the expiry, 4-byte unix seconds behind the 0x0E header, before the framed
    value; read checks it, sweep() removes expired items (map_sweep.lua).
  * "field": the server's hash field TTL (HEXPIREAT on the item's field), no expiry in the
    value. A write with a TTL sets value and TTL together: HSETEX where the server has it
    (Valkey 9.1), else HSET + HEXPIREAT in one MULTI (Redis 7.4), also in batches
    (run_fast groups them per bucket and expiry). A write without one is a plain HSET,
    which drops the field's TTL (as SET does); HINCRBY keeps it (both checked by
    tests/behaviour/test_map_fieldttl.py on Redis 7.4 and Valkey 9.1). ttl() reads
    HPEXPIRETIME, expire()/persist() are HEXPIREAT/HPERSIST (and EXPIREAT/PERSIST of an
    out-of-line key, which keeps its own EXAT one second past its field's). The server
    expires items itself and hides expired fields from HGET, HMGET, HGETALL and HSCAN,
    so sweep() only reclaims out-of-line keys. Refused with FieldTtlUnavailable, before
    anything is written, on a server without field TTL (Redis 7.0, Valkey 8.0).
  * "auto" (default): packed on every server, from these measurements (used_memory delta
    per item at 200k items, every item with a one-day TTL; `python benchmarks/map_memory.py
    --server S --case C --ttl-mode packed|field`; load does not move bytes):
        server       case         packed   field                    plain SET EX
        redis-7.4    int_seq      21.19    21.46 (listpackex)       101.22
        redis-7.4    int_holey    23.48    22.77 (listpackex)       100.97
        redis-7.4    str8_holey   22.50    27.77 (listpackex)       116.90
        valkey-9.1   int_seq      19.53    77.88 (hashtable)         68.47
        valkey-9.1   int_holey    21.41    73.05 (hashtable)         67.95
    On Redis 7.4 (listpackex) a field TTL is a listpack integer entry of ~10 bytes per
    item against 5 packed bytes, which also turn an integer value into a string: about
    even for integers (0.7 B/item smaller under holey ids, 0.3 larger under sequential
    ids), 5.3 B/item larger for 8-byte strings, and writes cost more server time (int
    cases, batched sets: HSET 2.0-2.8 us + HEXPIREAT 4.3-6.4 us per grouped call against
    HSET 1.1-1.4 us packed; commandstats of the same runs, load average 1.8-3.3).
    On Valkey 9.1 one expiring field turns the bucket into a hashtable: 3.4-4x packed and
    more than plain SET EX. So auto never finds field TTL "compact and not larger";
    "field" remains for those who want the server to expire items (no sweep).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from densekv.errors import FieldTtlUnavailable, InvalidArgument, MapConfigError
from densekv.flows import Flow, step
from densekv.keys import tag
from densekv.lua import script
from densekv.maps.buckets import FORMAT, bucket_count
from densekv.maps.settings import MapFacts
from densekv.maps.zipkeys import Aliases
from densekv.plan import script_call


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _flat(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    return {_text(k): _text(v) for k, v in zip(reply[::2], reply[1::2])}


def meta_key(namespace: str) -> bytes:
    """The map's metadata hash, `{ns}:zm:{<ns>}` (densekv/keys.py code zm)."""
    return tag(namespace, "zm", namespace)


def alias_key(namespace: str) -> bytes:
    """The map's key-prefix aliases hash, `{ns}:za:{<ns>}` (densekv/keys.py code za)."""
    return tag(namespace, "za", namespace)


TTL_MODES = ("auto", "packed", "field")


def choose_ttl_mode(facts: MapFacts) -> str:
    """ttl_mode="auto" for a new map: "field" only where the server keeps a hash with field
    TTLs compact (listpackex) and field TTL measured not larger than packed. Measured
    (module docstring, "Per-item TTL"): larger on the one server with listpackex (Redis
    7.4) except by 0.7 B/item for integers under holey ids, and 3.4-4x on Valkey 9.1
    (hashtable). So: packed, on every server of the matrix."""
    return "packed"


def ttl_mode_reason(facts: MapFacts, mode: str) -> str:
    if mode == "field":
        return ("the server's field TTL (set with the value in one command or MULTI; the server "
                "expires items, sweep() only reclaims out-of-line keys); a bucket with expiring items is "
                f"a {facts.field_ttl_encoding or 'whatever the server makes it'} here")
    packed = "expiry packed before the value (5 bytes, checked on read, swept by sweep()); "
    if facts.field_ttl == "none":
        return packed + "this server has no field TTL"
    if facts.field_ttl_encoding == "listpackex":
        return packed + ("the server's field TTL keeps listpacks here (listpackex) but measured no "
                         "smaller (larger for strings) and slower to write")
    return packed + (f"the server's field TTL ({facts.field_ttl}) turns a bucket into a "
                     f"{facts.field_ttl_encoding or 'hashtable'}: several times the bytes")


def init_flow(namespace: str, facts: MapFacts, expected: int, aliases: Mapping[str, str] | None,
              ttl_mode: str = "auto") -> Flow[tuple[dict[str, str], Aliases]]:
    """Create the map's meta in the server, or read what an earlier process stored. Bad
    settings (an unknown ttl_mode, field TTL on a server without it) raise before any write."""
    if ttl_mode not in TTL_MODES:
        raise InvalidArgument(f"ttl_mode is one of {', '.join(TTL_MODES)}, not {ttl_mode!r}")
    if ttl_mode == "field" and facts.field_ttl == "none":
        raise FieldTtlUnavailable(
            "ttl_mode='field' needs hash field TTL (HEXPIRE: Redis 7.4+, Valkey 9+); this server has "
            "none: use ttl_mode='packed' (or 'auto')")
    wanted = Aliases(aliases)
    mode = choose_ttl_mode(facts) if ttl_mode == "auto" else ttl_mode
    meta = {"format": FORMAT, "buckets": str(bucket_count(expected, facts.entries_limit)),
            "entries": str(facts.entries_limit), "value": str(facts.value_limit), "ttl_mode": mode}
    args: list[Any] = [len(meta)]
    for k, v in meta.items():
        args += [k, v]
    for crumb, alias in wanted.forward.items():
        args += [crumb.encode("utf-8", "surrogatepass"), alias.encode("utf-8", "surrogatepass")]
    stored_meta: Any
    stored_aliases: Any
    stored_meta, stored_aliases = yield from step(script_call(
        script("map_init"), [meta_key(namespace), alias_key(namespace)], args))
    got_meta, got_aliases = _flat(stored_meta), Aliases(_flat(stored_aliases))
    if got_meta.get("format") is None:
        raise MapConfigError(f"{meta_key(namespace).decode()} holds a hash densekv did not write: use another "
                             "namespace for the map (or delete that key)")
    if got_meta.get("format") != FORMAT:
        raise MapConfigError(f"map {namespace!r} in this server has format {got_meta.get('format')!r}, not {FORMAT}")
    if aliases is not None and got_aliases != wanted:
        raise MapConfigError(
            f"map {namespace!r} was created with aliases {got_aliases.forward}; an alias table is "
            "fixed when a map is created (pass aliases=None to use the stored one)")
    stored_mode = got_meta.setdefault("ttl_mode", "packed")  # maps made before ttl_mode: packed
    if ttl_mode != "auto" and stored_mode != ttl_mode:
        raise MapConfigError(
            f"map {namespace!r} was created with ttl_mode={stored_mode!r}; the TTL mode is fixed when a "
            "map is created (every process must agree; pass ttl_mode='auto' to use the stored one)")
    if stored_mode == "field" and facts.field_ttl == "none":
        raise FieldTtlUnavailable(
            f"map {namespace!r} keeps item TTLs as hash field TTLs, which this server does not have "
            "(HEXPIRE: Redis 7.4+, Valkey 9+)")
    return got_meta, got_aliases


def check_namespace(namespace: str) -> None:
    """InvalidArgument unless a map namespace is letters, digits, '_', '-' and '.' (it is
    part of every key name of the map, and of SCAN patterns)."""
    if not namespace or not all(c.isalnum() or c in "_-." for c in namespace) or not namespace.isascii():
        raise InvalidArgument("namespace is a non-empty string of letters, digits, '_', '-' and '.'")


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["TTL_MODES", "alias_key", "check_namespace", "choose_ttl_mode", "init_flow", "meta_key",
           "ttl_mode_reason"]
