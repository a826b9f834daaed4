"""The lab's data: streamed item generators with fixed seeds.

Every experiment draws its items from here so that a rerun (on another server, next
month) loads the same bytes. Invariants:
  * each generator is a stream: it holds O(1) items, so `--n 10000000` costs the client
    no more memory than `--n 1000` (the loaders pull fixed-size chunks with `chunks()`);
  * the same (name, seed) gives the same sequence on every machine and Python >= 3.10
    (only `random.Random` with an integer seed, `randbytes`, `randrange`, `choice`);
  * items are bytes, int or str exactly as the experiment sends them.

Shapes (what a seed used, and what it is here):
  ids16      16 random bytes: a 128-bit ID (seed 001's fingerprints, binary-packed)
  identities session owners: ints below n/2, so some users hold several sessions
             (seed 000 stored one identity_id per session)
  ints       non-negative integers below 2**31 (seed 004's counters)
  strings8   8 printable ASCII characters (seed 004's short strings)
  words24    24 random lowercase letters (seed 002's "24 len random string")
  html       HTML-like text, 200-1500 bytes, words from a fixed vocabulary (seed 004)
  json       JSON objects of one schema, 80-200 bytes (seed 004's JSON values)
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

DEFAULT_SEED = 20240601

_LOWER = string.ascii_lowercase
_PRINTABLE = string.ascii_letters + string.digits
_VOCABULARY = ["session", "cache", "redis", "valkey", "memory", "listpack", "hash", "partition", "expiry", "token", "user", "item", "price", "order", "cart", "product", "review", "rating", "search", "result", "page", "title", "image", "link", "button", "form", "input", "value", "table", "row", "column", "header", "footer", "menu", "account", "login", "logout", "profile"]
_TAGS = ("p", "div", "span", "li", "h2", "a", "em", "strong")
_CITIES = ("Berlin", "Lisbon", "Osaka", "Lima", "Oslo", "Accra", "Quito", "Perth")


def ids16(n: int, seed: int = DEFAULT_SEED) -> Iterator[bytes]:
    rng = random.Random(seed)
    for _ in range(n):
        yield rng.randbytes(16)


def identities(n: int, seed: int = DEFAULT_SEED) -> Iterator[int]:
    rng = random.Random(seed)
    users = max(1, n // 2)
    for _ in range(n):
        yield rng.randrange(users)


def ints(n: int, seed: int = DEFAULT_SEED) -> Iterator[int]:
    rng = random.Random(seed)
    for _ in range(n):
        yield rng.randrange(1 << 31)


def strings8(n: int, seed: int = DEFAULT_SEED) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choices(_PRINTABLE, k=8))


def words24(n: int, seed: int = DEFAULT_SEED) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choices(_LOWER, k=24))


def html(n: int, seed: int = DEFAULT_SEED) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(n):
        parts: list[str] = []
        size, target = 0, rng.randrange(200, 1500)
        while size < target:
            tag = rng.choice(_TAGS)
            words = " ".join(rng.choices(_VOCABULARY, k=rng.randrange(3, 14)))
            piece = f'<{tag} class="c{rng.randrange(8)}">{words}</{tag}>'
            parts.append(piece)
            size += len(piece)
        yield "".join(parts)


def json_objects(n: int, seed: int = DEFAULT_SEED) -> Iterator[str]:
    """One schema: id, name, email, city, active, score, tags (compact JSON text)."""
    rng = random.Random(seed)
    for i in range(n):
        name = "".join(rng.choices(_LOWER, k=rng.randrange(4, 10))).capitalize()
        doc: dict[str, Any] = {
            "id": i,
            "name": name,
            "email": f"{name.lower()}{rng.randrange(1000)}@example.com",
            "city": rng.choice(_CITIES),
            "active": rng.random() < 0.8,
            "score": round(rng.random() * 100, 2),
            "tags": rng.sample(_VOCABULARY, rng.randrange(0, 4)),
        }
        yield json.dumps(doc, separators=(",", ":"))


@dataclass(frozen=True)
class Workload:
    """A named generator and the sentence the report prints about it."""

    name: str
    describe: str
    make: Callable[[int, int], Iterator[Any]]

    def items(self, n: int, seed: int = DEFAULT_SEED) -> Iterator[Any]:
        if n < 0:
            raise ValueError("n >= 0")
        return self.make(n, seed)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("ids16", "random 16-byte IDs (128 bits)", ids16),
        Workload("identities", "integer session owners below n/2 (some own several sessions)", identities),
        Workload("ints", "random integers below 2^31", ints),
        Workload("strings8", "random 8-character alphanumeric strings", strings8),
        Workload("words24", "random 24-letter lowercase strings (seed 002's entries)", words24),
        Workload("html", "HTML-like text of 200-1500 bytes from a fixed vocabulary", html),
        Workload("json", "JSON objects of one schema (id, name, email, city, active, score, tags)", json_objects),
    )
}


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Fixed-size lists from a stream (the last one shorter): bounded client memory."""
    if size < 1:
        raise ValueError("chunk size >= 1")
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class Stream:
    """A generator consumed across several loads: take(k) returns the next k items.

    Meter.curve calls load(start, stop) once per checkpoint; a Stream keeps the position
    so each call continues the same fixed-seed sequence.
    """

    def __init__(self, items: Iterator[Any]) -> None:
        self._it = items
        self.taken = 0

    def take(self, k: int) -> list[Any]:
        out = list(islice(self._it, k))
        self.taken += len(out)
        return out
