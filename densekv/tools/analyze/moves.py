"""What densekv would do with a pattern's keys, as loads of a sample onto a scratch server.

Each Move takes the copies of a pattern's sampled keys (replay.Copy) and the pattern's
full key count, and loads the sample through densekv's public API exactly as moving the
pattern would (values and TTLs kept): `build(client)` makes the layout (its metadata, a
trained dictionary: the fixed part), `load(handle)` writes the items and returns how many.

Keeping the full-size fill. A partitioned layout sized for N items holds N/P items per
partition; a sample of R items in a layout sized for N would sit nearly alone in each
partition and cost far more per item than at full size. So each move sizes its layout so
that the sample fills partitions as the full count would:
  sessions     the store sized for R = N / 2^j sessions (P is a power of two chosen from
               N/P alone, so it is exactly P_N / 2^j); R over the copies -> the copies'
               data again under fresh tokens (the store keeps a digest per token, so
               the token's text does not change the bytes)
  set          partitions P_N x R / N of the layout CompactSet picks for N; items beyond
               the sampled IDs are random IDs of the same size (IDs are random bytes)
  set-members  one CompactSet per key: a set of the mean member count, sampled the same way
  map          CompactMap sized for R (buckets hold ~124 items at any size); numeric ids
               are renumbered so each keeps its quotient at full size (n // B_N) in a
               bucket of the sample: listpack fields as wide as they will be
  family       one key per parent at any size: no scaling
Keeping the heap's history: a move deletes each key it moves in (the framework backends
after each session, migrate per key, the set and family moves per batch), and on
valkey-9.1 (libc malloc) the layout's allocations then reuse the freed chunks, whose
usable size can exceed what was asked (used_memory counts usable sizes: a Flask session
moved this way takes ~15% more than in a fresh heap). So when `drop` is set (replay.py
sets it to delete the copies on the scratch server), each move deletes the copies it has
moved in the same rhythm.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from densekv.tools.analyze.recommend import SESSIONS_NAMESPACE, Choice, namespace_for
from densekv.tools.analyze.replay import Copy
from densekv.tools.analyze.shapes import decode_dict, hash_session
from densekv.tools.analyze.table import PatternStats

SESSION_BUDGET = 2000  # sessions loaded per measurement (at most 2x this)
SET_BUDGET = 8000  # IDs loaded per measurement
SEED = 20240613
NAMESPACE = "dkan"  # the layout's name when the recommended command names none
# (otherwise the one the command uses, recommend.namespace_for: a key name's length
# moves a small key across an allocator size class, ~18 B per parent for a SetFamily)


class _Dropping:
    """`drop(keys)` deletes moved-in originals (None: nothing to delete, the warm-up)."""

    drop: Callable[[list[bytes]], None] | None = None
    ns: str = NAMESPACE

    def _dropped(self, keys: list[bytes]) -> None:
        if self.drop is not None and keys:
            self.drop(keys)


def _halvings(full: int, budget: int) -> int:
    j = 0
    while full / 2 ** j > budget:
        j += 1
    return j


def _text(key: bytes) -> str:
    return key.decode("utf-8", "surrogateescape")


class SessionsMove(_Dropping):
    """SessionStore (layout auto = dense), as the framework backends import sessions."""

    kind = "sessions"

    def __init__(self, copies: Sequence[Copy], stats: PatternStats, choice: Choice, full: int,
                 budget: int = SESSION_BUDGET) -> None:
        self.ns = SESSIONS_NAMESPACE  # the name the recommended command uses
        from densekv.sessions.model import digest_of

        fmt = choice.detail.get("format")
        self.items: list[tuple[str | None, Any, dict[str, Any], int | None]] = []
        self.sources: list[bytes] = []
        self.notes: list[str] = []
        undecoded = 0
        for c in copies:
            data: dict[str, Any] | None = None
            if c.type == "string":
                found = decode_dict(bytes(c.value))
                data = found[1] if found else None
            elif c.type == "hash":
                data = hash_session(stats.name, c.value)
            if data is None:
                undecoded += 1
                continue
            data.pop("__metadata__", None)  # starsessions' own bookkeeping, not session data
            identity = _django_identity(data) if fmt == "django" else None
            parts = stats.variable_parts(c.key) or []
            token = parts[-1][1] if parts else None
            if token is not None and digest_of(token) is None:
                token = None
            ttl = max(1, math.ceil(c.pttl / 1000)) if c.pttl > 0 else None
            self.items.append((token, identity, data, ttl))
            self.sources.append(c.key)
        if undecoded:
            self.notes.append(f"{undecoded} of {len(copies)} sampled values did not decode as session data")
        self.full = full
        # every sampled session stands for one moved in (bootstrap only for tiny samples),
        # so the copies are deleted in step with the imports, as in the real move
        self.scale = 2 ** _halvings(full, max(50, min(budget, len(self.items))))
        self.count = max(1, round(full / self.scale))
        self.stands_for = full
        self.fixed_count = 1
        self.refused = 0
        self.extra_fixed = 0  # bytes of the dictionary trained during load (a fixed cost)
        self.client: Any = None

    def describe(self) -> str:
        return f"SessionStore (dense), sized for {self.count:,} sessions = 1/{self.scale} of {self.full:,}"

    def build(self, client: Any) -> Any:
        from densekv.sessions.store import SessionStore

        ttl = max([t for *_, t in self.items if t] or [30 * 86400])
        self.client = client
        return SessionStore(client, self.ns, ttl=ttl, expected_sessions=self.count, auto_train=None).open()

    def load(self, store: Any) -> int:
        """Sessions as a store of `full` sessions takes them: the first AUTO_TRAIN (a share
        AUTO_TRAIN / full of the sample) before it trains its zstd dictionary, the rest
        with it. The dictionary's own key is a fixed cost (`extra_fixed`), not an item's."""
        from densekv.errors import DensekvError
        from densekv.sessions.core import AUTO_TRAIN

        if not self.items:
            return 0
        done = 0
        self.refused = 0
        self.extra_fixed = 0
        datas = [d for _, _, d, _ in self.items if d]
        train_at = round(self.count * AUTO_TRAIN / self.full) if self.full >= AUTO_TRAIN and len(datas) >= 50 \
            else None
        for i in range(self.count):
            if i == train_at:
                self._train(store, datas)
            token, identity, data, ttl = self.items[i % len(self.items)]
            try:
                store.create(identity, data, ttl, token=token if i < len(self.items) else None)
                done += 1
            except DensekvError:
                self.refused += 1
            if i < len(self.items):  # as FlaskSessionFallback.forget after the import
                self._dropped([self.sources[i]])
        if self.refused and not any("refused" in n for n in self.notes):
            self.notes.append(f"the store refused {self.refused} of {self.count} sessions (too large or not "
                              "storable): those would stay where they are")
        if train_at and not any("dictionary" in n for n in self.notes):
            self.notes.append(f"the first {AUTO_TRAIN} sessions moved are stored before the store trains its "
                              "zstd dictionary (store.train_dictionary(samples) before the move makes them smaller)")
        return done

    def _train(self, store: Any, datas: list[dict[str, Any]]) -> None:
        from densekv.dictionaries import dictionary_key
        from densekv.errors import DensekvError

        try:
            store.train_dictionary(datas[:2000])
        except DensekvError as exc:
            self.notes.append(f"no zstd dictionary: {exc}")
            return
        self.extra_fixed = int(self.client.memory_usage(dictionary_key(self.ns), samples=0) or 0)


def _django_identity(data: dict[str, Any]) -> int | str | None:
    uid = data.get("_auth_user_id")
    if uid is None or uid == "" or isinstance(uid, bool):
        return None
    text = str(uid)
    return int(text) if text.isascii() and text.isdecimal() and int(text) < 2**64 else text


def id_bytes(text: str, how: str, size: int) -> bytes | None:
    """A key's ID text as the set item it becomes (None if it does not convert)."""
    import base64
    import binascii

    try:
        if how == "uuid":
            return uuid.UUID(text).bytes
        if how == "hex":
            raw = bytes.fromhex(text)
        elif how == "int":
            n = int(text)
            return n.to_bytes(size, "big") if 0 <= n < 1 << (8 * size) else None
        elif how == "b64url":
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        elif how == "binary":
            raw = text.encode("latin-1")
        else:
            return None
    except (ValueError, binascii.Error):
        return None
    return raw if len(raw) == size else None


