"""The session payloads a plan prices, and the bytes the store writes for them.

A session's listpack entry is its record (densekv/sessions/record.py) with the *framed*
payload at its end, and whether that record stays inline, is split over a continuation
field or goes out of line (LayoutSpec.placement) depends on the framed length. So the
planner frames payloads as a store does (densekv/sessions/payload_flows.py):
  * a new store writes its first AUTO_TRAIN payloads (2000) framed plain: 0x01 + the
    packed msgpack (PayloadCodec without a dictionary);
  * it then trains a dictionary on those packed payloads (train_payloads: a 4 KiB zstd
    dictionary and the key table, densekv/sessions/payload_table.py) and frames every
    later payload with it: the key table, or deflate or zstd with the dictionary,
    whichever is smallest, or plain where none shrinks it (PayloadCodec.encode).
Session i of a load (in write order) is therefore plain for i < min(N, AUTO_TRAIN) and
framed with the dictionary after; `era_of` spreads the same share of plain sessions
evenly over a calibration sample, so a sample of any size holds the workload's mix.
(A store fed in batches frames a whole batch before it trains: the planner's own loads
use batches of 1000, which divide AUTO_TRAIN, so exactly AUTO_TRAIN go plain, as with
sessions created one at a time.)

Two sources:
  Incompressible(n)   `--payload N`: session data {"d": N - 5 random bytes} (msgpack of
                      exactly N bytes), a fresh draw per session. No codec shrinks random
                      bytes, so every session frames to 1 + N bytes, with or without a
                      dictionary: the price of N bytes that do not compress. Real
                      session data compresses (hex tokens pack to half, key names and
                      constant values go into the dictionary): price it with a sample.
  Sampled(sessions)   `--sample FILE`: JSON lines of session data dicts, or
                      {"identity": ..., "data": {...}} (read_sample). The dictionary is
                      trained on the first min(AUTO_TRAIN, S // 2) sessions (repeated
                      to AUTO_TRAIN payloads, as a store would see them) and the
                      dictionary-framed sessions are the *others*, cycled: a dictionary
                      prices the sessions it was trained on too well (their values are
                      in it), and a store meets new sessions after it trains. A plain
                      data dict gets a 4-byte integer identity (the --payload workload's);
                      {"identity": null, ...} is an anonymous session.
Pure: no I/O but reading the sample file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections.abc import Iterable, Sequence
from typing import Any

from densekv.errors import DensekvError, PlannerError
from densekv.sessions.core import AUTO_TRAIN

Session = tuple[Any, dict[str, Any] | None]  # (identity or None, session data or None)
MAX_SAMPLE = 100_000  # sessions read from a sample file (the rest are left out, with a note)
MIN_HELD_OUT = 16  # fewer sessions than twice this: the dictionary is trained on all of them
DICTIONARY_BYTES = 4096  # what payload_flows.store_dictionary trains
IDENTITY_LOW, IDENTITY_HIGH = 1 << 24, 1 << 31  # the default identity: 4 bytes as an integer
RAW, DICT = "plain", "dictionary"


def raw_count(items: int) -> int:
    """Sessions of a load of `items` framed without a dictionary (the store trains after these)."""
    return min(items, AUTO_TRAIN)


def era_of(j: int, n: int, items: int) -> tuple[str, int]:
    """(era, index within its era) of item j of a calibration sample of n items standing
    for a load of `items`: a raw_count(items)/items share of the n items, spread evenly,
    are plain; for n == items the multiset of sessions is the load's own."""
    share = raw_count(items) / items
    before = math.floor(j * share + 1e-9)
    if math.floor((j + 1) * share + 1e-9) > before:
        return RAW, before
    return DICT, j - before


def store_era(i: int, items: int) -> tuple[str, int]:
    """(era, index within its era) of the i-th session a store writes in a load of `items`."""
    r = raw_count(items)
    return (RAW, i) if i < r else (DICT, i - r)


def _codec(dictionary: bytes | None) -> Any:
    from densekv.codec import ZstdDictionary
    from densekv.sessions.payload import PayloadCodec

    codec = PayloadCodec(1 << 16)
    if dictionary is not None:
        codec.use(ZstdDictionary.of(dictionary))
    return codec


def random_data(size: int, rng: random.Random) -> dict[str, Any] | None:
    """Session data whose msgpack is exactly `size` bytes of which all but a few header
    bytes are random (None for 0; {} for sizes under 5, which no dict with a value reaches
    exactly: {} is 1 byte)."""
    if size <= 0:
        return None
    for key_len in (1, 2, 3):
        # fixmap (1) + fixstr key (1 + key_len) + bin header (2 below 256 bytes, 3 below 65536, 5)
        for header in (2, 3, 5):
            n = size - 2 - key_len - header
            if n >= 0 and header == (2 if n < 256 else 3 if n < 65536 else 5):
                return {"d" * key_len: rng.randbytes(n)}
    return {}


