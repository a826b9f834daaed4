"""The batch fast path: a run of a batch's queued gets and sets in one round trip.

Consecutive gets of one bucket share an HMGET and consecutive sets one HSET (HSETEX, or
HSET + HEXPIREAT in one MULTI, for items with a field TTL), so a batch of thousands of
items is a few hundred commands. Integers, the common case, are encoded and decoded here
without the codec's general path: an int64 under any serializer but "raw" is stored as
its canonical decimal text (what codec.encode_int writes, which a listpack keeps as an
integer entry), and a reply that is canonical int64 text is that integer; anything else
goes through codec.encode/decode, which applies the same rule. See run_fast for the order
commands keep, and batch.py for how a batch is cut into runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from densekv import codec as cd
from densekv.errors import DecodeError
from densekv.flows import Flow
from densekv.maps.buckets import OOL, OOL_SLACK, Location
from densekv.maps.core import MISSING, MapCore
from densekv.maps.queue import Fast, QueuedGet, QueuedMSet, QueuedSet
from densekv.plan import Command, Plan, command

INT64_MIN, INT64_MAX = cd.INT64_MIN, cd.INT64_MAX
_INT_HEADS = frozenset(cd.INTEGER_FIRST)
_NONE: Mapping[int, Any] = {}
_ZSTD_HEADS = frozenset(bytes([h]) for h in (cd.ZSTD_BYTES, cd.ZSTD_STR, cd.ZSTD_MSGPACK))


def run_fast(core: MapCore, ops: Sequence[Fast], prefetch: Mapping[int, Any] = _NONE, base: int = 0,
             split: bool = False) -> Flow[list[Any]]:
    """Queued gets, mgets, sets and msets of a batch (no migration in progress) in one
    round trip. The result has one entry per key, in order: the value (MISSING when
    absent) for a get, True for a set.

    Commands go out in op order, except that consecutive gets of one bucket share an
    HMGET and consecutive sets one HSET as long as no op of the other kind on that
    bucket came in between: an op moves earlier past ops on other buckets only, so
    every key sees its ops in order. Every value is framed (and refused) before
    anything is sent. An out-of-line value (marker in the bucket) is read in a second
    round trip when its marker is seen, unless `prefetch` says a later op of the batch
    writes that key (base + op index -> True, or a flag per key of an mget): its GET goes
    right after the bucket read, before that write. A deferred read whose key is gone
    (another client overwrote the item and the key was reclaimed in between) reads the
    item again from the start, so a get never calls an item missing that never was.
    `split`: one plan per bucket (a cluster routes them by slot), else one plan."""
    place = core.place
    frame = core.frame
    int_ok = core.codec.serializer != "raw"  # every other serializer writes an int64 as INTEGER
    limit = core.geo.value_limit
    field_ttl, hsetex = core.field_ttl, core.hsetex
    cmds: list[tuple[bytes, list[Any]]] = []
    reads: dict[bytes, tuple[int, list[Any]]] = {}
    writes: dict[bytes, list[Any]] = {}
    # ttl_mode "field": bucket -> (expiry, the HSET or HSETEX, the HEXPIREAT or None) of
    # the last run of sets with that expiry; value and field TTL go in one command
    # (HSETEX) or one MULTI, so no reader ever sees the value without its TTL
    twrites: dict[bytes, tuple[int, list[Any], list[Any] | None]] = {}
    where: list[tuple[int, int, int] | None] = []  # per get: command, position, prefetch command
    keys: list[str] = []
    for n, op in enumerate(ops):
        if isinstance(op, (QueuedSet, QueuedMSet)):
            pairs: Any = ((op.key, op.value),) if isinstance(op, QueuedSet) else op.items
            ttl = op.ttl
            expires = core.expiry_of(ttl) if ttl is not None or core.ttl is not None else None
            packed = expires if not field_ttl else None
            for key, value in pairs:
                bucket, fld = place(key)
                if type(value) is int and int_ok and INT64_MIN <= value <= INT64_MAX:
                    stored, ool = str(value).encode(), None  # what codec.encode_int writes
                    if packed or len(stored) > limit:
                        stored, ool = frame(key, value, expires)
                else:
                    stored, ool = frame(key, value, expires)
                if reads:
                    reads.pop(bucket, None)
                if field_ttl:
                    if expires and ool is None:
                        writes.pop(bucket, None)
                        run = twrites.get(bucket)
                        if run is not None and run[0] == expires:
                            if run[2] is None:  # HSETEX key EXAT t FIELDS n f v ...
                                run[1][5] += 1
                                run[1].extend((fld, stored))
                            else:  # MULTI, HSET key f v ..., HEXPIREAT key t FIELDS n f ..., EXEC
                                run[1].extend((fld, stored))
                                run[2][4] += 1
                                run[2].append(fld)
                        elif hsetex:
                            hsx: list[Any] = [b"HSETEX", bucket, b"EXAT", expires, b"FIELDS", 1, fld, stored]
                            twrites[bucket] = (expires, hsx, None)
                            cmds.append((bucket, hsx))
                        else:
                            hs: list[Any] = [b"HSET", bucket, fld, stored]
                            hx: list[Any] = [b"HEXPIREAT", bucket, expires, b"FIELDS", 1, fld]
                            twrites[bucket] = (expires, hs, hx)
                            cmds += [(bucket, [b"MULTI"]), (bucket, hs), (bucket, hx), (bucket, [b"EXEC"])]
                        where.append(None)
                        keys.append(key)
                        continue
                    if twrites:
                        twrites.pop(bucket, None)
                if ool is None:
                    hset = writes.get(bucket)
                    if hset is None:
                        writes[bucket] = hset = [b"HSET", bucket, fld, stored]
                        cmds.append((bucket, hset))
                    else:
                        hset += (fld, stored)
                else:
                    writes.pop(bucket, None)
                    ex: list[Any] = [b"EXAT", expires + OOL_SLACK] if expires else []
                    cmds += [(bucket, [b"MULTI"]), (bucket, [b"SET", Location(bucket, fld).ool, ool, *ex]),
                             (bucket, [b"HSET", bucket, fld, stored])]
                    if field_ttl and expires:
                        cmds.append((bucket, [b"HEXPIREAT", bucket, expires, b"FIELDS", 1, fld]))
                    cmds.append((bucket, [b"EXEC"]))
                where.append(None)
                keys.append(key)
            continue
        # GET (one key) or MGET (a list): each key joins its bucket's HMGET
        if isinstance(op, QueuedGet):
            names: Sequence[str] = (op.key,)
            flags = (prefetch.get(base + n),) if prefetch else None
        else:
            names = op.keys
            flags = prefetch.get(base + n) if prefetch else None
        for j, key in enumerate(names):
            bucket, fld = place(key)
            if writes:
                writes.pop(bucket, None)
            if twrites:
                twrites.pop(bucket, None)
            got = reads.get(bucket)
            if got is None:
                got = reads[bucket] = (len(cmds), [b"HMGET", bucket, fld])
                cmds.append((bucket, got[1]))
            else:
                got[1].append(fld)
            pre = -1
            if flags and flags[j]:
                pre = len(cmds)
                cmds.append((bucket, [b"GET", Location(bucket, fld).ool]))
            where.append((got[0], len(got[1]) - 3, pre))
            keys.append(key)
    if not cmds:
        return []
    if split:
        groups: dict[bytes, list[int]] = {}
        for i, (bucket, _) in enumerate(cmds):
            groups.setdefault(bucket, []).append(i)
        plans: list[Plan[Any]] = [Plan(tuple(Command(tuple(cmds[i][1]), (b,)) for i in idx))
                                  for b, idx in groups.items()]
        replies: list[Any] = [None] * len(cmds)
        for idx, got_replies in zip(groups.values(), (yield plans)):
            for i, r in zip(idx, got_replies):
                replies[i] = r
    else:
        replies = (yield [Plan(tuple([Command(tuple(a), (b,)) for b, a in cmds]))])[0]
    return (yield from _settle_gets(core, keys, where, replies, split))


def _settle_gets(core: MapCore, keys: list[str], where: list[tuple[int, int, int] | None],
                 replies: list[Any], split: bool) -> Flow[list[Any]]:
    out: list[Any] = [True] * len(keys)
    inner: list[tuple[int, bytes]] = []
    deferred: list[tuple[int, bytes]] = []
    now = core.now()
    for i, w in enumerate(where):
        if w is None:
            continue
        raw = replies[w[0]][w[1]]
        if raw is None:
            out[i] = MISSING
            continue
        head = raw[0] if raw else 0
        if head in _INT_HEADS:  # the common case, decoded here: canonical int64 text
            if len(raw) <= 20 and (raw.isdigit() or raw[1:].isdigit()):
                v = int(raw)
                if INT64_MIN <= v <= INT64_MAX and str(v).encode() == raw:
                    out[i] = v
                    continue
            inner.append((i, raw))  # not canonical: cd.decode raises DecodeError
            continue
        if head == cd.EXPIRES:
            try:
                exp, raw = cd.split_expiry(raw)
            except ValueError as exc:
                raise DecodeError(f"the value of key {keys[i]!r} does not decode: {exc}", key=keys[i]) from exc
            if exp is not None and exp <= now:
                out[i] = MISSING
                continue
        if raw == OOL:
            if w[2] < 0:
                deferred.append((i, Location(*core.place(keys[i])).ool))
                continue
            raw = replies[w[2]]
            if raw is None:
                out[i] = MISSING
                continue
        inner.append((i, raw))
    if deferred:
        if split:
            got = yield [command("GET", k, keys=(k,)) for _, k in deferred]
        else:
            got = (yield [Plan(tuple(Command((b"GET", k), (k,)) for _, k in deferred))])[0]
        again = []
        for (i, _), found in zip(deferred, got):
            if found is None:
                again.append(i)
            else:
                inner.append((i, found))
        if again:
            for i, value in zip(again, (yield from core.get_many([keys[i] for i in again]))):
                out[i] = value
    if inner:
        yield from core.need_dictionaries(v for _, v in inner if v[:1] in _ZSTD_HEADS)
        known = core.dicts.known
        for i, framed in inner:
            out[i] = cd.decode(framed, key=keys[i], dictionaries=known)
    return out