class _SetSizing:
    """Sizes and builds the CompactSet a set move loads: `count` items of `size` bytes,
    partitioned as CompactSet would partition `per_set` items (one set at full size)."""

    size: int
    count: int
    per_set: int
    layout: str
    ns: str = NAMESPACE

    def build(self, client: Any) -> Any:
        from densekv.sets.compact import CompactSet

        self.layout, partitions = self._sized(client, self.per_set, self.size, self.count)
        return CompactSet(client, self.ns, layout=self.layout, expected=self.count, item_size=self.size,
                          partitions=partitions).open()

    def _sized(self, client: Any, expected: int, size: int, loaded: int) -> tuple[str, int]:
        """(layout, partitions) CompactSet picks for `expected`, scaled to `loaded` items."""
        from densekv.sets.compact import CompactSet

        probe = CompactSet(client, self.ns + "-sizing", expected=max(1, expected), item_size=size)
        layout, partitions = probe.layout, probe.partitions
        stale = list(client.scan_iter(match=self.ns + "-sizing*", count=1000))
        if stale:  # the scratch server's copy of the sizing set's metadata
            client.delete(*stale)
        return layout, max(1, round(partitions * loaded / max(1, expected)))


class SetMove(_SetSizing, _Dropping):
    """CompactSet of the IDs in the key names (per-ID flag keys, seed 001)."""

    kind = "set"

    def __init__(self, copies: Sequence[Copy], stats: PatternStats, choice: Choice, full: int,
                 budget: int = SET_BUDGET) -> None:
        self.ns = namespace_for(stats)  # the name the recommended command uses
        self.size = int(choice.detail["item_size"])
        how = str(choice.detail["id"])
        self.ids: list[bytes] = []
        self.sources: list[bytes] = []
        for c in copies:
            parts = stats.variable_parts(c.key)
            item = id_bytes(parts[0][1], how, self.size) if parts else None
            if item is not None:
                self.ids.append(item)
                self.sources.append(c.key)
        self.full = self.per_set = full
        self.count = min(full, budget)
        self.stands_for = full
        self.fixed_count = 1
        self.notes: list[str] = []
        self.layout = ""

    def describe(self) -> str:
        return f"CompactSet ({self.layout}) of {self.size}-byte IDs, sized as for {self.full:,}"

    def load(self, s: Any) -> int:
        rng = random.Random(SEED)
        items = self.ids[: self.count]
        items += [rng.randbytes(self.size) for _ in range(self.count - len(items))]
        added = 0
        for start in range(0, len(items), 1000):  # add_many, then UNLINK, per batch
            added += sum(s.add_many(items[start: start + 1000]))
            self._dropped(self.sources[start: start + 1000])
        return added