class Incompressible:
    """`--payload N`: N bytes of random msgpack data a session (see the module doc)."""

    dictionary_trained = False

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.seed = seed
        self._framed_len = len(self.framed(RAW, 0)[1] or b"") if size else 0

    def session(self, era: str, k: int) -> Session:
        """The k-th session of an era (a fresh random draw for each)."""
        rng = random.Random(self.seed * 1_000_003 + (k if era == RAW else AUTO_TRAIN + k))
        return rng.randrange(IDENTITY_LOW, IDENTITY_HIGH), random_data(self.size, rng)

    def framed(self, era: str, k: int) -> tuple[Any, bytes | None]:
        """(identity, framed payload) of the k-th session of an era: 1 + N bytes in both,
        as no codec shrinks random bytes (PayloadCodec keeps the plain framing then)."""
        identity, data = self.session(era, k)
        return identity, None if data is None else _codec(None).encode(data)[1]

    def typical(self, items: int) -> list[tuple[Any, bytes | None]]:
        """A few sessions as most of the load is written (all alike: 1 + N bytes framed)."""
        return [self.framed(DICT, k) for k in range(4)]

    def shape(self, items: int) -> dict[str, Any]:
        return {"incompressible": self.size}

    def describe(self, items: int) -> str:
        if not self.size:
            return "none: sessions without data (--payload 0)"
        return (f"{self.size} bytes of incompressible data a session (--payload: random bytes, {self._framed_len} "
                "framed; real session data compresses - price yours with --sample FILE)")

    def to_dict(self, items: int) -> dict[str, Any]:
        return {"source": "payload", "bytes": self.size, "incompressible": True,
                "framed_bytes": self._framed_len, "description": self.describe(items)}


