"""A session's payload on its way in and out: encoding, out-of-line parts, dictionaries.

Payloads is the one owner of a store's payload state (SessionCore holds it as
`core.payloads`; only this class changes its fields): the PayloadCodec (data -> packed ->
framed bytes, payload.py, with the namespace's zstd dictionary), the samples kept from
writes until a dictionary is trained (AUTO_TRAIN payloads, or SAMPLE_SESSIONS read back),
stored under an id in `{ns}:zd` and named in the store's metadata so that every process
adopts it (meta.Metadata.name_dictionary), the recent writes that tell whether the
dictionary still fits the sessions' shape (refit, below), the count of data refused as too large,
and the moving averages of reads that found their payload split or out of line (which
decide what a get reads in its first round trip). Its flows turn a read's record into its
whole payload (the continuation or out-of-line part read as the record names it,
densekv/sessions/layouts/partitioned.py) and then into data. No I/O: flows, as in core.py.

Refit: a dictionary trained on the first sessions stops fitting when the app changes what it
keeps in them (a new key, a longer token). The payloads grow, and ones that were inline (one
HGET a read) split over two values (HMGET, the split write script, ~21 bytes more:
docs/sessions.md "Where a session's bytes go"). So each process looks at the fit REFIT_FIRST
writes after its dictionary was adopted and then at doubling gaps (or REFIT_SAMPLES writes
after its payloads grew, if sooner): it keeps the REFIT_SAMPLES payloads written just before
a look (the writes between cost a moving average), trains a candidate on half of them and
frames the other half with both.
The candidate is stored and named (every process adopts it) only if it puts REFIT_INLINE_GAIN
more of them inline or frames them in REFIT_BYTES_GAIN fewer bytes, and splits none more:
a namespace whose sessions keep their shape never gets a second dictionary. Sessions already
written keep decoding with the dictionary they name (content ids, codec.py) and take the
new one at their next write. The look costs the write that makes it ~20 ms of training and
~30 ms of framing (P1, 2-core machine), log2(writes / REFIT_FIRST) times in a process's life.

The training and the look are CPU work asked of the driver as a flows.Compute: the sync
store runs them in its caller's thread, the asyncio store in a worker thread, so a web
worker's event loop serves other requests meanwhile. The write that made either due waits
for it. zstd's trainer and compressors let go of the GIL; the key table's Python work does
not, and while it runs each socket call of the loop waits up to the interpreter's switch
interval (5 ms) for the GIL back. Measured (benchmarks/loop_lag.py, 16 writer tasks, the
largest stall of the loop past the training and the first look, four runs): Django logins
55-57 -> 23-30 ms, Flask-Login 41-43 -> 11-14, shop-like sessions (a look that trains zstd
too, ~100 ms) 106-110 -> 17. Keeping the table's part on the loop was worse for Django
logins (31-36 ms).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from densekv.codec import ZstdDictionary
from densekv.dictionaries import plan_load, plan_store
from densekv.errors import (
    CodecUnavailable,
    DecodeError,
    DensekvError,
    SessionDataInvalid,
    SessionDataTooLarge,
)
from densekv.flows import Flow, computed
from densekv.keys import join_digest
from densekv.plan import Command, Plan
from densekv.sessions.layouts.base import Layout
from densekv.sessions.model import Record
from densekv.sessions.payload import (
    PayloadCodec,
    pack_data,
    retrain_table,
    train_payloads,
    unpack_data,
)
from densekv.sessions.record import pack_record, unpack_record, with_data

log = logging.getLogger("densekv.sessions")
AUTO_TRAIN = 2000  # payloads written before a store trains the namespace's dictionary
SAMPLE_SESSIONS = 2000  # sessions read to train a dictionary from the store itself
OUTSIDE_WEIGHT = 0.05  # moving averages of reads that found a split / out-of-line payload ...
OUTSIDE_SPECULATE = 0.1  # ... above which a get reads that part in the same round trip (only that one)
REFIT_SAMPLES = 2000  # payloads written before a look that it reads to see whether the dictionary still fits ...
REFIT_BYTES = 1 << 20  # ... and at most this many bytes of them
REFIT_FIRST = 2000  # writes after a dictionary's adoption before the first look; the gap doubles ...
REFIT_MAX_GAP = 256_000  # ... up to this many writes
REFIT_INLINE_GAIN = 0.1  # a dictionary trained again is adopted if it puts this share more payloads inline ...
REFIT_BYTES_GAIN = 0.03  # ... or frames them in this share fewer bytes (and never splits more of them)
REFIT_GROWTH = 0.05  # payloads framed this share larger on average than at the last look bring the next one sooner
REFIT_EMA = 1 / 256  # weight of a write in the moving average of framed bytes that can bring a look sooner
REFIT_MIN = 200  # payloads needed for a look (a store whose payloads are mostly over REFIT_BYTES / REFIT_SAMPLES)

#: what a flow over a record runs its plans with: SessionCore.run_on (the repartition splits first)
RunOn = Callable[[Iterable[bytes], list[Plan[Any]]], Flow[list[Any]]]


class DictionaryHome(Protocol):
    """What training a dictionary needs of the store (SessionCore): its metadata re-read
    (another process may have trained one meanwhile), and a stored dictionary named in it."""

    def refresh(self) -> Flow[bool]: ...

    def name_dictionary(self, dictionary_id: int) -> Flow[None]: ...


@dataclass(frozen=True)
class Fit:
    """What Payloads.fit found: a dictionary trained on half the recent payloads (`data`),
    and the `held` others' framed bytes and splits with the one in use (now) and it (then)."""

    data: bytes
    held: int
    bytes_now: int
    bytes_then: int
    split_now: int
    split_then: int

    def adopt(self) -> bool:
        """Whether `data` fits the held payloads better by the REFIT_* gains (module docstring)."""
        if self.split_then > self.split_now:
            return False
        return (self.split_now - self.split_then >= REFIT_INLINE_GAIN * self.held
                or self.bytes_then <= (1 - REFIT_BYTES_GAIN) * self.bytes_now)


