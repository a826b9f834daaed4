"""A session's payload on its way in and out: encoding, out-of-line parts, dictionaries.

Flows of densekv/sessions/core.py's SessionCore (each takes the core it works for, typed as
meta.StoreCore: core.py imports this module, never the other way), kept
apart because they are one concern: data -> packed -> framed bytes (payload.py) with the
namespace's zstd dictionary; a read's record -> its whole payload (the continuation or
out-of-line part read as the record names it, densekv/sessions/layouts/partitioned.py) ->
data; and the dictionary's life: samples kept from writes, trained once (AUTO_TRAIN
payloads, or SAMPLE_SESSIONS read back), stored under an id in `{ns}:zd` and named in the
store's metadata so that every process adopts it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from densekv.codec import ZstdDictionary
from densekv.dictionaries import plan_load, plan_store
from densekv.dictionaries import train_dictionary as train_zstd
from densekv.errors import (
    CodecUnavailable,
    DecodeError,
    DensekvError,
    SessionDataInvalid,
    SessionDataTooLarge,
)
from densekv.flows import Flow
from densekv.keys import join_digest
from densekv.plan import Command, Plan
from densekv.sessions.meta import StoreCore, plan_meta
from densekv.sessions.model import Record
from densekv.sessions.payload import pack_data
from densekv.sessions.record import unpack_record, with_data

log = logging.getLogger("densekv.sessions")
AUTO_TRAIN = 2000  # payloads written before a store trains the namespace's dictionary
SAMPLE_SESSIONS = 2000  # sessions read to train a dictionary from the store itself


def use_dictionary(core: StoreCore) -> Flow[None]:
    """Write with the dictionary the metadata names (loaded once, cached by id). One the
    server no longer holds (lost by a flush while the metadata was not) is not used: the
    store writes without a dictionary, and trains another after AUTO_TRAIN payloads."""
    want = core.meta.dictionary if core.meta is not None else None
    current = core.codec.dictionary.id if core.codec.dictionary else None
    if want is None or want == current:
        return
    if want not in core.codec.known:
        found = (yield [plan_load(core.namespace, [want])])[0]
        if want not in found:
            log.warning("densekv: namespace %r names zstd dictionary %d, which the server does not "
                        "hold: writing without it", core.namespace, want)
            return
        core.codec.known.update(found)
    core.codec.use(ZstdDictionary(want, core.codec.known[want]))


def encode(core: StoreCore, data: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
    """(packed, framed) of session data, checked (typed errors, nothing written yet)."""
    if data is None:
        return None, None
    try:
        if not core.layout.holds_bytes:
            no_bytes(data)
        out = core.codec.encode(data) if core.layout.framed else (pack_data(data, core.codec.max_bytes), None)
    except SessionDataTooLarge:
        core.refused_too_large += 1
        raise
    if core.events is not None:  # observed: the bytes to be stored, for metrics (events.py)
        core.events.sized(len(out[1] if out[1] is not None else out[0]))
    return out


def complete(core: StoreCore, digest: bytes, rec: Record | None) -> Flow[Record | None]:
    """A record as read, with its payload decoded. A record that points out of line at
    a missing value (an update moved the payload between HGET and GET) is re-read."""
    for attempt in range(3):
        if rec is None or not rec.outside or rec.payload is not None or not rec.live(core.now()):
            break
        layout = core.layout
        if attempt == 0 and layout.outside:  # read what the record names
            (rec,) = yield from core.run_on([digest], [layout.plan_fetch_outside(rec)])
        else:  # it moved meanwhile: read everything again
            (rec,) = yield from core.run_on([digest], [core.layout.plan_get(digest)])
    else:
        if rec is not None and rec.outside and rec.payload is None:
            raise DecodeError(f"session {digest.hex()} points at an out-of-line payload that is not stored", key=digest)
    if rec is None or rec.payload is None:
        return rec
    if core.codec.missing(rec.payload) is None:  # the common case: decoded here, no round trip
        return decode_one(core, rec, rec.payload)
    return (yield from decode_payloads(core, [rec]))[0]


def decode_one(core: StoreCore, rec: Record, payload: bytes) -> Record:
    """decode_payloads of one record whose dictionary is loaded, without its generator (a
    get's common case: core.py calls it directly)."""
    try:
        return with_data(rec, core.codec.decode(payload, key=rec.digest))
    except DecodeError:
        raise
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise DecodeError(f"session {rec.digest.hex()} holds a payload that does not decode: {exc}",
                          key=rec.digest) from exc


def decode_payloads(core: StoreCore, records: list[Record], skip: bool = False) -> Flow[list[Record]]:
    """Decode framed payloads, loading any dictionary they name that is not cached. `skip`:
    a record that does not decode is left out (one warning each) instead of raising
    DecodeError: a listing (sessions_of, training samples) shows the sessions it can."""
    need = sorted({d for r in records if r.payload is not None and (d := core.codec.missing(r.payload))})
    if need:
        core.codec.known.update((yield [plan_load(core.namespace, need)])[0])
    out = []
    for r in records:
        if r.payload is None:
            out.append(r)
            continue
        try:
            data = core.codec.decode(r.payload, key=r.digest)
        except (DecodeError, ValueError, TypeError, UnicodeDecodeError) as exc:
            if not skip and isinstance(exc, DecodeError):
                raise
            if not skip:
                raise DecodeError(f"session {r.digest.hex()} holds a payload that does not decode: {exc}",
                                  key=r.digest) from exc
            log.warning("densekv: session %s of namespace %r does not decode, left out: %s",
                        r.digest.hex(), core.namespace, exc)
            continue
        out.append(with_data(r, data))
    return out


def fill_outside(core: StoreCore, records: list[Record]) -> Flow[list[Record]]:
    """Records found by a scan carry only their inline part: read the rest."""
    layout = core.layout
    missing = [i for i, r in enumerate(records) if r.outside and r.payload is None]
    if missing and layout.outside:
        filled = yield [layout.plan_fetch_outside(records[i]) for i in missing]
        fresh: list[Record | None] = list(records)
        for i, rec in zip(missing, filled):
            fresh[i] = rec
        records = [r for r in fresh if r is not None]
    now = core.now()  # gone or expired meanwhile: dropped
    records = [r for r in records if not (r.outside and r.payload is None) and r.live(now)]
    return (yield from decode_payloads(core, records, skip=True))


def sample(core: StoreCore, packed: list[bytes]) -> Flow[None]:
    """Keep payloads until the namespace has a dictionary; then train it (once), within
    the write that brought the AUTO_TRAIN-th payload (that one request pays the training:
    benchmarks/train_cost.py). Training never fails that write: without zstandard the
    store keeps writing without a dictionary (one warning), and any other failure is
    logged and tried again after AUTO_TRAIN more payloads."""
    if (core.auto_train is None or core.codec.dictionary is not None
            or not core.layout.framed):
        return
    core.samples.extend(packed[: core.auto_train - len(core.samples)])
    if len(core.samples) >= core.auto_train:
        samples, core.samples = core.samples, []
        try:  # the write that got here is done: training must not turn it into an error
            yield from core.refresh()  # another process may have trained one meanwhile
            if core.codec.dictionary is None:
                yield from store_dictionary(core, samples)
        except CodecUnavailable as exc:
            core.auto_train = None
            log.warning("densekv: namespace %r keeps writing without a zstd dictionary: %s",
                        core.namespace, exc)
        except Exception as exc:  # noqa: BLE001  # a server error, a sample zstd cannot train on
            log.warning("densekv: namespace %r could not train its zstd dictionary (tried again "
                        "after %d more sessions): %s", core.namespace, core.auto_train, exc)


def train_dictionary(core: StoreCore, samples: Iterable[dict[str, Any]] | None = None) -> Flow[int]:
    """Train the namespace's zstd dictionary on `samples` (session data dicts), or on
    up to SAMPLE_SESSIONS sessions read from the store; store it, and make it the one
    new payloads are written with (every process adopts it within a minute)."""
    if not core.layout.framed:
        raise DensekvError(f"layout {core.layout.name} keeps payloads as they are: no dictionary")
    if samples is not None:
        packed = [pack_data(d, core.codec.max_bytes) for d in samples]
    else:
        packed = []
        layout = core.layout.partitioning()
        if layout is None:
            raise DensekvError(f"layout {core.layout.name} has no partitions to read samples from: "
                               "pass the samples")
        for p in range(layout.partitions):
            if len(packed) >= SAMPLE_SESSIONS:
                break
            key = layout.hash_key(p)
            _, flat = (yield [Plan((Command(("HSCAN", key, 0, "COUNT", 1000), (key,)),), lambda r: r[0])])[0]
            recs = [unpack_record(join_digest(p, flat[i], layout.bits), flat[i + 1]) for i in range(0, len(flat), 2)]
            recs = yield from fill_outside(core, [r for r in recs if r.payload is not None or r.outside])
            packed += [pack_data(r.data, core.codec.max_bytes) for r in recs if r.data is not None]
    return (yield from store_dictionary(core, packed))


def store_dictionary(core: StoreCore, packed: list[bytes]) -> Flow[int]:
    """Train a dictionary on packed payloads, store it and name it in the metadata."""
    data = train_zstd(packed, size=4096)
    stored = (yield [plan_store(core.namespace, data)])[0]
    meta = (yield [plan_meta(core.namespace, "dict", stored.id)])[0]
    core.codec.known[stored.id] = stored.data
    core.adopt(meta)
    yield from use_dictionary(core)
    return int(stored.id)


def no_bytes(value: Any) -> None:
    """The JSON layout's extra rule: no bytes anywhere in the data."""
    if isinstance(value, (bytes, bytearray)):
        raise SessionDataInvalid("layout json cannot hold bytes in session data (JSON has no bytes)")
    if isinstance(value, dict):
        for v in value.values():
            no_bytes(v)
    elif isinstance(value, list):
        for v in value:
            no_bytes(v)