class MemberSetMove(_SetSizing):
    """One CompactSet per key, holding its members (SETs of fixed-size IDs)."""

    kind = "set-members"

    def __init__(self, copies: Sequence[Copy], stats: PatternStats, choice: Choice, full: int,
                 budget: int = SET_BUDGET) -> None:
        self.size = int(choice.detail["member_size"])
        how = {"uuid": "uuid", "hex": "hex", "int": "int", "binary": "binary"}.get(str(choice.detail["member_kind"]))
        if how == "uuid":
            self.size = 16
        elif how == "hex":
            self.size //= 2
        elif how == "int":
            self.size = 8
        self.members: list[bytes] = []
        cards = []
        for c in copies:
            if c.type != "set":
                continue
            cards.append(len(c.value))
            for m in c.value:
                item = id_bytes(m.decode("latin-1"), how or "", self.size)
                if item is not None:
                    self.members.append(item)
        self.mean = self.per_set = max(1, round(sum(cards) / len(cards))) if cards else 1
        self.count = min(self.mean, budget)
        self.stands_for = full * self.mean
        self.fixed_count = full
        self.notes = [f"{self.mean:,} members per key on average"]
        self.layout = ""

    def describe(self) -> str:
        return f"one CompactSet ({self.layout}) per key, {self.size}-byte members"

    def load(self, s: Any) -> int:
        rng = random.Random(SEED)
        items = list(dict.fromkeys(self.members))[: self.count]
        items += [rng.randbytes(self.size) for _ in range(self.count - len(items))]
        return sum(s.add_many(items))