class Payloads:
    """A store's payload codec and what it learns from writes and reads (module docstring)."""

    def __init__(self, namespace: str, max_data_bytes: int, auto_train: int | None,
                 now: Callable[[], int]) -> None:
        """`now`: the store's clock in unix seconds (SessionCore.now)."""
        self.namespace = namespace
        self.codec = PayloadCodec(max_data_bytes)
        self.auto_train = auto_train
        self.samples: list[bytes] = []  # packed payloads written, until a dictionary exists
        self.refused_too_large = 0  # data refused as over max_data_bytes (store.stats())
        # (packed or None, framed, its record's bytes without it) of recent writes (packed is
        # None when the key table framed it: fit() packs those, at the look)
        self.recent: deque[tuple[bytes | None, bytes, int | None]] = deque()
        self.recent_bytes = 0
        self.refit_gap = self.refit_in = REFIT_FIRST  # writes between looks at the fit; until the next
        self.framed_mean = 0.0  # framed bytes of recent writes (moving average, REFIT_EMA) ...
        self.looked_mean = 0.0  # ... and as the last look found it (0: no look since the dictionary's adoption)
        self.refits = 0  # dictionaries this process trained again and adopted (explain())
        self.split_rate = 0.0  # recent reads that found their payload split (a continuation entry)
        self.ool_rate = 0.0  # ... or out of line (a key of its own)
        self.now = now

    # -- writes -------------------------------------------------------------------------
    def encode(self, layout: Layout, data: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
        """(packed, framed) of session data, checked (typed errors, nothing written yet)."""
        if data is None:
            return None, None
        try:
            if not layout.holds_bytes:
                no_bytes(data)
            return self.codec.encode(data) if layout.framed else (pack_data(data, self.codec.max_bytes), None)
        except SessionDataTooLarge:
            self.refused_too_large += 1
            raise

    def describe(self) -> dict[str, Any]:
        """What explain() says of the payloads: their limit, the dictionary in use and the
        entries of its key table (payload_table.py; None: a dictionary from before tables)."""
        dictionary = self.codec.dictionary
        table = self.codec.table
        return {"max_data_bytes": self.codec.max_bytes, "dictionary": dictionary.id if dictionary else None,
                "dictionary_refits": self.refits, "key_table_entries": len(table.entries) if table is not None else None}

    def refused(self) -> None:
        """Count data a layout refused as too large (a record it cannot hold: put_records)."""
        self.refused_too_large += 1

    def keep(self, layout: Layout, written: Iterable[tuple[bytes | None, bytes, Record | None]]) -> bool:
        """Note payloads just written (packed or None, framed, and their records where known); True
        when sample() is due: the first dictionary's training, or a look at its fit (refit):
        at the gap, or REFIT_SAMPLES writes after the payloads framed REFIT_GROWTH more bytes
        on average (REFIT_EMA) than at the last look, if that is sooner."""
        if self.auto_train is None or not layout.framed:
            return False
        if self.codec.dictionary is None:
            self.samples.extend([p for p, _, _ in written if p is not None][: self.auto_train - len(self.samples)])
            return len(self.samples) >= self.auto_train
        recent = self.recent
        for packed, framed, rec in written:
            self.framed_mean += REFIT_EMA * (len(framed) - self.framed_mean)
            self.refit_in -= 1
            if self.refit_in < REFIT_SAMPLES:  # among the writes the next look reads (the others cost nothing more)
                recent.append((packed, framed, None if rec is None else len(pack_record(rec))))
                self.recent_bytes += len(framed if packed is None else packed)
                while len(recent) > REFIT_SAMPLES or self.recent_bytes > REFIT_BYTES:
                    old, old_framed, _ = recent.popleft()
                    self.recent_bytes -= len(old_framed if old is None else old)
        if self.refit_in > REFIT_SAMPLES and 0 < (1 + REFIT_GROWTH) * self.looked_mean < self.framed_mean:
            self.refit_in = REFIT_SAMPLES  # grown: look once the recent payloads are all of the new kind
        return self.refit_in <= 0

    def sample(self, layout: Layout, home: DictionaryHome) -> Flow[None]:
        """What keep() found due. Without a dictionary: train one (once), within the write
        that brought the AUTO_TRAIN-th payload (that one request pays the training:
        benchmarks/train_cost.py). With one: refit. Neither ever fails that write: without
        zstandard the store keeps writing without a dictionary (one warning), and any other
        failure is logged and tried again after AUTO_TRAIN more payloads (or at the next look)."""
        if self.codec.dictionary is not None:
            yield from self.refit(layout, home)
            return
        samples, self.samples = self.samples, []
        try:  # the write that got here is done: training must not turn it into an error
            yield from home.refresh()  # another process may have trained one meanwhile
            if self.codec.dictionary is None:
                yield from self.store_dictionary(samples, home)
        except CodecUnavailable as exc:
            self.auto_train = None
            log.warning("densekv: namespace %r keeps writing without a zstd dictionary: %s",
                        self.namespace, exc)
        except Exception as exc:  # noqa: BLE001  # a server error, a sample zstd cannot train on
            log.warning("densekv: namespace %r could not train its zstd dictionary (tried again "
                        "after %d more sessions): %s", self.namespace, self.auto_train, exc)

    def refit(self, layout: Layout, home: DictionaryHome) -> Flow[None]:
        """The look at the dictionary's fit (module docstring): store and name a dictionary
        trained on the recent writes if it fits them better by the REFIT_* gains."""
        self.refit_gap = min(2 * self.refit_gap, REFIT_MAX_GAP)
        self.refit_in = self.refit_gap
        self.looked_mean = self.framed_mean
        current = self.codec.dictionary
        try:  # as sample(): the write that got here is done
            yield from home.refresh()  # another process may have adopted one meanwhile
            if self.codec.dictionary is not current:
                return
            recent = list(self.recent)
            self.recent.clear()  # the next look reads the writes just before it
            self.recent_bytes = 0
            fit = yield from computed(lambda: self.fit(layout, recent))  # off an asyncio store's loop
            if fit is None or not fit.adopt() or self.codec.dictionary is not current:
                return  # (or another dictionary was adopted while it trained)
            stored = (yield [plan_store(self.namespace, fit.data)])[0]
            self.codec.known[stored.id] = stored.data
            yield from home.name_dictionary(stored.id)
            self.refits += 1
            log.info("densekv: namespace %r writes with zstd dictionary %d, trained again on its recent "
                     "sessions (they no longer fit dictionary %s)", self.namespace, stored.id,
                     current.id if current else None)
        except Exception as exc:  # noqa: BLE001  # a server error, a sample zstd cannot train on
            log.warning("densekv: namespace %r could not train its zstd dictionary again (tried again "
                        "after %d more writes): %s", self.namespace, self.refit_in, exc)

    def fit(self, layout: Layout, recent: list[tuple[bytes | None, bytes, int | None]]) -> Fit | None:
        """A dictionary trained on every other recent payload, and how it and the one in use
        frame the others (None: too few payloads, or no dictionary in use). CPU only, no I/O.
        While the key table leads the writes, only the table is trained again (the zstd
        dictionary in use is kept in the candidate): the look is then ~25 ms instead of ~60
        (P1, benchmarks/train_cost.py), and on an asyncio worker it holds the event loop
        that long."""
        codec, dictionary = self.codec, self.codec.dictionary
        if len(recent) < REFIT_MIN or dictionary is None:
            return None
        datas = [unpack_data(p) if p is not None else codec.decode(f, key=b"recent write") for p, f, _ in recent]
        train, held = datas[0::2], datas[1::2]
        held_packed, held_bare = [p for p, _, _ in recent[1::2]], [bare for _, _, bare in recent[1::2]]
        if codec.leads_with_table():
            data = retrain_table(dictionary.data, train)
        else:
            data = train_payloads([p if p is not None else pack_data(d, codec.max_bytes)
                                   for (p, _, _), d in zip(recent[0::2], train)], train)
        candidate = PayloadCodec(self.codec.max_bytes)
        candidate.use(ZstdDictionary.of(data))
        now, then = codec.sizes(held, held_packed), candidate.sizes(held, held_packed)
        known = [bare for bare in held_bare if bare is not None]
        typical = sorted(known)[len(known) // 2] if known else 9  # a record with an int identity
        rooms = [layout.payload_room(typical if bare is None else bare) for bare in held_bare]
        return Fit(data, len(held), sum(now), sum(then),
                   sum(1 for size, room in zip(now, rooms) if room is not None and size > room),
                   sum(1 for size, room in zip(then, rooms) if room is not None and size > room))

    def train_dictionary(self, layout: Layout, samples: Iterable[dict[str, Any]] | None,
                         home: DictionaryHome) -> Flow[int]:
        """Train the namespace's zstd dictionary on `samples` (session data dicts), or on
        up to SAMPLE_SESSIONS sessions read from the store; store it, and make it the one
        new payloads are written with (every process adopts it within a minute)."""
        if not layout.framed:
            raise DensekvError(f"layout {layout.name} keeps payloads as they are: no dictionary")
        if samples is not None:
            packed = [pack_data(d, self.codec.max_bytes) for d in samples]
        else:
            packed = []
            parts = layout.partitioning()
            if parts is None:
                raise DensekvError(f"layout {layout.name} has no partitions to read samples from: "
                                   "pass the samples")
            for p in range(parts.partitions):
                if len(packed) >= SAMPLE_SESSIONS:
                    break
                key = parts.hash_key(p)
                _, flat = (yield [Plan((Command(("HSCAN", key, 0, "COUNT", 1000), (key,)),), lambda r: r[0])])[0]
                recs = [unpack_record(join_digest(p, flat[i], parts.bits), flat[i + 1]) for i in range(0, len(flat), 2)
                        if not parts.is_cont(flat[i])]  # a split session's rest: read with its record
                recs = yield from self.fill_outside(layout, [r for r in recs if r.payload is not None or r.outside])
                packed += [pack_data(r.data, self.codec.max_bytes) for r in recs if r.data is not None]
        return (yield from self.store_dictionary(packed, home))

    def store_dictionary(self, packed: list[bytes], home: DictionaryHome) -> Flow[int]:
        """Train a dictionary on packed payloads, store it and name it in the metadata."""
        data = yield from computed(lambda: train_payloads(packed))  # off an asyncio store's loop
        stored = (yield [plan_store(self.namespace, data)])[0]
        self.codec.known[stored.id] = stored.data
        yield from home.name_dictionary(stored.id)
        return int(stored.id)

    def use_dictionary(self, want: int | None) -> Flow[None]:
        """Write with dictionary `want`, the one the metadata names (loaded once, cached by
        id). One the server no longer holds (lost by a flush while the metadata was not) is
        not used: the store writes without a dictionary, and trains another after
        AUTO_TRAIN payloads."""
        current = self.codec.dictionary.id if self.codec.dictionary else None
        if want is None or want == current:
            return
        if want not in self.codec.known:
            found = (yield [plan_load(self.namespace, [want])])[0]
            if want not in found:
                log.warning("densekv: namespace %r names zstd dictionary %d, which the server does not "
                            "hold: writing without it", self.namespace, want)
                return
            self.codec.known.update(found)
        self.codec.use(ZstdDictionary(want, self.codec.known[want]))
        self.refit_gap = self.refit_in = REFIT_FIRST  # a fresh look at this one's fit, after as many writes
        self.looked_mean = 0.0

    # -- reads --------------------------------------------------------------------------
    def speculation(self) -> bool | str:
        """What a get reads beside the record in its first round trip (Layout.plan_get's
        `outside`): the part recent reads needed (OUTSIDE_SPECULATE), and only that kind."""
        split, ool = self.split_rate > OUTSIDE_SPECULATE, self.ool_rate > OUTSIDE_SPECULATE
        return True if split and ool else "split" if split else "ool" if ool else False

    def note_read(self, rec: Record) -> None:
        """A live record read by a get: the moving averages of split / out-of-line reads."""
        split_now = rec.outside and rec.part is not None
        self.split_rate += OUTSIDE_WEIGHT * ((1.0 if split_now else 0.0) - self.split_rate)
        self.ool_rate += OUTSIDE_WEIGHT * ((1.0 if rec.outside and not split_now else 0.0) - self.ool_rate)

    def complete(self, layout: Layout, run_on: RunOn, digest: bytes, rec: Record | None) -> Flow[Record | None]:
        """A record as read, with its payload decoded. A record that points out of line at
        a missing value (an update moved the payload between HGET and GET) is re-read."""
        for attempt in range(3):
            if rec is None or not rec.outside or rec.payload is not None or not rec.live(self.now()):
                break
            if attempt == 0 and layout.outside:  # read what the record names
                (rec,) = yield from run_on([digest], [layout.plan_fetch_outside(rec)])
            else:  # it moved meanwhile: read everything again
                (rec,) = yield from run_on([digest], [layout.plan_get(digest)])
        else:
            if rec is not None and rec.outside and rec.payload is None:
                raise DecodeError(f"session {digest.hex()} points at an out-of-line payload that is not stored",
                                  key=digest)
        if rec is None or rec.payload is None:
            return rec
        if self.codec.missing(rec.payload) is None:  # the common case: decoded here, no round trip
            return self.decode_one(rec, rec.payload)
        return (yield from self.decode_payloads([rec]))[0]

    def decode_one(self, rec: Record, payload: bytes) -> Record:
        """decode_payloads of one record whose dictionary is loaded, without its generator (a
        get's common case: core.py calls it directly)."""
        try:
            return with_data(rec, self.codec.decode(payload, key=rec.digest))
        except DecodeError:
            raise
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise DecodeError(f"session {rec.digest.hex()} holds a payload that does not decode: {exc}",
                              key=rec.digest) from exc

    def decode_payloads(self, records: list[Record], skip: bool = False) -> Flow[list[Record]]:
        """Decode framed payloads, loading any dictionary they name that is not cached. `skip`:
        a record that does not decode is left out (one warning each) instead of raising
        DecodeError: a listing (sessions_of, training samples) shows the sessions it can."""
        codec = self.codec
        need = sorted({d for r in records if r.payload is not None and (d := codec.missing(r.payload))})
        if need:
            codec.known.update((yield [plan_load(self.namespace, need)])[0])
        out = []
        for r in records:
            if r.payload is None:
                out.append(r)
                continue
            try:
                data = codec.decode(r.payload, key=r.digest)
            except (DecodeError, ValueError, TypeError, UnicodeDecodeError) as exc:
                if not skip and isinstance(exc, DecodeError):
                    raise
                if not skip:
                    raise DecodeError(f"session {r.digest.hex()} holds a payload that does not decode: {exc}",
                                      key=r.digest) from exc
                log.warning("densekv: session %s of namespace %r does not decode, left out: %s",
                            r.digest.hex(), self.namespace, exc)
                continue
            out.append(with_data(r, data))
        return out

    def fill_outside(self, layout: Layout, records: list[Record]) -> Flow[list[Record]]:
        """Records found by a scan carry only their inline part: read the rest."""
        missing = [i for i, r in enumerate(records) if r.outside and r.payload is None]
        if missing and layout.outside:
            filled = yield [layout.plan_fetch_outside(records[i]) for i in missing]
            fresh: list[Record | None] = list(records)
            for i, rec in zip(missing, filled):
                fresh[i] = rec
            records = [r for r in fresh if r is not None]
        now = self.now()  # gone or expired meanwhile: dropped
        records = [r for r in records if not (r.outside and r.payload is None) and r.live(now)]
        return (yield from self.decode_payloads(records, skip=True))


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


__all__ = ["AUTO_TRAIN", "OUTSIDE_SPECULATE", "OUTSIDE_WEIGHT", "REFIT_FIRST", "SAMPLE_SESSIONS", "DictionaryHome", "Fit", "Payloads",
           "no_bytes"]
