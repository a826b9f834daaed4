"""Key naming, hash tags and partition math shared by every kind.

Names: `{namespace}:{kind code}:{{partition}}` - the partition number (or the slot group)
inside braces, so all keys of one partition share a cluster slot and a Lua script may
touch them together. Every code densekv writes is registered in CODES below, with what
the key holds and which module writes it; `tag()` and `key()` refuse any other (a code
is never reused: RETIRED keeps the ones no longer written). Partition counts are powers
of two and a digest's partition is its top `bits` bits; the rest of the digest is the
field, so the partition's bits are not stored twice.

Sizing rule (documented in docs/sessions.md): the seed used P = N / Z x 1.2. Random assignment
puts about N/P +- sqrt(N/P) items in a partition, so densekv takes the smallest power of
two P with N/P + 4 sqrt(N/P) <= Z: the fullest partition stays under the listpack limit
Z with a wide margin, and sizes stay on powers of two so that repartitioning splits each
partition in two.
"""

from __future__ import annotations

import math
from functools import lru_cache

from densekv.errors import InvalidArgument


def partition_count(expected: int, max_entries: int, *, minimum: int = 1, fill: int | None = None) -> int:
    """Smallest power of two P >= minimum with mean + 4 sigma of a partition <= max_entries,
    and mean <= fill when given (smaller listpacks: faster lookups, more keys)."""
    if expected < 0 or max_entries < 1 or (fill is not None and fill < 1):
        raise InvalidArgument("expected >= 0, max_entries >= 1 and fill >= 1")
    p = 1
    while p < minimum:
        p *= 2
    while True:
        mean = expected / p
        fits = mean + 4 * math.sqrt(mean) <= max_entries and (fill is None or mean <= fill)
        if fits or p >= 1 << 24:
            return p
        p *= 2


def partition_bits(partitions: int) -> int:
    """log2 of a partition count: the digest bits that pick a partition (InvalidArgument
    unless the count is a power of two)."""
    if partitions < 1 or partitions & (partitions - 1):
        raise InvalidArgument("the partition count is a power of two")
    return partitions.bit_length() - 1


def split_digest(digest: bytes, bits: int) -> tuple[int, bytes]:
    """(partition, field): the top `bits` bits, and the digest without them.

    Whole bytes implied by the partition are dropped; the implied high bits of a partly
    implied byte are zeroed (the field stays unique within its partition).
    """
    top = int.from_bytes(digest[:4], "big")
    partition = top >> (32 - bits) if bits else 0
    skip, rest = divmod(bits, 8)
    field = digest[skip:]
    if rest:
        field = bytes([field[0] & (0xFF >> rest)]) + field[1:]
    return partition, field


def join_digest(partition: int, field: bytes, bits: int) -> bytes:
    """The inverse of split_digest."""
    skip, rest = divmod(bits, 8)
    if not bits:
        return field
    high = partition << (8 * (skip + (1 if rest else 0)) - bits)  # align to byte boundary
    nbytes = skip + (1 if rest else 0)
    head = high.to_bytes(nbytes, "big") if nbytes else b""
    if rest:
        return head[:-1] + bytes([head[-1] | field[0]]) + field[1:]
    return head + field


_GLOB_SPECIAL = frozenset(b"*?[]\\")


def glob_escape(data: bytes) -> bytes:
    """`data` as a literal inside a SCAN/HSCAN MATCH pattern."""
    return b"".join(b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in data)


# --- the registry of key-name codes ------------------------------------------------------
#
# A code ending in "#" stands for the code followed by a decimal number in the key name
# (sets: the partition count, `{ns}:h4096:{17}`; Bloom: the stage, `{ns}:bf2:{0}`).
# One namespace holds one kind, so the sets' "h#" never meets the maps' "h".