class FamilyMove(_Dropping):
    """SetFamily: one compact key per parent (many small sets, seed 002)."""

    kind = "family"

    def __init__(self, copies: Sequence[Copy], stats: PatternStats, choice: Choice, full: int) -> None:
        self.ns = namespace_for(stats)  # the name the recommended command uses
        self.items: list[tuple[str, list[bytes], int]] = []
        self.sources: list[bytes] = []
        for c in copies:
            if c.type == "set" or c.type == "hash":
                children = list(c.value)
            else:
                continue
            parts = stats.variable_parts(c.key)
            parent = ":".join(t for _, t in parts) if parts else _text(c.key)
            self.items.append((parent, children, c.pttl))
            self.sources.append(c.key)
        self.most = max((len(ch) for _, ch, _ in self.items), default=0)
        self.stands_for = full
        self.fixed_count = 1
        self.notes: list[str] = []
        self.encoding = ""
        self.expected_children: int | None = None

    def describe(self) -> str:
        return f"SetFamily ({self.encoding} per parent)"

    def build(self, client: Any) -> Any:
        from densekv.sets.compact import limits_from_probe
        from densekv.sets.family import SetFamily

        limits = limits_from_probe(client)
        limit = limits.set_max_listpack_entries or 0
        self.expected_children = self.most if 0 < self.most <= limit else None
        fam = SetFamily(client, self.ns, expected_children=self.expected_children, limits=limits).open()
        self.encoding = fam.encoding
        return fam

    def load(self, fam: Any) -> int:
        for (parent, children, pttl), source in zip(self.items, self.sources):
            if children:
                fam.add_many(parent, children)
                if pttl > 0:
                    fam.expire(parent, pttl / 1000)
            self._dropped([source])
        return len(self.items)


class MapMove(_Dropping):
    """CompactMap, as `densekv migrate` fills it (plain values: integers stay integers)."""

    kind = "map"

    def __init__(self, copies: Sequence[Copy], stats: PatternStats, choice: Choice, full: int) -> None:
        self.ns = namespace_for(stats)  # the name the recommended command uses
        from densekv.maps.compact import plain_value

        self.zstd = bool(choice.detail.get("zstd"))
        self.kind = "map-zstd" if self.zstd else "map"
        strings = [c for c in copies if c.type == "string"]
        self.items = [(_text(c.key), plain_value(bytes(c.value)), c.pttl) for c in strings]
        self.sources = [c.key for c in strings]
        self.full = full
        self.count = len(self.items)
        self.stands_for = full
        self.fixed_count = 1
        self.notes: list[str] = []
        self.buckets = 0

    def describe(self) -> str:
        codec = "zstd with a dictionary trained on the sample" if self.zstd else "auto codec"
        return f"CompactMap ({codec}), {self.buckets} buckets for {self.count:,} items as for {self.full:,}"

    def build(self, client: Any) -> Any:
        from densekv.maps import CompactMap

        m = CompactMap(client, self.ns, codec="zstd" if self.zstd else "auto", expected=max(1, self.count))
        self.buckets = int(m.explain()["buckets"])
        if self.zstd:
            m.train([v for _, v, _ in self.items[:500]])
        return m

    def renumbered(self, limit: int) -> list[tuple[str, Any, int]]:
        """Numeric-tail keys renumbered so each keeps its full-size quotient (module docstring)."""
        from densekv.maps.buckets import bucket_count, split_numeric

        full_buckets = bucket_count(self.full, limit)
        used: dict[str, set[int]] = {}
        turn: dict[str, int] = {}
        out = []
        for key, value, pttl in self.items:
            found = split_numeric(key)
            if found is None:
                out.append((key, value, pttl))
                continue
            prefix, n = found
            q = n // full_buckets
            taken = used.setdefault(prefix, set())
            start = turn.get(prefix, 0)
            k = 0
            new = q * self.buckets + start % self.buckets
            while new in taken:  # that bucket has this quotient already: the next bucket (then quotient)
                k += 1
                new = (q + k // self.buckets) * self.buckets + (start + k) % self.buckets
            taken.add(new)
            turn[prefix] = start + k + 1
            out.append((f"{prefix}{new}", value, pttl))
        return out

    def load(self, m: Any) -> int:
        limit = int(m.explain()["hash_max_listpack_entries"])
        items = self.renumbered(limit)
        for start in range(0, len(items), 100):  # migrate moves (and deletes) key by key
            with m.batch() as b:
                for key, value, pttl in items[start: start + 100]:
                    b.set(key, value, ttl=pttl / 1000 if pttl > 0 else None)
            self._dropped(self.sources[start: start + 100])
        return len(items)


MOVES: dict[str, Any] = {"sessions": SessionsMove, "set": SetMove, "set-members": MemberSetMove,
                         "family": FamilyMove, "map": MapMove, "map-zstd": MapMove}


def move_for(choice: Choice, copies: Sequence[Copy], stats: PatternStats, full: int) -> Any:
    return MOVES[choice.kind](copies, stats, choice, full)