class Sampled:
    """`--sample FILE`: the user's own sessions, framed with a dictionary trained on some of
    them and priced on the others (see the module doc)."""

    def __init__(self, sessions: Sequence[Session], name: str, left_out: int = 0) -> None:
        if not sessions:
            raise PlannerError(f"{name} holds no sessions: one JSON object a line")
        self.name = name
        self.left_out = left_out
        s = len(sessions)
        held = min(AUTO_TRAIN, s // 2) if s >= 2 * MIN_HELD_OUT else 0
        self.train = list(sessions[:held] if held else sessions)
        self.priced = list(sessions[held:])
        self.held_out = bool(held)
        self.count = s
        digest = hashlib.sha256()
        for identity, data in sessions:
            digest.update(json.dumps([identity, data], sort_keys=True, default=repr).encode())
        self.fingerprint = digest.hexdigest()[:16]
        self._raw: list[bytes | None] | None = None
        self._dict: list[bytes | None] | None = None
        self._dictionary: bytes | None = None
        self.dictionary_note = ""

    def session(self, era: str, k: int) -> Session:
        """The k-th session of an era: the training part cycled while the store writes
        plain, the held-out part cycled after."""
        pool = self.train if era == RAW else self.priced
        return pool[k % len(pool)]

    def _packed(self, data: dict[str, Any] | None) -> bytes | None:
        from densekv.sessions.payload import pack_data

        return None if data is None else pack_data(data, 1 << 16)

    def _train(self) -> None:
        """Frame the training part plain and train the dictionary on AUTO_TRAIN of its
        payloads, as the store does; then frame the priced part with it, in order."""
        if self._raw is not None:
            return
        from densekv.errors import CodecUnavailable
        from densekv.sessions.payload import train_payloads

        plain = _codec(None)
        self._raw = [None if d is None else plain.encode(d)[1] for _, d in self.train]
        packed = [p for p in (self._packed(self.session(RAW, k)[1]) for k in range(AUTO_TRAIN)) if p is not None]
        try:
            self._dictionary = train_payloads(packed) if packed else None
        except CodecUnavailable as exc:
            self.dictionary_note = f"no zstd here ({exc}): priced without a dictionary, as a store without it writes"
        except DensekvError as exc:  # zstd could not train on these payloads: the store retries, writing plain
            self.dictionary_note = f"zstd could not train a dictionary on this sample ({exc}): priced without one"
        codec = _codec(self._dictionary)
        self._dict = [None if d is None else codec.encode(d)[1] for _, d in self.priced]

    @property
    def dictionary_trained(self) -> bool:
        self._train()
        return self._dictionary is not None

    def framed(self, era: str, k: int) -> tuple[Any, bytes | None]:
        """(identity, framed payload) of the k-th session of an era."""
        self._train()
        assert self._raw is not None and self._dict is not None
        pool, framed = (self.train, self._raw) if era == RAW else (self.priced, self._dict)
        i = k % len(pool)
        return pool[i][0], framed[i]

    def typical(self, items: int) -> list[tuple[Any, bytes | None]]:
        """The sessions of the era most of a load of `items` is written in, as written:
        the held-out part with the dictionary, or (a load of at most 2 x AUTO_TRAIN) the
        training part framed plain."""
        era, pool = (DICT, self.priced) if raw_count(items) < items / 2 else (RAW, self.train)
        return [self.framed(era, k) for k in range(len(pool))]

    def shape(self, items: int) -> dict[str, Any]:
        return {"sample": self.fingerprint, "plain_share": round(raw_count(items) / items, 4)}

    def _means(self) -> tuple[float, float, float]:
        """Mean bytes of the priced sessions packed and framed, and of the plain-framed ones."""
        self._train()
        assert self._raw is not None and self._dict is not None

        def mean(values: Iterable[bytes | None]) -> float:
            sizes = [len(v) for v in values if v is not None]
            return sum(sizes) / len(sizes) if sizes else 0.0

        return mean(self._packed(d) for _, d in self.priced), mean(self._dict), mean(self._raw)

    def to_dict(self, items: int) -> dict[str, Any]:
        packed, framed, plain = self._means()
        return {"source": "sample", "file": self.name, "sessions": self.count, "left_out": self.left_out,
                "train_sessions": len(self.train), "priced_sessions": len(self.priced), "held_out": self.held_out,
                "dictionary": self._dictionary is not None, "packed_mean": round(packed, 1),
                "framed_mean": round(framed, 1), "plain_framed_mean": round(plain, 1),
                "plain_sessions": raw_count(items) if self._dictionary is not None else items,
                "description": self.describe(items)}

    def describe(self, items: int) -> str:
        packed, framed, plain = self._means()
        trained = (f"a zstd dictionary trained on {len(self.train):,} of them" if self._dictionary is not None
                   else f"no dictionary ({self.dictionary_note or 'a store trains one after ' + format(AUTO_TRAIN, ',')})")
        priced = (f"priced on the other {len(self.priced):,}" if self.held_out else
                  f"priced on the same ones (too few to hold any out: give {2 * MIN_HELD_OUT}+)")
        if items <= AUTO_TRAIN:
            plain_ = f"; all {items:,} go plain ({plain:.0f} B): a store trains its dictionary after {AUTO_TRAIN:,}"
        elif self._dictionary is not None:
            plain_ = f"; the first {AUTO_TRAIN:,} a new store writes go plain ({plain:.0f} B) until it trains"
        else:
            plain_ = ""
        left = f"; {self.left_out:,} more lines left out" if self.left_out else ""
        return (f"{self.name}: {self.count:,} sessions of {packed:.0f} B packed msgpack (mean), {framed:.0f} B framed "
                f"with {trained}, {priced}{plain_}{left}")


Payloads = Incompressible | Sampled


def _session_of(obj: Any, rng: random.Random) -> Session:
    """A sample line's (identity, data): {"identity": ..., "data": {...}} or a data dict."""
    if isinstance(obj, dict) and "data" in obj and set(obj) <= {"identity", "data"} and (
            obj["data"] is None or isinstance(obj["data"], dict)):
        identity = obj.get("identity", rng.randrange(IDENTITY_LOW, IDENTITY_HIGH))
        return identity, obj["data"]
    if not isinstance(obj, dict):
        raise PlannerError(f"a session is a JSON object (its data dict), not {type(obj).__name__}")
    return rng.randrange(IDENTITY_LOW, IDENTITY_HIGH), obj


def check_session(session: Session) -> Session:
    """The session as a store would take it (typed densekv errors for what it refuses)."""
    from densekv.sessions.model import check_owner
    from densekv.sessions.payload import pack_data

    identity, data = session
    identity = check_owner(identity)
    if data is not None:
        pack_data(data, 1 << 16)
    return identity, data


def read_sample(path: str | os.PathLike[str], seed: int = 20240601) -> Sampled:
    """The sessions of a JSON-lines sample file (PlannerError naming the line that is not
    one: bad JSON, not an object, data a store would refuse)."""
    rng = random.Random(seed)
    sessions: list[Session] = []
    left_out = 0
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                if len(sessions) >= MAX_SAMPLE:
                    left_out += 1
                    continue
                try:
                    sessions.append(check_session(_session_of(json.loads(line), rng)))
                except (ValueError, DensekvError) as exc:
                    what = "not JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise PlannerError(f"{path} line {number}: {what}") from None
    except OSError as exc:
        raise PlannerError(f"cannot read the sample {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PlannerError(f"{path} is not UTF-8 text (JSON lines of session data)") from None
    return Sampled(sessions, str(path), left_out)


def sampled(sessions: Iterable[Any], name: str = "the given sessions", seed: int = 20240601) -> Sampled:
    """Sampled from session data dicts (or {"identity", "data"} dicts) given in Python."""
    rng = random.Random(seed)
    out = []
    for n, obj in enumerate(sessions, 1):
        try:
            out.append(check_session(_session_of(obj, rng)))
        except (ValueError, DensekvError) as exc:
            raise PlannerError(f"{name}, session {n}: {exc}") from None
    return Sampled(out, name)


__all__ = ["AUTO_TRAIN", "DICT", "RAW", "Incompressible", "Payloads", "Sampled", "era_of", "raw_count",
           "read_sample", "sampled", "store_era"]
