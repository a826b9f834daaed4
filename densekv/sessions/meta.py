"""What a session store is, and where it is decided: the server's facts, the layout choice,
the store's shared metadata.

Deciding apart from doing: `choose_layout` picks the layout for `layout="auto"` from
ServerFacts (a pure projection of the probe's Capabilities: facts_of) and `make_layout`
builds it; StoreMeta is the namespace's metadata hash `{ns}:meta` (written once by the
first store, densekv/lua/store_meta.lua; every later process adopts its layout, partition
count, repartition state and dictionary id, whatever it was told). No I/O here but the
plans of plan_meta; the flows that use them are densekv/sessions/core.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from densekv.errors import DecodeError, DensekvError
from densekv.keys import key, partition_count
from densekv.lua import script
from densekv.plan import Plan, script_call
from densekv.sessions.layouts.base import Layout, LayoutLimits
from densekv.sessions.layouts.partitioned import DenseLayout, FieldTtlLayout, ZsetLayout
from densekv.sessions.layouts.perkey import HashLayout, JsonLayout, PackedLayout

if TYPE_CHECKING:
    from densekv.server.probe import Capabilities

LAYOUTS = ("json", "packed", "hash", "zset", "dense", "fieldttl")


class LayoutUnavailable(DensekvError):
    """The layout asked for cannot run on this server (e.g. fieldttl without HEXPIRE)."""


@dataclass(frozen=True)
class ServerFacts:
    """What the store needs of the server (from the probe, or a few CONFIG GETs)."""

    limits: LayoutLimits
    field_ttl: str = "none"
    field_ttl_encoding: str | None = None
    cluster: bool = False


@dataclass(frozen=True)
class Choice:
    layout: str
    reason: str


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
    return Choice("dense", why)


def make_layout(name: str, namespace: str, facts: ServerFacts, expected: int, partitions: int | None,
                meta: StoreMeta | None = None, fill: int | None = None) -> Layout:
    if name in ("json", "packed", "hash"):
        return {"json": JsonLayout, "packed": PackedLayout, "hash": HashLayout}[name](namespace)
    limit = facts.limits.hash_max_listpack_entries
    if name == "zset":
        limit = min(limit, facts.limits.zset_max_listpack_entries)
    p = partitions or partition_count(expected, limit, fill=fill)
    extra: dict[str, Any] = {}
    if meta is not None and meta.partitions:
        p = meta.partitions
        extra = {"base_partitions": meta.base, "from_partitions": meta.from_}
    if name == "dense":
        return DenseLayout(namespace, p, facts.limits, **extra)
    if name == "zset":
        return ZsetLayout(namespace, p, facts.limits, **extra)
    if name == "fieldttl":
        if facts.field_ttl == "none":
            raise LayoutUnavailable("layout fieldttl needs hash field TTL (Redis 7.4+, Valkey 9+)")
        layout = FieldTtlLayout(namespace, p, facts.limits, **extra)
        layout.hsetex = facts.field_ttl == "hsetex"
        return layout
    raise ValueError(f"unknown layout {name!r}: choose one of auto, {', '.join(LAYOUTS)}")


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

    @classmethod
    def from_reply(cls, reply: Any) -> StoreMeta | None:
        try:
            fields = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
            if not fields:
                return None
            meta = cls(fields["layout"], int(fields["partitions"]), int(fields["base"]),
                       int(fields["from"]) if "from" in fields else None,
                       int(fields["dict"]) if "dict" in fields else None,
                       fields["index"] == "1" if "index" in fields else None)
        except (KeyError, ValueError, UnicodeDecodeError, AttributeError, IndexError) as exc:
            raise DecodeError("the namespace's metadata hash was not written by densekv: "
                              "use another namespace, or delete that key") from exc
        if meta.layout not in LAYOUTS:
            raise DecodeError(f"the namespace's metadata names layout {meta.layout!r}, which densekv "
                              "does not know: use another namespace, or delete that key")
        return meta


def meta_key(namespace: str) -> bytes:
    return key(namespace, "meta")


def plan_meta(namespace: str, op: str, *args: Any) -> Plan[StoreMeta | None]:
    """One call of densekv/lua/store_meta.lua: open, read, begin, finish, dict."""
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
    from densekv.server.probe import probe

    return facts_of(probe(client))


__all__ = ["LAYOUTS", "Choice", "LayoutUnavailable", "ServerFacts", "StoreMeta", "choose_layout", "facts_from_probe",
           "facts_of", "make_layout", "meta_key", "plan_meta"]