CODES: dict[str, str] = {
    # -- sessions (densekv/sessions/) -----------------------------------------------------
    "meta": "a kind's metadata. Sessions: hash `{ns}:meta` of layout, partitions, repartition, "
            "dictionary id and lifecycle options (sessions/meta.py plan_meta, lua/store_meta.lua). Sets: JSON "
            "string `{ns}:meta:{0}` of layout, partitions, item size, spread (sets/compact.py)",
    "sj": "one session as a JSON string, `{ns}:sj:{<first digest byte, hex>}<rest, hex>` "
          "(sessions/layouts/perkey.py JsonLayout)",
    "sp": "one session as a msgpack string, `{ns}:sp:{<byte>}<rest>` (perkey.py PackedLayout)",
    "sh": "one session as a hash of its fields, `{ns}:sh:{<byte>}<rest>` (perkey.py HashLayout)",
    "sd": "a partition's hash of session records, field = digest less the partition bits, "
          "and of split payloads' rests, field = a session's field + one 0x00 byte "
          "(sessions/layouts/partitioned.py: dense, zset, fieldttl)",
    "sz": "a partition's ZSET of field -> expires_at, for sweep (partitioned.py ZsetLayout)",
    "sc": "a partition's continuation hash: the rest of the payloads of split records, as "
          "0.1 kept them (partitioned.py: read, and emptied as they are rewritten)",
    "so": "one session's out-of-line payload string, `{ns}:so:{<base partition>}:<digest>` "
          "(partitioned.py)",
    "si": "a partition of the identity index: hash of identity + session ref -> expiry day, "
          "or a format-1 entry with devices or a limit (sessions/index.py)",
    "ev": "a session store's event stream, `{ns}:ev:{<ns>}`: a capped Redis Stream of "
          "lifecycle events (sessions/events.py), when the store has events_stream",
    # -- maps (densekv/maps/) -------------------------------------------------------------
    "m": "a numeric-tail bucket hash, `{ns}:m:{<bucket, base62><zipped prefix>}` "
         "(maps/buckets.py locate)",
    "h": "a hashed bucket hash, `{ns}:h:{<bucket, base62>}` (maps/buckets.py locate)",
    "om": "the out-of-line value of one field of an `m` bucket, `{ns}:om:{<tag>}:<field>` "
          "(maps/buckets.py Location.ool)",
    "oh": "the out-of-line value of one field of an `h` bucket (maps/buckets.py Location.ool)",
    "zm": "a map's metadata hash, `{ns}:zm:{<ns>}` (maps/meta.py, lua/map_init.lua)",
    "za": "a map's key-prefix aliases hash, `{ns}:za:{<ns>}` (maps/meta.py)",
    "zd": "the namespace's zstd dictionaries, field N = dictionary N, `{ns}:zd:{<ns>}` "
          "(dictionaries.py; used by maps and session stores)",
    # -- sets (densekv/sets/) -------------------------------------------------------------
    "f#": "one string per item of a flat set, `{ns}:f<P>:{<p>}:<hex q>` = 1 "
          "(sets/layouts.py FlatKeys)",
    "s#": "a partition SET of hex quotients, `{ns}:s<P>:{<p>}` (sets/layouts.py SetOfMembers)",
    "h#": "a partition HASH, field = hex quotient, value 1 (sets/layouts.py HashOfFields)",
    "z#": "a partition ZSET, member = hex quotient, score 1 (sets/layouts.py SortedSet)",
    "ds#": "a dense partition SET of binary quotients (sets/layouts.py DenseSet)",
    "dq#": "a dense partition HASH, quotient split over field and value (sets/layouts.py "
           "DenseSplitHash)",
    "bm": "a Bloom filter's metadata hash, `{ns}:bm:{0}` (sets/bloom_core.py, lua/bloom_meta.lua)",
    "bs": "a Bloom shard's state hash (stages, count), `{ns}:bs:{<shard>}` (sets/bloom_core.py)",
    "bf#": "a Bloom shard's bitmap string of stage N, `{ns}:bf<N>:{<shard>}` (sets/bloom_core.py)",
    "bn": "a native RedisBloom filter of one shard, `{ns}:bn:{<shard>}` (sets/bloom_core.py)",
    "fm": "a set family's parent: HASH or SET of its children, `{ns}:fm:{<parent>}` "
          "(sets/family.py, lua/set_family_add.lua)",
    "fo": "a set family's outliers: SET of parents that left the listpack, `{ns}:fo:{0}` "
          "(sets/family.py)",
    # -- elsewhere ------------------------------------------------------------------------
    "probe": "the probe's scratch hash `densekv:probe:{<random hex>}`, written and deleted in "
             "one round trip (capabilities.py)",
}

#: Codes no longer written; still read where noted, never given to anything else.
RETIRED: dict[str, str] = {
    "dh#": "the first dense partition HASH (field = whole binary quotient, value 1): sets "
           "recorded with it are reopened and written as before (sets/layouts.py DenseHash); "
           "new dense hash sets are dq#",
}


@lru_cache(maxsize=1024)
def checked(code: str) -> str:
    """`code` itself if CODES or RETIRED has it (a "#" entry: the code with its number);
    ValueError otherwise. The one check every key name of densekv goes through."""
    stem = code.rstrip("0123456789")
    registered = "#" not in code and (code in CODES or code in RETIRED or (
        stem != code and (stem + "#" in CODES or stem + "#" in RETIRED)))
    if not registered:
        raise ValueError(f"key code {code!r} is not registered in densekv/keys.py CODES")
    return code


def tag(namespace: str, code: str, partition: int | str | bytes) -> bytes:
    """`{namespace}:{code}:{{partition}}`: a key name with its hash tag (code checked)."""
    if isinstance(partition, bytes):
        return f"{namespace}:{checked(code)}:{{".encode() + partition + b"}"
    return f"{namespace}:{checked(code)}:{{{partition}}}".encode()


def key(namespace: str, code: str) -> bytes:
    """`{namespace}:{code}`: a key name without a hash tag (code checked)."""
    return f"{namespace}:{checked(code)}".encode()


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["CODES", "RETIRED", "checked", "glob_escape", "join_digest", "key", "partition_bits",
           "partition_count", "split_digest", "tag"]
